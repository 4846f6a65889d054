package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestParsePoliciesLease: "lease": {"maxShare", "ttl"} (the names the
// issue fixes, ADR 0042) becomes the policy's Lease; each bad lease is a
// start-up error naming its field.
func TestParsePoliciesLease(t *testing.T) {
	set, err := ParsePolicies(strings.NewReader(policyJSONText(replace(fwBase, `"lease":{"maxShare":0.05,"ttl":"200ms"}`)...)))
	require.NoError(t, err)
	l, ok := set.Policies[0].Lease()
	require.True(t, ok)
	assert.Equal(t, ratelimit.Lease{MaxShare: 0.05, TTL: 200 * time.Millisecond}, l)
	// A token bucket records its leases (ADR 0042).
	set, err = ParsePolicies(strings.NewReader(policyJSONText(replace(tbBase, `"lease":{"maxShare":0.1,"ttl":"500ms"}`)...)))
	require.NoError(t, err)
	_, ok = set.Policies[0].Lease()
	assert.True(t, ok)

	for name, tc := range map[string]struct {
		fields []string
		want   string
	}{
		"no ttl":              {replace(fwBase, `"lease":{"maxShare":0.05}`), `"lease.ttl" is required`},
		"no maxShare":         {replace(fwBase, `"lease":{"ttl":"1s"}`), `"lease.maxShare" is required`},
		"ttl not a duration":  {replace(fwBase, `"lease":{"maxShare":0.05,"ttl":"soon"}`), "lease.ttl"},
		"share above 1":       {replace(fwBase, `"lease":{"maxShare":2,"ttl":"1s"}`), "Lease.MaxShare"},
		"unknown lease field": {replace(fwBase, `"lease":{"maxShare":0.05,"ttl":"1s","units":3}`), `unknown field "units"`},
		"wrong case":          {replace(fwBase, `"lease":{"MaxShare":0.05,"ttl":"1s"}`), `lease: key "MaxShare" is not "maxShare"`},
		"a leaky bucket":      {replace(lbBase, `"lease":{"maxShare":0.05,"ttl":"1s"}`), "leaky_bucket policy cannot lease"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePolicies(strings.NewReader(policyJSONText(tc.fields...)))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
