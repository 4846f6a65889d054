package ratecarry_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/changetest"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratecarry"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The limits of the tests: a small old limit and a larger new one, over an
// hour, so that what either adds during a test (well under a minute) is a
// fraction of a unit; the tests still bound it (adds, on the server's
// clock).
const (
	smallLimit = 5
	largeLimit = 20
	period     = time.Hour
)

// roundingSlack is how many units the carry may count above what was
// admitted (rateplan's tests explain it): the Carrier reads the server's
// TIME to the millisecond (floored), while GCRA and the leaky bucket decide
// on its microsecond, so a state admitted earlier in the same millisecond
// can read as one more unit in use. It only under-admits.
const roundingSlack = 1

// The shared kit (internal/changetest) under this package's names.
var (
	algorithms       = changetest.Algorithms
	randomSubject    = changetest.RandomSubject
	clientAt         = changetest.ClientAt
	deadAddr         = changetest.DeadAddr
	ask              = changetest.Ask
	admitted         = changetest.Admitted
	countUntilDenied = changetest.CountUntilDenied
	serverMillis     = changetest.ServerMillis
	adds             = changetest.Adds
)

// algorithmNamed is the algorithm named name.
var algorithmNamed = changetest.Named

// policy is an enforced, fail-closed, subject-scoped policy of cost 1 at
// revision rev.
func policy(t testing.TB, id ratelimit.PolicyID, rev int64, params ratelimit.Params) ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: id, Revision: rev, Algorithm: params.Algorithm(), Params: params, MaxCost: 1,
		CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.FailClosed})
	require.NoError(t, err)
	return p
}

// provider builds and starts a provider over c (closed at cleanup).
var provider = changetest.Provider

// observed records a Carrier's Observe calls; safe for concurrent use.
type observed struct {
	mu  sync.Mutex
	got []observation
}

type observation struct {
	policy ratelimit.PolicyID
	result ratecarry.Result
}

func (o *observed) observe(id ratelimit.PolicyID, r ratecarry.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, observation{id, r})
}

// all is every observation so far, in order.
func (o *observed) all() []observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]observation(nil), o.got...)
}

// count is how many observations of id had result r.
func (o *observed) count(id ratelimit.PolicyID, r ratecarry.Result) int {
	n := 0
	for _, ob := range o.all() {
		if ob.policy == id && ob.result == r {
			n++
		}
	}
	return n
}

// carrier builds a Carrier over inner with client and one predecessor per
// pair (current, predecessor), observed by obs.
func carrier(t testing.TB, inner ratecarry.Inner, client redis.UniversalClient, keys *keyspace.Builder, obs *observed, pairs ...[2]ratelimit.Policy) *ratecarry.Carrier {
	t.Helper()
	opts := ratecarry.Options{Client: client, Keys: keys, Predecessors: map[ratelimit.PolicyID]ratelimit.Policy{}, Observe: obs.observe}
	for _, p := range pairs {
		opts.Policies = append(opts.Policies, p[0])
		opts.Predecessors[p[0].ID()] = p[1]
	}
	c, err := ratecarry.New(inner, opts)
	require.NoError(t, err)
	return c
}

// scriptCounter is a go-redis hook counting the commands a client sends
// (pipelined ones included); safe for concurrent use.
type scriptCounter struct{ n atomic.Int64 }

func (h *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// stubInner is an Inner for the options' tests: New never calls it.
type stubInner struct{ ratecarry.Inner }
