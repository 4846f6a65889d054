package reliability_test

// The fault lane with pipelined program calls (redisrate
// Options.PipelineMaxBatch; docs/adr/0012-pipelined-program-calls.md): a
// batch cut mid-frame and after its write, and randomized fault runs with
// concurrent callers. The server's INFO commandstats count the commands
// that ran; the state keys hold what they did.

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// newPipelinedProvider is newProvider with batching on: MaxInFlight
// maxInFlight, PipelineMaxBatch maxBatch.
func newPipelinedProvider(t testing.TB, cfg redisrate.ClientConfig, maxInFlight, maxBatch int, keys *keyspace.Builder, policies ...ratelimit.Policy) *redisrate.Provider {
	t.Helper()
	client, err := redisrate.NewClient(cfg)
	require.NoError(t, err)
	p, err := redisrate.New(client, keys, policies, redisrate.Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: maxInFlight, PipelineMaxBatch: maxBatch})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	return p
}

// replyLen is the RESP2 length of a program reply of these integers.
func replyLen(v []any) int {
	n := len("*" + strconv.Itoa(len(v)) + "\r\n")
	for _, x := range v {
		n += len(":" + strconv.FormatInt(x.(int64), 10) + "\r\n")
	}
	return n
}

// TestToxicPipelinedBatchCut: call A holds the provider's only connection
// turn (the server is paused for writes, so A's EVALSHA waits there), three
// calls queue behind it, a toxic is added, the server resumes: A is
// answered and the three go as one batch, into the toxic.
//   - upstream cut 24 bytes into the batch (mid-frame): no command of the
//     batch is complete, none ran; each is Indeterminate (it was written).
//   - downstream cut just after A's reply (the batch was written and ran,
//     its replies are lost): each is Indeterminate, each ran exactly once.
//
// calls on the server = commands that ran, never one more.
func TestToxicPipelinedBatchCut(t *testing.T) {
	srv := redistest.Start(t)
	ownServer(t, srv) // pauses the server
	admin := srv.Client()
	proxy := startProxy(t, srv.Addr())
	pol := hourPolicies(t)[0]
	prog, err := programs.Bind(pol) // what the provider sends (ADR 0030)
	require.NoError(t, err)
	tests := []struct {
		name  string
		toxic func(aReply int) string
		ran   bool
	}{
		{"upstream cut mid-frame", func(int) string {
			return `{"type":"limit_data","stream":"upstream","attributes":{"bytes":24}}`
		}, false},
		{"downstream cut after the batch's write", func(aReply int) string {
			return fmt.Sprintf(`{"type":"limit_data","stream":"downstream","attributes":{"bytes":%d}}`, aReply+5)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys := randomKeys(t)
			// One turn (MaxInFlight = PipelineMaxBatch = 4), so the three
			// queue behind A and go on A's connection.
			p := newPipelinedProvider(t, clientConfig(proxy.Listen, 2*time.Second, 4), 4, 4, keys, pol)
			// The length of A's reply: the same call on a fresh key.
			scratch, err := redisrate.StateKey(keys, pol, randomSubject(t))
			require.NoError(t, err)
			v, err := admin.Eval(redistest.AdminCtx(t), prog.Source, []string{scratch}, programs.BoundArgs(pol, 1)...).Slice()
			require.NoError(t, err)
			resetStats(t, admin)

			require.NoError(t, admin.Do(redistest.AdminCtx(t), "client", "pause", "30000", "write").Err())
			t.Cleanup(func() { _ = admin.Do(context.Background(), "client", "unpause").Err() })
			subjects := []ratelimit.SubjectDigest{randomSubject(t), randomSubject(t), randomSubject(t), randomSubject(t)}
			outs := make([]ratelimit.Outcome, len(subjects))
			var wg sync.WaitGroup
			start := func(i int) {
				wg.Add(1)
				go func() { defer wg.Done(); outs[i] = ask(p, pol.ID(), subjects[i], 1) }()
			}
			start(0)
			waitFor(t, "A held by the paused server", 10*time.Second, func() error { return expect("blocked clients", infoInt(t, admin, "clients", "blocked_clients"), 1) })
			for i := 1; i < len(subjects); i++ {
				start(i)
				waitFor(t, "call queued", 10*time.Second, func() error { return expect("queued calls", p.PipelineStats().Queued, i) })
			}
			remove := addToxic(t, proxy, tt.toxic(replyLen(v)))
			require.NoError(t, admin.Do(redistest.AdminCtx(t), "client", "unpause").Err())
			wg.Wait()
			remove()

			require.True(t, ratelimit.Admitted(outs[0]), "A: %v", outs[0])
			for i, out := range outs[1:] {
				assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "call %d: %v", i, out)
				var ce *redisrate.CallError
				if assert.ErrorAs(t, out.(ratelimit.Indeterminate).Cause, &ce) {
					assert.True(t, ce.Written)
				}
			}
			st := p.PipelineStats()
			assert.Equal(t, int64(1), st.Batches)
			assert.Equal(t, int64(3), st.Calls)

			wantCalls := 1
			if tt.ran {
				wantCalls = 4
			}
			// A command in flight through the proxy: wait (bounded) until
			// the count reaches what ran, then check it stays there.
			waitFor(t, "commands counted", 10*time.Second, func() error { return expect("evalsha calls", min(calls(t, admin, "evalsha"), wantCalls), wantCalls) })
			time.Sleep(100 * time.Millisecond)
			assert.Equal(t, wantCalls, calls(t, admin, "evalsha"), "calls = commands that ran")
			assert.Zero(t, calls(t, admin, "eval"), "nothing re-sent")
			for i, s := range subjects[1:] {
				c, ok := consumed(t, admin, keys, pol, s)
				if tt.ran {
					assert.True(t, ok && c == 1, "call %d ran exactly once: %d", i, c)
				} else {
					assert.False(t, ok, "call %d never ran", i)
				}
			}
		})
	}
}

// TestRandomizedFaultRunsPipelined: 300 runs, each of 1..8 concurrent
// calls on one subject under a random fast toxic, with batching on (two
// turns, at most 4 calls per batch). Per run, from INFO commandstats and
// the state key: the commands that ran are at least the Evaluated calls
// and at most those plus the Indeterminate ones (an Unavailable call never
// ran, none ran twice), and the state moved by the admitted units plus at
// most the Indeterminate calls that ran. Over all runs the admitted units
// never exceed the limit, and batches were written.
func TestRandomizedFaultRunsPipelined(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	proxy := startProxy(t, srv.Addr())
	keys := randomKeys(t)
	const runs, limit = 300, 500 // the limit is reached part-way
	pol := mustPolicy(t, "r-rand-pipe", ratelimit.FixedWindow{Limit: limit, Window: time.Hour}, 1)
	p := newPipelinedProvider(t, clientConfig(proxy.Listen, faultTimeout, 8), 8, 4, keys, pol)
	subject := randomSubject(t)
	rng := mrand.New(mrand.NewPCG(2026, 13))
	kinds := map[ratelimit.OutcomeKind]int{}
	var allowed, totalCalls int
	resetStats(t, admin)
	prevCalls, prevCount := 0, int64(0)
	deadline := time.Now().Add(3 * time.Minute)
	for run := 0; run < runs; run++ {
		require.True(t, time.Now().Before(deadline), "bounded in time: %d runs done", run)
		js := randomToxic(rng, 300, 1000)
		remove := func() {}
		if js != "" {
			remove = addToxic(t, proxy, js)
		}
		n := 1 + rng.IntN(8)
		outs := make([]ratelimit.Outcome, n)
		var wg sync.WaitGroup
		for i := range outs {
			wg.Add(1)
			go func() { defer wg.Done(); outs[i] = ask(p, pol.ID(), subject, 1) }()
		}
		wg.Wait()
		remove()
		var evaluated, admitted, indeterminate int
		for _, out := range outs {
			kinds[out.Kind()]++
			switch out.Kind() {
			case ratelimit.KindEvaluated:
				evaluated++
				if ratelimit.Admitted(out) {
					admitted++
				}
			case ratelimit.KindIndeterminate:
				indeterminate++
			case ratelimit.KindUnavailable:
			default:
				t.Fatalf("run %d (%s): %v", run, js, out)
			}
		}
		totalCalls += n
		allowed += admitted
		c, count := serverCount(t, admin, keys, pol, subject, indeterminate > 0)
		ran, moved := c-prevCalls, count-prevCount
		require.GreaterOrEqual(t, ran, evaluated, "run %d (%s, %d calls): every Evaluated call ran", run, js, n)
		require.LessOrEqual(t, ran, evaluated+indeterminate, "run %d (%s, %d calls): only Evaluated and Indeterminate calls ran, each at most once", run, js, n)
		require.GreaterOrEqual(t, moved, int64(admitted), "run %d (%s): every admit consumed", run, js)
		require.LessOrEqual(t, moved, int64(admitted+ran-evaluated), "run %d (%s): beyond the admits only Indeterminate calls that ran consumed", run, js)
		require.LessOrEqual(t, count, int64(limit), "run %d (%s): never beyond the limit", run, js)
		prevCalls, prevCount = c, count
	}
	st := p.PipelineStats()
	assert.Positive(t, st.Batches, "batches were written")
	assert.Positive(t, kinds[ratelimit.KindIndeterminate])
	assert.Positive(t, kinds[ratelimit.KindEvaluated])
	assert.Equal(t, int64(limit), prevCount, "the limit was reached")
	t.Logf("%d runs, %d calls: %v; admitted %d, consumed %d (limit %d); %d batches carried %d calls", runs, totalCalls, kinds, allowed, prevCount, limit, st.Batches, st.Calls)
}
