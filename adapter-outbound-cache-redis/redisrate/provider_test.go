package redisrate

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// deadlineOnly is a context with a deadline that never expires by itself:
// Deadline reports at, Done and Err are the parent's.
type deadlineOnly struct {
	context.Context
	at time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.at, true }

// TestEvaluateRefusalsBeforeSendSendNothing: every check before the program
// call answers without a single command reaching the client.
func TestEvaluateRefusalsBeforeSendSendNothing(t *testing.T) {
	valid := request("fw", subjectA, 1, t0)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	// A context whose deadline is on the provider's clock (t0), so the
	// precheck meets it unexpired however long the test waits to run:
	// a wall-clock deadline of 190 ms could pass first on a loaded machine
	// (then the context, not the precheck, refuses).
	short := deadlineOnly{Context: context.Background(), at: t0.Add(testTimeout - 10*time.Millisecond)}
	tests := []struct {
		name   string
		ctx    context.Context
		req    func(r ratelimit.Request) ratelimit.Request
		kind   ratelimit.OutcomeKind
		cat    ratelimit.Category
		id     ratelimit.PolicyID
		target error
	}{
		{"nil context", nil, nil, ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest, "fw", errNilContext},
		{"invalid policy id", context.Background(), func(r ratelimit.Request) ratelimit.Request { r.PolicyID = "Bad ID!"; return r },
			ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest, "", ratelimit.ErrInvalidPolicyID},
		{"invalid subject", context.Background(), func(r ratelimit.Request) ratelimit.Request { r.SubjectDigest = "short"; return r },
			ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest, "fw", ratelimit.ErrInvalidSubjectDigest},
		{"zero cost", context.Background(), func(r ratelimit.Request) ratelimit.Request { r.Cost = 0; return r },
			ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest, "fw", ratelimit.ErrCostOutOfRange},
		{"negative cost", context.Background(), func(r ratelimit.Request) ratelimit.Request { r.Cost = -1; return r },
			ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest, "fw", ratelimit.ErrCostOutOfRange},
		{"evaluation id", context.Background(), func(r ratelimit.Request) ratelimit.Request { r.EvaluationID = "e1"; return r },
			ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest, "fw", ratelimit.ErrDedupNotSupported},
		{"no deadline", context.Background(), func(r ratelimit.Request) ratelimit.Request { r.Deadline = time.Time{}; return r },
			ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest, "fw", ratelimit.ErrDeadlineMissing},
		{"deadline passed", context.Background(), func(r ratelimit.Request) ratelimit.Request { r.Deadline = t0; return r },
			ratelimit.KindUnavailable, ratelimit.CategoryDeadline, "fw", ratelimit.ErrDeadlinePassed},
		{"deadline passed and bad cost", context.Background(), func(r ratelimit.Request) ratelimit.Request { r.Deadline, r.Cost = t0, 0; return r },
			ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest, "fw", ratelimit.ErrCostOutOfRange},
		{"unknown policy", context.Background(), func(r ratelimit.Request) ratelimit.Request { r.PolicyID = "nope"; return r },
			ratelimit.KindUnavailable, ratelimit.CategoryUnknownPolicy, "nope", errUnknownPolicy},
		{"cost above max cost", context.Background(), func(r ratelimit.Request) ratelimit.Request { r.Cost = 6; return r },
			ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest, "fw", ratelimit.ErrCostAboveMaxCost},
		{"context cancelled", cancelled, nil, ratelimit.KindUnavailable, ratelimit.CategoryDeadline, "fw", context.Canceled},
		{"context deadline shorter than the command timeout", short, func(r ratelimit.Request) ratelimit.Request {
			r.Deadline = t0.Add(time.Hour) // ctx's deadline is the earlier one
			return r
		}, ratelimit.KindUnavailable, ratelimit.CategoryDeadline, "fw", errDeadlineTooShort},
		{"request deadline shorter than the command timeout", context.Background(), func(r ratelimit.Request) ratelimit.Request {
			r.Deadline = t0.Add(testTimeout - time.Millisecond)
			return r
		}, ratelimit.KindUnavailable, ratelimit.CategoryDeadline, "fw", errDeadlineTooShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCommander{}
			p := fakeProvider(t, f, 4)
			req := valid
			if tt.req != nil {
				req = tt.req(req)
			}
			out := p.Evaluate(tt.ctx, req)
			require.NotNil(t, out)
			assert.Equal(t, tt.kind, out.Kind())
			assert.Equal(t, tt.cat, ratelimit.CategoryOf(out))
			assert.False(t, ratelimit.Admitted(out))
			u, ok := out.(ratelimit.Unavailable)
			require.True(t, ok)
			assert.Equal(t, tt.id, u.PolicyID)
			assert.Equal(t, MinFailureRetryAfter, u.RetryAfter)
			assert.ErrorIs(t, u.Cause, tt.target)
			assert.Empty(t, f.commands(), "nothing sent")
			if req.SubjectDigest != "" {
				assert.NotContains(t, u.Cause.Error(), string(req.SubjectDigest))
			}
		})
	}
}

func TestEvaluateExactDeadlineIsAdmitted(t *testing.T) {
	f := &fakeCommander{respond: func(int, sentCommand) fakeReply {
		return fakeReply{val: modelReply(fixedPolicy(t, "fw", 5, time.Minute), t0, 1)}
	}}
	p := fakeProvider(t, f, 4)
	req := request("fw", subjectA, 1, t0)
	req.Deadline = t0.Add(testTimeout) // exactly one command timeout left
	out := p.Evaluate(context.Background(), req)
	assert.True(t, ratelimit.Admitted(out), "%v", out)
}

func TestEvaluateAfterCloseIsUnavailableClosed(t *testing.T) {
	f := &fakeCommander{}
	p := fakeProvider(t, f, 4)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "idempotent")
	assert.Equal(t, 1, f.closes, "client closed once")
	out := p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))
	assert.Equal(t, ratelimit.CategoryClosed, ratelimit.CategoryOf(out))
	assert.Equal(t, ratelimit.KindUnavailable, out.Kind())
	assert.Empty(t, f.commands())
	assert.ErrorIs(t, p.Ready(context.Background()), ErrClosed)
	assert.ErrorIs(t, p.Start(context.Background()), ErrClosed)
}

func TestEvaluateInFlightBoundAnswersAtOnce(t *testing.T) {
	reply := modelReply(fixedPolicy(t, "fw", 5, time.Minute), t0, 1)
	f := &fakeCommander{
		block:   make(chan struct{}),
		entered: make(chan struct{}, 1),
		respond: func(int, sentCommand) fakeReply { return fakeReply{val: reply} },
	}
	p := fakeProvider(t, f, 1)
	first := make(chan ratelimit.Outcome, 1)
	go func() { first <- p.Evaluate(context.Background(), request("fw", subjectA, 1, t0)) }()
	select {
	case <-f.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("first call never reached the client")
	}
	out := p.Evaluate(context.Background(), request("fw", subjectB, 1, t0))
	assert.Equal(t, ratelimit.KindUnavailable, out.Kind())
	assert.Equal(t, ratelimit.CategoryAdmission, ratelimit.CategoryOf(out))
	assert.ErrorIs(t, out.(ratelimit.Unavailable).Cause, errInFlightFull)
	close(f.block)
	assert.True(t, ratelimit.Admitted(<-first))
	assert.Len(t, f.commands(), 1, "the refused call sent nothing")

	f.block = nil // the slot is free again
	assert.True(t, ratelimit.Admitted(p.Evaluate(context.Background(), request("fw", subjectB, 1, t0))))
}

// TestEvaluateMapsEveryStatus maps each program status, for each algorithm.
func TestEvaluateMapsEveryStatus(t *testing.T) {
	now := t0.UnixMilli()
	for _, pol := range testPolicies(t) {
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			// A denial: exhaust the model's state, then ask once more.
			var st programs.State
			for i := 0; i < 5; i++ {
				_, st = programs.Evaluate(pol, st, now, 1)
			}
			denied, _ := programs.Evaluate(pol, st, now, 1)
			require.Equal(t, programs.StatusDenied, denied.Status)
			allowed, _ := programs.Evaluate(pol, nil, now, 2)
			require.Equal(t, programs.StatusAllowed, allowed.Status)

			tests := []struct {
				name  string
				reply programs.Reply
				check func(t *testing.T, out ratelimit.Outcome)
			}{
				{"allowed", allowed, func(t *testing.T, out ratelimit.Outcome) {
					e := out.(ratelimit.Evaluated)
					assert.True(t, ratelimit.Admitted(out))
					assert.Equal(t, ratelimit.Decision{
						Allowed: true, Limit: 5, Remaining: allowed.Remaining, RetryAfter: 0,
						ResetAt: time.UnixMilli(allowed.ResetAtMillis), ServerNow: time.UnixMilli(allowed.ServerNowMillis), PolicyID: pol.ID(), PolicyRevision: 1,
						Source: ratelimit.GlobalRedis, Certainty: pol.Certainty(),
						// The refund's receipt: the admission's cost and instant (ADR 0025).
						Receipt: ratelimit.NewReceipt(pol.ID(), 1, 2, allowed.EffectiveNowMillis, ratelimit.GlobalRedis),
					}, e.Decision)
				}},
				{"denied", denied, func(t *testing.T, out ratelimit.Outcome) {
					e := out.(ratelimit.Evaluated)
					assert.False(t, ratelimit.Admitted(out))
					assert.False(t, e.Decision.Allowed)
					assert.Equal(t, time.Duration(denied.RetryAfterMillis)*time.Millisecond, e.Decision.RetryAfter)
					assert.Positive(t, e.Decision.RetryAfter)
					assert.Equal(t, denied.Remaining, e.Decision.Remaining)
					assert.Equal(t, time.UnixMilli(denied.ResetAtMillis), e.Decision.ResetAt)
					assert.Equal(t, pol.Certainty(), e.Decision.Certainty)
				}},
				{"clock unsafe behind", programs.Reply{Status: programs.StatusClockUnsafe, ServerNowMillis: now, EffectiveNowMillis: now + 5000, RetryAfterMillis: 3000},
					func(t *testing.T, out ratelimit.Outcome) {
						u := out.(ratelimit.Unavailable)
						assert.Equal(t, ratelimit.CategoryClockUnsafe, u.Category)
						assert.Equal(t, 3*time.Second, u.RetryAfter, "the program's wait")
						assert.ErrorIs(t, u.Cause, errClockUnsafe)
					}},
				{"clock unsafe barely behind", programs.Reply{Status: programs.StatusClockUnsafe, ServerNowMillis: now, EffectiveNowMillis: now + 2001, RetryAfterMillis: 1},
					func(t *testing.T, out ratelimit.Outcome) {
						assert.Equal(t, MinFailureRetryAfter, out.(ratelimit.Unavailable).RetryAfter, "at least the failure hint")
					}},
				{"clock unsafe far behind", programs.Reply{Status: programs.StatusClockUnsafe, ServerNowMillis: now, EffectiveNowMillis: now + 3_600_000, RetryAfterMillis: 3_598_000},
					func(t *testing.T, out ratelimit.Outcome) {
						assert.Equal(t, MaxClockRetryAfter, out.(ratelimit.Unavailable).RetryAfter, "capped")
					}},
				{"clock unsafe past the server-time bound", programs.Reply{Status: programs.StatusClockUnsafe},
					func(t *testing.T, out ratelimit.Outcome) {
						u := out.(ratelimit.Unavailable)
						assert.Equal(t, ratelimit.CategoryClockUnsafe, u.Category)
						assert.Equal(t, MaxClockRetryAfter, u.RetryAfter)
					}},
				{"state incompatible", programs.Reply{Status: programs.StatusStateIncompatible, ServerNowMillis: now},
					func(t *testing.T, out ratelimit.Outcome) {
						i := out.(ratelimit.Incompatible)
						assert.Equal(t, ratelimit.CategoryStateIncompatible, i.Category)
						assert.ErrorIs(t, i.Cause, errStateIncompatible)
					}},
				{"invalid", programs.Reply{Status: programs.StatusInvalid, ServerNowMillis: now},
					func(t *testing.T, out ratelimit.Outcome) {
						i := out.(ratelimit.Incompatible)
						assert.Equal(t, ratelimit.CategoryInvalidArguments, i.Category)
						assert.ErrorIs(t, i.Cause, errInvalidArguments)
					}},
				{"inconsistent", programs.Reply{Status: programs.StatusAllowed, ServerNowMillis: now, EffectiveNowMillis: now, Limit: 5, Remaining: 5, ResetAtMillis: now + 1},
					func(t *testing.T, out ratelimit.Outcome) {
						i := out.(ratelimit.Incompatible)
						assert.Equal(t, ratelimit.CategoryMalformedReply, i.Category)
						assert.ErrorIs(t, i.Cause, programs.ErrMalformedReply)
					}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{val: modelReplyOf(tt.reply)} }}
					out := fakeProvider(t, f, 4).Evaluate(context.Background(), request(pol.ID(), subjectA, 2, t0))
					require.NotNil(t, out)
					assert.Equal(t, pol.ID(), policyIDOf(out))
					tt.check(t, out)
					assert.Len(t, f.commands(), 1)
				})
			}
		})
	}
}

func TestNewValidatesPoliciesAndOptions(t *testing.T) {
	keys := testKeys(t)
	pols := testPolicies(t)
	good := Options{CommandTimeout: testTimeout, MaxInFlight: 2}
	tests := []struct {
		name     string
		keysNil  bool
		policies []ratelimit.Policy
		opts     Options
		want     string
	}{
		{"nil keys", true, pols, good, "keys"},
		{"no policies", false, nil, good, "policies"},
		{"zero policy", false, []ratelimit.Policy{{}}, good, "zero policy"},
		{"duplicate ids", false, []ratelimit.Policy{pols[0], fixedPolicy(t, "fw", 9, time.Second)}, good, "duplicate"},
		{"no command timeout", false, pols, Options{MaxInFlight: 2}, "CommandTimeout"},
		{"command timeout too long", false, pols, Options{CommandTimeout: time.Hour, MaxInFlight: 2}, "CommandTimeout"},
		{"no in-flight bound", false, pols, Options{CommandTimeout: testTimeout}, "MaxInFlight"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := keys
			if tt.keysNil {
				k = nil
			}
			_, err := newProvider(&fakeCommander{}, k, tt.policies, tt.opts)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	p, err := newProvider(&fakeCommander{}, keys, pols, good)
	require.NoError(t, err)
	assert.Len(t, p.scripts, 3, "one script per program")
	assert.Equal(t, programs.MinRedisVersion, p.minRedis)
}

// TestStartChecksTheServerVersion: Start reads INFO server, refuses a server
// older than the manifest (Evaluate then answers Incompatible{server_version}
// unsent) and loads every program otherwise.
func TestStartChecksTheServerVersion(t *testing.T) {
	infoOf := func(v string) string {
		return "# Server\r\nredis_git_sha1:00000000\r\nredis_version:" + v + "\r\nredis_mode:standalone\r\n"
	}
	newFake := func(version string) *fakeCommander {
		return &fakeCommander{respond: func(_ int, c sentCommand) fakeReply {
			switch c.name {
			case "info":
				return fakeReply{val: infoOf(version)}
			case "ping":
				return fakeReply{val: "PONG"}
			case "script":
				return fakeReply{val: sha1Hex(c.raw[2])}
			}
			return fakeReply{}
		}}
	}
	t.Run("old server", func(t *testing.T) {
		f := newFake("6.2.14")
		p := fakeProvider(t, f, 2)
		err := p.Start(context.Background())
		require.ErrorIs(t, err, ErrServerVersion)
		assert.Contains(t, err.Error(), "6.2.14")
		assert.Equal(t, []string{"info"}, f.names(), "no SCRIPT LOAD on an old server")
		out := p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))
		assert.Equal(t, ratelimit.KindIncompatible, out.Kind())
		assert.Equal(t, ratelimit.CategoryServerVersion, ratelimit.CategoryOf(out))
		assert.ErrorIs(t, out.(ratelimit.Incompatible).Cause, ErrServerVersion)
		assert.ErrorIs(t, p.Ready(context.Background()), ErrServerVersion)
		assert.Equal(t, []string{"info"}, f.names(), "Evaluate and Ready sent nothing")
	})
	for _, v := range []string{"garbage", "", "7", "7.x.1"} {
		t.Run("unreadable version "+v, func(t *testing.T) {
			p := fakeProvider(t, newFake(v), 2)
			require.ErrorIs(t, p.Start(context.Background()), ErrServerVersion)
		})
	}
	t.Run("missing version field", func(t *testing.T) {
		f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{val: "# Server\r\nredis_mode:standalone\r\n"} }}
		require.ErrorIs(t, fakeProvider(t, f, 2).Start(context.Background()), ErrServerVersion)
	})
	for _, v := range []string{"7.0.0", "7.0.15", "7.4.2", "8.0.1", "10.0"} {
		t.Run("supported "+v, func(t *testing.T) {
			f := newFake(v)
			p := fakeProvider(t, f, 2)
			require.NoError(t, p.Start(context.Background()))
			sent := f.commands()
			require.Len(t, sent, 4)
			for i, pol := range testPolicies(t) { // each policy's bound program (ADR 0030), in policy order
				prog, err := programs.Bind(pol)
				require.NoError(t, err)
				assert.Equal(t, []any{"script", "load", []byte(prog.Source)}, sent[i+1].raw, "SCRIPT LOAD of the exact source")
			}
			require.NoError(t, p.Ready(context.Background()))
		})
	}
	t.Run("digest mismatch", func(t *testing.T) {
		f := &fakeCommander{respond: func(_ int, c sentCommand) fakeReply {
			if c.name == "info" {
				return fakeReply{val: infoOf("7.0.15")}
			}
			return fakeReply{val: "0000000000000000000000000000000000000000"}
		}}
		require.ErrorIs(t, fakeProvider(t, f, 2).Start(context.Background()), ErrScriptDigest)
	})
	t.Run("a later successful start clears the failure", func(t *testing.T) {
		version := "6.0.0"
		f := &fakeCommander{respond: func(_ int, c sentCommand) fakeReply {
			switch c.name {
			case "info":
				return fakeReply{val: infoOf(version)}
			case "script":
				return fakeReply{val: sha1Hex(c.raw[2])}
			}
			return fakeReply{}
		}}
		p := fakeProvider(t, f, 2)
		require.ErrorIs(t, p.Start(context.Background()), ErrServerVersion)
		version = "7.0.15"
		require.NoError(t, p.Start(context.Background()))
		reply := modelReply(fixedPolicy(t, "fw", 5, time.Minute), t0, 1)
		f.respond = func(int, sentCommand) fakeReply { return fakeReply{val: reply} }
		assert.True(t, ratelimit.Admitted(p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))))
	})
	t.Run("transport failure changes nothing", func(t *testing.T) {
		f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{err: io.EOF} }}
		p := fakeProvider(t, f, 2)
		err := p.Start(context.Background())
		require.ErrorIs(t, err, io.EOF)
		assert.False(t, errors.Is(err, ErrServerVersion))
		assert.Nil(t, p.versionErr.Load())
	})
}
