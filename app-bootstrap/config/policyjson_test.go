package config

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestParamFieldsAreNotPolicyFields: an algorithm's parameter field (the
// registry's field table, ADR 0034) never shadows a field every policy
// has, which the decoder would otherwise hand to the algorithm.
func TestParamFieldsAreNotPolicyFields(t *testing.T) {
	common := jsonNames(policyFields{})
	assert.NotEmpty(t, paramOrder)
	for _, name := range paramOrder {
		assert.False(t, slices.Contains(common, name), "parameter field %q is also a policy field", name)
	}
}
