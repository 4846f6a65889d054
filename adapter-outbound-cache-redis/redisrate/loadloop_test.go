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

// failoverLoad starts a bounded load while a test injects a fault: workers
// goroutines round-robin over ps and subs, cost 1, a call every 2ms, at
// most 5000 each, until stop is closed. Only Evaluated, Unavailable and
// Indeterminate may occur (anything else fails t). Read tally once loaded
// is closed, after the test closed stop.
func failoverLoad(t *testing.T, ps []*Provider, id ratelimit.PolicyID, subs []ratelimit.SubjectDigest, workers int, stop <-chan struct{}) (tally map[ratelimit.SubjectDigest]*subjectTally, loaded <-chan struct{}) {
	t.Helper()
	tally = make(map[ratelimit.SubjectDigest]*subjectTally, len(subs))
	for _, s := range subs {
		tally[s] = &subjectTally{}
	}
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		redistest.Load(workers, 5000, 2*time.Millisecond, redistest.Closed(stop), func(w, i int) {
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
	return tally, done
}
