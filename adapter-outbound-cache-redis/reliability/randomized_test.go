package reliability_test

import (
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestRandomizedFaultRuns: 1000 single-request runs, each under a random
// fast toxic (none, RST either way, the connection cut after a random
// number of bytes either way, sliced replies). Per run, from INFO
// commandstats and the state key: an Unavailable call never ran, an
// Evaluated call ran exactly once, an Indeterminate call ran at most once,
// and the state moved by exactly the calls that ran. Over all runs the
// admitted units never exceed the limit.
func TestRandomizedFaultRuns(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	proxy := startProxy(t, srv.Addr())
	keys := randomKeys(t)
	const runs, limit = 1000, 300 // the limit is reached part-way
	pol := mustPolicy(t, "r-rand", ratelimit.FixedWindow{Limit: limit, Window: time.Hour}, 1)
	p := newProvider(t, clientConfig(proxy.Listen, faultTimeout, 2), keys, pol)
	subject := randomSubject(t)
	rng := mrand.New(mrand.NewPCG(2026, 12))
	kinds := map[ratelimit.OutcomeKind]int{}
	var allowed, ranIndeterminate int64
	resetStats(t, admin)
	prevCalls, prevCount := 0, int64(0)
	deadline := time.Now().Add(2 * time.Minute)
	for run := 0; run < runs; run++ {
		require.True(t, time.Now().Before(deadline), "bounded in time: %d runs done", run)
		js := randomToxic(rng, 60, 260)
		remove := func() {}
		if js != "" {
			remove = addToxic(t, proxy, js)
		}
		out := ask(p, pol.ID(), subject, 1)
		remove()
		kinds[out.Kind()]++
		c, count := serverCount(t, admin, keys, pol, subject, out.Kind() == ratelimit.KindIndeterminate)
		ran, moved := c-prevCalls, count-prevCount
		switch out.Kind() {
		case ratelimit.KindEvaluated:
			require.Equal(t, 1, ran, "run %d (%s): evaluated ran once", run, js)
			if ratelimit.Admitted(out) {
				allowed++
				require.Equal(t, int64(1), moved, "run %d (%s): an admit consumed one unit", run, js)
			} else {
				require.Zero(t, moved, "run %d (%s): a denial consumed nothing", run, js)
				require.Equal(t, int64(limit), count, "run %d (%s): denied only at the limit", run, js)
			}
		case ratelimit.KindUnavailable:
			require.Equal(t, 0, ran, "run %d (%s): %v ran", run, js, out)
			require.Zero(t, moved, "run %d (%s): %v moved the state", run, js, out)
		case ratelimit.KindIndeterminate:
			require.LessOrEqual(t, ran, 1, "run %d (%s): re-sent", run, js)
			require.LessOrEqual(t, moved, int64(ran), "run %d (%s)", run, js)
			ranIndeterminate += moved
		default:
			t.Fatalf("run %d (%s): %v", run, js, out)
		}
		prevCalls, prevCount = c, count
	}
	assert.LessOrEqual(t, prevCount, int64(limit), "never beyond the limit")
	assert.Equal(t, allowed+ranIndeterminate, prevCount, "every consumed unit is an admit or an indeterminate call that ran")
	assert.Equal(t, int64(limit), prevCount, "the limit was reached")
	assert.Positive(t, kinds[ratelimit.KindIndeterminate])
	assert.Positive(t, kinds[ratelimit.KindEvaluated])
	t.Logf("%d runs: %v; admitted %d, consumed by indeterminate calls %d, consumed %d (limit %d)", runs, kinds, allowed, ranIndeterminate, prevCount, limit)
}

// randomToxic draws one fast toxic as toxiproxy JSON, or "" for none: a
// reset on either stream, a cut after a random number of bytes (below
// downBytes of the reply, upBytes of the command) or a reply sliced slowly.
func randomToxic(rng *mrand.Rand, downBytes, upBytes int) string {
	switch rng.IntN(6) {
	case 0:
		return ""
	case 1:
		return `{"type":"reset_peer","stream":"downstream","attributes":{"timeout":0}}`
	case 2:
		return `{"type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`
	case 3:
		return fmt.Sprintf(`{"type":"limit_data","stream":"downstream","attributes":{"bytes":%d}}`, rng.IntN(downBytes))
	case 4:
		return fmt.Sprintf(`{"type":"limit_data","stream":"upstream","attributes":{"bytes":%d}}`, rng.IntN(upBytes))
	default:
		return `{"type":"tlb_slicer","stream":"downstream","attributes":{"average_size":3,"size_variation":2,"delay":50}}`
	}
}

// serverCount returns the program calls the server ran (EVALSHA + EVAL)
// and the units subject's state holds, the state first: a call whose write
// is seen is then always counted. With settle (after an Indeterminate
// outcome, whose frame may still be on its way through the proxy and, in
// the container lane, docker's) it waits, at most 2 s, until neither moves.
func serverCount(t *testing.T, admin *redis.Client, keys *keyspace.Builder, pol ratelimit.Policy, subject ratelimit.SubjectDigest, settle bool) (int, int64) {
	t.Helper()
	snapshot := func() (int, int64) {
		count, _ := consumed(t, admin, keys, pol, subject)
		return calls(t, admin, "evalsha") + calls(t, admin, "eval"), count
	}
	c, count := snapshot()
	for until := time.Now().Add(2 * time.Second); settle && time.Now().Before(until); {
		time.Sleep(50 * time.Millisecond)
		c2, count2 := snapshot()
		if c2 == c && count2 == count {
			break
		}
		c, count = c2, count2
	}
	return c, count
}
