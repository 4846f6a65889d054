package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The concurrency limit: 10 requests in flight, each slot held 30 s
// at most.
var ccBase = []string{`"id":"inflight"`, `"revision":1`, `"algorithm":"concurrency"`, `"limit":10`, `"maxHold":"30s"`,
	`"maxCost":1`, `"cleanupGrace":"1m"`, `"maxClockRegression":"2s"`, `"failurePolicy":"fail-closed"`}

// TestParsePoliciesConcurrency: "limit" and the optional "maxHold"
// (default the HTTP write timeout, 30 s) are the Concurrency (ADR 0041),
// and the policy can join a set with a rate limit.
func TestParsePoliciesConcurrency(t *testing.T) {
	set, err := ParsePolicies(strings.NewReader(policyJSONText(ccBase...)))
	require.NoError(t, err)
	assert.Equal(t, ratelimit.Concurrency{Limit: 10, MaxHold: 30 * time.Second}, set.Policies[0].Params())
	assert.True(t, set.Policies[0].Holds())

	set, err = ParsePolicies(strings.NewReader(policyJSONText(replace(ccBase, `"-maxHold"`)...)))
	require.NoError(t, err)
	assert.Equal(t, ratelimit.Concurrency{Limit: 10, MaxHold: MaxHold}, set.Policies[0].Params())

	two := `{"policies": [{` + strings.Join(replace(ccBase, `"routes":["GET /api/q"]`), ",") + `},{` +
		strings.Join(replace(fwBase, `"routes":["GET /api/q"]`), ",") + `}]}`
	set, err = ParsePolicies(strings.NewReader(two))
	require.NoError(t, err, "a request needs its rate budget and a slot")
	assert.Len(t, set.Routes, 2)
}

// TestParsePoliciesConcurrencyRejections: every bad concurrency limit is a
// start-up error that names its field.
func TestParsePoliciesConcurrencyRejections(t *testing.T) {
	for name, tc := range map[string]struct {
		fields []string
		want   string
	}{
		"no limit":               {replace(ccBase, `"-limit"`), `"limit" is required`},
		"window is a rate's":     {replace(ccBase, `"window":"1s"`), `"window" is not a parameter of concurrency`},
		"maxHold above timeout":  {replace(ccBase, `"maxHold":"31s"`), "above 30s, the HTTP write timeout"},
		"maxHold not a duration": {replace(ccBase, `"maxHold":"soon"`), "maxHold"},
		"limit above the cap":    {replace(ccBase, `"limit":10001`), "Params.Limit"},
		"with a dedup window":    {replace(ccBase, `"dedupWindow":"1m"`), "concurrency policy cannot have a dedup window"},
		"a shadow":               {replace(ccBase, `"enforce":"shadow"`), "cannot be a shadow policy"},
		"denial cache asked for": {replace(ccBase, `"denialCache":true`), "denial cache is not exact for concurrency"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePolicies(strings.NewReader(policyJSONText(tc.fields...)))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
