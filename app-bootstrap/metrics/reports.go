package metrics

import "github.com/prometheus/client_golang/prometheus"

// RegisterBreaker exports the circuit breaker read at scrape time:
// BreakerState is 1 for the current state (state reports one of
// BreakerStates) and 0 for the others; BreakerTripsTotal counts how often
// it opened (trips). Call it once.
func (m *Metrics) RegisterBreaker(state func() string, trips func() uint64) {
	for _, s := range BreakerStates {
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        BreakerState,
			Help:        "Circuit breaker of the rate-limit provider: 1 for the current state (closed: calls sent; open: calls answered Unavailable{circuit_open} unsent; half_open: the recovery probe is in flight).",
			ConstLabels: prometheus.Labels{"state": s},
		}, func() float64 {
			if state() == s {
				return 1
			}
			return 0
		}))
	}
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: BreakerTripsTotal,
		Help: "Times the rate-limit provider's circuit breaker opened after a run of connection failures or timeouts.",
	}, func() float64 { return float64(trips()) }))
}

// RegisterDedupRetries exports the provider's retries of Indeterminate
// calls with the same evaluation ID, read at scrape time: decided and
// failed are running totals. Call it once.
func (m *Metrics) RegisterDedupRetries(decided, failed func() uint64) {
	for result, f := range map[string]func() uint64{"decided": decided, "failed": failed} {
		m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        DedupRetriesTotal,
			Help:        "Retries of an Indeterminate rate-limit call with the same evaluation ID (dedup policies only), by result: decided (the retry got a decision, charged at most once) or failed (no decision; the request fails closed).",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(f()) }))
	}
}

// RegisterPipeline exports the provider's pipelined-call counters read at
// scrape time (stats returns batches written, the calls they carried, and
// the calls queued now). Call it once.
func (m *Metrics) RegisterPipeline(stats func() (batches, calls int64, queued int)) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: PipelineBatchesTotal,
		Help: "Pipelines of rate-limit program calls written (one write and one read for several calls that met busy connection turns).",
	}, func() float64 { b, _, _ := stats(); return float64(b) }))
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: PipelineBatchedCallsTotal,
		Help: "Rate-limit program calls written as part of a pipeline (a call sent alone is not counted).",
	}, func() float64 { _, c, _ := stats(); return float64(c) }))
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: PipelineQueued,
		Help: "Rate-limit program calls waiting for a connection turn (they go in the next pipeline).",
	}, func() float64 { _, _, q := stats(); return float64(q) }))
}

// FallbackStats is what the local emergency fallback reports at scrape
// time (ratefallback.Stats; policy IDs as strings).
type FallbackStats struct {
	Pending               map[string]int64
	Subjects, MaxSubjects int
	Dropped               uint64
	ChargeFailures        uint64
}

// RegisterFallback exports the local emergency fallback's state, read
// from stats at scrape time: FallbackPending{policy}, FallbackSubjects,
// FallbackMaxSubjects, FallbackDroppedTotal, FallbackChargeFailuresTotal.
func (m *Metrics) RegisterFallback(stats func() FallbackStats) {
	m.registry.MustRegister(&fallbackCollector{stats: stats,
		pending:  prometheus.NewDesc(FallbackPending, "Local emergency admissions of this instance not yet charged to the global state (reconciliation pending), by policy.", []string{"policy"}, nil),
		subjects: prometheus.NewDesc(FallbackSubjects, "Subjects in the local fallback's table.", nil, nil),
		max:      prometheus.NewDesc(FallbackMaxSubjects, "Bound of the local fallback's table (APP_RATE_LIMIT_FALLBACK_MAX_SUBJECTS).", nil, nil),
		dropped:  prometheus.NewDesc(FallbackDroppedTotal, "Local emergency admissions dropped uncharged because their window had passed.", nil, nil),
		failures: prometheus.NewDesc(FallbackChargeFailuresTotal, "Reconciliation charges that failed (retried with backoff until their window passes).", nil, nil),
	})
}

// fallbackCollector reads FallbackStats once per scrape.
type fallbackCollector struct {
	stats                                     func() FallbackStats
	pending, subjects, max, dropped, failures *prometheus.Desc
}

func (c *fallbackCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.subjects
	ch <- c.max
	ch <- c.dropped
	ch <- c.failures
}

func (c *fallbackCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	for policy, n := range st.Pending {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n), policy)
	}
	ch <- prometheus.MustNewConstMetric(c.subjects, prometheus.GaugeValue, float64(st.Subjects))
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(st.MaxSubjects))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(st.Dropped))
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(st.ChargeFailures))
}

// DenialCacheStats is what the local denial cache reports at scrape time.
type DenialCacheStats struct {
	Hits, Invalidations, Evicted uint64
	Entries, MaxEntries          int
	Live                         bool
}

// RegisterDenialCache exports the local denial cache's state, read from
// stats at scrape time: DenialCacheHitsTotal, DenialCacheEntries,
// DenialCacheMaxEntries, DenialCacheInvalidationsTotal,
// DenialCacheEvictedTotal, DenialCacheLive.
func (m *Metrics) RegisterDenialCache(stats func() DenialCacheStats) {
	m.registry.MustRegister(newDenialCollector(stats, [6]string{DenialCacheHitsTotal, DenialCacheEntries, DenialCacheMaxEntries,
		DenialCacheInvalidationsTotal, DenialCacheEvictedTotal, DenialCacheLive}, "the local denial cache"))
}

// RegisterRLSDenialCache exports the denial caches of the rate-limit
// service's rule generations, read from stats at scrape time (counters
// summed over every generation, gauges of the newest):
// RLSDenialCacheHitsTotal, RLSDenialCacheEntries, RLSDenialCacheMaxEntries,
// RLSDenialCacheInvalidationsTotal, RLSDenialCacheEvictedTotal,
// RLSDenialCacheLive. Call it once.
func (m *Metrics) RegisterRLSDenialCache(stats func() DenialCacheStats) {
	m.registry.MustRegister(newDenialCollector(stats, [6]string{RLSDenialCacheHitsTotal, RLSDenialCacheEntries, RLSDenialCacheMaxEntries,
		RLSDenialCacheInvalidationsTotal, RLSDenialCacheEvictedTotal, RLSDenialCacheLive}, "the rate-limit service's denial cache"))
}

// newDenialCollector describes a denial cache's six metrics under names
// (hits, entries, max, invalidations, evicted, live); what names the cache
// in their help.
func newDenialCollector(stats func() DenialCacheStats, names [6]string, what string) *denialCollector {
	return &denialCollector{stats: stats,
		hits:    prometheus.NewDesc(names[0], "Requests answered by "+what+" (a denial the server gave, not yet past its retry-after).", nil, nil),
		entries: prometheus.NewDesc(names[1], "Denials in the table of "+what+".", nil, nil),
		max:     prometheus.NewDesc(names[2], "Bound of the table of "+what+" (APP_RATE_LIMIT_DENIAL_CACHE_MAX_ENTRIES).", nil, nil),
		inval:   prometheus.NewDesc(names[3], "Invalidations "+what+" received (tlbctl reset publishes one).", nil, nil),
		evicted: prometheus.NewDesc(names[4], "Live denials dropped from the full table of "+what+" to make room.", nil, nil),
		live:    prometheus.NewDesc(names[5], "1 while "+what+" serves (subscribed to invalidations), else 0.", nil, nil),
	}
}

// denialCollector reads DenialCacheStats once per scrape.
type denialCollector struct {
	stats                                    func() DenialCacheStats
	hits, entries, max, inval, evicted, live *prometheus.Desc
}

func (c *denialCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.hits, c.entries, c.max, c.inval, c.evicted, c.live} {
		ch <- d
	}
}

func (c *denialCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	live := 0.0
	if st.Live {
		live = 1
	}
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(st.Hits))
	ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(st.MaxEntries))
	ch <- prometheus.MustNewConstMetric(c.inval, prometheus.CounterValue, float64(st.Invalidations))
	ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(st.Evicted))
	ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, live)
}
