package redistest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// TestClock: a server started WithClock reads TIME an Advance later than
// real time, and expires a key whose TTL the advance passed.
func TestClock(t *testing.T) {
	srv := redistest.Start(t, redistest.WithClock())
	c := srv.Client()
	ctx := redistest.AdminCtx(t)
	before, err := c.Time(ctx).Result()
	require.NoError(t, err)
	require.NoError(t, c.Set(ctx, "k", "v", time.Hour).Err())
	srv.Clock().Advance(t, 2*time.Hour)
	after, err := c.Time(ctx).Result()
	require.NoError(t, err)
	jump := after.Sub(before)
	assert.GreaterOrEqual(t, jump, 2*time.Hour)
	assert.Less(t, jump, 2*time.Hour+time.Minute, "the advance, plus the real time between the reads")
	assert.Equal(t, 2*time.Hour, srv.Clock().Offset())
	n, err := c.Exists(ctx, "k").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a key whose TTL the advance passed is expired")
}
