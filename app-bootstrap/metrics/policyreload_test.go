package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
)

// TestPolicyReloadMetrics: reloads are counted by trigger and result; a
// loaded set replaces the previous revisions (a removed policy loses its
// series) and the load time.
func TestPolicyReloadMetrics(t *testing.T) {
	r := New().RegisterPolicyReload()
	r.Reload("file", "applied")
	r.Reload("file", "applied")
	r.Reload("signal", "refused")
	assert.Equal(t, 2.0, testutil.ToFloat64(r.reloads.WithLabelValues("file", "applied")))
	assert.Equal(t, 1.0, testutil.ToFloat64(r.reloads.WithLabelValues("signal", "refused")))

	at := time.Unix(1_700_000_000, 500_000_000)
	r.Loaded(map[string]int64{"api": 1, "login": 3}, at)
	assert.Equal(t, 2, testutil.CollectAndCount(r.revision))
	r.Loaded(map[string]int64{"api": 2}, at.Add(time.Minute))
	assert.Equal(t, 1, testutil.CollectAndCount(r.revision), "login removed")
	assert.Equal(t, 2.0, testutil.ToFloat64(r.revision.WithLabelValues("api")))
	assert.InDelta(t, 1_700_000_060.5, testutil.ToFloat64(r.loaded), 1e-3)
}
