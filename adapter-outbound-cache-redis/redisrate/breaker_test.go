package redisrate

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
)

// breakerProvider builds a Provider over f with a breaker of threshold and
// interval, closed at the end of the test.
func breakerProvider(t testing.TB, f *fakeCommander, threshold int, interval time.Duration) *Provider {
	t.Helper()
	p, err := newProvider(f, testKeys(t), testPolicies(t), Options{
		CommandTimeout: testTimeout, MaxInFlight: 4, Now: func() time.Time { return t0 },
		Breaker: BreakerOptions{Threshold: threshold, ProbeInterval: interval},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func countNamed(f *fakeCommander, name string) int {
	n := 0
	for _, c := range f.commands() {
		if c.name == name {
			n++
		}
	}
	return n
}

var errReadTimeout = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

// TestBreakerOpensOnlyOnConnectionFailuresAndTimeouts: threshold failures
// in a row of a counting kind open the breaker; from then on every call is
// Unavailable{circuit_open} and nothing reaches the client. Answers of the
// server and failures that say nothing about connectivity never open it.
func TestBreakerOpensOnlyOnConnectionFailuresAndTimeouts(t *testing.T) {
	const threshold = 3
	tests := []struct {
		name  string
		r     fakeReply
		opens bool
	}{
		{"dial failure (connection)", fakeReply{err: &certainty.DialError{Err: io.EOF}, unwritten: true}, true},
		{"handshake timeout (connection)", fakeReply{err: errReadTimeout, unwritten: true}, true},
		{"read timeout after write (timeout)", fakeReply{err: errReadTimeout}, true},
		{"eof after write (connection_lost)", fakeReply{err: io.EOF}, true},
		{"denied", fakeReply{val: []any{int64(2), t0.UnixMilli(), t0.UnixMilli(), int64(5), int64(0), int64(1000), t0.UnixMilli() + 1000}}, false},
		{"server rejected (OOM)", fakeReply{err: serverError(msgOOM)}, false},
		{"incompatible (lua error)", fakeReply{err: serverError("ERR user_script:9: x" + scriptSuffix)}, false},
		{"incompatible (nil reply)", fakeReply{err: redis.Nil}, false},
		{"admission (pool timeout)", fakeReply{err: redis.ErrPoolTimeout, unwritten: true}, false},
		{"cancelled after write", fakeReply{err: context.Canceled}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCommander{respond: func(_ int, c sentCommand) fakeReply {
				if c.name == "ping" {
					return fakeReply{err: errReadTimeout, unwritten: true}
				}
				return tt.r
			}}
			p := breakerProvider(t, f, threshold, time.Minute) // no probe during the test
			for i := range threshold {
				out := p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))
				require.NotEqual(t, ratelimit.CategoryCircuitOpen, ratelimit.CategoryOf(out), "call %d", i)
			}
			const more = 50
			for range more {
				out := p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))
				if tt.opens {
					require.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
					u := out.(ratelimit.Unavailable)
					assert.Equal(t, ratelimit.CategoryCircuitOpen, u.Category)
					assert.ErrorIs(t, u.Cause, ErrCircuitOpen)
					assert.Equal(t, ratelimit.PolicyID("fw"), u.PolicyID)
					assert.Equal(t, MinFailureRetryAfter, u.RetryAfter)
				} else {
					require.NotEqual(t, ratelimit.CategoryCircuitOpen, ratelimit.CategoryOf(out), "%v", out)
				}
			}
			if tt.opens {
				assert.Equal(t, threshold, countNamed(f, send.CmdEvalSha), "nothing sent once open")
				assert.Equal(t, BreakerOpen, p.BreakerState())
				assert.Equal(t, uint64(1), p.BreakerTrips())
			} else {
				assert.Equal(t, threshold+more, countNamed(f, send.CmdEvalSha), "every call sent")
				assert.Equal(t, BreakerClosed, p.BreakerState())
				assert.Zero(t, p.BreakerTrips())
			}
			assert.Zero(t, countNamed(f, "ping"), "no probe before the probe interval")
		})
	}
}

// TestBreakerRunMustBeConsecutive: any server answer ends a run of
// failures, so failures interleaved with answers never open the breaker.
func TestBreakerRunMustBeConsecutive(t *testing.T) {
	f := &fakeCommander{respond: func(i int, _ sentCommand) fakeReply {
		if i%3 == 2 {
			return fakeReply{val: modelReply(fixedPolicy(t, "fw", 5, time.Minute), t0, 1)}
		}
		return fakeReply{err: errReadTimeout}
	}}
	p := breakerProvider(t, f, 3, time.Minute)
	for range 30 {
		out := p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))
		require.NotEqual(t, ratelimit.CategoryCircuitOpen, ratelimit.CategoryOf(out))
	}
	assert.Equal(t, BreakerClosed, p.BreakerState())
}

// TestBreakerRefusalsBeforeTheBreakerKeepTheirCategory: an invalid request
// or an unknown policy is refused as before, also with the breaker open.
func TestBreakerRefusalsBeforeTheBreakerKeepTheirCategory(t *testing.T) {
	f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{err: errReadTimeout} }}
	p := breakerProvider(t, f, 1, time.Minute)
	p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))
	require.Equal(t, BreakerOpen, p.BreakerState())
	assert.Equal(t, ratelimit.CategoryUnknownPolicy, ratelimit.CategoryOf(p.Evaluate(context.Background(), request("nope", subjectA, 1, t0))))
	assert.Equal(t, ratelimit.CategoryInvalidRequest, ratelimit.CategoryOf(p.Evaluate(context.Background(), request("fw", subjectA, 0, t0))))
	assert.Equal(t, ratelimit.CategoryCircuitOpen, ratelimit.CategoryOf(p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))))
}

// TestBreakerProbesInTheBackgroundAndClosesOnFirstSuccess: while open,
// calls send nothing; only the prober talks to the client, one PING at a
// time, at most one per half interval; the first PING that succeeds
// closes the breaker and calls are sent again. The state changes are
// reported in order.
func TestBreakerProbesInTheBackgroundAndClosesOnFirstSuccess(t *testing.T) {
	const interval = 20 * time.Millisecond
	var healthy atomic.Bool
	var inPing, maxInPing atomic.Int32
	f := &fakeCommander{respond: func(_ int, c sentCommand) fakeReply {
		if c.name == "ping" {
			n := inPing.Add(1)
			defer inPing.Add(-1)
			for {
				m := maxInPing.Load()
				if n <= m || maxInPing.CompareAndSwap(m, n) {
					break
				}
			}
			if healthy.Load() {
				return fakeReply{val: "PONG"}
			}
			return fakeReply{err: &certainty.DialError{Err: io.EOF}, unwritten: true}
		}
		if healthy.Load() {
			return fakeReply{val: modelReply(fixedPolicy(t, "fw", 5, time.Minute), t0, 1)}
		}
		return fakeReply{err: &certainty.DialError{Err: io.EOF}, unwritten: true}
	}}
	p := breakerProvider(t, f, 2, interval)
	var mu sync.Mutex
	var changes []BreakerState
	p.OnBreakerChange(func(s BreakerState) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, s)
	})
	for range 2 {
		p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))
	}
	require.NotEqual(t, BreakerClosed, p.BreakerState())
	opened := time.Now()

	// Wait (bounded) for a few failed probes while calls keep coming.
	deadline := time.Now().Add(10 * time.Second)
	for countNamed(f, "ping") < 3 {
		require.True(t, time.Now().Before(deadline), "no probes")
		out := p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))
		require.Equal(t, ratelimit.CategoryCircuitOpen, ratelimit.CategoryOf(out))
		time.Sleep(time.Millisecond)
	}
	pings := countNamed(f, "ping")
	elapsed := time.Since(opened)
	assert.Equal(t, 2, countNamed(f, send.CmdEvalSha), "no call sent while open")
	assert.LessOrEqual(t, pings, int(elapsed/(interval/2))+1, "probes spaced by at least half the interval")

	healthy.Store(true)
	for p.BreakerState() != BreakerClosed {
		require.True(t, time.Now().Before(deadline), "breaker did not close after the server came back")
		time.Sleep(time.Millisecond)
	}
	out := p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))
	assert.True(t, ratelimit.Admitted(out), "%v", out)
	assert.Equal(t, 3, countNamed(f, send.CmdEvalSha))
	assert.Equal(t, int32(1), maxInPing.Load(), "one probe at a time")
	assert.Equal(t, uint64(1), p.BreakerTrips())
	mu.Lock()
	assert.Equal(t, []BreakerState{BreakerOpen, BreakerClosed}, changes)
	mu.Unlock()
}

// TestBreakerReopensAfterRecovery: a breaker that closed opens again on a
// new run of failures and probes again (a new prober).
func TestBreakerReopensAfterRecovery(t *testing.T) {
	var healthy atomic.Bool
	f := &fakeCommander{respond: func(_ int, c sentCommand) fakeReply {
		if healthy.Load() {
			if c.name == "ping" {
				return fakeReply{val: "PONG"}
			}
			return fakeReply{val: modelReply(fixedPolicy(t, "fw", 5, time.Minute), t0, 1)}
		}
		return fakeReply{err: errReadTimeout}
	}}
	p := breakerProvider(t, f, 1, 20*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for round := range 3 {
		healthy.Store(false)
		p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))
		require.NotEqual(t, BreakerClosed, p.BreakerState(), "round %d", round)
		healthy.Store(true)
		for p.BreakerState() != BreakerClosed {
			require.True(t, time.Now().Before(deadline), "round %d: did not close", round)
			time.Sleep(time.Millisecond)
		}
	}
	assert.Equal(t, uint64(3), p.BreakerTrips())
}

// TestBreakerCloseStopsTheProber: Close ends the prober (TestMain's goleak
// check fails the package otherwise) and the breaker answers nothing after
// Close but Unavailable{closed}.
func TestBreakerCloseStopsTheProber(t *testing.T) {
	f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{err: errReadTimeout} }}
	p := breakerProvider(t, f, 1, 20*time.Millisecond)
	p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))
	require.NotEqual(t, BreakerClosed, p.BreakerState())
	time.Sleep(50 * time.Millisecond) // let a probe or two run
	require.NoError(t, p.Close())
	assert.Equal(t, ratelimit.CategoryClosed, ratelimit.CategoryOf(p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))))
	n := countNamed(f, "ping")
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, n, countNamed(f, "ping"), "no probe after Close")
}

// TestBreakerDisabledByDefault: the zero BreakerOptions sends every call,
// however many fail.
func TestBreakerDisabledByDefault(t *testing.T) {
	f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{err: errReadTimeout} }}
	p := fakeProvider(t, f, 4)
	for range 20 {
		assert.Equal(t, ratelimit.CategoryTimeout, ratelimit.CategoryOf(p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))))
	}
	assert.Equal(t, BreakerDisabled, p.BreakerState())
	assert.Equal(t, 20, countNamed(f, send.CmdEvalSha))
}

func TestBreakerOptionsValidation(t *testing.T) {
	tests := []struct {
		opts BreakerOptions
		want string
	}{
		{BreakerOptions{Threshold: -1, ProbeInterval: time.Second}, "Options.Breaker.Threshold -1"},
		{BreakerOptions{Threshold: MaxBreakerThreshold + 1, ProbeInterval: time.Second}, "Options.Breaker.Threshold 1001"},
		{BreakerOptions{Threshold: 5}, "Options.Breaker.ProbeInterval 0s"},
		{BreakerOptions{Threshold: 5, ProbeInterval: 2 * time.Minute}, "Options.Breaker.ProbeInterval 2m0s"},
	}
	for _, tt := range tests {
		_, err := newProvider(&fakeCommander{}, testKeys(t), testPolicies(t), Options{CommandTimeout: testTimeout, MaxInFlight: 1, Breaker: tt.opts})
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.Contains(t, err.Error(), tt.want)
	}
	_, err := newProvider(&fakeCommander{}, testKeys(t), testPolicies(t), Options{CommandTimeout: testTimeout, MaxInFlight: 1, Breaker: BreakerOptions{ProbeInterval: -1}})
	assert.NoError(t, err, "threshold 0: off, the interval is not read")
}
