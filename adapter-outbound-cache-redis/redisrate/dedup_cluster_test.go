package redisrate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestClusterDedup: on Redis Cluster, a dedup call's two keys (the state
// and the subject's dedup hash) share a slot for subjects on every
// primary: no CROSSSLOT, the first repeat is replayed (the default
// DedupMaxReplays, 1) and the second charged in the program. (A token
// bucket refilling 1 per hour: no window boundary can reset the count
// during the test.)
func TestClusterDedup(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	pol := mustPolicy(t, ratelimit.PolicySpec{ID: "c-dedup", Params: ratelimit.TokenBucket{Capacity: 5, RefillTokens: 1, RefillPeriod: time.Hour}, MaxCost: 5, DedupWindow: time.Minute})
	p := clusterProvider(t, c.Addrs(), keys, []ratelimit.Policy{pol})
	perPrimary := map[*redistest.Server]int{}
	for range 40 { // all three primaries missed by chance: 3 x (2/3)^40 < 1e-6
		s := randomSubject(t)
		sk, err := StateKey(keys, pol, s)
		require.NoError(t, err)
		dk, err := DedupKey(keys, s)
		require.NoError(t, err)
		require.Equal(t, keySlot(sk), keySlot(dk))
		perPrimary[c.SlotOwner(redistest.Slot(sk))]++
		req := ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: s, Cost: 2, EvaluationID: "cluster-1", Deadline: time.Now().Add(30 * time.Second)}
		for i, remaining := range []int64{3, 3, 1} {
			out := p.Evaluate(context.Background(), req)
			require.True(t, ratelimit.Admitted(out), "%v", out)
			d := out.(ratelimit.Evaluated).Decision
			assert.Equal(t, i == 1, d.Replayed, "use %d", i)
			assert.Equal(t, remaining, d.Remaining, "use %d", i)
		}
		out := ask(p, pol.ID(), s, 1)
		require.True(t, ratelimit.Admitted(out), "%v", out)
		assert.Equal(t, int64(0), out.(ratelimit.Evaluated).Decision.Remaining, "charged twice")
	}
	assert.Len(t, perPrimary, 3, "subjects on every primary")
}
