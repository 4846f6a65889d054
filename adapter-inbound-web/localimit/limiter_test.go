package localimit

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

func newLimiter(t testing.TB, cfg Config) *Limiter {
	t.Helper()
	l, err := New(cfg)
	require.NoError(t, err)
	return l
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Rate: 1, Burst: 2, MaxClients: 10, IdleTTL: 2 * time.Second}
	tests := []struct {
		name   string
		mutate func(*Config)
		field  string // "" means valid
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "default", mutate: func(c *Config) { *c = DefaultConfig() }},
		{name: "zero rate", mutate: func(c *Config) { c.Rate = 0 }, field: "Rate"},
		{name: "negative rate", mutate: func(c *Config) { c.Rate = -1 }, field: "Rate"},
		{name: "nan rate", mutate: func(c *Config) { c.Rate = math.NaN() }, field: "Rate"},
		{name: "inf rate", mutate: func(c *Config) { c.Rate = math.Inf(1) }, field: "Rate"},
		{name: "zero burst", mutate: func(c *Config) { c.Burst = 0 }, field: "Burst"},
		{name: "huge burst", mutate: func(c *Config) { c.Burst = MaxBurst + 1 }, field: "Burst"},
		{name: "zero clients", mutate: func(c *Config) { c.MaxClients = 0 }, field: "MaxClients"},
		{name: "huge clients", mutate: func(c *Config) { c.MaxClients = MaxClientsLimit + 1 }, field: "MaxClients"},
		{name: "zero ttl", mutate: func(c *Config) { c.IdleTTL = 0 }, field: "IdleTTL"},
		{name: "ttl shorter than refill", mutate: func(c *Config) { c.IdleTTL = 1999 * time.Millisecond }, field: "IdleTTL"},
		{name: "ttl equal to refill", mutate: func(c *Config) { c.IdleTTL = 2 * time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mutate(&c)
			err := c.Validate()
			_, nerr := New(c)
			if tt.field == "" {
				require.NoError(t, err)
				require.NoError(t, nerr)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.field)
			require.ErrorIs(t, nerr, ErrInvalidConfig)
		})
	}
	err := Config{}.Validate()
	for _, f := range []string{"Rate", "Burst", "MaxClients", "IdleTTL"} {
		assert.Contains(t, err.Error(), f, "all violations are reported")
	}
}

func TestAllowDenyRetryAfter(t *testing.T) {
	l := newLimiter(t, Config{Rate: 1, Burst: 2, MaxClients: 10, IdleTTL: time.Minute})
	steps := []struct {
		at    time.Duration
		key   string
		ok    bool
		retry time.Duration
	}{
		{at: 0, key: "a", ok: true},
		{at: 0, key: "a", ok: true},
		{at: 0, key: "a", ok: false, retry: time.Second},
		{at: 0, key: "b", ok: true}, // clients are independent
		{at: 500 * time.Millisecond, key: "a", ok: false, retry: 500 * time.Millisecond},
		{at: time.Second, key: "a", ok: true},
		{at: time.Second, key: "a", ok: false, retry: time.Second},
		{at: 3 * time.Second, key: "a", ok: true},
		{at: 3 * time.Second, key: "a", ok: true}, // refilled to the burst, not beyond
		{at: 3 * time.Second, key: "a", ok: false, retry: time.Second},
	}
	for i, s := range steps {
		ok, retry := l.AllowAt(s.key, t0.Add(s.at))
		assert.Equal(t, s.ok, ok, "step %d", i)
		assert.InDelta(t, float64(s.retry), float64(retry), float64(time.Microsecond), "step %d", i)
	}
}

func TestFractionalRetryAfter(t *testing.T) {
	l := newLimiter(t, Config{Rate: 3, Burst: 1, MaxClients: 10, IdleTTL: time.Minute})
	ok, _ := l.AllowAt("a", t0)
	require.True(t, ok)
	ok, retry := l.AllowAt("a", t0)
	require.False(t, ok)
	assert.InDelta(t, float64(time.Second/3), float64(retry), float64(time.Microsecond))
	ok, _ = l.AllowAt("a", t0.Add(retry))
	assert.True(t, ok, "a retry after Retry-After is admitted")
}

func TestEvictionBound(t *testing.T) {
	for _, maxClients := range []int{1, 7, 100, 1000, 10_000} {
		t.Run(fmt.Sprint(maxClients), func(t *testing.T) {
			l := newLimiter(t, Config{Rate: 1, Burst: 1, MaxClients: maxClients, IdleTTL: time.Hour})
			require.LessOrEqual(t, l.Cap(), maxClients)
			require.Greater(t, l.Cap(), maxClients*9/10, "sharding loses at most a little capacity")
			for i := range 10 * maxClients {
				l.AllowAt(fmt.Sprint("client-", i), t0)
				if i%997 == 0 {
					require.LessOrEqual(t, l.Len(), l.Cap())
				}
			}
			assert.LessOrEqual(t, l.Len(), maxClients)
			assert.Equal(t, l.Cap(), l.Len(), "a full table stays full")
			for i := range l.shards {
				s := &l.shards[i]
				n := 0
				for e := s.head; e != nil; e = e.next {
					n++
				}
				assert.Equal(t, len(s.m), n, "LRU list and map agree in shard %d", i)
			}
		})
	}
}

func TestLRUEvictsLeastRecentlySeen(t *testing.T) {
	// Burst 1 and a very slow rate: a client still in the table is denied
	// its second request, a client that was evicted starts full again.
	l := newLimiter(t, Config{Rate: 0.001, Burst: 1, MaxClients: 3, IdleTTL: time.Hour})
	require.Len(t, l.shards, 1)
	for _, k := range []string{"a", "b", "c"} {
		ok, _ := l.AllowAt(k, t0)
		require.True(t, ok)
	}
	ok, _ := l.AllowAt("a", t0.Add(time.Second)) // touch a: b is now the oldest
	require.False(t, ok)
	ok, _ = l.AllowAt("d", t0.Add(2*time.Second)) // evicts b
	require.True(t, ok)
	assert.Equal(t, 3, l.Len())

	ok, _ = l.AllowAt("a", t0.Add(3*time.Second))
	assert.False(t, ok, "a was kept")
	ok, _ = l.AllowAt("b", t0.Add(3*time.Second))
	assert.True(t, ok, "b was evicted and starts full")
}

func TestIdleTTLExpiry(t *testing.T) {
	l := newLimiter(t, Config{Rate: 1, Burst: 1, MaxClients: 100, IdleTTL: 10 * time.Second})
	l.AllowAt("a", t0)
	l.AllowAt("b", t0.Add(time.Second))
	require.Equal(t, 2, l.Len())
	l.AllowAt("c", t0.Add(10500*time.Millisecond)) // a idle 10.5s > TTL
	assert.Equal(t, 2, l.Len(), "a expired")
	l.AllowAt("c", t0.Add(30*time.Second)) // b idle 29s
	assert.Equal(t, 1, l.Len(), "b expired, c stays")
}

func TestConcurrentSharedClient(t *testing.T) {
	// A single client with burst 50 and a negligible refill: exactly 50 of
	// the 800 concurrent requests are admitted.
	l := newLimiter(t, Config{Rate: 1e-3, Burst: 50, MaxClients: 10_000, IdleTTL: 1000 * time.Hour})
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				if ok, _ := l.Allow("shared"); ok {
					allowed.Add(1)
				}
				l.Allow(fmt.Sprint("other-", g, "-", i)) // churn other clients
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(50), allowed.Load())
	assert.LessOrEqual(t, l.Len(), l.Cap())
}

func TestConcurrentEvictionChurn(t *testing.T) {
	l := newLimiter(t, Config{Rate: 100, Burst: 1, MaxClients: 64, IdleTTL: time.Second})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				l.Allow(fmt.Sprint(g, "-", i%300))
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, l.Len(), 64)
}

func TestKnownClientAllowDoesNotAllocate(t *testing.T) {
	l := newLimiter(t, Config{Rate: 1e9, Burst: 1 << 20, MaxClients: 100, IdleTTL: time.Hour})
	l.Allow("known")
	allocs := testing.AllocsPerRun(1000, func() { l.Allow("known") })
	assert.Zero(t, allocs)
	denier := newLimiter(t, Config{Rate: 1e-3, Burst: 1, MaxClients: 100, IdleTTL: 1000 * time.Hour})
	denier.Allow("known")
	allocs = testing.AllocsPerRun(1000, func() { denier.Allow("known") })
	assert.Zero(t, allocs, "the deny path does not allocate either")
}
