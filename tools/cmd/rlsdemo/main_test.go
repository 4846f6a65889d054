package main

import (
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
)

// TestTallyProblems: admissions beyond the limit, a missing due denial and
// a denial of the unlimited key are each reported; a tally that holds is
// not.
func TestTallyProblems(t *testing.T) {
	held := tally{label: "a", limit: 2, due: 1}
	for _, c := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		held.record(c)
	}
	assert.Empty(t, held.problems())

	over := tally{label: "b", limit: 2, due: 1}
	for range 3 {
		over.record(rlsv3.RateLimitResponse_OK)
	}
	assert.Len(t, over.problems(), 2, "3 admitted of 2, and the due denial missing")

	free := tally{label: "c"}
	free.record(rlsv3.RateLimitResponse_OVER_LIMIT)
	assert.Len(t, free.problems(), 1)
}
