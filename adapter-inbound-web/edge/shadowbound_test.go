package edge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestShadowCallsAreBounded: with ShadowMaxInFlight 1 and a shadow call
// held in flight, the next request's shadow call is skipped (and
// ShadowSkipped told) while its enforced call is made as always; once the
// held call ends, shadow calls are made again.
func TestShadowCallsAreBounded(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	port := &fakePort{}
	port.once.Do(func() {}) // the kit's Fake answers with the Func below
	var mu sync.Mutex
	shadowCalls := 0
	port.fake.Func = func(ctx context.Context, r ratelimit.Request) ratelimit.Outcome {
		if r.PolicyID != "dark" {
			return byPolicy(nil)(r)
		}
		mu.Lock()
		shadowCalls++
		first := shadowCalls == 1
		mu.Unlock()
		if first {
			held <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return byPolicy(nil)(r)
	}
	cfg := shadowConfig(t, port)
	cfg.Routes = []Route{{Pattern: "GET /api/v1/ping", Policy: "per-second"}, {Pattern: "GET /api/v1/ping", Policy: "dark"}}
	cfg.ShadowMaxInFlight = 1
	cfg.Now = time.Now
	cfg.Timeout = 5 * time.Second // the held call lives until release, at most until this deadline
	var skipped []ratelimit.PolicyID
	cfg.ShadowSkipped = func(id ratelimit.PolicyID) { skipped = append(skipped, id) }

	m, err := New(cfg)
	require.NoError(t, err)
	require.True(t, serveWith(m, "/api/v1/ping"))
	select {
	case <-held:
	case <-time.After(2 * time.Second):
		t.Fatal("the first shadow call never started")
	}
	assert.True(t, serveWith(m, "/api/v1/ping"), "the enforced call decides as always")
	assert.Equal(t, []ratelimit.PolicyID{"dark"}, skipped, "the second shadow call skipped")
	close(release)
	require.Eventually(t, func() bool { return len(m.shadowSlots) == 0 }, 2*time.Second, time.Millisecond, "the held call's slot given back")
	require.True(t, serveWith(m, "/api/v1/ping"))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return shadowCalls == 2 }, 2*time.Second, time.Millisecond,
		"with a free slot the shadow call is made again")
	assert.Len(t, skipped, 1)
	assert.Len(t, port.requests(), 3+2, "every enforced call, and the two shadow calls made")
}

// serveWith serves one GET of path through m and reports whether the
// handler ran.
func serveWith(m *Middleware, path string) bool {
	ran := false
	m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	return ran
}

// TestShadowMaxInFlightValidated: out of range is a config error naming
// the field.
func TestShadowMaxInFlightValidated(t *testing.T) {
	for _, n := range []int{-1, MaxShadowInFlight + 1} {
		cfg := shadowConfig(t, &fakePort{})
		cfg.ShadowMaxInFlight = n
		_, err := New(cfg)
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.Contains(t, err.Error(), "ShadowMaxInFlight")
	}
}
