package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func TestPolicyNumbers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                  string
		spec                  ratelimit.PolicySpec
		limit, window, horiz  int64
		refillTokens, refillP int64
		refill                bool
	}{
		{"fixed", fixedSpec(10, 1500*ms, 1), 10, 1500, 1500, 0, 0, false},
		{"sliding", slidingSpec(7, time.Minute, 1), 7, 60000, 120000, 0, 0, false},
		// 3 tokens per 1000 ms, capacity 10: ceil(10*1000/3) = 3334 ms to fill.
		{"bucket, fill rounded up", bucketSpec(10, 3, time.Second, 1), 10, 3334, 3334, 3, 1000, true},
		{"bucket, exact fill", bucketSpec(4, 2, 250*ms, 1), 4, 500, 500, 2, 250, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustPolicy(t, tt.spec)
			assert.Equal(t, tt.limit, p.Limit())
			assert.Equal(t, tt.window, p.WindowMillis())
			assert.Equal(t, tt.horiz, p.HorizonMillis())
			tokens, period, ok := p.Refill()
			assert.Equal(t, tt.refill, ok)
			assert.Equal(t, tt.refillTokens, tokens)
			assert.Equal(t, tt.refillP, period)
		})
	}
	t.Run("zero policy", func(t *testing.T) {
		t.Parallel()
		var p ratelimit.Policy
		assert.Zero(t, p.Limit())
		assert.Zero(t, p.WindowMillis())
		assert.Zero(t, p.HorizonMillis())
		_, _, ok := p.Refill()
		assert.False(t, ok)
	})
}
