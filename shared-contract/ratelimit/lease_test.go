package ratelimit_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestLeasePolicy: a lease (ADR 0042) is kept by the policy, a copy the
// spec cannot change; its share of the limit is at least 1 unit; each bad
// field, and an algorithm that cannot lease, is refused naming the field.
func TestLeasePolicy(t *testing.T) {
	l := &ratelimit.Lease{MaxShare: 0.05, TTL: 200 * time.Millisecond}
	spec := with(fixedSpec(1000, time.Second, 1), func(s *ratelimit.PolicySpec) { s.Lease = l })
	p := mustPolicy(t, spec)
	got, ok := p.Lease()
	require.True(t, ok)
	assert.Equal(t, *l, got)
	l.TTL = time.Hour
	got, _ = p.Lease()
	assert.Equal(t, 200*time.Millisecond, got.TTL, "NewPolicy copies the lease")
	assert.Equal(t, int64(50), got.MaxUnits(1000))
	assert.Equal(t, int64(1), got.MaxUnits(10), "at least one unit")
	_, ok = mustPolicy(t, fixedSpec(10, time.Second, 1)).Lease()
	assert.False(t, ok)
	mustPolicy(t, with(slidingSpec(100, time.Second, 1), func(s *ratelimit.PolicySpec) { s.Lease = &ratelimit.Lease{MaxShare: 1, TTL: time.Second} }))

	leased := func(s ratelimit.PolicySpec, share float64, ttl time.Duration) ratelimit.PolicySpec {
		return with(s, func(s *ratelimit.PolicySpec) { s.Lease = &ratelimit.Lease{MaxShare: share, TTL: ttl} })
	}
	for name, tc := range map[string]struct {
		spec  ratelimit.PolicySpec
		field string
	}{
		"zero share":             {leased(fixedSpec(10, time.Second, 1), 0, time.Millisecond), "Lease.MaxShare"},
		"share above 1":          {leased(fixedSpec(10, time.Second, 1), 1.5, time.Millisecond), "Lease.MaxShare"},
		"NaN share":              {leased(fixedSpec(10, time.Second, 1), math.NaN(), time.Millisecond), "Lease.MaxShare"},
		"zero ttl":               {leased(fixedSpec(10, time.Second, 1), 0.1, 0), "Lease.TTL"},
		"ttl not whole ms":       {leased(fixedSpec(10, time.Second, 1), 0.1, time.Microsecond), "Lease.TTL"},
		"ttl beyond window":      {leased(fixedSpec(10, time.Second, 1), 0.1, 2*time.Second), "Lease.TTL"},
		"a leaky bucket":         {leased(baseSpec(ratelimit.AlgorithmLeakyBucket, ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 5, MaxDelay: time.Second}, 1), 0.1, time.Millisecond), "Lease"},
		"bucket ttl beyond fill": {leased(bucketSpec(10, 1, time.Second, 1), 0.1, 11*time.Second), "Lease.TTL"},
		"a concurrency limit":    {leased(baseSpec(ratelimit.AlgorithmConcurrency, ratelimit.Concurrency{Limit: 3, MaxHold: time.Second}, 1), 0.1, time.Millisecond), "Lease"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ratelimit.NewPolicy(tc.spec)
			require.Error(t, err)
			var pe *ratelimit.PolicyError
			require.True(t, errors.As(err, &pe), "%v", err)
			assert.Equal(t, tc.field, pe.Field, "%v", err)
		})
	}
}

// TestTokenBucketLeaseEndsByItsTTL: a token bucket records its leases
// (ADR 0042), so a lease ends its TTL after the reservation, whatever the
// bucket's fill time's alignment.
func TestTokenBucketLeaseEndsByItsTTL(t *testing.T) {
	p := mustPolicy(t, with(bucketSpec(100, 10, time.Second, 1), func(s *ratelimit.PolicySpec) {
		s.Lease = &ratelimit.Lease{MaxShare: 0.1, TTL: 300 * time.Millisecond}
	}))
	for _, ms := range []int64{1_800_000_009_995, 1_800_000_000_000, 1_800_000_000_001} {
		until, ok := p.LeaseUntil(time.UnixMilli(ms))
		require.True(t, ok)
		assert.Equal(t, time.UnixMilli(ms+300), until)
	}
	_, ok := mustPolicy(t, bucketSpec(100, 10, time.Second, 1)).LeaseUntil(time.UnixMilli(1))
	assert.False(t, ok, "no lease, no end")
}

// TestLocalUntilEndsNoLaterThanTheServer: a reservation sent 0.7 ms into
// a millisecond and decided in that millisecond (the server floors its
// TIME) ends here no later than the window's end on the same clock, and
// exactly then when sent on the millisecond.
func TestLocalUntilEndsNoLaterThanTheServer(t *testing.T) {
	p := mustPolicy(t, with(fixedSpec(1000, time.Second, 1), func(s *ratelimit.PolicySpec) {
		s.Lease = &ratelimit.Lease{MaxShare: 0.05, TTL: 200 * time.Millisecond}
	}))
	serverNow := time.UnixMilli(1_800_000_000_995) // 5 ms before a second's end
	until, ok := p.LeaseUntil(serverNow)
	require.True(t, ok)
	require.Equal(t, time.UnixMilli(1_800_000_001_000), until, "the window's end comes before the ttl")
	sent := serverNow.Add(700 * time.Microsecond)
	got := ratelimit.LocalUntil(sent, serverNow, until)
	assert.False(t, got.After(until), "the lease ends at %v here, after the server's %v", got, until)
	assert.Equal(t, until, ratelimit.LocalUntil(serverNow, serverNow, until))
	assert.Equal(t, until.Add(-2*time.Millisecond), ratelimit.LocalUntil(serverNow.Add(-1500*time.Microsecond), serverNow, until),
		"a reservation sent earlier than the server's millisecond ends earlier by whole milliseconds")
}
