package metrics

import "github.com/prometheus/client_golang/prometheus"

// DedupRetryFailuresTotal counts the failed dedup retries of
// DedupRetriesTotal{result="failed"} by what the retry got: its outcome
// kind (unavailable, indeterminate) and category. The labels are the
// contract's enums, so their number is bounded.
const DedupRetryFailuresTotal = "tlb_ratelimit_dedup_retry_failures_total"

// DedupRetryFailure is one row of DedupRetryFailuresTotal.
type DedupRetryFailure struct {
	Kind, Category string
	Count          uint64
}

// RegisterDedupRetryFailures exports DedupRetryFailuresTotal, read at
// scrape time from failures (running totals). Call it once.
func (m *Metrics) RegisterDedupRetryFailures(failures func() []DedupRetryFailure) {
	m.registry.MustRegister(&dedupRetryFailures{
		read: failures,
		desc: prometheus.NewDesc(DedupRetryFailuresTotal,
			"Failed retries of an Indeterminate rate-limit call with the same evaluation ID, by what the retry got: its outcome kind and category (the request failed closed with the first call's Indeterminate).",
			[]string{"kind", "category"}, nil),
	})
}

// dedupRetryFailures is the collector of DedupRetryFailuresTotal.
type dedupRetryFailures struct {
	read func() []DedupRetryFailure
	desc *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *dedupRetryFailures) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *dedupRetryFailures) Collect(ch chan<- prometheus.Metric) {
	for _, f := range c.read() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(f.Count), f.Kind, f.Category)
	}
}
