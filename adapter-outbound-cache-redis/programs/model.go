package programs

import (
	"math/bits"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Evaluate is the reference model: what the program for p answers, and the
// state it leaves, when it runs on a key holding st while the server's TIME
// reads serverNowMillis, for one request of the given cost. It performs the
// programs' integer arithmetic step for step (docs/programs.md), so the
// programs are tested against it. The returned State is st itself unless the
// reply is StatusAllowed; the TTL then set is Reply.ExpiryMillis.
//
// serverNowMillis outside 0..MaxServerMillis is StatusClockUnsafe, as a TIME
// past MaxServerMillis is. The zero Policy is StatusInvalid.
//
// The server's TIME is taken at the start of that millisecond (0 µs); GCRA,
// the one algorithm that reads microseconds, is modelled at any microsecond
// by EvaluateMicros.
func Evaluate(p ratelimit.Policy, st State, serverNowMillis, cost int64) (Reply, State) {
	var c calc
	r, next := evaluate(p, st, serverNowMillis, 0, cost, &c)
	return r, next
}

// EvaluateMicros is Evaluate with the server's TIME at serverNowMicros
// microseconds: the reply's instants are its millisecond
// (floor(serverNowMicros / 1000)), and GCRA decides at the microsecond
// (ADR 0021). For the other algorithms it equals Evaluate at that
// millisecond.
func EvaluateMicros(p ratelimit.Policy, st State, serverNowMicros, cost int64) (Reply, State) {
	var c calc
	ms, frac := splitMicros(serverNowMicros)
	return evaluate(p, st, ms, frac, cost, &c)
}

// splitMicros splits a microsecond instant into its millisecond (rounded
// down) and the microseconds into it, 0..999.
func splitMicros(us int64) (ms, frac int64) {
	ms, frac = us/1000, us%1000
	if frac < 0 {
		ms, frac = ms-1, frac+1000
	}
	return ms, frac
}

// calc performs the model's arithmetic and records the largest magnitude of
// any intermediate, so that tests can show every one stays within
// MaxExactInt, where the programs' doubles are exact.
type calc struct {
	peak     int64
	overflow bool
}

func (c *calc) note(x int64) int64 {
	m := x
	if m < 0 {
		m = -m
	}
	if m > ratelimit.MaxExactInt || m < 0 {
		c.overflow = true
	}
	if m > c.peak {
		c.peak = m
	}
	return x
}

// mul multiplies a, b >= 0.
func (c *calc) mul(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > uint64(ratelimit.MaxExactInt) {
		c.overflow = true
	}
	return c.note(int64(lo))
}

func (c *calc) add(a, b int64) int64 { return c.note(a + b) }
func (c *calc) sub(a, b int64) int64 { return c.note(a - b) }

// floor is math.floor(a / b) for a >= 0, b >= 1.
func (c *calc) floor(a, b int64) int64 { return c.note(a / b) }

// ceil mirrors the programs' ceil(): quotient, then remainder a - q*b.
func (c *calc) ceil(a, b int64) int64 {
	q := c.floor(a, b)
	if c.sub(a, c.mul(q, b)) > 0 {
		q = c.add(q, 1)
	}
	return q
}

func fail(s Status, now int64) Reply { return Reply{Status: s, ServerNowMillis: now} }

// admit is the part every program shares before it touches state: the
// server clock within 0..MaxServerMillis, units in 1..limit, stored state
// of this policy's algorithm and revision, and a clock regression within
// the tolerance (the effective time is then the last observed one). When
// refused is true, refusal is the reply and the state stays as it was.
func admit(p ratelimit.Policy, st State, now, units int64, c *calc) (n numbers, f map[string]int64, eff int64, refusal Reply, refused bool) {
	future := now < 0 || now > ratelimit.MaxServerMillis
	if future {
		now = 0
	}
	if p.IsZero() || units < 1 || units > p.Limit() {
		return n, nil, 0, fail(StatusInvalid, now), true
	}
	if future {
		return n, nil, 0, Reply{Status: StatusClockUnsafe}, true
	}
	n = numbersOf(p)
	if st != nil {
		var ok bool
		// The model does not cover lease records (ADR 0042): the server
		// tests and the history checker do.
		if f, ok = st.fields(n.alg); !ok || f[FieldLeases] > 0 || !n.validState(f, p.Revision(), c) || !st.logNewestValid(f) {
			return n, nil, 0, fail(StatusStateIncompatible, now), true
		}
	}
	eff = now
	if f != nil && now < f[FieldLastObserved] {
		last := f[FieldLastObserved]
		if c.sub(last, now) > n.reg {
			return n, nil, 0, Reply{Status: StatusClockUnsafe, ServerNowMillis: now, EffectiveNowMillis: last,
				RetryAfterMillis: c.sub(c.sub(last, now), n.reg)}, true
		}
		eff = last
	}
	return n, f, eff, Reply{}, false
}

func evaluate(p ratelimit.Policy, st State, now, frac, cost int64, c *calc) (Reply, State) {
	n, f, eff, refusal, refused := admit(p, st, now, cost, c)
	if refused {
		return refusal, st
	}
	r, next := modelOf(n.alg).decide(n, step{st: st, f: f, now: now, eff: eff, frac: gcraFrac(now, eff, frac), units: cost, rev: p.Revision(), c: c})
	if next == nil {
		return r, st
	}
	// The TTL the program sets: (resetAt - serverNow) + grace.
	c.add(c.sub(r.ResetAtMillis, now), n.grace)
	return r, next
}

// validState mirrors the programs' state checks: schema, algorithm,
// revision, lastObserved within MaxServerMillis and each algorithm field in
// its range (the algorithm's model.validState).
func (n numbers) validState(f map[string]int64, rev int64, c *calc) bool {
	if f[FieldSchema] != SchemaVersion || f[FieldAlgorithm] != int64(n.alg) || f[FieldRevision] != rev ||
		f[FieldLastObserved] > ratelimit.MaxServerMillis {
		return false
	}
	return modelOf(n.alg).validState(n, f, c)
}
