package ratelimit_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func TestParseScope(t *testing.T) {
	for _, s := range []ratelimit.Scope{ratelimit.ScopeSubject, ratelimit.ScopeGlobal} {
		got, err := ratelimit.ParseScope(s.String())
		require.NoError(t, err)
		assert.Equal(t, s, got)
	}
	for _, bad := range []string{"", "Global", "subjects", "all"} {
		_, err := ratelimit.ParseScope(bad)
		require.ErrorIs(t, err, ratelimit.ErrInvalidScope, bad)
	}
	assert.Equal(t, "Scope(7)", ratelimit.Scope(7).String())
}

func TestPolicyScope(t *testing.T) {
	subject := mustPolicy(t, fixedSpec(10, time.Second, 1))
	assert.Equal(t, ratelimit.ScopeSubject, subject.Scope(), "the zero value is the subject scope")
	global := mustPolicy(t, with(fixedSpec(10, time.Second, 1), func(s *ratelimit.PolicySpec) { s.Scope = ratelimit.ScopeGlobal }))
	assert.Equal(t, ratelimit.ScopeGlobal, global.Scope())

	d := ratelimit.SubjectDigest(strings.Repeat("a", 43))
	assert.Equal(t, d, subject.Subject(d))
	assert.Equal(t, ratelimit.GlobalSubject, global.Subject(d))
	assert.Equal(t, ratelimit.GlobalSubject, global.Subject(ratelimit.SubjectDigest(strings.Repeat("b", 43))))
	require.NoError(t, ratelimit.GlobalSubject.Validate(), "the global subject is a valid digest")

	_, err := ratelimit.NewPolicy(with(fixedSpec(10, time.Second, 1), func(s *ratelimit.PolicySpec) {
		s.Scope = ratelimit.ScopeGlobal
		s.DedupWindow = time.Minute
	}))
	require.ErrorIs(t, err, ratelimit.ErrUnsupported)
	assert.Contains(t, err.Error(), "Scope")
	_, err = ratelimit.NewPolicy(with(fixedSpec(10, time.Second, 1), func(s *ratelimit.PolicySpec) { s.Scope = 2 }))
	require.ErrorIs(t, err, ratelimit.ErrUnsupported)
	assert.Contains(t, err.Error(), "Scope")
}

func validSet() ratelimit.SetRequest {
	return ratelimit.SetRequest{
		Members:       []ratelimit.PolicyID{"per-second", "per-day", "backend"},
		SubjectDigest: ratelimit.SubjectDigest(strings.Repeat("x", 43)),
		Cost:          1,
		Deadline:      time.Unix(1_700_000_000, 0),
	}
}

func TestSetRequestValidate(t *testing.T) {
	require.NoError(t, validSet().Validate())
	many := make([]ratelimit.PolicyID, ratelimit.MaxSetMembers+1)
	for i := range many {
		many[i] = ratelimit.PolicyID(fmt.Sprintf("p%d", i))
	}
	for name, tc := range map[string]struct {
		mutate func(*ratelimit.SetRequest)
		field  string
		is     error
	}{
		"no members":      {func(r *ratelimit.SetRequest) { r.Members = nil }, "Members", ratelimit.ErrSetMembers},
		"too many":        {func(r *ratelimit.SetRequest) { r.Members = many }, "Members", ratelimit.ErrSetMembers},
		"repeated member": {func(r *ratelimit.SetRequest) { r.Members[2] = "per-second" }, "Members[2]", ratelimit.ErrSetMembers},
		"invalid member":  {func(r *ratelimit.SetRequest) { r.Members[1] = "Per Day" }, "Members[1]", ratelimit.ErrInvalidPolicyID},
		"subject":         {func(r *ratelimit.SetRequest) { r.SubjectDigest = "short" }, "SubjectDigest", ratelimit.ErrInvalidSubjectDigest},
		"cost":            {func(r *ratelimit.SetRequest) { r.Cost = 0 }, "Cost", ratelimit.ErrCostOutOfRange},
		"deadline":        {func(r *ratelimit.SetRequest) { r.Deadline = time.Time{} }, "Deadline", ratelimit.ErrDeadlineMissing},
	} {
		t.Run(name, func(t *testing.T) {
			r := validSet()
			r.Members = append([]ratelimit.PolicyID(nil), r.Members...)
			tc.mutate(&r)
			err := r.Validate()
			require.ErrorIs(t, err, ratelimit.ErrInvalidRequest)
			require.ErrorIs(t, err, tc.is)
			var re *ratelimit.RequestError
			require.True(t, errors.As(err, &re))
			assert.Equal(t, tc.field, re.Field)
			assert.NotContains(t, err.Error(), string(validSet().SubjectDigest), "the error never holds the digest")
		})
	}
	m := validSet().Member(1)
	assert.Equal(t, ratelimit.Request{PolicyID: "per-day", SubjectDigest: validSet().SubjectDigest, Cost: 1, Deadline: validSet().Deadline}, m)
	require.NoError(t, m.Validate())
	assert.Equal(t, ratelimit.PolicyID(""), validSet().Member(3).PolicyID, "out of range: no member")
	assert.NotContains(t, fmt.Sprint(validSet()), string(validSet().SubjectDigest))
	assert.NotContains(t, fmt.Sprintf("%#v", validSet()), string(validSet().SubjectDigest))
}

func TestDeciding(t *testing.T) {
	allow := func(rem int64) ratelimit.Decision {
		return ratelimit.Decision{Allowed: true, Remaining: rem, Limit: 100}
	}
	deny := func(retry time.Duration) ratelimit.Decision { return ratelimit.Decision{RetryAfter: retry, Limit: 100} }
	for name, tc := range map[string]struct {
		members []ratelimit.Decision
		want    int
	}{
		"none":                          {nil, -1},
		"one":                           {[]ratelimit.Decision{allow(5)}, 0},
		"least remaining speaks":        {[]ratelimit.Decision{allow(9), allow(3), allow(7)}, 1},
		"first of equals":               {[]ratelimit.Decision{allow(3), allow(3)}, 0},
		"a denial beats any admission":  {[]ratelimit.Decision{allow(0), deny(time.Second)}, 1},
		"the longest retry-after":       {[]ratelimit.Decision{deny(time.Second), deny(time.Hour), deny(time.Minute)}, 1},
		"denial first, admission after": {[]ratelimit.Decision{deny(time.Millisecond), allow(0)}, 0},
	} {
		t.Run(name, func(t *testing.T) { assert.Equal(t, tc.want, ratelimit.Deciding(tc.members)) })
	}
}

func TestPolicyOf(t *testing.T) {
	assert.Equal(t, ratelimit.PolicyID("a"), ratelimit.PolicyOf(ratelimit.Evaluated{Decision: ratelimit.Decision{PolicyID: "a"}}))
	assert.Equal(t, ratelimit.PolicyID("b"), ratelimit.PolicyOf(ratelimit.Unavailable{PolicyID: "b"}))
	assert.Equal(t, ratelimit.PolicyID("c"), ratelimit.PolicyOf(ratelimit.Indeterminate{PolicyID: "c"}))
	assert.Equal(t, ratelimit.PolicyID("d"), ratelimit.PolicyOf(ratelimit.Incompatible{PolicyID: "d"}))
	assert.Equal(t, ratelimit.PolicyID(""), ratelimit.PolicyOf(nil))
	assert.Equal(t, ratelimit.PolicyID(""), ratelimit.PolicyOf(&ratelimit.Unavailable{PolicyID: "e"}), "a pointer is not an outcome")
}

func TestSetRequestFirstMember(t *testing.T) {
	assert.Equal(t, ratelimit.PolicyID("per-second"), validSet().FirstMember())
	assert.Equal(t, ratelimit.PolicyID(""), ratelimit.SetRequest{}.FirstMember())
}

// TestCanJoinSet: the one set-member rule: a plain policy may join, one
// with a dedup window or a queue may not, and the error says which.
func TestCanJoinSet(t *testing.T) {
	assert.NoError(t, ratelimit.CanJoinSet(mustPolicy(t, fixedSpec(10, time.Second, 1))))
	dedup := mustPolicy(t, with(fixedSpec(10, time.Second, 1), func(s *ratelimit.PolicySpec) { s.DedupWindow = time.Minute }))
	err := ratelimit.CanJoinSet(dedup)
	assert.ErrorIs(t, err, ratelimit.ErrSetMemberDedup)
	assert.NotErrorIs(t, err, ratelimit.ErrSetMemberQueue)
	queue := mustPolicy(t, ratelimit.PolicySpec{ID: "q", Revision: 1, Algorithm: ratelimit.AlgorithmLeakyBucket,
		Params: ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 5, MaxDelay: time.Second}, MaxCost: 1,
		CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed})
	err = ratelimit.CanJoinSet(queue)
	assert.ErrorIs(t, err, ratelimit.ErrSetMemberQueue)
	assert.Contains(t, err.Error(), `policy "q"`)
}

// TestCheckDedupMaxReplays: the one replay rule, at its edges.
func TestCheckDedupMaxReplays(t *testing.T) {
	assert.ErrorIs(t, ratelimit.CheckDedupMaxReplays(false, 1), ratelimit.ErrReplaysWithoutWindow)
	assert.ErrorIs(t, ratelimit.CheckDedupMaxReplays(false, 0), ratelimit.ErrReplaysWithoutWindow)
	for _, n := range []int64{0, 1, ratelimit.MaxDedupMaxReplays} {
		assert.NoError(t, ratelimit.CheckDedupMaxReplays(true, n), "%d", n)
	}
	for _, n := range []int64{-1, ratelimit.MaxDedupMaxReplays + 1} {
		assert.ErrorIs(t, ratelimit.CheckDedupMaxReplays(true, n), ratelimit.ErrDedupMaxReplays, "%d", n)
	}
}
