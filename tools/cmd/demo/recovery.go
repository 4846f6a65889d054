package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The -fallback demo's recovery check (docs/degraded-mode.md, section 2,
// "Over-admission bound per algorithm"): a fresh client is admitted U times
// globally, Redis is refused, both instances admit it locally (A in all),
// Redis comes back with its state, and at once both instances hammer the
// client. Per fixed window the total admitted must stay within
// max(L, U + A): after recovery at most max(0, L - U - A) more.
const (
	// recoveryClient is the API key of the client the recovery check
	// follows; phase 1 never uses it.
	recoveryClient = "demo-recovery"
	// recoveryPreAdmits is U: the client's global admissions before the
	// outage, one on each instance.
	recoveryPreAdmits = 2
	// recoveryBudget is how much of the current window the sequence from
	// U to the first decisions after recovery is given: the demo waits for
	// the next window when less is left (when the window is longer than
	// the budget), so the local admissions and the decisions after
	// recovery meet in one window.
	recoveryBudget = 6 * time.Second
	// hammerWorkers is the number of goroutines per instance after
	// recovery.
	hammerWorkers = 4
	// hammerGlobal is how many global decisions (made with Redis) each
	// instance must have answered before the hammer stops.
	hammerGlobal = 10
	// hammerMaxRequests and hammerMaxTime bound the hammer per instance
	// and in all.
	hammerMaxRequests = 4000
	hammerMaxTime     = 15 * time.Second
	// hammerPause is each worker's pause between two requests (a bound
	// on the request rate while the breaker is still open; there is no
	// pause between recovery and the first request).
	hammerPause = 2 * time.Millisecond
	// pendingWait bounds the wait for tlb_ratelimit_fallback_pending to
	// return to 0 on both instances.
	pendingWait = 10 * time.Second
)

// recoveryResult is what the recovery check saw.
type recoveryResult struct {
	pre, outage, after []response
	// globalPerTarget counts the decisions after recovery made with Redis
	// (the policy's limit in RateLimit-Policy, not the share), per instance.
	globalPerTarget []int
	// pendingOutage is tlb_ratelimit_fallback_pending summed over both
	// instances at the end of the outage; pendingAfter after recovery
	// (the first reading that was 0, or the last one), pendingErr when
	// the metric could not be read.
	pendingOutage, pendingAfter float64
	pendingWaited               time.Duration
	pendingErr                  error
	restartedAt                 time.Time
}

// fallbackPhases runs phases 2 and 3 of -fallback: the outage with local
// decisions, then the recovery and its check. load is phase 1's result.
func fallbackPhases(ctx context.Context, o options, rs *redisServer, instances []*instance, load loadResult, stdout io.Writer, say func(string, ...any)) error {
	if wait := windowWait(time.Now(), o.window); wait > 0 {
		say("waiting %v for the next %v window, so that the outage and the recovery fall in one window", wait.Round(10*time.Millisecond), o.window)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	res := &recoveryResult{globalPerTarget: make([]int, len(instances))}
	say("client %s: %d requests before the outage, one per instance (U: admitted globally)", recoveryClient, recoveryPreAdmits)
	res.pre = sequential(ctx, instances, recoveryClient, recoveryPreAdmits)

	// The state survives the restart: SAVE, then stop; the restarted
	// server loads dump.rdb from its directory. Nothing writes between the
	// two: the instances are idle.
	if err := saveRedis(ctx, rs.addr); err != nil {
		return err
	}
	say("phase 2: redis-server stopped (state saved); each instance decides locally on half the limit (connection failures, then the open breaker)")
	rs.stop()
	outage, err := outageLoad(ctx, instances, recoveryClient)
	if err != nil {
		return err
	}
	res.outage = outage.responses
	res.pendingOutage, res.pendingErr = pendingSum(ctx, instances)
	printPhase2(stdout, o, outage)

	restartCtx, cancel := context.WithTimeout(ctx, redisReadyWait)
	err = rs.proc.Restart(restartCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("restart redis-server on %s: %w", rs.addr, err)
	}
	res.restartedAt = time.Now()
	say("phase 3: redis-server back on %s with its state; at once, both instances x %d goroutines send %s's requests until each instance has answered %d decisions made with Redis", rs.addr, hammerWorkers, recoveryClient, hammerGlobal)
	res.after, res.globalPerTarget = hammer(ctx, o, instances)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if res.pendingErr == nil {
		res.pendingAfter, res.pendingWaited, res.pendingErr = waitPendingZero(ctx, instances)
	}
	printPhase3(stdout, o, res)

	return errors.Join(verdict(o, load, outage), recoveryVerdict(o, res))
}

// windowWait is how long to wait at now for a window of length w that
// leaves recoveryBudget: 0 when the current one does, or when w is not
// longer than the budget (no window would).
func windowWait(now time.Time, w time.Duration) time.Duration {
	if w <= recoveryBudget {
		return 0
	}
	left := w - time.Duration(now.UnixMilli()%w.Milliseconds())*time.Millisecond
	if left >= recoveryBudget {
		return 0
	}
	return left
}

// sequential sends n requests of client, one after the other, alternating
// between the instances.
func sequential(ctx context.Context, instances []*instance, client string, n int) []response {
	httpc := &http.Client{Timeout: requestTimeout}
	defer httpc.CloseIdleConnections()
	out := make([]response, 0, n)
	for i := range n {
		t := i % len(instances)
		out = append(out, send(ctx, httpc, instances, t, client))
	}
	return out
}

func send(ctx context.Context, httpc *http.Client, instances []*instance, t int, client string) response {
	sent := time.Now()
	status, smp, err := get(ctx, httpc, "http://"+instances[t].addr+demoPath, client)
	return response{target: t, client: client, status: status, err: err, sent: sent, got: time.Now(), header: smp.header, body: smp.body}
}

// saveRedis makes the server write its dataset to dump.rdb (SAVE).
func saveRedis(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, redisReadyWait)
	defer cancel()
	if err := c.Save(ctx).Err(); err != nil {
		return fmt.Errorf("redis SAVE before the outage: %w", err)
	}
	return nil
}

// hammer sends the recovery client's requests from hammerWorkers
// goroutines per instance, with no pause before the first, until every
// instance has answered hammerGlobal decisions made with Redis, or the
// bounds end it. It returns every response and the global decisions per
// instance.
func hammer(ctx context.Context, o options, instances []*instance) ([]response, []int) {
	reqCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, hammerMaxTime)
	defer cancel()
	httpc := &http.Client{
		Timeout:   requestTimeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: hammerWorkers, DisableCompression: true},
	}
	defer httpc.CloseIdleConnections()
	var (
		mu     sync.Mutex
		out    []response
		global = make([]int, len(instances))
		sent   = make([]int, len(instances))
		wg     sync.WaitGroup
	)
	for t := range instances {
		for range hammerWorkers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					mu.Lock()
					if global[t] >= hammerGlobal || sent[t] >= hammerMaxRequests {
						mu.Unlock()
						return
					}
					sent[t]++
					mu.Unlock()
					// The bound stops sending, never a request in flight:
					// every request sent is counted.
					r := send(reqCtx, httpc, instances, t, recoveryClient)
					mu.Lock()
					out = append(out, r)
					if q, _, ok := rateLimitFields(r); ok && q == o.limit {
						global[t]++
					}
					mu.Unlock()
					select {
					case <-time.After(hammerPause):
					case <-ctx.Done():
					}
				}
			}()
		}
	}
	wg.Wait()
	return out, global
}

func instanceName(t int) string { return string(rune('A' + t)) }

// pendingSum reads tlb_ratelimit_fallback_pending from both instances'
// /metrics (the public port: the demo sets no APP_WEB_ADMIN_ADDR) and
// returns the sum over every policy.
func pendingSum(ctx context.Context, instances []*instance) (float64, error) {
	httpc := &http.Client{Timeout: requestTimeout}
	defer httpc.CloseIdleConnections()
	sum := 0.0
	for t, in := range instances {
		v, err := metricSum(ctx, httpc, "http://"+in.addr+"/metrics", "tlb_ratelimit_fallback_pending")
		if err != nil {
			return 0, fmt.Errorf("instance %s: %w", instanceName(t), err)
		}
		sum += v
	}
	return sum, nil
}

// waitPendingZero polls pendingSum until it is 0, for at most pendingWait.
func waitPendingZero(ctx context.Context, instances []*instance) (float64, time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, pendingWait)
	defer cancel()
	for {
		v, err := pendingSum(ctx, instances)
		if err != nil || v == 0 {
			return v, time.Since(start), err
		}
		select {
		case <-ctx.Done():
			return v, time.Since(start), nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// metricSum returns the sum of every sample of the metric name in a
// Prometheus text exposition at url; a metric that is absent is an error.
func metricSum(ctx context.Context, c *http.Client, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	sum, found := 0.0, false
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: sample %q: %w", name, line, err)
		}
		sum, found = sum+v, true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%s: no sample at %s", name, url)
	}
	return sum, nil
}

func printPhase3(w io.Writer, o options, res *recoveryResult) {
	fmt.Fprintf(w, "\nPhase 3: redis-server back, %s hammered from both instances at once\n\n", recoveryClient)
	type row struct{ requests, local, global, admitted, failClosed, other int }
	rows := make([]row, len(res.globalPerTarget))
	categories := map[string]int{}
	for _, r := range res.after {
		rw := &rows[r.target]
		rw.requests++
		q, _, ok := rateLimitFields(r)
		switch {
		case r.err != nil:
			rw.other++
		case r.status == http.StatusServiceUnavailable:
			rw.failClosed++
			categories[problemCategory(r.body)]++
		case !ok:
			rw.other++
		case q == o.limit:
			rw.global++
		default:
			rw.local++
		}
		if r.err == nil && r.status == http.StatusOK {
			rw.admitted++
		}
	}
	fmt.Fprintf(w, "  %-30s %12s %12s\n", "", "instance A", "instance B")
	for _, l := range []struct {
		label string
		f     func(row) int
	}{
		{"requests", func(r row) int { return r.requests }},
		{"decided locally (breaker open)", func(r row) int { return r.local }},
		{"decided with Redis", func(r row) int { return r.global }},
		{"admitted (200)", func(r row) int { return r.admitted }},
		{"fail-closed (503)", func(r row) int { return r.failClosed }},
		{"other / errors", func(r row) int { return r.other }},
	} {
		fmt.Fprintf(w, "  %-30s %12d %12d\n", l.label, l.f(rows[0]), l.f(rows[1]))
	}
	if len(categories) > 0 {
		fmt.Fprintf(w, "\n  503 by category: %v\n", categories)
	}
	windows, err := tallyWindows(o, res)
	fmt.Fprintf(w, "\n  %s per %v window: U admitted before the outage, A admitted locally, R admitted after recovery\n", recoveryClient, o.window)
	fmt.Fprintf(w, "  %-10s %4s %4s %4s %24s %8s\n", "window", "U", "A", "R", "bound on R", "holds")
	for _, k := range sortedWindows(windows) {
		t := windows[k]
		b := t.bound(o.limit)
		fmt.Fprintf(w, "  %-10s %4d %4d %4d %24s %8s\n", windowStart(k, o.window), t.pre, t.local, t.after,
			fmt.Sprintf("max(0, %d-%d-%d) = %d", o.limit, t.pre, t.local, b), yesNo(int64(t.after) <= b))
	}
	if err != nil {
		fmt.Fprintf(w, "  (not placed in a window: %v)\n", err)
	}
	fmt.Fprintf(w, "\n  tlb_ratelimit_fallback_pending (both instances): %v at the end of the outage, %v %v after the hammer\n",
		res.pendingOutage, res.pendingAfter, res.pendingWaited.Round(10*time.Millisecond))
	fmt.Fprintf(w, "\n  The first decision of each instance after recovery carries, in the same round trip, the\n"+
		"  charge of its local admissions and the other instance's share (reserved: it cannot know what\n"+
		"  the other admitted), so no decision made with Redis counts less than the whole fleet may have\n"+
		"  admitted. Charging only its own admissions, an instance would see U + its half of A and admit\n"+
		"  up to L - U - A/2 more (the issue 20 measurement: 3 more on L 10, U 2, A 10).\n\n")
}
