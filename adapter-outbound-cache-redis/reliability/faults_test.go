package reliability_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestToxicResetAfterWrite: the proxy answers the written request with a
// TCP RST (upstream reset_peer) before forwarding it. Indeterminate: the
// client cannot know the server never got it; the key is unchanged and
// nothing is re-sent.
func TestToxicResetAfterWrite(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	proxy := startProxy(t, srv.Addr())
	keys := randomKeys(t)
	pols := hourPolicies(t)
	p := newProvider(t, clientConfig(proxy.Listen, faultTimeout, 4), keys, pols...)
	for _, pol := range pols {
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			require.True(t, ratelimit.Admitted(ask(p, pol.ID(), randomSubject(t), 1)), "warm connection")
			subject := randomSubject(t)
			resetStats(t, admin)
			remove := addToxic(t, proxy, `{"type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`)
			out := ask(p, pol.ID(), subject, 2)
			remove()
			assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
			assert.Equal(t, ratelimit.CategoryConnectionLost, ratelimit.CategoryOf(out), "%v", out)
			time.Sleep(50 * time.Millisecond)
			assert.Equal(t, 0, calls(t, admin, "evalsha")+calls(t, admin, "eval"), "nothing reached the server, nothing re-sent")
			_, ok := consumed(t, admin, keys, pol, subject)
			assert.False(t, ok, "key unchanged (absent)")
		})
	}
}

// TestToxicSlicedFramesSameDecisions: frames sliced to ~1 byte with delays,
// or throttled bandwidth, but within the command timeout: the decisions are
// exactly those of a clean run (direct to the server) of the same sequence.
func TestToxicSlicedFramesSameDecisions(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	proxy := startProxy(t, srv.Addr())
	tests := []struct {
		name   string
		toxics []string
	}{
		{"slicer 1B/100us both ways", []string{
			`{"name":"sd","type":"tlb_slicer","stream":"downstream","attributes":{"average_size":1,"size_variation":0,"delay":100}}`,
			`{"name":"su","type":"tlb_slicer","stream":"upstream","attributes":{"average_size":1,"size_variation":0,"delay":100}}`,
		}},
		{"bandwidth 2 KB/s both ways", []string{
			`{"name":"bd","type":"bandwidth","stream":"downstream","attributes":{"rate":2}}`,
			`{"name":"bu","type":"bandwidth","stream":"upstream","attributes":{"rate":2}}`,
		}},
	}
	costs := []int64{1, 2, 1, 3, 1, 1}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys := randomKeys(t)
			pols := hourPolicies(t)
			cfg := clientConfig(proxy.Listen, 2*time.Second, 4)
			faulty := newProvider(t, cfg, keys, pols...)
			clean := newProvider(t, clientConfig(srv.Addr(), 2*time.Second, 4), keys, pols...)
			for _, js := range tt.toxics {
				addToxic(t, proxy, js)
			}
			resetStats(t, admin)
			n := 0
			for _, pol := range pols {
				sf, sc := randomSubject(t), randomSubject(t)
				for i, c := range costs {
					of, oc := ask(faulty, pol.ID(), sf, c), ask(clean, pol.ID(), sc, c)
					n += 2
					require.Equal(t, ratelimit.KindEvaluated, of.Kind(), "%s step %d: %v", pol.ID(), i, of)
					require.Equal(t, ratelimit.KindEvaluated, oc.Kind(), "%s step %d: %v", pol.ID(), i, oc)
					df, dc := of.(ratelimit.Evaluated).Decision, oc.(ratelimit.Evaluated).Decision
					assert.Equal(t, dc.Allowed, df.Allowed, "%s step %d", pol.ID(), i)
					assert.Equal(t, dc.Remaining, df.Remaining, "%s step %d", pol.ID(), i)
				}
			}
			assert.Equal(t, n, calls(t, admin, "evalsha"), "one call per decision")
		})
	}
}

// TestClientPauseWriteIsIndeterminate: CLIENT PAUSE WRITE longer than the
// command timeout. What reached the server: the whole EVALSHA frame; Redis
// postpones it (a #!lua script without no-writes is a write command). The
// client sees only its read timeout: Indeterminate{timeout}. go-redis then
// closes that connection, and Redis discards the postponed command of a
// closed client: after the pause the key is still absent and evalsha has 0
// calls. (Had the connection stayed open, it would have run at the end of
// the pause; either way Indeterminate is the only honest answer.)
func TestClientPauseWriteIsIndeterminate(t *testing.T) {
	srv := redistest.Start(t)
	ownServer(t, srv)
	admin := srv.Client()
	keys := randomKeys(t)
	pols := hourPolicies(t)
	p := newProvider(t, clientConfig(srv.Addr(), faultTimeout, 4), keys, pols...)
	for _, pol := range pols {
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			require.True(t, ratelimit.Admitted(ask(p, pol.ID(), randomSubject(t), 1)), "warm connection")
			subject := randomSubject(t)
			resetStats(t, admin)
			pause := 4 * faultTimeout
			require.NoError(t, admin.Do(redistest.AdminCtx(t), "CLIENT", "PAUSE", strconv.FormatInt(pause.Milliseconds(), 10), "WRITE").Err())
			t.Cleanup(func() { _ = admin.Do(context.Background(), "CLIENT", "UNPAUSE").Err() })
			out := ask(p, pol.ID(), subject, 2)
			assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
			assert.Equal(t, ratelimit.CategoryTimeout, ratelimit.CategoryOf(out), "%v", out)
			_, ok := consumed(t, admin, keys, pol, subject)
			assert.False(t, ok, "still queued while paused")
			// go-redis closed the timed-out connection; Redis drops a
			// postponed command of a client that disconnects, so once the
			// pause is over the call has still not run.
			time.Sleep(pause)
			_, ok = consumed(t, admin, keys, pol, subject)
			assert.False(t, ok, "the postponed call died with its connection")
			assert.Equal(t, 0, calls(t, admin, "evalsha"), "and was never re-sent")
			assert.True(t, ratelimit.Admitted(ask(p, pol.ID(), subject, 1)), "the server serves again after the pause")
		})
	}
}

// fakeOldRedis is a tiny RESP server that claims redis_version:6.0.0. It
// answers HELLO with an error (go-redis falls back to RESP2), PING, INFO;
// every other command is recorded and refused.
type fakeOldRedis struct {
	ln    net.Listener
	mu    sync.Mutex
	other []string
	wg    sync.WaitGroup
}

func startFakeOldRedis(t *testing.T) *fakeOldRedis {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeOldRedis{ln: ln}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				f.serve(c)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); f.wg.Wait() })
	return f
}

func (f *fakeOldRedis) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		var reply string
		switch strings.ToUpper(args[0]) {
		case "HELLO":
			reply = "-ERR unknown command 'HELLO'\r\n"
		case "PING":
			reply = "+PONG\r\n"
		case "INFO":
			body := "# Server\r\nredis_version:6.0.0\r\nredis_mode:standalone\r\n"
			reply = fmt.Sprintf("$%d\r\n%s\r\n", len(body), body)
		default:
			f.mu.Lock()
			f.other = append(f.other, strings.ToUpper(args[0]))
			f.mu.Unlock()
			reply = "-ERR not a real redis\r\n"
		}
		if _, err := io.WriteString(c, reply); err != nil {
			return
		}
	}
}

func (f *fakeOldRedis) others() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.other...)
}

// readCommand reads one RESP array of bulk strings (what clients send).
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, errors.New("not an array")
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 || n > 64 {
		return nil, errors.New("bad array length")
	}
	args := make([]string, 0, n)
	for range n {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		l, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(hdr, "$")))
		if err != nil || l < 0 || l > 1<<20 {
			return nil, errors.New("bad bulk length")
		}
		buf := make([]byte, l+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args = append(args, string(buf[:l]))
	}
	return args, nil
}

// TestOldServerVersionIsIncompatible: a server older than the manifest's
// minimum (7.0.0), faked by a RESP server answering INFO server with
// redis_version:6.0.0. Start returns ErrServerVersion, Evaluate answers
// Incompatible{server_version} and never sends a program call.
func TestOldServerVersionIsIncompatible(t *testing.T) {
	fake := startFakeOldRedis(t)
	cfg := clientConfig(fake.ln.Addr().String(), faultTimeout, 2)
	client, err := redisrate.NewClient(cfg)
	require.NoError(t, err)
	p, err := redisrate.New(client, randomKeys(t), hourPolicies(t), redisrate.Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = p.Start(ctx)
	require.ErrorIs(t, err, redisrate.ErrServerVersion)
	assert.Contains(t, err.Error(), "6.0.0")
	require.ErrorIs(t, p.Ready(ctx), redisrate.ErrServerVersion)
	for _, pol := range hourPolicies(t) {
		out := ask(p, pol.ID(), randomSubject(t), 1)
		assert.Equal(t, ratelimit.KindIncompatible, out.Kind(), "%v", out)
		assert.Equal(t, ratelimit.CategoryServerVersion, ratelimit.CategoryOf(out), "%v", out)
	}
	assert.Empty(t, fake.others(), "no SCRIPT LOAD, EVALSHA or EVAL reached the old server")
}

// TestRestartMidLoadNoGoroutineLeak: 16 goroutines evaluate while the
// server is restarted; the provider recovers by itself, never admits on a
// failure, and after Close no goroutine is left (goleak).
func TestRestartMidLoadNoGoroutineLeak(t *testing.T) {
	srv := redistest.Start(t)
	srv.Require(t, redistest.CapRestart)
	before := goleak.IgnoreCurrent()
	pol := mustPolicy(t, "r-load", ratelimit.FixedWindow{Limit: 1 << 20, Window: time.Hour}, 1)
	cfg := clientConfig(srv.Addr(), faultTimeout, 16)
	client, err := redisrate.NewClient(cfg)
	require.NoError(t, err)
	p, err := redisrate.New(client, randomKeys(t), []ratelimit.Policy{pol}, redisrate.Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	subject := randomSubject(t)
	var (
		stop                   atomic.Bool
		evaluated, failed, bad atomic.Int64
		wg                     sync.WaitGroup
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5000 && !stop.Load(); i++ {
				out := ask(p, pol.ID(), subject, 1)
				switch {
				case out.Kind() == ratelimit.KindEvaluated:
					evaluated.Add(1)
				case ratelimit.Admitted(out):
					bad.Add(1)
				default:
					failed.Add(1)
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	srv.Restart()
	afterRestart := evaluated.Load()
	require.Eventually(t, func() bool { return evaluated.Load() > afterRestart+100 }, 10*time.Second, 20*time.Millisecond, "the provider recovers without a rebuild")
	stop.Store(true)
	wg.Wait()
	assert.Zero(t, bad.Load())
	assert.Positive(t, failed.Load(), "the restart was felt")
	t.Logf("evaluated %d, failed (unavailable/indeterminate) %d", evaluated.Load(), failed.Load())
	require.NoError(t, p.Close())
	// go-redis's dial prober notices Close only after its 1 s sleep.
	deadline := time.Now().Add(5 * time.Second)
	// The restarted server's reaper goroutine belongs to redistest (it ends
	// at the server's cleanup), not to the provider.
	reaper := goleak.IgnoreAnyFunction("github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver.(*Process).Start.func1")
	leakErr := goleak.Find(before, reaper)
	for leakErr != nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		leakErr = goleak.Find(before, reaper)
	}
	require.NoError(t, leakErr, "goroutines left after Close")
}
