package redisrate

import (
	"bytes"
	"context"
	"encoding"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
)

// Fixed instants and settings of the unit tests.
var t0 = time.UnixMilli(1_700_000_000_000)

const (
	testTimeout = 200 * time.Millisecond
	subjectA    = ratelimit.SubjectDigest("c3ViamVjdC1hLWRpZ2VzdA")
	subjectB    = ratelimit.SubjectDigest("c3ViamVjdC1iLWRpZ2VzdA")
)

func testKeys(t testing.TB) *keyspace.Builder {
	t.Helper()
	secret, err := keyspace.NewSecret([]byte("0123456789abcdef0123456789abcdef-test-secret"))
	require.NoError(t, err)
	b, err := keyspace.NewBuilder("tlb", secret)
	require.NoError(t, err)
	return b
}

func mustPolicy(t testing.TB, spec ratelimit.PolicySpec) ratelimit.Policy {
	t.Helper()
	if spec.Revision == 0 {
		spec.Revision = 1
	}
	if spec.MaxCost == 0 {
		spec.MaxCost = 1
	}
	if spec.CleanupGrace == 0 {
		spec.CleanupGrace = time.Minute
	}
	if spec.FailurePolicy == 0 {
		spec.FailurePolicy = ratelimit.FailClosed
	}
	if spec.Params != nil {
		spec.Algorithm = spec.Params.Algorithm()
	}
	p, err := ratelimit.NewPolicy(spec)
	require.NoError(t, err)
	return p
}

func fixedPolicy(t testing.TB, id ratelimit.PolicyID, limit int64, window time.Duration) ratelimit.Policy {
	return mustPolicy(t, ratelimit.PolicySpec{ID: id, Params: ratelimit.FixedWindow{Limit: limit, Window: window}, MaxCost: limit, MaxClockRegression: 2 * time.Second})
}

func slidingPolicy(t testing.TB, id ratelimit.PolicyID, limit int64, window time.Duration) ratelimit.Policy {
	return mustPolicy(t, ratelimit.PolicySpec{ID: id, Params: ratelimit.SlidingWindowCounter{Limit: limit, Window: window}, MaxCost: limit, MaxClockRegression: 2 * time.Second})
}

func tokenPolicy(t testing.TB, id ratelimit.PolicyID, capacity, refill int64, period time.Duration) ratelimit.Policy {
	return mustPolicy(t, ratelimit.PolicySpec{ID: id, Params: ratelimit.TokenBucket{Capacity: capacity, RefillTokens: refill, RefillPeriod: period}, MaxCost: capacity, MaxClockRegression: 2 * time.Second})
}

// testPolicies is one policy per algorithm: "fw", "sw" and "tb".
func testPolicies(t testing.TB) []ratelimit.Policy {
	return []ratelimit.Policy{
		fixedPolicy(t, "fw", 5, time.Minute),
		slidingPolicy(t, "sw", 5, time.Minute),
		tokenPolicy(t, "tb", 5, 1, time.Second),
	}
}

func request(id ratelimit.PolicyID, subject ratelimit.SubjectDigest, cost int64, now time.Time) ratelimit.Request {
	return ratelimit.Request{PolicyID: id, SubjectDigest: subject, Cost: cost, Deadline: now.Add(10 * testTimeout)}
}

// sentCommand is one command the fake commander received, with the
// executor's pointer arguments resolved.
type sentCommand struct {
	name    string
	program string // digest (evalsha) or source (eval)
	numKeys any
	key     string
	argv    []any
	raw     []any // the arguments as given to go-redis
	written bool
}

// fakeReply is the fake's answer to one command. unwritten simulates a
// failure before go-redis serialized the command.
type fakeReply struct {
	val       any
	err       error
	unwritten bool
}

// fakeCommander stands in for go-redis in unit tests: it records what it is
// asked to send and answers from respond.
type fakeCommander struct {
	mu      sync.Mutex
	sent    []sentCommand
	respond func(i int, c sentCommand) fakeReply
	// block, when set, makes Process wait for it to close after signalling
	// entered.
	block   chan struct{}
	entered chan struct{}
	panics  bool
	closes  int
}

func (f *fakeCommander) Process(ctx context.Context, cmd redis.Cmder) error {
	if f.panics {
		panic("fake commander panic")
	}
	if f.block != nil {
		f.entered <- struct{}{}
		<-f.block
	}
	args := cmd.Args()
	c := sentCommand{name: fmt.Sprint(args[0]), raw: args}
	for j, a := range args {
		switch v := a.(type) {
		case interface{ Payload() []byte }: // the send loop's wire argument
			c.program = string(v.Payload())
		case *string:
			c.key = *v
		case *int64:
			c.argv = append(c.argv, *v)
		default:
			switch {
			case j == 2:
				c.numKeys = a
			case j >= 4:
				c.argv = append(c.argv, a)
			}
		}
	}
	f.mu.Lock()
	i := len(f.sent)
	var r fakeReply
	if f.respond != nil {
		r = f.respond(i, c)
	}
	if !r.unwritten {
		// What go-redis's writer does while serializing.
		c.written = true
		for _, a := range args {
			if m, ok := a.(encoding.BinaryMarshaler); ok {
				_, _ = m.MarshalBinary()
			}
		}
	}
	f.sent = append(f.sent, c)
	f.mu.Unlock()
	switch cc := cmd.(type) {
	case *redis.Cmd:
		cc.SetVal(r.val)
	case *redis.StringCmd:
		s, _ := r.val.(string)
		cc.SetVal(s)
	case *redis.StatusCmd:
		s, _ := r.val.(string)
		cc.SetVal(s)
	}
	cmd.SetErr(r.err)
	return r.err
}

func (f *fakeCommander) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closes++
	return nil
}

func (f *fakeCommander) commands() []sentCommand {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentCommand(nil), f.sent...)
}

func (f *fakeCommander) names() []string {
	var out []string
	for _, c := range f.commands() {
		out = append(out, c.name)
	}
	return out
}

// modelReply answers a program call from the reference model for p on an
// empty key at now.
func modelReply(p ratelimit.Policy, now time.Time, cost int64) []any {
	r, _ := programs.Evaluate(p, nil, now.UnixMilli(), cost)
	ints := r.Ints()
	out := make([]any, len(ints))
	for i, n := range ints {
		out[i] = n
	}
	return out
}

// fakeProvider builds a Provider over a fake commander with a fixed clock.
func fakeProvider(t testing.TB, f *fakeCommander, maxInFlight int) *Provider {
	t.Helper()
	p, err := newProvider(f, testKeys(t), testPolicies(t), Options{CommandTimeout: testTimeout, MaxInFlight: maxInFlight, Now: func() time.Time { return t0 }})
	require.NoError(t, err)
	return p
}

// serverError is a Redis error reply as go-redis surfaces it.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

var _ redis.Error = serverError("")

// waitGoroutineGone waits (bounded) until no goroutine has fn in its stack.
// go-redis's pool starts a dial prober (tryDial) after PoolSize failed dials;
// it notices Close only after its 1 s sleep.
func waitGoroutineGone(t testing.TB, fn string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		if !bytes.Contains(buf, []byte(fn)) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutine %s still running after close", fn)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const poolDialProber = "pool.(*ConnPool).tryDial"

// Verdict builders for certainty.Classify assertions.
var (
	unavailable = func(c ratelimit.Category) certainty.Verdict {
		return certainty.Verdict{Kind: ratelimit.KindUnavailable, Category: c}
	}
	indeterminate = func(c ratelimit.Category) certainty.Verdict {
		return certainty.Verdict{Kind: ratelimit.KindIndeterminate, Category: c}
	}
)

// Realistic Redis 7.0 error replies, as redis-server sends them.
const (
	scriptSuffix = " script: 3ad0ab6a1a3a5e7e1f0b6e6c1e4b2a0a6f1e5a2b, on @user_script:57."
	msgOOM       = "OOM command not allowed when used memory > 'maxmemory'."
	msgReadOnly  = "READONLY You can't write against a read only replica."
	msgBusy      = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."
)
