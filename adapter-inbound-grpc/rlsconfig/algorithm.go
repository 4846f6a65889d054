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
// shared-contract's sealed ratelimit.Params (SlidingWindowCounter,
// TokenBucket, GCRA or SlidingLog), ready for a ratelimit.PolicySpec; the
// arithmetic bounds are checked there (ratelimit.NewPolicy), only
// presence and sign here.
//
// The file fields, beside `algorithm: <name>` in a rate_limit mapping:
//
//	fixed_window            unit, requests_per_unit (the default; Algorithm is nil)
//	sliding_window_counter  unit, requests_per_unit (a window of one unit)
//	token_bucket            capacity, refill, period   (refill tokens every period)
//	gcra                    rate, period, burst
//	sliding_log             limit, window
//
// period and window are Go durations ("1s", "500ms", "1m"). A field of
// another algorithm, or unit/requests_per_unit where the algorithm does not
// use them, is refused (ErrAlgorithm); so is unlimited or policy with an
// algorithm.
type Algorithm struct {
	Name   ratelimit.Algorithm
	Params ratelimit.Params
}

// algorithmSpec is the one home of what varies by algorithm in the file:
// which extension fields it takes (unitFields: unit and requests_per_unit
// instead) and how they become Params.
type algorithmSpec struct {
	fields     []string
	unitFields bool
	build      func(f algFields) ratelimit.Params // nil: the default fixed window
}

// algFields are the extension fields as read, durations parsed.
type algFields struct {
	capacity, refill, rate, burst, limit int64
	period, window                       time.Duration
	requestsPerUnit                      uint32
	unit                                 Unit
}

var algorithms = map[ratelimit.Algorithm]algorithmSpec{
	ratelimit.AlgorithmFixedWindow: {unitFields: true},
	ratelimit.AlgorithmSlidingWindowCounter: {unitFields: true, build: func(f algFields) ratelimit.Params {
		return ratelimit.SlidingWindowCounter{Limit: int64(f.requestsPerUnit), Window: f.unit.Duration()}
	}},
	ratelimit.AlgorithmTokenBucket: {fields: []string{"capacity", "refill", "period"}, build: func(f algFields) ratelimit.Params {
		return ratelimit.TokenBucket{Capacity: f.capacity, RefillTokens: f.refill, RefillPeriod: f.period}
	}},
	ratelimit.AlgorithmGCRA: {fields: []string{"rate", "period", "burst"}, build: func(f algFields) ratelimit.Params {
		return ratelimit.GCRA{Rate: f.rate, Period: f.period, Burst: f.burst}
	}},
	ratelimit.AlgorithmSlidingLog: {fields: []string{"limit", "window"}, build: func(f algFields) ratelimit.Params {
		return ratelimit.SlidingLog{Limit: f.limit, Window: f.window}
	}},
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
