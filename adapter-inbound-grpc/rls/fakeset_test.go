package rls_test

import (
	"context"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// EvaluateSet decides req all or nothing over the fake's store, each
// member with its own subject and cost; a member the scripted failure
// answers fails the whole set (nothing taken). A member that would have
// admitted a denied set reports what it answered, as the set program does.
func (f *fakeDecider) EvaluateSet(_ context.Context, req ratelimit.SetRequest) ratelimit.Outcome {
	f.mu.Lock()
	f.sets++
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return ratelimit.Unavailable{PolicyID: req.FirstMember(), Category: ratelimit.CategoryClosed}
	}
	if err := req.Validate(); err != nil {
		return ratelimit.Unavailable{PolicyID: req.FirstMember().Known(), Category: ratelimit.CategoryInvalidRequest, Cause: err}
	}
	pols := make([]ratelimit.Policy, len(req.Members))
	for i, id := range req.Members {
		p, ok := f.policies[id]
		if !ok {
			return ratelimit.Unavailable{PolicyID: id, Category: ratelimit.CategoryUnknownPolicy}
		}
		if err := errorsOf(req.Member(i).ValidateFor(p), ratelimit.CanJoinSet(p)); err != nil {
			return ratelimit.Unavailable{PolicyID: id, Category: ratelimit.CategoryInvalidRequest, Cause: err}
		}
		if f.fail != nil {
			if o := f.fail(req.Member(i)); o != nil {
				return o
			}
		}
		pols[i] = p
	}
	if err := req.ValidateScoped(pols); err != nil {
		return ratelimit.Unavailable{PolicyID: req.FirstMember(), Category: ratelimit.CategoryInvalidRequest, Cause: err}
	}
	now := time.Unix(1_000_000, 0)
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	keys := make([]string, len(pols))
	all := true
	for i, p := range pols {
		m := req.Member(i)
		keys[i] = string(p.ID()) + "/" + string(p.Subject(m.SubjectDigest))
		all = all && f.st.used[keys[i]]+m.Cost <= p.Limit()
	}
	members := make([]ratelimit.Decision, len(pols))
	for i, p := range pols {
		m := req.Member(i)
		used := f.st.used[keys[i]]
		allowed := used+m.Cost <= p.Limit()
		if allowed {
			used += m.Cost
		}
		if all {
			f.st.used[keys[i]] = used
		}
		d := ratelimit.Decision{Allowed: allowed, Limit: p.Limit(), Remaining: p.Limit() - used, ServerNow: now,
			ResetAt: now.Add(30 * time.Second), PolicyID: p.ID(), PolicyRevision: p.Revision(), Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain}
		if allowed {
			d.Receipt = ratelimit.NewReceipt(p.ID(), p.Revision(), m.Cost, now.UnixMilli(), ratelimit.GlobalRedis)
		} else {
			d.RetryAfter = 30 * time.Second
		}
		members[i] = d
	}
	return ratelimit.Evaluated{Decision: members[ratelimit.Deciding(members)], Members: members}
}

// errorsOf is the first non-nil error of errs.
func errorsOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// setCalls is the number of EvaluateSet calls.
func (f *fakeDecider) setCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sets
}
