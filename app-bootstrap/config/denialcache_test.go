package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func TestLoadDenialCacheMaxEntries(t *testing.T) {
	cfg, err := Load(enabledEnv())
	require.NoError(t, err)
	assert.Equal(t, 10_000, cfg.RateLimit.DenialCacheMaxEntries)
	cfg, err = Load(with(enabledEnv(), "APP_RATE_LIMIT_DENIAL_CACHE_MAX_ENTRIES", "0"))
	require.NoError(t, err, "0 turns the cache off")
	assert.Zero(t, cfg.RateLimit.DenialCacheMaxEntries)
	for _, bad := range []string{"-1", "1000001", "many"} {
		_, err := Load(with(enabledEnv(), "APP_RATE_LIMIT_DENIAL_CACHE_MAX_ENTRIES", bad))
		require.Error(t, err, bad)
		ves := VarErrors(err)
		require.Len(t, ves, 1, "%v", err)
		assert.Equal(t, "APP_RATE_LIMIT_DENIAL_CACHE_MAX_ENTRIES", ves[0].Var)
	}
}

func TestParsePoliciesDenialCache(t *testing.T) {
	const head = `{"policies":[{"id":"api","revision":1,"algorithm":"fixed_window","limit":10,"window":"1m","maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"fail-closed"`
	const second = `,{"id":"web","revision":1,"algorithm":"token_bucket","capacity":10,"refillTokens":1,"refillPeriod":"1s","maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"fail-closed","denialCache":false}`
	set, err := ParsePolicies(strings.NewReader(head + `}` + second + `]}`))
	require.NoError(t, err)
	assert.Equal(t, []ratelimit.PolicyID{"web"}, set.NoDenialCache, "absent: on; false: off")
	set, err = ParsePolicies(strings.NewReader(head + `,"denialCache":true}]}`))
	require.NoError(t, err)
	assert.Empty(t, set.NoDenialCache, "true on an exact algorithm: on")
	// GCRA is exact too (with a 2 ms margin, ADR 0021): true is accepted.
	const gcra = `{"policies":[{"id":"rr","revision":1,"algorithm":"gcra","rate":10,"period":"1s","burst":10,"maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"fail-closed","denialCache":true}]}`
	set, err = ParsePolicies(strings.NewReader(gcra))
	require.NoError(t, err)
	assert.Empty(t, set.NoDenialCache)
	// So is the sliding log (ADR 0024).
	const log = `{"policies":[{"id":"roll","revision":1,"algorithm":"sliding_log","limit":100,"window":"1h","maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"fail-closed","denialCache":true}]}`
	set, err = ParsePolicies(strings.NewReader(log))
	require.NoError(t, err)
	assert.Empty(t, set.NoDenialCache)
	for _, tt := range []struct{ name, extra, want string }{
		{"a string", `"denialCache":"false"`, "denialCache"},
		{"a number", `"denialCache":0`, "denialCache"},
		{"wrong case", `"DenialCache":false`, "DenialCache"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePolicies(strings.NewReader(head + `,` + tt.extra + `}]}`))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrPolicyFile)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
