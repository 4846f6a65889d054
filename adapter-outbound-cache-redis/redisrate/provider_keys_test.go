package redisrate

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func sha1Hex(v any) string {
	b, _ := v.([]byte)
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

func policyIDOf(o ratelimit.Outcome) ratelimit.PolicyID {
	switch v := o.(type) {
	case ratelimit.Evaluated:
		return v.Decision.PolicyID
	case ratelimit.Unavailable:
		return v.PolicyID
	case ratelimit.Indeterminate:
		return v.PolicyID
	case ratelimit.Incompatible:
		return v.PolicyID
	}
	return ""
}

func TestEvaluateSendsTheStateKey(t *testing.T) {
	var got sentCommand
	pol := tokenPolicy(t, "tb", 5, 1, time.Second)
	f := &fakeCommander{respond: func(_ int, c sentCommand) fakeReply {
		got = c
		return fakeReply{val: modelReply(pol, t0, 1)}
	}}
	p := fakeProvider(t, f, 4)
	require.True(t, ratelimit.Admitted(p.Evaluate(context.Background(), request("tb", subjectA, 1, t0))))
	want, err := StateKey(testKeys(t), pol, subjectA)
	require.NoError(t, err)
	assert.Equal(t, want, got.key)
	assert.True(t, strings.HasPrefix(got.key, "tlb:rate:tb:s:v2:{"), got.key)
	assert.NotContains(t, got.key, string(subjectA))
}

func TestStateKeyRollsWithRevisionAndAlgorithm(t *testing.T) {
	keys := testKeys(t)
	k := func(p ratelimit.Policy, s ratelimit.SubjectDigest) string {
		key, err := StateKey(keys, p, s)
		require.NoError(t, err)
		return key
	}
	rev1 := fixedPolicy(t, "api", 5, time.Minute)
	rev2 := mustPolicy(t, ratelimit.PolicySpec{ID: "api", Revision: 2, Params: ratelimit.FixedWindow{Limit: 5, Window: time.Minute}})
	sliding := slidingPolicy(t, "api", 5, time.Minute)
	other := fixedPolicy(t, "login", 5, time.Minute)
	all := map[string]bool{}
	for _, key := range []string{k(rev1, subjectA), k(rev2, subjectA), k(sliding, subjectA), k(other, subjectA), k(rev1, subjectB)} {
		assert.False(t, all[key], "distinct keys")
		all[key] = true
		assert.NotContains(t, key, string(subjectA))
		assert.NotContains(t, key, string(subjectB))
	}
	assert.Equal(t, k(rev1, subjectA), k(rev1, subjectA), "deterministic")
	assert.True(t, strings.HasPrefix(k(other, subjectA), "tlb:rate:login:s:v2:{"))
	slot := func(key string) string { return key[strings.Index(key, "{"):strings.Index(key, "}")] }
	assert.Equal(t, slot(k(rev1, subjectA)), slot(k(other, subjectA)), "one subject, one slot tag, whatever the policy")
}
