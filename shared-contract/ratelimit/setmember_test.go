package ratelimit_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// perMemberSet is validSet with a subject and a cost per member, the
// first policy repeated for another subject.
func perMemberSet() ratelimit.SetRequest {
	r := validSet()
	r.SubjectDigest, r.Cost = "", 0
	r.Members = []ratelimit.PolicyID{"per-second", "per-day", "per-second"}
	r.Subjects = []ratelimit.SubjectDigest{subj("a"), subj("b"), subj("c")}
	r.Costs = []int64{1, 2, 3}
	return r
}

func subj(c string) ratelimit.SubjectDigest { return ratelimit.SubjectDigest(strings.Repeat(c, 43)) }

// TestSetRequestPerMember: Subjects and Costs give each member its own
// subject and cost; a policy may repeat for another subject, never for
// the same one, and each error names the field and its index.
func TestSetRequestPerMember(t *testing.T) {
	require.NoError(t, perMemberSet().Validate())
	for i, want := range []ratelimit.Request{
		{PolicyID: "per-second", SubjectDigest: subj("a"), Cost: 1},
		{PolicyID: "per-day", SubjectDigest: subj("b"), Cost: 2},
		{PolicyID: "per-second", SubjectDigest: subj("c"), Cost: 3},
	} {
		want.Deadline = validSet().Deadline
		assert.Equal(t, want, perMemberSet().Member(i), "member %d", i)
	}
	onlyCosts := validSet()
	onlyCosts.Costs = []int64{4, 5, 6}
	require.NoError(t, onlyCosts.Validate())
	assert.Equal(t, validSet().SubjectDigest, onlyCosts.Member(2).SubjectDigest, "nil Subjects: the set's subject")
	assert.Equal(t, int64(6), onlyCosts.Member(2).Cost)

	for name, tc := range map[string]struct {
		mutate func(*ratelimit.SetRequest)
		field  string
		is     error
	}{
		"a subject short":        {func(r *ratelimit.SetRequest) { r.Subjects = r.Subjects[:2] }, "Subjects", ratelimit.ErrSetMembers},
		"an invalid subject":     {func(r *ratelimit.SetRequest) { r.Subjects[1] = "short" }, "Subjects[1]", ratelimit.ErrInvalidSubjectDigest},
		"a cost short":           {func(r *ratelimit.SetRequest) { r.Costs = r.Costs[:1] }, "Costs", ratelimit.ErrSetMembers},
		"a cost zero":            {func(r *ratelimit.SetRequest) { r.Costs[2] = 0 }, "Costs[2]", ratelimit.ErrCostOutOfRange},
		"a cost too large":       {func(r *ratelimit.SetRequest) { r.Costs[0] = ratelimit.MaxExactInt + 1 }, "Costs[0]", ratelimit.ErrCostOutOfRange},
		"policy and subject too": {func(r *ratelimit.SetRequest) { r.Subjects[2] = r.Subjects[0] }, "Members[2]", ratelimit.ErrSetMemberRepeats},
	} {
		t.Run(name, func(t *testing.T) {
			r := perMemberSet()
			tc.mutate(&r)
			err := r.Validate()
			require.ErrorIs(t, err, ratelimit.ErrInvalidRequest)
			require.ErrorIs(t, err, tc.is)
			var re *ratelimit.RequestError
			require.True(t, errors.As(err, &re))
			assert.Equal(t, tc.field, re.Field)
			for _, d := range perMemberSet().Subjects {
				assert.NotContains(t, err.Error(), string(d), "the error never holds a digest")
			}
		})
	}
	r := perMemberSet()
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("set", "req", r)
	for _, s := range []string{fmt.Sprint(r), fmt.Sprintf("%#v", r), b.String()} {
		for _, d := range r.Subjects {
			assert.NotContains(t, s, string(d))
		}
		assert.Contains(t, s, "[1 2 3]", "the costs are shown")
	}
}

// TestSetRequestValidateScoped: two members of one ScopeGlobal policy
// count one key whatever their subjects, which only the policies show.
func TestSetRequestValidateScoped(t *testing.T) {
	sub := mustPolicy(t, with(fixedSpec(10, time.Second, 5), func(s *ratelimit.PolicySpec) { s.ID = "per-second" }))
	glob := mustPolicy(t, with(fixedSpec(10, time.Second, 5), func(s *ratelimit.PolicySpec) {
		s.ID = "per-second"
		s.Scope = ratelimit.ScopeGlobal
	}))
	day := mustPolicy(t, with(fixedSpec(10, time.Hour, 5), func(s *ratelimit.PolicySpec) { s.ID = "per-day" }))
	r := perMemberSet()
	require.NoError(t, r.ValidateScoped([]ratelimit.Policy{sub, day, sub}))
	err := r.ValidateScoped([]ratelimit.Policy{glob, day, glob})
	require.ErrorIs(t, err, ratelimit.ErrInvalidRequest)
	require.ErrorIs(t, err, ratelimit.ErrSetMemberRepeats)
	assert.Contains(t, err.Error(), "Members[2]")
	require.ErrorIs(t, r.ValidateScoped([]ratelimit.Policy{sub}), ratelimit.ErrSetMembers, "one policy per member")
}
