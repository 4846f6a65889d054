package redisrate

// The package's loads over redistest.Load (the one bounded load loop).

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// hotSubjectLoad sends workers requests at a time per provider, perWorker
// each, cost 1, round-robin over subs, and returns what was admitted per
// subject and how many requests were not Evaluated. It injects no fault,
// so each of those fails t too (with its cause).
func hotSubjectLoad(t *testing.T, ps []*Provider, id ratelimit.PolicyID, subs []ratelimit.SubjectDigest, workers, perWorker int) (admitted map[ratelimit.SubjectDigest]int, other int) {
	t.Helper()
	var mu sync.Mutex
	admitted = map[ratelimit.SubjectDigest]int{}
	redistest.Load(len(ps)*workers, perWorker, 0, nil, func(w, i int) {
		s := subs[(w+i)%len(subs)]
		out := ask(ps[w%len(ps)], id, s, 1)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ratelimit.Admitted(out):
			admitted[s]++
		case out.Kind() != ratelimit.KindEvaluated:
			other++
			t.Errorf("outcome %v (cause %v): no fault, every call is decided", out, causeOf(out))
		}
	})
	return admitted, other
}

// assertHotSubjectLimits checks a hotSubjectLoad of total requests on subs
// over a cluster, with no fault injected: every request decided, exactly
// limit admitted per subject, and one program call per request over every
// node.
func assertHotSubjectLimits(t *testing.T, c *redistest.Cluster, subs []ratelimit.SubjectDigest, admitted map[ratelimit.SubjectDigest]int, other, limit, total int) {
	t.Helper()
	require.Zero(t, other, "requests not decided")
	for _, s := range subs {
		assert.Equal(t, limit, admitted[s], "exactly the limit per subject")
	}
	assert.EqualValues(t, total, programCalls(c), "one call per request")
}

// subjectTally is what the callers of one subject saw under a failover.
type subjectTally struct {
	admitted, denied, unavailable, indeterminate, shortfall int
}

// calls is how many calls of the subject ended, whatever their outcome.
func (tl subjectTally) calls() int {
	return tl.admitted + tl.denied + tl.unavailable + tl.indeterminate
}

// failoverLoadCalls bounds a failoverLoad worker's calls: at a call every
// 2ms, a minute or more, far beyond any fault a test waits for.
const failoverLoadCalls = 30_000

// failoverLoad starts a bounded load while a test injects a fault: workers
// goroutines round-robin over ps and subs, cost 1, a call every 2ms, at
// most failoverLoadCalls each, until stop is closed. Only Evaluated,
// Unavailable and Indeterminate may occur (anything else fails t). Read
// tally after progress.stop (which ends the load and waits for it; t's
// cleanup runs it too, so a failed test leaves no load behind); progress
// reads it while the load runs.
func failoverLoad(t *testing.T, ps []*Provider, id ratelimit.PolicyID, subs []ratelimit.SubjectDigest, workers int) (tally map[ratelimit.SubjectDigest]*subjectTally, progress *loadProgress) {
	t.Helper()
	stop := make(chan struct{})
	tally = make(map[ratelimit.SubjectDigest]*subjectTally, len(subs))
	for _, s := range subs {
		tally[s] = &subjectTally{}
	}
	mu := new(sync.Mutex)
	done := make(chan struct{})
	go func() {
		defer close(done)
		redistest.Load(workers, failoverLoadCalls, 2*time.Millisecond, redistest.Closed(stop), func(w, i int) {
			s := subs[(w+i)%len(subs)]
			out := ask(ps[w%len(ps)], id, s, 1)
			mu.Lock()
			defer mu.Unlock()
			tl := tally[s]
			switch o := out.(type) {
			case ratelimit.Evaluated:
				if o.Decision.Allowed {
					tl.admitted++
				} else {
					tl.denied++
				}
			case ratelimit.Unavailable:
				tl.unavailable++
			case ratelimit.Indeterminate:
				tl.indeterminate++
				if o.Category == ratelimit.CategoryReplication {
					tl.shortfall++
				}
			default:
				t.Errorf("outcome %v during the failover", out)
			}
		})
	}()
	progress = &loadProgress{mu: mu, tally: tally}
	progress.stop = sync.OnceFunc(func() {
		close(stop)
		<-done
	})
	t.Cleanup(progress.stop)
	return tally, progress
}

// loadProgress reads a running failoverLoad's tally, so that a test waits
// for the load it needs (before a fault, and after it) instead of sleeping.
type loadProgress struct {
	mu    *sync.Mutex
	tally map[ratelimit.SubjectDigest]*subjectTally
	// stop ends the load and waits for it; idempotent.
	stop func()
}

// snapshot copies the tally now.
func (p *loadProgress) snapshot() map[ratelimit.SubjectDigest]subjectTally {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[ratelimit.SubjectDigest]subjectTally, len(p.tally))
	for s, tl := range p.tally {
		out[s] = *tl
	}
	return out
}

// waitAround waits, before a fault, until every subject has had 5 calls
// admitted, then runs fault and waits until every subject has had 5 more
// calls end (any outcome: the switch itself), each wait bounded by within
// and polled every 10ms; either wait falling short fails t with the
// subjects short of it. It replaces sleeping around the fault: the load
// the assertions rest on is there on a slow machine too.
func (p *loadProgress) waitAround(t *testing.T, within time.Duration, fault func()) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for s, tl := range p.snapshot() {
			assert.GreaterOrEqual(c, tl.admitted, 5, "subject %v: calls admitted before the fault, %+v", s, tl)
		}
	}, within, 10*time.Millisecond, "every subject had 5 calls admitted before the fault")
	fault()
	before := p.snapshot()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for s, tl := range p.snapshot() {
			assert.GreaterOrEqual(c, tl.calls(), before[s].calls()+5, "subject %v: calls ended after the fault, %+v", s, tl)
		}
	}, within, 10*time.Millisecond, "every subject had 5 more calls end after the fault")
}
