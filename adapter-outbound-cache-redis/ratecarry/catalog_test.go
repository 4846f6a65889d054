package ratecarry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratecarry"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestCatalog: Predecessors finds, for each policy, the other revision of
// its ID recorded last (a rollback to an older revision finds the newer
// one it replaced); a policy the catalog has no other revision of has
// none; Record keeps the three revisions of a policy recorded last.
func TestCatalog(t *testing.T) {
	srv := redistest.Start(t)
	rc := clientAt(t, srv.Addr())
	cat, err := ratecarry.NewCatalog(rc, redistest.RandomKeys(t))
	require.NoError(t, err)
	ctx := context.Background()
	fw := algorithmNamed(t, "fixed_window")
	rev := func(id ratelimit.PolicyID, r, limit int64) ratelimit.Policy {
		return policy(t, id, r, fw.Over(limit, period))
	}

	preds, err := cat.Predecessors(ctx, []ratelimit.Policy{rev(polAPI, 1, 5)})
	require.NoError(t, err)
	assert.Empty(t, preds, "an empty catalog")

	for _, r := range []int64{1, 2, 3, 4} {
		require.NoError(t, cat.Record(ctx, []ratelimit.Policy{rev(polAPI, r, 5*r), rev("other", 1, 9)}))
		time.Sleep(2 * time.Millisecond) // recorded at distinct milliseconds
	}
	preds, err = cat.Predecessors(ctx, []ratelimit.Policy{rev(polAPI, 5, 50), rev("other", 1, 9), rev("new", 1, 1)})
	require.NoError(t, err)
	require.Contains(t, preds, polAPI)
	assert.Equal(t, rev(polAPI, 4, 20), preds[polAPI], "the revision recorded last, decoded whole")
	assert.NotContains(t, preds, ratelimit.PolicyID("other"), "only its own revision recorded")
	assert.NotContains(t, preds, ratelimit.PolicyID("new"))

	// A rollback to revision 3: its predecessor is 4, recorded after it.
	preds, err = cat.Predecessors(ctx, []ratelimit.Policy{rev(polAPI, 3, 15)})
	require.NoError(t, err)
	assert.Equal(t, int64(4), preds[polAPI].Revision())

	// Revision 1 was dropped: 2, 3 and 4 are the three recorded last.
	preds, err = cat.Predecessors(ctx, []ratelimit.Policy{rev(polAPI, 4, 20)})
	require.NoError(t, err)
	assert.Equal(t, int64(3), preds[polAPI].Revision())
	keys, err := rc.Keys(ctx, "*:rate:"+ratecarry.KeyRegionCatalog+":*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1, "one catalog for the keyspace")
	fields, err := rc.HKeys(ctx, keys[0]).Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"api@2", "api@3", "api@4", "other@1"}, fields)
}
