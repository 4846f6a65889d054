package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestRegistry: every algorithm's spec is complete and consistent (ADR
// 0034): its name parses back to it, its fields build parameters of its
// own algorithm that NewPolicy accepts, and a field name shared by several
// algorithms has one kind (the policy file decodes it by name).
func TestRegistry(t *testing.T) {
	specs := ratelimit.Algorithms()
	require.NotEmpty(t, specs)
	kinds := map[string]ratelimit.FieldKind{}
	for i, s := range specs {
		t.Run(s.Name, func(t *testing.T) {
			assert.Equal(t, ratelimit.Algorithm(i+1), s.Algorithm, "registry order is Algorithm order")
			assert.True(t, s.Algorithm.Valid())
			a, err := ratelimit.ParseAlgorithm(s.Name)
			require.NoError(t, err)
			assert.Equal(t, s.Algorithm, a)
			assert.Equal(t, s.Name, s.Algorithm.String())
			got, ok := s.Algorithm.Spec()
			require.True(t, ok)
			assert.Equal(t, s.Name, got.Name)
			assert.NotZero(t, s.Certainty)
			require.NotNil(t, s.Build)
			values := ratelimit.FieldValues{Ints: map[string]int64{}, Durations: map[string]time.Duration{}}
			for _, f := range s.Fields() {
				if k, seen := kinds[f.Name]; seen {
					assert.Equal(t, k, f.Kind, "field %q has two kinds", f.Name)
				}
				kinds[f.Name] = f.Kind
				if f.Optional {
					continue
				}
				switch f.Kind {
				case ratelimit.FieldInt:
					values.Ints[f.Name] = 10
				case ratelimit.FieldDuration:
					values.Durations[f.Name] = time.Second
				default:
					t.Fatalf("field %q: kind %d", f.Name, f.Kind)
				}
			}
			params := s.Build(values)
			require.NotNil(t, params)
			assert.Equal(t, s.Algorithm, params.Algorithm())
			p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
				ID: "r", Revision: 1, Algorithm: s.Algorithm, Params: params, MaxCost: 1,
				CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed,
			})
			require.NoError(t, err)
			assert.Equal(t, s.Certainty, p.Certainty())
		})
	}
	_, ok := ratelimit.Algorithm(0).Spec()
	assert.False(t, ok)
	_, ok = ratelimit.Algorithm(len(specs) + 1).Spec()
	assert.False(t, ok)
}
