package redisrate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// TestServiceGlobalScopeIsOneBudget: a global policy counts every subject
// against one budget, in one key (ADR 0027), and a subject policy beside
// it keeps one budget per subject.
func TestServiceGlobalScopeIsOneBudget(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	global := mustPolicy(t, ratelimit.PolicySpec{ID: "backend", Params: ratelimit.FixedWindow{Limit: 3, Window: time.Hour}, Scope: ratelimit.ScopeGlobal})
	subject := fixedPolicy(t, "per-client", 3, time.Hour)
	p := serviceProvider(t, srv, keys, []ratelimit.Policy{global, subject}, nil)
	ratelimittest.ClearOfWindowEnd(t, time.Hour, 5*time.Second)

	subjects := []ratelimit.SubjectDigest{randomSubject(t), randomSubject(t), randomSubject(t), randomSubject(t)}
	for i, s := range subjects[:3] {
		require.True(t, ratelimit.Admitted(ask(p, "backend", s, 1)), "request %d of the global budget of 3", i)
	}
	out := ask(p, "backend", subjects[3], 1)
	require.False(t, ratelimit.Admitted(out), "a fourth subject finds the global budget spent")
	ev, ok := out.(ratelimit.Evaluated)
	require.True(t, ok, "%#v", out)
	assert.Equal(t, int64(0), ev.Decision.Remaining)

	for _, s := range subjects[:2] {
		for i := range 3 {
			require.True(t, ratelimit.Admitted(ask(p, "per-client", s, 1)), "per-client request %d: each subject has its own 3", i)
		}
	}

	gk, err := StateKey(keys, global, subjects[0])
	require.NoError(t, err)
	gk2, err := StateKey(keys, global, subjects[3])
	require.NoError(t, err)
	assert.Equal(t, gk, gk2, "every subject of a global policy names one key")
	exists, err := srv.Client().Exists(redistest.AdminCtx(t), gk).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), exists, "the global state is stored under that key")
	sk0, _ := StateKey(keys, subject, subjects[0])
	sk1, _ := StateKey(keys, subject, subjects[1])
	assert.NotEqual(t, sk0, sk1)
}

// TestServiceSetGlobalPolicyTwiceIsRefused: two members of one global
// policy name one key whatever their subjects (SetRequest.ValidateScoped):
// the set program would read it twice before either write and admit
// twice, so the set is refused before sending and consumes nothing; the
// same policy of subject scope may repeat for two subjects.
func TestServiceSetGlobalPolicyTwiceIsRefused(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	global := mustPolicy(t, ratelimit.PolicySpec{ID: "backend", Params: ratelimit.FixedWindow{Limit: 3, Window: time.Hour}, Scope: ratelimit.ScopeGlobal})
	subject := fixedPolicy(t, "per-client", 3, time.Hour)
	p := serviceProvider(t, srv, keys, []ratelimit.Policy{global, subject}, nil)
	ratelimittest.ClearOfWindowEnd(t, time.Hour, 5*time.Second)

	s1, s2 := randomSubject(t), randomSubject(t)
	set := func(id ratelimit.PolicyID) ratelimit.Outcome {
		return p.EvaluateSet(t.Context(), ratelimit.SetRequest{Members: []ratelimit.PolicyID{id, id},
			Subjects: []ratelimit.SubjectDigest{s1, s2}, Costs: []int64{1, 1}, Deadline: time.Now().Add(time.Minute)})
	}
	out := set("backend")
	require.Equal(t, ratelimit.CategoryInvalidRequest, ratelimit.CategoryOf(out), "%v", out)
	require.ErrorIs(t, out.(ratelimit.Unavailable).Cause, ratelimit.ErrSetMemberRepeats)
	ev, ok := ask(p, "backend", s1, 1).(ratelimit.Evaluated)
	require.True(t, ok)
	assert.Equal(t, int64(2), ev.Decision.Remaining, "the refused set took nothing")

	require.True(t, ratelimit.Admitted(set("per-client")), "a subject policy for two subjects")
}
