package ratelimit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func TestParseEnforcement(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ratelimit.Enforcement
	}{
		{"enforce", ratelimit.Enforce},
		{"shadow", ratelimit.Shadow},
	} {
		got, err := ratelimit.ParseEnforcement(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got)
		assert.Equal(t, tc.in, got.String(), "the wire name round-trips")
	}
	for _, bad := range []string{"", "Shadow", "dry-run", "enforced", " shadow"} {
		_, err := ratelimit.ParseEnforcement(bad)
		require.ErrorIs(t, err, ratelimit.ErrInvalidEnforcement, "%q", bad)
	}
}

func TestPolicyEnforcement(t *testing.T) {
	t.Run("absent means enforce", func(t *testing.T) {
		p := mustPolicy(t, fixedSpec(10, time.Second, 1))
		assert.Equal(t, ratelimit.Enforce, p.Enforcement())
		assert.False(t, p.Shadow())
	})
	t.Run("shadow", func(t *testing.T) {
		spec := fixedSpec(10, time.Second, 1)
		spec.Enforcement = ratelimit.Shadow
		p := mustPolicy(t, spec)
		assert.Equal(t, ratelimit.Shadow, p.Enforcement())
		assert.True(t, p.Shadow())
		assert.Contains(t, p.String(), "shadow")
	})
	t.Run("out of range refused, naming the field", func(t *testing.T) {
		spec := fixedSpec(10, time.Second, 1)
		spec.Enforcement = ratelimit.Shadow + 1
		_, err := ratelimit.NewPolicy(spec)
		var pe *ratelimit.PolicyError
		require.True(t, errors.As(err, &pe), "%v", err)
		assert.Equal(t, "Enforcement", pe.Field)
		assert.ErrorIs(t, err, ratelimit.ErrUnsupported)
	})
	t.Run("the zero policy has none", func(t *testing.T) {
		assert.Equal(t, ratelimit.Enforcement(0), ratelimit.Policy{}.Enforcement())
	})
	t.Run("a shadow policy is the same policy to a provider", func(t *testing.T) {
		// Only callers read it: the ID, revision, algorithm and parameters
		// (what keys and programs are made of) are the enforced twin's.
		spec := fixedSpec(10, time.Second, 1)
		enforced := mustPolicy(t, spec)
		spec.Enforcement = ratelimit.Shadow
		shadow := mustPolicy(t, spec)
		assert.Equal(t, enforced.ID(), shadow.ID())
		assert.Equal(t, enforced.Revision(), shadow.Revision())
		assert.Equal(t, enforced.Params(), shadow.Params())
		assert.Equal(t, enforced.WindowMillis(), shadow.WindowMillis())
		require.NoError(t, ratelimit.CanJoinSet(enforced))
		assert.ErrorIs(t, ratelimit.CanJoinSet(shadow), ratelimit.ErrSetMemberShadow, "a shadow policy never joins a set")
		assert.NotErrorIs(t, ratelimit.CanJoinSet(shadow), ratelimit.ErrSetMemberQueue, "the provider's one refusal stays the queue's")
	})
}
