package rlsconfig

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Algorithm is the rate_limit extension `algorithm:` selecting an
// algorithm other than the reference's fixed window. Params is a value of
// shared-contract's sealed ratelimit.Params, ready for a
// ratelimit.PolicySpec; the arithmetic bounds are checked there
// (ratelimit.NewPolicy), only presence and sign here.
//
// Two forms, beside `algorithm: <name>` in a rate_limit mapping:
//
//   - the reference's unit and requests_per_unit, read as a rate of
//     requests_per_unit per unit (the RateLimit keeps them, for the
//     protocol's current_limit):
//     sliding_window_counter and sliding_log: limit per window of one unit;
//     token_bucket: capacity requests_per_unit, refilled by as many every
//     unit; gcra: requests_per_unit per unit with a burst of as many.
//   - the algorithm's own fields (Unit is then 0):
//     token_bucket: capacity, refill, period (refill tokens every period);
//     gcra: rate, period, burst; sliding_log and sliding_window_counter:
//     limit, window.
//
// period and window are Go durations ("1s", "500ms", "1m"). fixed_window
// (the default; Algorithm is nil) takes only the first form; leaky_bucket
// is refused (it delays requests, which the protocol cannot). Mixing the
// forms, another algorithm's field, unlimited or policy with an algorithm
// is refused (ErrAlgorithm).
type Algorithm struct {
	// Name is the algorithm's wire name ("token_bucket"), as
	// ratelimit.ParseAlgorithm reads it; Params.Algorithm() is the same.
	Name   string
	Params ratelimit.Params
}

// algorithmSpec is the one home of what varies by algorithm in the file:
// its own fields and how they become Params, and how a limit per window
// (the unit form) does. build nil: the default fixed window (unit form
// only, Algorithm nil).
type algorithmSpec struct {
	fields   []string
	build    func(f algFields) ratelimit.Params
	fromRate func(limit int64, window time.Duration) ratelimit.Params
}

// algFields are the extension fields as read, durations parsed.
type algFields struct {
	capacity, refill, rate, burst, limit int64
	period, window                       time.Duration
}

var algorithms = map[ratelimit.Algorithm]algorithmSpec{
	ratelimit.AlgorithmFixedWindow: {},
	ratelimit.AlgorithmSlidingWindowCounter: {
		fields: []string{"limit", "window"},
		build: func(f algFields) ratelimit.Params {
			return ratelimit.SlidingWindowCounter{Limit: f.limit, Window: f.window}
		},
		fromRate: func(n int64, w time.Duration) ratelimit.Params {
			return ratelimit.SlidingWindowCounter{Limit: n, Window: w}
		},
	},
	ratelimit.AlgorithmSlidingLog: {
		fields: []string{"limit", "window"},
		build: func(f algFields) ratelimit.Params {
			return ratelimit.SlidingLog{Limit: f.limit, Window: f.window}
		},
		fromRate: func(n int64, w time.Duration) ratelimit.Params {
			return ratelimit.SlidingLog{Limit: n, Window: w}
		},
	},
	ratelimit.AlgorithmTokenBucket: {
		fields: []string{"capacity", "refill", "period"},
		build: func(f algFields) ratelimit.Params {
			return ratelimit.TokenBucket{Capacity: f.capacity, RefillTokens: f.refill, RefillPeriod: f.period}
		},
		fromRate: func(n int64, w time.Duration) ratelimit.Params {
			return ratelimit.TokenBucket{Capacity: n, RefillTokens: n, RefillPeriod: w}
		},
	},
	ratelimit.AlgorithmGCRA: {
		fields: []string{"rate", "period", "burst"},
		build: func(f algFields) ratelimit.Params {
			return ratelimit.GCRA{Rate: f.rate, Period: f.period, Burst: f.burst}
		},
		fromRate: func(n int64, w time.Duration) ratelimit.Params {
			return ratelimit.GCRA{Rate: n, Period: w, Burst: n}
		},
	},
}

// algorithmNames lists the names accepted, for error messages.
func algorithmNames() string {
	names := make([]string, 0, len(algorithms))
	for a := range algorithms {
		names = append(names, a.String())
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// extensionFields reports which extension fields of rl are present, by
// file name, with their values.
func extensionFields(rl *yamlRateLimit) (map[string]bool, []error, algFields) {
	present := map[string]bool{}
	var f algFields
	var errs []error
	ints := []struct {
		name string
		p    *int64
		dst  *int64
	}{
		{"capacity", rl.Capacity, &f.capacity},
		{"refill", rl.Refill, &f.refill},
		{"rate", rl.Rate, &f.rate},
		{"burst", rl.Burst, &f.burst},
		{"limit", rl.Limit, &f.limit},
	}
	for _, i := range ints {
		if i.p == nil {
			continue
		}
		present[i.name] = true
		if *i.p <= 0 {
			errs = append(errs, fmt.Errorf("%w: %s %d is not positive", ErrAlgorithm, i.name, *i.p))
		}
		*i.dst = *i.p
	}
	durs := []struct {
		name string
		p    *string
		dst  *time.Duration
	}{
		{"period", rl.Period, &f.period},
		{"window", rl.Window, &f.window},
	}
	for _, d := range durs {
		if d.p == nil {
			continue
		}
		present[d.name] = true
		v, err := time.ParseDuration(*d.p)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%w: %s %q is not a duration such as 1s or 500ms", ErrAlgorithm, d.name, bounded(*d.p)))
		case v <= 0:
			errs = append(errs, fmt.Errorf("%w: %s %v is not positive", ErrAlgorithm, d.name, v))
		}
		*d.dst = v
	}
	return present, errs, f
}
