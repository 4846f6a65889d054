package ratelimit

import "time"

// MaxConcurrencyLimit caps Concurrency.Limit: a subject's state holds at
// most Limit slots, so the cap bounds it at 11 + 8*MaxConcurrencyLimit
// bytes plus the revision (C1 of docs/arithmetic.md, ADR 0041).
const MaxConcurrencyLimit = 10_000

// DefaultMaxHold is Concurrency.MaxHold when the policy file leaves it
// out: the service's HTTP write timeout (ADR 0041).
const DefaultMaxHold = 30 * time.Second

// Concurrency admits a request iff the slots held for the subject plus
// its cost are at most Limit: requests in flight, not requests per time
// (ADR 0041). An admission holds Cost slots until the caller gives them
// back by its receipt (EdgePort.Refund) or, when it never does (its
// instance died), until MaxHold of server time has passed since the
// admission. It runs on the sliding log's state and arithmetic with
// MaxHold as the window: a slot is a log entry that leaves early when it
// is given back.
type Concurrency struct {
	Limit   int64
	MaxHold time.Duration
}

var concurrencySpec = register[Concurrency](AlgorithmSpec{
	Algorithm: AlgorithmConcurrency,
	Name:      "concurrency",
	fields:    []ParamField{{Name: "limit", Kind: FieldInt}, {Name: "maxHold", Kind: FieldDuration, Optional: true}},
	Build: func(v FieldValues) Params {
		q := Concurrency{Limit: v.Ints["limit"], MaxHold: DefaultMaxHold}
		if d, ok := v.Durations["maxHold"]; ok {
			q.MaxHold = d
		}
		return q
	},
	Certainty: Certain,
	// A slot given back frees a denied request's way before the retry
	// the server computed (the oldest hold's expiry): no denial may be
	// cached.
	DenialCacheExact: false,
	// A replay would run a second handler on the first one's slot, and
	// the replay's release would free it while the first still runs.
	NoDedup: "a replayed admission would hold no slot of its own",
	Holds:   true,
	Charge:  true,
	NoLease: "a slot is held per request and given back by it; a lease has no request to give it back (ADR 0042)",
	Refund:  true,
})

// Algorithm implements Params.
func (Concurrency) Algorithm() Algorithm { return AlgorithmConcurrency }

func (q Concurrency) limit() int64 { return q.Limit }

// windowMillis is MaxHold: how long an admission may hold its slots.
func (q Concurrency) windowMillis() int64 { return q.MaxHold.Milliseconds() }

// horizonMillis: every slot is free one MaxHold after the newest
// admission, which is at most the effective instant (C2).
func (q Concurrency) horizonMillis() int64 { return q.windowMillis() }

// validate checks formulas C1-C2 of docs/arithmetic.md.
func (q Concurrency) validate(v *policyValidator, grace int64) (int64, variant) {
	v.positive("Params.Limit", q.Limit)
	w := v.millis("Params.MaxHold", q.MaxHold, false)
	// C1: at most Limit slots are held (every hold is at least 1); the cap
	// bounds the state's bytes.
	if q.Limit > MaxConcurrencyLimit {
		v.fail("Params.Limit", ErrLimitAboveCap, "%d > %d (the slots held per subject)", q.Limit, MaxConcurrencyLimit)
	}
	// C2: reset (newest hold + maxHold), retry and TTL: maxHold + grace <=
	// MaxHorizonMillis.
	v.sumWithin("Params.MaxHold", w, grace, MaxHorizonMillis)
	return q.Limit, q
}

// fallbackShares: each instance may hold its share of the slots.
func (q Concurrency) fallbackShares(share, _ int64) ([]Params, error) {
	return []Params{Concurrency{Limit: share, MaxHold: q.MaxHold}}, nil
}

func (Concurrency) sealedParams() {}

// HoldEnd is when a handler holding a slot of a concurrency limit, taken
// by a decision sent at sent, must have stopped: maxHold after sent's
// whole millisecond, the earliest instant the server can reclaim the slot
// (it counts the hold from its admission's millisecond, no earlier than
// sent's).
func HoldEnd(sent time.Time, maxHold time.Duration) time.Time {
	return sent.Truncate(time.Millisecond).Add(maxHold)
}
