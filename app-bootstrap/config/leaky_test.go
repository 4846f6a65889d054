package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The queue: 10 per second, 20 waiting, every waiter delayed.
var lbBase = []string{`"id":"queue"`, `"revision":1`, `"algorithm":"leaky_bucket"`, `"rate":10`, `"period":"1s"`, `"queueSize":20`,
	`"maxCost":1`, `"cleanupGrace":"1m"`, `"maxClockRegression":"2s"`, `"failurePolicy":"fail-closed"`}

// TestParsePoliciesLeakyBucket: "rate", "period", "queueSize" and the
// optional "delayAfter" (default 0) and "maxDelay" (default the queue's
// longest delay) are the LeakyBucket (ADR 0028).
func TestParsePoliciesLeakyBucket(t *testing.T) {
	set, err := ParsePolicies(strings.NewReader(policyJSONText(lbBase...)))
	require.NoError(t, err)
	p := set.Policies[0]
	assert.Equal(t, ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 20, MaxDelay: 2 * time.Second}, p.Params())
	assert.Equal(t, int64(21), p.Limit())

	set, err = ParsePolicies(strings.NewReader(policyJSONText(replace(lbBase, `"delayAfter":8`, `"maxDelay":"5s"`)...)))
	require.NoError(t, err)
	assert.Equal(t, ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 20, DelayAfter: 8, MaxDelay: 5 * time.Second}, set.Policies[0].Params())
}

// TestParsePoliciesLeakyBucketRejections: every bad queue is a start-up
// error that names its field.
func TestParsePoliciesLeakyBucketRejections(t *testing.T) {
	for name, tc := range map[string]struct {
		fields []string
		want   string
	}{
		"no queueSize":              {replace(lbBase, `"-queueSize"`), `"queueSize" is required`},
		"burst is GCRA's":           {replace(lbBase, `"burst":3`), `"burst" is not a parameter of leaky_bucket`},
		"queueSize on GCRA":         {replace(gcBase, `"queueSize":3`), `"queueSize" is not a parameter of gcra`},
		"delayAfter above queue":    {replace(lbBase, `"delayAfter":21`), "Params.DelayAfter"},
		"maxDelay below longest":    {replace(lbBase, `"maxDelay":"1s"`), "Params.MaxDelay"},
		"maxDelay above the cap":    {replace(lbBase, `"rate":1`, `"maxDelay":"21s"`), "above 20s"},
		"default maxDelay too long": {replace(lbBase, `"rate":1`, `"queueSize":25`), "above 20s"},
		"maxDelay not a duration":   {replace(lbBase, `"maxDelay":"soon"`), "maxDelay"},
		"with a dedup window":       {replace(lbBase, `"dedupWindow":"1m"`), "leaky_bucket policy cannot have a dedup window"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePolicies(strings.NewReader(policyJSONText(tc.fields...)))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	two := `{"policies": [{` + strings.Join(replace(lbBase, `"routes":["GET /api/q"]`), ",") + `},{` +
		strings.Join(replace(fwBase, `"routes":["GET /api/q"]`), ",") + `}]}`
	_, err := ParsePolicies(strings.NewReader(two))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "a queue cannot be a set member")
}
