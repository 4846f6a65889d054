package programs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestEveryAlgorithmHasAModel: every algorithm of the contract's registry
// has its Redis-level half here (ADR 0034), whose slug names its programs.
func TestEveryAlgorithmHasAModel(t *testing.T) {
	for _, a := range ratelimit.Algorithms() {
		t.Run(a.Name, func(t *testing.T) {
			m := modelOf(a.Algorithm)
			require.NotNil(t, m, "no model in the registry (algorithm.go)")
			assert.Equal(t, a.Algorithm, m.alg)
			assert.NotEmpty(t, m.layout)
			assert.NotNil(t, m.validState)
			assert.NotNil(t, m.decide)
			p, ok := ForAlgorithm(a.Algorithm)
			require.True(t, ok, "no decision program")
			assert.Equal(t, "rate-"+m.slug+"-v1", p.Name)
			_, dedup := DedupFor(a.Algorithm)
			assert.Equal(t, a.NoDedup == "", dedup, "an algorithm that may dedup has a dedup program")
			_, member := SetCode(a.Algorithm)
			assert.Equal(t, a.NoSetMember == "", member, "a set member has a set code")
			if a.Charge {
				assert.NotNil(t, m.charge)
				_, ok := ChargeFor(a.Algorithm)
				assert.True(t, ok, "no charge program")
			}
			if a.Refund {
				assert.NotNil(t, m.refund)
				_, ok := RefundFor(a.Algorithm)
				assert.True(t, ok, "no refund program")
			}
		})
	}
	assert.Nil(t, modelOf(0))
	assert.Len(t, models, len(ratelimit.Algorithms()))
}
