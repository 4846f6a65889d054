package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestEdgeDelayCounts: each held request is counted by its result, its
// delay observed, and an unknown policy is folded into "other".
func TestEdgeDelayCounts(t *testing.T) {
	m := New()
	known := KnownPolicies([]ratelimit.PolicyID{"queue"})
	m.EdgeDelay("queue", known, 100*time.Millisecond, false, false)
	m.EdgeDelay("queue", known, 200*time.Millisecond, true, true)
	m.EdgeDelay("queue", known, 300*time.Millisecond, true, false)
	m.EdgeDelay("invented", known, time.Second, false, false)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.delayed.WithLabelValues("queue", DelayPassed)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.delayed.WithLabelValues("queue", DelayLeftRefunded)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.delayed.WithLabelValues("queue", DelayLeftKept)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.delayed.WithLabelValues(OtherPolicy, DelayPassed)))
	assert.Equal(t, 2, testutil.CollectAndCount(m.delays), "one histogram per policy label")
}
