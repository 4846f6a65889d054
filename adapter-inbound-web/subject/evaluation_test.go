package subject

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestEvaluationID: the ID is a valid EvaluationID, a function of secret,
// subject and key, and separated from subject digests.
func TestEvaluationID(t *testing.T) {
	p, err := NewPseudonymizer(testSecret(t, 's'))
	require.NoError(t, err)
	other, err := NewPseudonymizer(testSecret(t, 'o'))
	require.NoError(t, err)
	subj := ratelimit.SubjectDigest(strings.Repeat("A", 43))
	subj2 := ratelimit.SubjectDigest(strings.Repeat("B", 43))

	id, err := p.EvaluationID(subj, "key-1")
	require.NoError(t, err)
	require.NoError(t, id.Validate())
	assert.Len(t, string(id), DigestLen)
	again, err := p.EvaluationID(subj, "key-1")
	require.NoError(t, err)
	assert.Equal(t, id, again)
	for _, o := range []func() (ratelimit.EvaluationID, error){
		func() (ratelimit.EvaluationID, error) { return p.EvaluationID(subj2, "key-1") },
		func() (ratelimit.EvaluationID, error) { return p.EvaluationID(subj, "key-2") },
		func() (ratelimit.EvaluationID, error) { return other.EvaluationID(subj, "key-1") },
	} {
		d, err := o()
		require.NoError(t, err)
		assert.NotEqual(t, id, d)
	}
	pid, err := NewPrincipal("key-1")
	require.NoError(t, err)
	principal, err := p.Digest(pid)
	require.NoError(t, err)
	assert.NotEqual(t, string(principal), string(id), "not a subject digest of the key")

	_, err = p.EvaluationID(subj, "")
	require.ErrorIs(t, err, ErrNoIdempotencyKey)
	_, err = p.EvaluationID("short", "key-1")
	require.ErrorIs(t, err, ratelimit.ErrInvalidSubjectDigest)
	assert.NotContains(t, err.Error(), "key-1")
}
