package ratelimittest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// TestFakeConforms: the Fake's default limiter passes the kit, so it can
// stand in for a port wherever a caller needs real limiting.
func TestFakeConforms(t *testing.T) {
	ratelimittest.Run(t, ratelimittest.FakePorts())
}

// TestFakeSetsConform: the Fake's default sets pass the kit's set checks.
func TestFakeSetsConform(t *testing.T) {
	ratelimittest.RunSets(t, ratelimittest.FakePorts())
}

func TestFakeScripted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(2_000_000_000, 0))
	defer cancel()
	req := ratelimit.Request{PolicyID: "api", SubjectDigest: ratelimittest.Subject(t), Cost: 1, Deadline: time.Now().Add(time.Second)}

	fixed := ratelimit.Unavailable{PolicyID: "api", Category: ratelimit.CategoryConnection}
	f := &ratelimittest.Fake{Outcome: fixed}
	if got := f.Evaluate(ctx, req); got != fixed {
		t.Fatalf("Outcome: got %v", got)
	}
	calls := f.Calls()
	if len(calls) != 1 || calls[0].Request != req || !calls[0].ContextDeadline.Equal(time.Unix(2_000_000_000, 0)) {
		t.Fatalf("calls %+v", calls)
	}

	nilOut := &ratelimittest.Fake{UseOutcome: true}
	if got := nilOut.Evaluate(ctx, req); got != nil {
		t.Fatalf("UseOutcome with nil Outcome: got %v", got)
	}

	var seen []ratelimit.PolicyID
	fn := &ratelimittest.Fake{Func: func(_ context.Context, r ratelimit.Request) ratelimit.Outcome {
		seen = append(seen, r.PolicyID)
		return ratelimit.Incompatible{PolicyID: r.PolicyID, Category: ratelimit.CategoryProgramFault}
	}}
	if got := fn.Evaluate(ctx, req); got.Kind() != ratelimit.KindIncompatible || len(seen) != 1 {
		t.Fatalf("Func: got %v, seen %v", got, seen)
	}
	if got := fn.Requests(); len(got) != 1 || got[0] != req {
		t.Fatalf("Requests %v", got)
	}

	quiet := &ratelimittest.Fake{Outcome: fixed, DontRecord: true}
	quiet.Evaluate(ctx, req)
	if len(quiet.Calls()) != 0 {
		t.Fatal("DontRecord recorded a call")
	}

	unknown := ratelimittest.NewFake()
	if got := unknown.Evaluate(ctx, req); ratelimit.CategoryOf(got) != ratelimit.CategoryUnknownPolicy {
		t.Fatalf("no policies: got %v", got)
	}
}

// TestClearOfWindowEnd: far from a window's end it returns at once; within
// the margin it returns only after the end has passed.
func TestClearOfWindowEnd(t *testing.T) {
	start := time.Now()
	ratelimittest.ClearOfWindowEnd(t, time.Hour, 0)
	ratelimittest.ClearOfWindowEnd(t, 0, time.Minute)
	require.Less(t, time.Since(start), time.Second, "no margin or no window: no wait")

	// A 300 ms window always ends within a 400 ms margin: the call waits
	// past the end it saw coming, so it returns in a later window.
	const w = 300 * time.Millisecond
	before := time.Now().UnixMilli() / w.Milliseconds()
	ratelimittest.ClearOfWindowEnd(t, w, 400*time.Millisecond)
	require.Greater(t, time.Now().UnixMilli()/w.Milliseconds(), before)
}
