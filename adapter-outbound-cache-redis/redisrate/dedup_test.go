package redisrate

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func dedupPolicy(t testing.TB, id ratelimit.PolicyID) ratelimit.Policy {
	return mustPolicy(t, ratelimit.PolicySpec{ID: id, Params: ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, MaxCost: 5, MaxClockRegression: 2 * time.Second, DedupWindow: 10 * time.Minute})
}

// noReplayPolicy is dedupPolicy with DedupMaxReplays 0.
func noReplayPolicy(t testing.TB, id ratelimit.PolicyID) ratelimit.Policy {
	zero := int64(0)
	return mustPolicy(t, ratelimit.PolicySpec{ID: id, Params: ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, MaxCost: 5, MaxClockRegression: 2 * time.Second, DedupWindow: 10 * time.Minute, DedupMaxReplays: &zero})
}

// dedupFakeProvider is a Provider over f with the plain test policies,
// "dd", a fixed window with a 10 minute dedup window, and "dd0", the same
// with DedupMaxReplays 0.
func dedupFakeProvider(t testing.TB, f *fakeCommander, opts Options) *Provider {
	t.Helper()
	opts.CommandTimeout, opts.MaxInFlight = testTimeout, 4
	if opts.Now == nil {
		opts.Now = func() time.Time { return t0 }
	}
	p, err := newProvider(f, testKeys(t), append(testPolicies(t), dedupPolicy(t, "dd"), noReplayPolicy(t, "dd0")), opts)
	require.NoError(t, err)
	return p
}

func withID(r ratelimit.Request, id ratelimit.EvaluationID) ratelimit.Request {
	r.EvaluationID = id
	return r
}

// TestDedupCallShape: a request with an evaluation ID runs the dedup
// program with the state key and the subject's dedup key (same slot tag)
// and the ID after the policy ID, window and cap; without an ID the plain
// program runs, as for any policy; an ID for a policy without dedup is
// refused unsent.
func TestDedupCallShape(t *testing.T) {
	pol := dedupPolicy(t, "dd")
	var raws [][]any // each command's arguments, pointers resolved while it is sent
	f := &fakeCommander{respond: func(_ int, c sentCommand) fakeReply {
		raws = append(raws, resolve(c.raw))
		return fakeReply{val: modelReply(pol, t0, 2)}
	}}
	p := dedupFakeProvider(t, f, Options{})
	assert.Len(t, p.scripts, 4, "three decision programs and one dedup program")

	out := p.Evaluate(context.Background(), withID(request("dd", subjectA, 2, t0), "evaluation-1"))
	require.True(t, ratelimit.Admitted(out), "%v", out)
	sent := f.commands()
	require.Len(t, sent, 1)
	bundle, err := programs.ForPolicy(pol)
	require.NoError(t, err)
	dprog := bundle.Dedup // bound to the policy (ADR 0035)
	raw := raws[0]
	assert.Equal(t, "evalsha", raw[0])
	assert.Equal(t, dprog.SHA1, sent[0].program)
	assert.Equal(t, programs.NumKeysDedup, raw[2])
	stateKey, dedupKey := raw[3].(string), raw[4].(string)
	wantState, err := StateKey(testKeys(t), pol, subjectA)
	require.NoError(t, err)
	wantDedup, err := DedupKey(testKeys(t), subjectA)
	require.NoError(t, err)
	assert.Equal(t, wantState, stateKey)
	assert.Equal(t, wantDedup, dedupKey)
	assert.True(t, strings.HasPrefix(dedupKey, "tlb:rate:dedup:dedup:v2:{"))
	slot := func(key string) string { return key[strings.Index(key, "{"):strings.Index(key, "}")] }
	assert.Equal(t, slot(stateKey), slot(dedupKey), "one slot for both keys")
	argv := raw[5:]
	require.Len(t, argv, dprog.ArgCount)
	assert.Equal(t, int64(2), argv[programs.ArgCost])
	assert.Equal(t, programs.BoundArgs(pol, 2), argv[:programs.ArgCountBound], "the revision and the cost, then the dedup entries")
	tail := argv[len(argv)-programs.ArgCountDedup:]
	assert.Equal(t, []any{"evaluation-1", "dd", int64(600_000), int64(ratelimit.DefaultDedupMaxReplays), int64(programs.DedupMaxEntries)}, tail)

	require.True(t, ratelimit.Admitted(p.Evaluate(context.Background(), request("dd", subjectA, 2, t0))))
	plain, err := programs.Bind(p.policies["dd"].policy)
	require.NoError(t, err)
	assert.Equal(t, plain.SHA1, f.commands()[1].program, "no ID: the policy's bound program (ADR 0030)")

	out = p.Evaluate(context.Background(), withID(request("fw", subjectA, 1, t0), "evaluation-1"))
	assert.Equal(t, ratelimit.CategoryInvalidRequest, ratelimit.CategoryOf(out))
	assert.ErrorIs(t, out.(ratelimit.Unavailable).Cause, ratelimit.ErrDedupNotSupported)
	assert.Len(t, f.commands(), 2, "refused unsent")
}

// TestDedupReplies: REPLAYED is the recorded decision marked Replayed,
// DEDUP_CONFLICT is Incompatible{dedup_conflict}; with replication acks a
// replay is Indeterminate{replication}.
func TestDedupReplies(t *testing.T) {
	pol := dedupPolicy(t, "dd")
	r, _, _ := programs.EvaluateDedup(pol, nil, nil, t0.UnixMilli()-5000, 1, "e")
	replay := r
	replay.Status = programs.StatusReplayed
	conflict := programs.Reply{Status: programs.StatusDedupConflict, ServerNowMillis: t0.UnixMilli()}

	f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{val: modelReplyOf(replay)} }}
	out := dedupFakeProvider(t, f, Options{}).Evaluate(context.Background(), withID(request("dd", subjectA, 1, t0), "e"))
	ev, ok := out.(ratelimit.Evaluated)
	require.True(t, ok, "%v", out)
	assert.True(t, ev.Decision.Allowed && ev.Decision.Replayed)
	assert.Equal(t, time.UnixMilli(r.ServerNowMillis), ev.Decision.ServerNow, "the recorded decision")
	assert.Equal(t, r.Remaining, ev.Decision.Remaining)

	f = &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{val: modelReplyOf(conflict)} }}
	out = dedupFakeProvider(t, f, Options{}).Evaluate(context.Background(), withID(request("dd", subjectA, 1, t0), "e"))
	assert.Equal(t, ratelimit.KindIncompatible, out.Kind())
	assert.Equal(t, ratelimit.CategoryDedupConflict, ratelimit.CategoryOf(out))
	assert.False(t, ratelimit.Admitted(out))

	// A plain policy never accepts the dedup statuses.
	f = &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{val: modelReplyOf(conflict)} }}
	out = dedupFakeProvider(t, f, Options{}).Evaluate(context.Background(), request("fw", subjectA, 1, t0))
	assert.Equal(t, ratelimit.CategoryMalformedReply, ratelimit.CategoryOf(out))
}

// TestDedupRetry: an Indeterminate dedup call whose reply was lost is sent
// once more with the same ID within the deadline; its decision is the
// answer. A retry without a decision keeps the first Indeterminate. No
// retry without an ID, without time for one, for a policy without replays
// (the retry would be charged), or for other categories.
func TestDedupRetry(t *testing.T) {
	pol := dedupPolicy(t, "dd")
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	first := func(second fakeReply) *fakeCommander {
		return &fakeCommander{respond: func(i int, _ sentCommand) fakeReply {
			if i == 0 {
				return fakeReply{err: readTimeout}
			}
			return second
		}}
	}
	replayed, _, _ := programs.EvaluateDedup(pol, nil, nil, t0.UnixMilli(), 1, "e")
	replayed.Status = programs.StatusReplayed

	var raws [][]any
	f := &fakeCommander{respond: func(i int, c sentCommand) fakeReply {
		raws = append(raws, resolve(c.raw))
		if i == 0 {
			return fakeReply{err: readTimeout}
		}
		return fakeReply{val: modelReplyOf(replayed)}
	}}
	p := dedupFakeProvider(t, f, Options{})
	out := p.Evaluate(context.Background(), withID(request("dd", subjectA, 1, t0), "e"))
	require.True(t, ratelimit.Admitted(out), "%v", out)
	assert.True(t, out.(ratelimit.Evaluated).Decision.Replayed)
	require.Len(t, raws, 2)
	assert.Equal(t, raws[0][2:], raws[1][2:], "the same keys and arguments, the same ID")
	decided, failed := p.DedupRetries()
	assert.Equal(t, [2]uint64{1, 0}, [2]uint64{decided, failed})
	assert.Empty(t, p.DedupRetryFailures())

	f = first(fakeReply{err: readTimeout})
	p = dedupFakeProvider(t, f, Options{})
	out = p.Evaluate(context.Background(), withID(request("dd", subjectA, 1, t0), "e"))
	assert.Equal(t, ratelimit.CategoryTimeout, ratelimit.CategoryOf(out))
	assert.Len(t, f.commands(), 2, "one retry only")
	decided, failed = p.DedupRetries()
	assert.Equal(t, [2]uint64{0, 1}, [2]uint64{decided, failed})
	assert.Equal(t, map[DedupRetryFailure]uint64{{Kind: ratelimit.KindIndeterminate, Category: ratelimit.CategoryTimeout}: 1}, p.DedupRetryFailures(),
		"the failed retry counted by what it got")

	// A retry refused before it was sent is counted as what it got too.
	f = first(fakeReply{err: serverError(msgBusy)})
	p = dedupFakeProvider(t, f, Options{})
	out = p.Evaluate(context.Background(), withID(request("dd", subjectA, 1, t0), "e"))
	assert.Equal(t, ratelimit.CategoryTimeout, ratelimit.CategoryOf(out), "the first call's Indeterminate stands")
	got := p.DedupRetryFailures()
	require.Len(t, got, 1, "%v", got)
	for k, n := range got {
		assert.Equal(t, DedupRetryFailure{Kind: ratelimit.KindUnavailable, Category: ratelimit.CategoryServerRejected}, k)
		assert.Equal(t, uint64(1), n)
	}

	for name, tt := range map[string]struct {
		req  ratelimit.Request
		opts Options
	}{
		"no evaluation id":    {request("dd", subjectA, 1, t0), Options{}},
		"no replays":          {withID(request("dd0", subjectA, 1, t0), "e"), Options{}},
		"no time for a retry": {withID(ratelimit.Request{PolicyID: "dd", SubjectDigest: subjectA, Cost: 1, Deadline: t0.Add(testTimeout + time.Millisecond)}, "e"), Options{Now: func() func() time.Time { n := t0; return func() time.Time { n = n.Add(time.Millisecond); return n } }()}},
	} {
		f := first(fakeReply{val: modelReplyOf(replayed)})
		out := dedupFakeProvider(t, f, tt.opts).Evaluate(context.Background(), tt.req)
		assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), name)
		assert.Len(t, f.commands(), 1, name)
	}
}

// resolve copies args with the executor's pointer arguments dereferenced
// (they are reused after the call).
func resolve(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case *string:
			out[i] = *v
		case *int64:
			out[i] = *v
		default:
			out[i] = a
		}
	}
	return out
}
