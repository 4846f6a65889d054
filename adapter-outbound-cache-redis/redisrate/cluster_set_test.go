package redisrate

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// TestClusterSetAcrossSlotsNeverBeyondAnyMember: the refund path of a
// policy set on a real cluster (ADR 0027). The global member's key and
// every subject member's key sit in different slots, so each set is two
// calls, the two subject members in one set-program call (ADR 0026), and
// a denial by the global member gives back both. 4 providers x 64
// goroutines: no subject admits beyond its member's limit, all together
// never beyond the global member's, no refund fails, and the global
// budget on the server holds exactly what was admitted.
func TestClusterSetAcrossSlotsNeverBeyondAnyMember(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	const subjectLimit, globalLimit, subjects, providers, workers, perWorker = 20, 100, 8, 4, 64, 4
	perClient := fixedPolicy(t, "per-client", subjectLimit, time.Hour)
	global := mustPolicy(t, ratelimit.PolicySpec{ID: "backend", Params: ratelimit.FixedWindow{Limit: globalLimit, Window: time.Hour}, Scope: ratelimit.ScopeGlobal})
	perDay := tokenPolicy(t, "per-client-day", 1000, 1000, 24*time.Hour)
	pols := []ratelimit.Policy{perClient, perDay, global}
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute)
	var ps []*Provider
	for range providers {
		ps = append(ps, clusterProvider(t, c.Addrs(), keys, pols, func(c *ClientConfig) {
			c.PoolSize = workers // MaxInFlight = PoolSize: no admission refusals
			c.CommandTimeout, c.DialTimeout, c.PoolTimeout = noFaultTimeout, noFaultTimeout, noFaultTimeout
		}))
	}
	gk, err := StateKey(keys, global, randomSubject(t))
	require.NoError(t, err)
	subs := make([]ratelimit.SubjectDigest, 0, subjects)
	for len(subs) < subjects {
		s := randomSubject(t)
		sk, err := StateKey(keys, perClient, s)
		require.NoError(t, err)
		if keyspace.Slot(sk) != keyspace.Slot(gk) {
			subs = append(subs, s)
		}
	}
	var perSubject [subjects]atomic.Int64
	var total atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				for pi, p := range ps {
					k := (w + i + pi) % subjects
					out := askSet(p, subs[k], "per-client", "per-client-day", "backend")
					if !assert.Equal(t, ratelimit.KindEvaluated, out.Kind(), "no fault is injected: every set is decided: %v", out) {
						return
					}
					if ratelimit.Admitted(out) {
						perSubject[k].Add(1)
						total.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	require.Positive(t, total.Load())
	assert.LessOrEqual(t, total.Load(), int64(globalLimit), "the global member's limit")
	for k := range perSubject {
		assert.LessOrEqual(t, perSubject[k].Load(), int64(subjectLimit), "subject %d's member limit", k)
	}
	var failures uint64
	for _, p := range ps {
		failures += p.SetRefundFailures()
	}
	assert.Zero(t, failures, "every refund ran")
	probe := ask(ps[0], "backend", randomSubject(t), 1)
	if total.Load() < globalLimit {
		require.True(t, ratelimit.Admitted(probe), "%d admitted: the global budget has room: %v", total.Load(), probe)
		assert.Equal(t, globalLimit-total.Load()-1, remainingOf(t, probe), "the server holds exactly the admitted sets: every other admission was given back")
	} else {
		assert.False(t, ratelimit.Admitted(probe))
	}
}

// TestClusterSetMembersInRequestOrder: members of one slot are decided
// together even when a member of another slot is asked between them, and
// the outcome still lists them in the order asked.
func TestClusterSetMembersInRequestOrder(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	a := fixedPolicy(t, "a", 10, time.Hour)
	g := mustPolicy(t, ratelimit.PolicySpec{ID: "g", Params: ratelimit.FixedWindow{Limit: 10, Window: time.Hour}, Scope: ratelimit.ScopeGlobal})
	b := fixedPolicy(t, "b", 10, time.Hour)
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute)
	p := clusterProvider(t, c.Addrs(), keys, []ratelimit.Policy{a, g, b})
	gk, err := StateKey(keys, g, randomSubject(t))
	require.NoError(t, err)
	var s ratelimit.SubjectDigest
	for range 100 {
		s = randomSubject(t)
		if k, _ := StateKey(keys, a, s); keyspace.Slot(k) != keyspace.Slot(gk) {
			break
		}
	}
	out := askSet(p, s, "a", "g", "b")
	require.True(t, ratelimit.Admitted(out), "%v", out)
	var ids []ratelimit.PolicyID
	for _, m := range out.(ratelimit.Evaluated).Members {
		ids = append(ids, m.PolicyID)
	}
	assert.Equal(t, []ratelimit.PolicyID{"a", "g", "b"}, ids)
}
