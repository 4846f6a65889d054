package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// policyFile is the wire form of the policy file (README.md, "Policy file").
type policyFile struct {
	Policies []policyJSON `json:"policies"`
}

// policyJSON is one policy. Pointers tell an absent field from a zero one,
// so that a field of another algorithm and a missing field are both errors.
type policyJSON struct {
	ID                 *string   `json:"id"`
	Revision           *int64    `json:"revision"`
	Algorithm          *string   `json:"algorithm"`
	Limit              *int64    `json:"limit"`
	Window             *duration `json:"window"`
	Capacity           *int64    `json:"capacity"`
	RefillTokens       *int64    `json:"refillTokens"`
	RefillPeriod       *duration `json:"refillPeriod"`
	Rate               *int64    `json:"rate"`
	Period             *duration `json:"period"`
	Burst              *int64    `json:"burst"`
	QueueSize          *int64    `json:"queueSize"`
	DelayAfter         *int64    `json:"delayAfter"`
	MaxDelay           *duration `json:"maxDelay"`
	MaxCost            *int64    `json:"maxCost"`
	CleanupGrace       *duration `json:"cleanupGrace"`
	MaxClockRegression *duration `json:"maxClockRegression"`
	FailurePolicy      *string   `json:"failurePolicy"`
	FallbackInstances  *int64    `json:"fallbackInstances"`
	DedupWindow        *duration `json:"dedupWindow"`
	DedupMaxReplays    *int64    `json:"dedupMaxReplays"`
	DenialCache        *bool     `json:"denialCache"`
	Scope              *string   `json:"scope"`
	Routes             []string  `json:"routes"`
}

// duration is a Go duration string ("1s", "250ms") that must be whole
// milliseconds; it is parsed by spec so that errors name the field.
type duration = string

// parseDuration parses the duration field name, recording a problem.
func parseDuration(name string, s *string, problems *[]error) time.Duration {
	d, err := time.ParseDuration(*s)
	switch {
	case err != nil:
		*problems = append(*problems, fmt.Errorf("%s: %q is not a Go duration such as \"1s\" or \"250ms\"", name, bounded(*s)))
	case d%time.Millisecond != 0:
		*problems = append(*problems, fmt.Errorf("%s: %q is not a whole number of milliseconds", name, *s))
	}
	return d
}

// MaxQueueDelay is the longest maxDelay a leaky_bucket policy may have:
// the edge holds an admitted request up to maxDelay before its handler
// runs, and the service's HTTP write timeout (30 s) must leave the handler
// time to answer (ADR 0028).
const MaxQueueDelay = 20 * time.Second

// leakyBucket is the LeakyBucket of a leaky_bucket policy: delayAfter
// defaults to 0 (every waiter is delayed, nginx's default) and maxDelay to
// the queue's longest delay (the set builder refuses one above
// MaxQueueDelay).
func leakyBucket(p policyJSON, problems *[]error) ratelimit.LeakyBucket {
	q := ratelimit.LeakyBucket{Rate: *p.Rate, Period: parseDuration("period", p.Period, problems), QueueSize: *p.QueueSize}
	if p.DelayAfter != nil {
		q.DelayAfter = *p.DelayAfter
	}
	if p.MaxDelay != nil {
		q.MaxDelay = parseDuration("maxDelay", p.MaxDelay, problems)
	} else {
		q.MaxDelay = q.LongestDelay()
	}
	return q
}

// spec maps the wire policy to a PolicySpec, listing every missing field
// and every field that belongs to another algorithm.
func (p policyJSON) spec() (ratelimit.PolicySpec, []error) {
	var problems []error
	missing := func(name string) { problems = append(problems, fmt.Errorf("%q is required", name)) }
	var spec ratelimit.PolicySpec
	if p.ID == nil {
		missing("id")
	} else {
		spec.ID = ratelimit.PolicyID(*p.ID)
	}
	if p.Revision == nil {
		missing("revision")
	} else {
		spec.Revision = *p.Revision
	}
	if p.MaxCost == nil {
		missing("maxCost")
	} else {
		spec.MaxCost = *p.MaxCost
	}
	if p.CleanupGrace == nil {
		missing("cleanupGrace")
	} else {
		spec.CleanupGrace = parseDuration("cleanupGrace", p.CleanupGrace, &problems)
	}
	if p.MaxClockRegression == nil {
		missing("maxClockRegression")
	} else {
		spec.MaxClockRegression = parseDuration("maxClockRegression", p.MaxClockRegression, &problems)
	}
	if p.FailurePolicy == nil {
		missing("failurePolicy")
	} else if fp, err := ratelimit.ParseFailurePolicy(*p.FailurePolicy); err != nil {
		problems = append(problems, fmt.Errorf("failurePolicy: %w", err))
	} else {
		spec.FailurePolicy = fp
		// "fallbackInstances" belongs to "local-fallback" only; NewPolicy
		// names a missing or a stray one.
		if p.FallbackInstances != nil {
			spec.FallbackInstances = *p.FallbackInstances
		}
	}
	if p.DedupWindow != nil {
		// Optional: absent means no dedup; "0s" is refused, so that a
		// window is either meant or absent.
		spec.DedupWindow = parseDuration("dedupWindow", p.DedupWindow, &problems)
		if spec.DedupWindow == 0 {
			problems = append(problems, fmt.Errorf("dedupWindow: %q must be positive (omit the field for no dedup)", *p.DedupWindow))
		}
	}
	if p.DedupMaxReplays != nil {
		// Optional: absent means ratelimit.DefaultDedupMaxReplays. Without
		// a dedup window it would mean nothing, so it is refused rather
		// than ignored: the contract's replay rule, in the policy file's
		// words.
		n := *p.DedupMaxReplays
		switch err := ratelimit.CheckDedupMaxReplays(p.DedupWindow != nil, n); {
		case errors.Is(err, ratelimit.ErrReplaysWithoutWindow):
			problems = append(problems, fmt.Errorf("dedupMaxReplays: %d is set without \"dedupWindow\" (replays exist only with a dedup window; add one or remove the field)", n))
		case err != nil:
			problems = append(problems, fmt.Errorf("dedupMaxReplays: %d is not an integer 0..%d", n, ratelimit.MaxDedupMaxReplays))
		default:
			spec.DedupMaxReplays = &n
		}
	}
	if p.Scope != nil {
		// Optional: absent means "subject" (ADR 0027).
		if sc, err := ratelimit.ParseScope(*p.Scope); err != nil {
			problems = append(problems, fmt.Errorf("scope: %w", err))
		} else {
			spec.Scope = sc
		}
	}
	if p.Algorithm == nil {
		missing("algorithm")
		return spec, problems
	}
	alg, err := ratelimit.ParseAlgorithm(*p.Algorithm)
	if err != nil {
		problems = append(problems, fmt.Errorf("algorithm: %w", err))
		return spec, problems
	}
	spec.Algorithm = alg
	present := map[string]bool{
		"limit": p.Limit != nil, "window": p.Window != nil,
		"capacity": p.Capacity != nil, "refillTokens": p.RefillTokens != nil, "refillPeriod": p.RefillPeriod != nil,
		"rate": p.Rate != nil, "period": p.Period != nil, "burst": p.Burst != nil,
		"queueSize": p.QueueSize != nil, "delayAfter": p.DelayAfter != nil, "maxDelay": p.MaxDelay != nil,
	}
	// optional are fields of alg that may be left out (leaky bucket:
	// delayAfter 0, maxDelay the queue's longest delay).
	var optional []string
	var own []string
	switch alg {
	case ratelimit.AlgorithmFixedWindow, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.AlgorithmSlidingLog:
		// The sliding log's limit is capped (ratelimit.MaxSlidingLogLimit,
		// ADR 0024): NewPolicy names a larger one.
		own = []string{"limit", "window"}
	case ratelimit.AlgorithmTokenBucket:
		own = []string{"capacity", "refillTokens", "refillPeriod"}
	case ratelimit.AlgorithmGCRA:
		// redis_rate.Limit{Rate, Burst, Period} (ADR 0021).
		own = []string{"rate", "period", "burst"}
	case ratelimit.AlgorithmLeakyBucket:
		// nginx's limit_req rate, burst and delay= (ADR 0028).
		own, optional = []string{"rate", "period", "queueSize"}, []string{"delayAfter", "maxDelay"}
	}
	mine := map[string]bool{}
	for _, f := range own {
		mine[f] = true
		if !present[f] {
			missing(f)
		}
	}
	for _, f := range optional {
		mine[f] = true
	}
	for _, f := range []string{"limit", "window", "capacity", "refillTokens", "refillPeriod", "rate", "period", "burst", "queueSize", "delayAfter", "maxDelay"} {
		if present[f] && !mine[f] {
			problems = append(problems, fmt.Errorf("%q is not a parameter of %s", f, alg))
		}
	}
	if len(problems) > 0 {
		return spec, problems
	}
	switch alg {
	case ratelimit.AlgorithmFixedWindow:
		spec.Params = ratelimit.FixedWindow{Limit: *p.Limit, Window: parseDuration("window", p.Window, &problems)}
	case ratelimit.AlgorithmSlidingWindowCounter:
		spec.Params = ratelimit.SlidingWindowCounter{Limit: *p.Limit, Window: parseDuration("window", p.Window, &problems)}
	case ratelimit.AlgorithmTokenBucket:
		spec.Params = ratelimit.TokenBucket{Capacity: *p.Capacity, RefillTokens: *p.RefillTokens, RefillPeriod: parseDuration("refillPeriod", p.RefillPeriod, &problems)}
	case ratelimit.AlgorithmGCRA:
		spec.Params = ratelimit.GCRA{Rate: *p.Rate, Period: parseDuration("period", p.Period, &problems), Burst: *p.Burst}
	case ratelimit.AlgorithmSlidingLog:
		spec.Params = ratelimit.SlidingLog{Limit: *p.Limit, Window: parseDuration("window", p.Window, &problems)}
	case ratelimit.AlgorithmLeakyBucket:
		spec.Params = leakyBucket(p, &problems)
	}
	return spec, problems
}
