package ratelimit

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Algorithm selects one of the supported algorithms. The zero value is
// invalid. What an algorithm means at the contract level is its
// AlgorithmSpec (Spec), one per algorithm in alg_<name>.go (ADR 0034).
type Algorithm int

// The supported algorithms.
const (
	AlgorithmFixedWindow Algorithm = iota + 1
	AlgorithmSlidingWindowCounter
	AlgorithmTokenBucket
	// AlgorithmGCRA is the generic cell rate algorithm (go-redis/redis_rate's
	// limiter; ADR 0021).
	AlgorithmGCRA
	// AlgorithmSlidingLog is the exact sliding log: every admission is kept
	// with its cost for one window (ADR 0024).
	AlgorithmSlidingLog
	// AlgorithmLeakyBucket is the leaky bucket as a queue: a request beyond
	// the rate is admitted with a delay while the queue has room (nginx's
	// limit_req with burst and delay=; ADR 0028).
	AlgorithmLeakyBucket
	// AlgorithmConcurrency limits the requests in flight: an admission
	// holds a slot until it is given back or its hold expires (ADR 0041).
	AlgorithmConcurrency
)

// algorithms is the registry: one line per algorithm, in Algorithm order.
// Every question whose answer varies by algorithm is asked of the entry
// (ADR 0034); a new algorithm is its alg_<name>.go and one line here.
var algorithms = [...]*AlgorithmSpec{
	AlgorithmFixedWindow:          &fixedWindowSpec,
	AlgorithmSlidingWindowCounter: &slidingWindowCounterSpec,
	AlgorithmTokenBucket:          &tokenBucketSpec,
	AlgorithmGCRA:                 &gcraSpec,
	AlgorithmSlidingLog:           &slidingLogSpec,
	AlgorithmLeakyBucket:          &leakyBucketSpec,
	AlgorithmConcurrency:          &concurrencySpec,
}

// AlgorithmSpec is what an algorithm means at the contract level: its
// wire name, its parameter type and policy-file fields, how sure its
// decisions are and what it supports. Its parameter type (a Params
// variant) carries the rest: the numbers Policy reports, the validation
// with its arithmetic bounds (docs/arithmetic.md) and the local-fallback
// share. The Redis-level half (model, state layout, programs) is the
// algorithm's entry in adapter-outbound-cache-redis/programs. Algorithms
// and Algorithm.Spec hand out copies, which share nothing a caller could
// change: the registry is fixed.
type AlgorithmSpec struct {
	// Algorithm is the registry key.
	Algorithm Algorithm
	// Name is the stable wire name ("fixed_window"), used in the policy
	// file, the key digest and stored state.
	Name string
	// fields are the policy-file parameter fields (Fields).
	fields []ParamField
	// Build makes the parameters from the values of Fields (a required
	// field is always present; an optional one may be absent). NewPolicy
	// validates the result.
	Build func(FieldValues) Params
	// Certainty is what every decision of the algorithm carries: Certain,
	// or ApproximateAlgorithm when the algorithm itself approximates.
	Certainty Certainty
	// DenialCacheExact: with no other traffic and no reset, a request the
	// server denied with retry-after R stays denied, for that cost and
	// every larger one, at every instant before R has passed on the
	// server's clock (docs/programs.md, "Denial cache"). Only then may a
	// denial be cached.
	DenialCacheExact bool
	// DecidesInMicros: the algorithm decides on the microsecond, not the
	// server's millisecond, so a retry-after rounded up to a millisecond
	// may be admitted up to 1 ms before it (ADR 0021); a cached denial
	// expires a millisecond earlier for it.
	DecidesInMicros bool
	// NoDedup, when not empty, is why a policy of the algorithm cannot
	// have a dedup window.
	NoDedup string
	// NoSetMember, when not empty, is why a policy of the algorithm
	// cannot be a member of a policy set (ADR 0027).
	NoSetMember string
	// Delays: an admission may carry a delay in RetryAfter, the time the
	// caller holds the request (the leaky bucket's queue, ADR 0028).
	Delays bool
	// Holds: an admission holds its units until the caller gives them
	// back with EdgePort.Refund, or until the policy's window (its
	// maximum hold) passes on the server's clock; the edge gives them
	// back when the handler returns (a concurrency limit, ADR 0041).
	Holds bool
	// NoLease, when not empty, is why a policy of the algorithm cannot
	// lease (PolicySpec.Lease, ADR 0042): only an algorithm whose bound
	// holds when a lease's units are counted at the reservation and used
	// later, within the lease, leases.
	NoLease string
	// LeaseRecords: the algorithm's state holds each lease until its end
	// (ADR 0042): a token bucket and GCRA record it (reservation instant,
	// end, units) and never refill into its units; a sliding log stores
	// it as admitted at its end. A lease then ends its TTL after the
	// reservation, with no window to end with. Without it a lease also
	// ends with the aligned window it was counted in.
	LeaseRecords bool
	// Charge and Refund: the algorithm has reconciliation charges and
	// refunds by receipt (ADR 0025).
	Charge, Refund bool

	// matches returns p when it is the algorithm's parameter type, as a
	// value (a pointer would let the caller mutate a frozen policy).
	matches func(Params) (variant, bool)
	// typeName is the parameter type's name, for errors.
	typeName string
}

// ParamField is one parameter field of a policy file.
type ParamField struct {
	// Name is the policy file's key ("limit", "refillPeriod").
	Name string
	// Kind is the value's type.
	Kind FieldKind
	// Optional fields may be left out; Build then applies its default.
	Optional bool
}

// FieldKind is the type of a ParamField's value. The zero value is
// invalid.
type FieldKind int

// The field kinds.
const (
	// FieldInt is an integer.
	FieldInt FieldKind = iota + 1
	// FieldDuration is a time.Duration of whole milliseconds (the policy
	// file writes it as a Go duration string, "250ms").
	FieldDuration
)

// FieldValues are the values of a policy's parameter fields by name: an
// integer field's in Ints, a duration field's in Durations.
type FieldValues struct {
	Ints      map[string]int64
	Durations map[string]time.Duration
}

// register completes spec for its parameter type T: matches and typeName.
func register[T variant](spec AlgorithmSpec) AlgorithmSpec {
	var zero T
	spec.typeName = strings.TrimPrefix(fmt.Sprintf("%T", zero), "ratelimit.")
	spec.matches = func(p Params) (variant, bool) {
		v, ok := p.(T)
		return v, ok
	}
	return spec
}

// Algorithms lists every algorithm's spec, in Algorithm order.
func Algorithms() []AlgorithmSpec {
	out := make([]AlgorithmSpec, 0, len(algorithms)-1)
	for _, s := range algorithms[1:] {
		out = append(out, *s)
	}
	return out
}

// Fields are the algorithm's policy-file parameter fields, in the order
// their problems are reported (a copy).
func (s AlgorithmSpec) Fields() []ParamField { return slices.Clone(s.fields) }

// Spec returns a's spec; ok is false when a is not a supported algorithm.
func (a Algorithm) Spec() (spec AlgorithmSpec, ok bool) {
	if !a.Valid() {
		return AlgorithmSpec{}, false
	}
	return *algorithms[a], true
}

// String returns the stable wire name ("fixed_window", ...), used in the
// policy file, the key digest and stored state.
func (a Algorithm) String() string {
	if a.Valid() {
		return algorithms[a].Name
	}
	return fmt.Sprintf("Algorithm(%d)", int(a))
}

// Valid reports whether a is one of the supported algorithms.
func (a Algorithm) Valid() bool {
	return a >= 1 && int(a) < len(algorithms)
}

// ParseAlgorithm maps a wire name to an Algorithm; unknown names are errors.
func ParseAlgorithm(s string) (Algorithm, error) {
	for _, spec := range algorithms[1:] {
		if spec.Name == s {
			return spec.Algorithm, nil
		}
	}
	return 0, fmt.Errorf("%w: algorithm %q is not %s", ErrUnsupported, bounded(s), algorithmList(func(s *AlgorithmSpec) string { return s.Name }))
}

// algorithmList joins every algorithm's name(s) as "a, b or c".
func algorithmList(name func(*AlgorithmSpec) string) string {
	names := make([]string, 0, len(algorithms)-1)
	for _, s := range algorithms[1:] {
		names = append(names, name(s))
	}
	last := len(names) - 1
	return strings.Join(names[:last], ", ") + " or " + names[last]
}

// variantOf returns p as its variant when it is one of the parameter
// types as a value; ok is false otherwise (nil, or a pointer).
func variantOf(p Params) (v variant, ok bool) {
	for _, s := range algorithms[1:] {
		if v, ok := s.matches(p); ok {
			return v, true
		}
	}
	return nil, false
}
