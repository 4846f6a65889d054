package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// model is the Redis-level half of one algorithm (ADR 0034): the template
// its programs are rendered from, the layout of its stored state and the
// reference model of its decision, charge and refund programs. The
// contract-level half (parameters, policy-file fields, bounds,
// capabilities) is its ratelimit.AlgorithmSpec. Each algorithm's model is
// in alg_<name>.go; the steps every program shares (admit, the TTL, the
// checked arithmetic) are model.go's.
type model struct {
	alg ratelimit.Algorithm
	// slug names the algorithm's template in luasrc
	// (luasrc/<slug>.lua.tmpl) and its programs ("rate-<slug>-v1").
	slug string
	// layout is the packed fields after the header byte, in order; every
	// width covers the field's bound (docs/arithmetic.md).
	layout []field
	// compactArrival: GCRA's d is written in the fewest of 4..7 bytes, its
	// width carried in l's field (ADR 0029).
	compactArrival bool
	// setCode is the algorithm's code in the set program's ARGV framing,
	// its member function's position in the program (luasrc.Algorithms);
	// 0 for an algorithm the set program does not decide (SetCode).
	setCode int64
	// logEntries: the packed fields are followed by FieldEntries log
	// entries of LogEntryBytes (the sliding log; ADR 0024).
	logEntries bool
	// args appends the algorithm's ARGV after ArgLimit (docs/programs.md,
	// "ARGV"): the window, the refill or the emission interval.
	args func(dst []any, p ratelimit.Policy) []any
	// fill returns n with the algorithm's own numbers (win; rate, per, fullScaled;
	// a queue's delay numbers) from p.
	fill func(p ratelimit.Policy, n numbers) numbers
	// validState is the programs' range check of the algorithm's fields
	// (the header's fields are admit's).
	validState func(n numbers, f map[string]int64, c *calc) bool
	// decide, charge and refund are the reference models of the decision,
	// charge and refund programs, after admit.
	decide, charge, refund func(n numbers, s step) (Reply, State)
	// checkDecision is the algorithm's own part of Reply.Check on an
	// ALLOWED or DENIED reply (its window alignment); nil when it has none.
	checkDecision func(n numbers, r Reply) error
}

// step is one run of a program on one key, after admit: the state read
// (nil when absent) and its fields, the server's and the effective
// millisecond, the microseconds into the effective millisecond (GCRA;
// gcraFrac), the cost or units, the receipt's instant (refund) and the
// policy revision.
type step struct {
	st                        State
	f                         map[string]int64
	now, eff, frac, units, at int64
	rev                       int64
	c                         *calc
}

// models is the registry, keyed by algorithm; init fills it, one line per
// algorithm (a package-level initializer would be an initialization
// cycle: the models encode state, which reads the registry).
var models = map[ratelimit.Algorithm]*model{}

func init() {
	for _, m := range []*model{
		&fixedWindowModel,
		&slidingCounterModel,
		&tokenBucketModel,
		&gcraModel,
		&slidingLogModel,
		&leakyBucketModel,
		&concurrencyModel,
	} {
		models[m.alg] = m
	}
}

// modelOf is algorithm a's model, or nil for an unknown algorithm.
func modelOf(a ratelimit.Algorithm) *model { return models[a] }
