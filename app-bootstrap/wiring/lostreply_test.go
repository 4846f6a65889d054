package wiring

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// faultPolicies are issue 33's policies: "orders" (a token bucket of
// ordersCapacity refilling 1 per hour, a dedup window, fail-closed) and
// "login" (a token bucket of loginCapacity refilling as much per day, so
// that no refill counts within a test, local fallback on 2 instances).
const faultPolicies = `{"policies":[
 {"id":"orders","revision":1,"algorithm":"token_bucket","capacity":1000,"refillTokens":1,"refillPeriod":"1h",
  "maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"fail-closed","dedupWindow":"10m","routes":["GET /api/v1/orders"]},
 {"id":"login","revision":1,"algorithm":"token_bucket","capacity":10,"refillTokens":10,"refillPeriod":"24h",
  "maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"local-fallback","fallbackInstances":2,"routes":["GET /api/v1/login"]}]}`

const (
	loginCapacity     = 10
	fallbackInstances = 2
	ordersPath        = "/api/v1/orders"
	loginPath         = "/api/v1/login"
	// recoveryWithin bounds the wait for the first decision after a fault:
	// the breaker's probe interval (1 s, jittered to at most 1 s) plus a
	// command timeout, with room for a loaded machine.
	recoveryWithin = 10 * time.Second
)

// faultBench is a private redis-server behind the test's own proxy and
// two service instances at the shipped defaults (every timeout, the
// breaker, pipelining and the derived evaluation deadline are the
// service's own) with faultPolicies: the setting of issue 33.
type faultBench struct {
	t        *testing.T
	rs       *redistest.Server
	proxy    *redistest.Proxy
	ins      []*Server
	dedupSHA string // the bound dedup program "orders" sends
	loginSHA string // the bound decision program "login" sends
}

func newFaultBench(t *testing.T, rs *redistest.Server) *faultBench {
	t.Helper()
	require.NoError(t, rs.Client().FlushAll(redistest.AdminCtx(t)).Err())
	b := &faultBench{t: t, rs: rs, proxy: redistest.StartProxy(t, rs.Addr())}
	file := filepath.Join(t.TempDir(), "policies.json")
	require.NoError(t, os.WriteFile(file, []byte(faultPolicies), 0o600))
	b.ins = make([]*Server, fallbackInstances)
	for i := range b.ins {
		cfg := loadConfig(t, append(enabledKV(b.proxy.Addr()), "APP_RATE_LIMIT_POLICIES_FILE", file, "APP_RATE_LIMIT_DEFAULT_POLICY", "login",
			"APP_WEB_ADMIN_ADDR", "127.0.0.2:0")...)
		if b.loginSHA == "" {
			login, ok := cfg.RateLimit.Policies.Policy("login")
			require.True(t, ok)
			bound, err := programs.Bind(login)
			require.NoError(t, err)
			b.loginSHA = bound.SHA1
			orders, ok := cfg.RateLimit.Policies.Policy("orders")
			require.True(t, ok)
			bundle, err := programs.ForPolicy(orders)
			require.NoError(t, err)
			require.True(t, bundle.HasDedup)
			b.dedupSHA = bundle.Dedup.SHA1 // bound to "orders" (ADR 0035)
		}
		app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&b.ins[i]))
		app.RequireStart()
		t.Cleanup(app.RequireStop)
	}
	return b
}

// answer is what one request got: its status and RateLimit-Remaining
// (-1 without the field).
type answer struct {
	code      int
	remaining int64
}

// get sends GET path to instance i with the header pairs kv.
func (b *faultBench) get(i int, path string, kv ...string) answer {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.ins[i%len(b.ins)].Addr()+path, nil)
	require.NoError(b.t, err)
	for j := 0; j+1 < len(kv); j += 2 {
		req.Header.Set(kv[j], kv[j+1])
	}
	resp, err := httpClient().Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	a := answer{code: resp.StatusCode, remaining: -1}
	if r := resp.Header.Get("RateLimit-Remaining"); r != "" {
		a.remaining, err = strconv.ParseInt(r, 10, 64)
		require.NoError(b.t, err, "RateLimit-Remaining %q", r)
	}
	return a
}

// admitted reports whether the limiter let the request through (the
// handler answered: no route serves these paths, so 404 or 405).
func (a answer) admitted() bool {
	return a.code != http.StatusTooManyRequests && a.code != http.StatusServiceUnavailable
}

// load sends GET loginPath from workers goroutines per instance for d (at
// most 10 000 requests each) and returns how many were admitted and sent.
func (b *faultBench) load(d time.Duration, workers int) (admitted, sent int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for w := range workers * len(b.ins) {
		wg.Go(func() {
			for i := 0; i < 10000 && time.Now().Before(end); i++ {
				a := b.get(w, loginPath)
				mu.Lock()
				sent++
				if a.admitted() {
					admitted++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return admitted, sent
}

// awaitRecovery asks "orders" on each instance in turn every 50 ms until
// Redis decides it there (admitted, with the field; each instance's
// breaker closes on its own probe), at most recoveryWithin in all, and
// returns what is left after the last.
func (b *faultBench) awaitRecovery() int64 {
	b.t.Helper()
	var last answer
	deadline := time.Now().Add(recoveryWithin)
	for i := range b.ins {
		for {
			if last = b.get(i, ordersPath); last.admitted() && last.remaining >= 0 {
				break
			}
			if !time.Now().Before(deadline) {
				require.FailNow(b.t, "no decision after the fault", "instance %d within %v; last answer %+v", i, recoveryWithin, last)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return last.remaining
}

// lostReply is the promise of ADR 0017 after whatever came before: with
// left units of "orders" left, a request with an Idempotency-Key whose
// program call's reply is lost (mode) is retried with the same ID and
// answered with its real decision (admitted, left-1), charged once (the
// other instance then sees left-2).
func (b *faultBench) lostReply(mode redistest.LossMode, key string, left int64) {
	b.t.Helper()
	lost := b.proxy.Lost()
	b.proxy.LoseNextReplyTo(mode, b.dedupSHA)
	got := b.get(0, ordersPath, "Idempotency-Key", key)
	b.proxy.Disarm()
	require.Equal(b.t, lost+1, b.proxy.Lost(), "the reply of the dedup call was lost")
	require.True(b.t, got.admitted(), "the retry answers the real decision: %+v; instance 0 reports:\n%s", got, b.retryReport(0))
	require.Equal(b.t, left-1, got.remaining, "the real decision's remaining")
	next := b.get(1, ordersPath)
	require.True(b.t, next.admitted(), "%+v", next)
	require.Equal(b.t, left-2, next.remaining, "charged once")
}

// retryReport is what instance i's /metrics says of its dedup retries and
// its breaker: the evidence of a failed retry (what the retry got).
func (b *faultBench) retryReport(i int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.ins[i].AdminAddr()+"/metrics", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := httpClient().Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "tlb_ratelimit_dedup_retr") || strings.HasPrefix(l, "tlb_ratelimit_breaker") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

var lossModes = []struct {
	name string
	mode redistest.LossMode
}{{"connection closed", redistest.LoseAndClose}, {"no reply", redistest.LoseAndHold}}

// TestLostReplyRetryAfterFaults is issue 33's sequence at the shipped
// defaults, on two instances: a fault (an outage at the proxy, which
// refuses connections and drops every open one, followed by 6 s of load
// on both instances; a Redis restart; a SCRIPT FLUSH), then the lost-reply
// step on "orders" with the connection closed and with no reply: the
// request is admitted with its real remaining and charged once.
func TestLostReplyRetryAfterFaults(t *testing.T) {
	rs := redistest.Start(t)
	faults := []struct {
		name    string
		fault   func(b *faultBench)
		recover time.Duration // load on "login" after the fault
	}{
		{"outage", func(b *faultBench) {
			b.proxy.Refuse()
			admitted, sent := b.load(2*time.Second, 4)
			require.LessOrEqual(t, admitted, fallbackInstances*(loginCapacity/fallbackInstances), "local admissions within the shares (%d sent)", sent)
			require.NoError(t, b.proxy.Accept())
		}, 6 * time.Second},
		{"restart", func(b *faultBench) { b.rs.Restart() }, time.Second},
		{"script flush", func(b *faultBench) {
			require.NoError(t, b.rs.Client().ScriptFlush(redistest.AdminCtx(t)).Err())
		}, time.Second},
	}
	for _, f := range faults {
		for _, m := range lossModes {
			t.Run(f.name+", "+m.name, func(t *testing.T) {
				b := newFaultBench(t, rs)
				require.True(t, b.get(0, ordersPath).admitted(), "warm")
				f.fault(b)
				b.load(f.recover, 4)
				left := b.awaitRecovery()
				b.lostReply(m.mode, "order-"+strconv.Itoa(int(m.mode)), left)
				assert.Zero(t, b.proxy.Lost()-1, "one reply lost in all")
			})
		}
	}
}
