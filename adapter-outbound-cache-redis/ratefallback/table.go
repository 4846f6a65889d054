package ratefallback

import (
	"errors"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// sweepEvery spaces the sweeps of a full table.
const sweepEvery = time.Second

// entry is one subject's local state under one policy.
type entry struct {
	policy  *localPolicy
	subject ratelimit.SubjectDigest
	state   programs.State
	// expiresAt (local ms) is when state has expired, as its TTL in Redis
	// would have: the window of what was admitted locally has passed.
	expiresAt int64
	// pending is what this instance admitted locally and has not charged
	// to the global state yet; reserve is the other instances' shares,
	// charged with it once per outage (ADR 0017).
	pending, reserve int64
	// charging is closed when the charge in flight ends; nil when none
	// is. taken is what that charge carries (pending, reserve).
	charging     chan struct{}
	takenPending int64
	takenReserve int64
	// failures in a row of background charges that reached the network,
	// and the earliest next background attempt.
	failures int
	nextTry  time.Time
}

// entryKey is the table key of req's subject under its policy (the
// subject digest is already a pseudonym).
func entryKey(req ratelimit.Request) string {
	return string(req.PolicyID) + "\x00" + string(req.SubjectDigest)
}

// decide runs the model for one request on the subject's local state.
func (f *Fallback) decide(lp *localPolicy, key string, subject ratelimit.SubjectDigest, cost int64, u ratelimit.Unavailable) ratelimit.Outcome {
	if cost > lp.share.Limit() {
		return u // never admissible on this instance's share
	}
	nowT := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	t, refused := f.try(lp, key, subject, cost, nowT, u)
	if refused != nil {
		return refused
	}
	d := t.decision()
	if d.Allowed {
		t.commit(nowT.UnixMilli(), cost)
		d.Receipt = t.receipt(cost)
	}
	return ratelimit.Evaluated{Decision: d}
}

// trial is one request decided on the local model and not yet written.
type trial struct {
	lp   *localPolicy
	e    *entry
	r    programs.Reply
	next programs.State
}

// try decides one request of cost on key's local state at nowT without
// writing it, creating the entry (the table has room, or a sweep makes
// it); a non-nil Outcome is u, the request cannot be decided locally (a
// full table, a local clock gone back too far, a model refusal). Called
// with f.mu held.
func (f *Fallback) try(lp *localPolicy, key string, subject ratelimit.SubjectDigest, cost int64, nowT time.Time, u ratelimit.Unavailable) (trial, ratelimit.Outcome) {
	e := f.table[key]
	if e == nil {
		if len(f.table) >= f.max {
			f.sweep(nowT, false)
		}
		if len(f.table) >= f.max {
			u.Cause = errors.Join(u.Cause, ErrTableFull)
			return trial{}, u
		}
		e = &entry{policy: lp, subject: subject}
		f.table[key] = e
	}
	st := e.state
	if st != nil && nowT.UnixMilli() >= e.expiresAt {
		st = nil
	}
	// To the microsecond: GCRA decides on it (ADR 0021); the other
	// algorithms on its millisecond.
	r, next := programs.EvaluateMicros(lp.share, st, nowT.UnixMicro(), cost)
	if r.Status != programs.StatusAllowed && r.Status != programs.StatusDenied {
		return trial{}, u
	}
	return trial{lp: lp, e: e, r: r, next: next}, nil
}

// commit writes an admitted trial of cost at now (local ms). Called with
// f.mu held.
func (t trial) commit(now, cost int64) {
	if !t.e.owes() {
		// A new outage for this subject: the other instances may admit
		// their shares too (ADR 0017).
		t.e.reserve = t.lp.reserve
	}
	t.e.state = t.next
	t.e.expiresAt = now + t.r.ExpiryMillis(t.lp.share)
	t.e.pending += cost
}

// receipt is an admitted trial's receipt: a local one, given back by
// Fallback.Refund on this instance's table (ADR 0025).
func (t trial) receipt(cost int64) ratelimit.Receipt {
	return ratelimit.NewReceipt(t.lp.global.ID(), t.lp.global.Revision(), cost, t.r.EffectiveNowMillis, ratelimit.LocalEmergency)
}

// decision is the local decision of a trial.
func (t trial) decision() ratelimit.Decision {
	retry, delay := t.r.Waits()
	return ratelimit.Decision{
		Allowed:        t.r.Status == programs.StatusAllowed,
		Limit:          t.r.Limit,
		Remaining:      t.r.Remaining,
		RetryAfter:     retry,
		Delay:          delay,
		ResetAt:        time.UnixMilli(t.r.ResetAtMillis),
		PolicyID:       t.lp.global.ID(),
		PolicyRevision: t.lp.global.Revision(),
		Source:         ratelimit.LocalEmergency,
		Certainty:      ratelimit.ApproximateLocal,
	}
}

// sweep drops the entries whose local state has expired, with what they
// still owe (its window has passed: charging it now would only charge the
// next one), at most once per sweepEvery unless force. Entries with a
// charge in flight stay. Called with f.mu held.
func (f *Fallback) sweep(now time.Time, force bool) {
	if !force && !f.lastSweep.IsZero() && now.Sub(f.lastSweep) < sweepEvery {
		return
	}
	f.lastSweep = now
	ms := now.UnixMilli()
	for k, e := range f.table {
		if e.charging == nil && ms >= e.expiresAt {
			f.dropped += uint64(e.pending)
			delete(f.table, k)
		}
	}
}
