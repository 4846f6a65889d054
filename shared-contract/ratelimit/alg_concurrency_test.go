package ratelimit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestConcurrencyPolicy: a concurrency limit (ADR 0041) holds, has the
// window MaxHold, defaults MaxHold from the policy file, and refuses each
// bound (C1-C2), a dedup window and shadow enforcement, naming the field.
func TestConcurrencyPolicy(t *testing.T) {
	spec := func(q ratelimit.Concurrency) ratelimit.PolicySpec {
		return baseSpec(ratelimit.AlgorithmConcurrency, q, 1)
	}
	p := mustPolicy(t, spec(ratelimit.Concurrency{Limit: 10, MaxHold: 5 * time.Second}))
	assert.True(t, p.Holds())
	assert.Equal(t, int64(10), p.Limit())
	assert.Equal(t, int64(5000), p.WindowMillis())
	assert.False(t, mustPolicy(t, fixedSpec(10, time.Second, 1)).Holds(), "a rate limit holds nothing")

	s, ok := ratelimit.AlgorithmConcurrency.Spec()
	require.True(t, ok)
	assert.False(t, s.DenialCacheExact, "a slot given back frees a denied request early")
	built := s.Build(ratelimit.FieldValues{Ints: map[string]int64{"limit": 3}})
	assert.Equal(t, ratelimit.Concurrency{Limit: 3, MaxHold: ratelimit.DefaultMaxHold}, built)

	for name, tc := range map[string]struct {
		spec  ratelimit.PolicySpec
		field string
	}{
		"zero limit":        {spec(ratelimit.Concurrency{Limit: 0, MaxHold: time.Second}), "Params.Limit"},
		"limit above cap":   {spec(ratelimit.Concurrency{Limit: ratelimit.MaxConcurrencyLimit + 1, MaxHold: time.Second}), "Params.Limit"},
		"zero maxHold":      {spec(ratelimit.Concurrency{Limit: 1}), "Params.MaxHold"},
		"maxHold not whole": {spec(ratelimit.Concurrency{Limit: 1, MaxHold: time.Microsecond}), "Params.MaxHold"},
		"maxHold beyond H":  {spec(ratelimit.Concurrency{Limit: 1, MaxHold: time.Duration(ratelimit.MaxHorizonMillis) * time.Millisecond}), "Params.MaxHold"},
		"dedup window":      {with(spec(ratelimit.Concurrency{Limit: 1, MaxHold: time.Second}), func(s *ratelimit.PolicySpec) { s.DedupWindow = time.Minute }), "DedupWindow"},
		"shadow":            {with(spec(ratelimit.Concurrency{Limit: 1, MaxHold: time.Second}), func(s *ratelimit.PolicySpec) { s.Enforcement = ratelimit.Shadow }), "Enforcement"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ratelimit.NewPolicy(tc.spec)
			require.Error(t, err)
			var pe *ratelimit.PolicyError
			require.True(t, errors.As(err, &pe), "%v", err)
			assert.Equal(t, tc.field, pe.Field, "%v", err)
		})
	}
	// A set member: a request needs its rate budget and a slot.
	assert.NoError(t, ratelimit.CanJoinSet(p))
}

// TestHoldEndIsNoLaterThanTheServersReclaim: the server counts a hold from
// its admission's whole millisecond, which is no earlier than the sending
// instant's, so the handler's end is maxHold after that millisecond: on
// it for a sending instant on a millisecond, before maxHold after the
// sending otherwise.
func TestHoldEndIsNoLaterThanTheServersReclaim(t *testing.T) {
	onMillisecond := time.UnixMilli(1_800_000_000_123)
	assert.Equal(t, onMillisecond.Add(30*time.Second), ratelimit.HoldEnd(onMillisecond, 30*time.Second))
	within := onMillisecond.Add(999 * time.Microsecond)
	assert.Equal(t, onMillisecond.Add(2*time.Second), ratelimit.HoldEnd(within, 2*time.Second),
		"a decision sent 999 µs into a millisecond may be admitted in that millisecond and reclaimed maxHold after its start")
}
