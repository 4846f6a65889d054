package main_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// Edge hardening black-box tests (issue 21 items 2-5): the binary, env and
// HTTP only.

// logAddr waits (bounded) for the log line whose msg is msg and returns its
// "addr" attribute.
func logAddr(t *testing.T, in *instance, msg string) string {
	t.Helper()
	deadline := time.Now().Add(startWait)
	for {
		in.mu.Lock()
		for _, line := range in.lines {
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg && rec.Addr != "" {
				in.mu.Unlock()
				return rec.Addr
			}
		}
		in.mu.Unlock()
		require.True(t, time.Now().Before(deadline), "no %q log line within %v\n%s", msg, startWait, in.logs())
		time.Sleep(20 * time.Millisecond)
	}
}

// countLines is how many log lines contain every one of parts.
func countLines(in *instance, parts ...string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
next:
	for _, line := range in.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		n++
	}
	return n
}

// TestE2EAdminListener: with APP_WEB_ADMIN_ADDR set, /metrics and the
// detailed readiness document are on the admin port only; the public
// /readyz says ready without server detail; SIGTERM stops both listeners
// gracefully. Without it, today's behaviour with a warning line.
func TestE2EAdminListener(t *testing.T) {
	rs := redistest.Start(t)
	in := startInstance(t, append(enabledEnv(t, rs.Addr()), "APP_WEB_ADMIN_ADDR=127.0.0.1:0"))
	admin := logAddr(t, in, "admin listening")
	require.NotEqual(t, in.addr, admin)
	adminURL := func(path string) string { return "http://" + admin + path }

	assert.Equal(t, http.StatusOK, call(t, http.MethodGet, in.url("/api/v1/ping")).status)
	pub := call(t, http.MethodGet, in.url("/metrics"))
	assert.Equal(t, http.StatusNotFound, pub.status, "no /metrics on the public port")
	assert.NotContains(t, pub.body, "tlb_")
	m := call(t, http.MethodGet, adminURL("/metrics"))
	assert.Equal(t, http.StatusOK, m.status)
	assert.Contains(t, m.body, "tlb_edge_responses_total", "the admin port serves the service's metrics")

	ready := call(t, http.MethodGet, in.url("/readyz"))
	assert.Equal(t, http.StatusOK, ready.status)
	assert.Equal(t, "ready\n", ready.body, "the public /readyz says ready, nothing more")
	for _, detail := range []string{"dependencies", "version", "role", "eviction", "persistence", "ratelimit"} {
		assert.NotContains(t, ready.body, detail)
	}
	detailed := call(t, http.MethodGet, adminURL("/readyz"))
	assert.Equal(t, http.StatusOK, detailed.status)
	assert.Contains(t, detailed.body, `"dependencies"`)
	assert.Contains(t, detailed.body, `"eviction_policy"`, "the detailed document is on the admin port")
	assert.Equal(t, http.StatusOK, call(t, http.MethodGet, in.url("/healthz")).status)
	assert.Equal(t, http.StatusOK, call(t, http.MethodGet, adminURL("/healthz")).status)
	assert.Equal(t, http.StatusNotFound, call(t, http.MethodGet, adminURL("/api/v1/ping")).status, "no API on the admin port")
	assert.Zero(t, countLines(in, "APP_WEB_ADMIN_ADDR unset"))

	require.NoError(t, in.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-in.done:
	case <-time.After(stopWait):
		t.Fatalf("no exit within %v of SIGTERM", stopWait)
	}
	require.NoError(t, in.err, "graceful stop exits 0\n%s", in.logs())
	assert.Contains(t, in.logs(), `"msg":"stopped"`)
	for _, addr := range []string{in.addr, admin} {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		assert.Error(t, err, "%s still accepts after the stop", addr)
	}

	t.Run("unset", func(t *testing.T) {
		in := startInstance(t, baseEnv())
		assert.Equal(t, http.StatusOK, call(t, http.MethodGet, in.url("/metrics")).status, "today's behaviour: /metrics on the public port")
		// The warning is logged before "listening", which startInstance
		// waited for, and the log is read in order: it is there now.
		assert.Equal(t, 1, countLines(in, `"level":"WARN"`, "APP_WEB_ADMIN_ADDR unset"), "one warning line at start\n%s", in.logs())
	})
	t.Run("bind error names the variable", func(t *testing.T) {
		busy, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = busy.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), startWait)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary(t), "-addr", "127.0.0.1:0")
		cmd.Env = baseEnv("APP_WEB_ADMIN_ADDR", busy.Addr().String())
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "want a non-zero exit, got %v\n%s", err, out)
		assert.Equal(t, 1, exit.ExitCode())
		assert.Contains(t, string(out), "APP_WEB_ADMIN_ADDR")
		assert.Contains(t, string(out), busy.Addr().String())
	})
}

// TestE2EWildcardProxyRefused: a trusted-proxy entry of prefix length 0
// stops start-up with one line naming APP_WEB_TRUSTED_PROXIES; a broad one
// starts with one warning line.
func TestE2EWildcardProxyRefused(t *testing.T) {
	bin := binary(t)
	for _, proxies := range []string{"0.0.0.0/0", "::/0", "10.0.0.1,0.0.0.0/0"} {
		ctx, cancel := context.WithTimeout(context.Background(), startWait)
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = baseEnv("APP_WEB_TRUSTED_PROXIES", proxies)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%s: want a non-zero exit, got %v\n%s", proxies, err, out)
		assert.Equal(t, 2, exit.ExitCode())
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		require.Len(t, lines, 1, "%s", out)
		assert.True(t, strings.HasPrefix(lines[0], "tech-log-backend: config: APP_WEB_TRUSTED_PROXIES: is invalid: "), "%q", lines[0])
		assert.Contains(t, lines[0], "trusts every address")
	}

	in := startInstance(t, baseEnv("APP_WEB_TRUSTED_PROXIES", "127.0.0.0/4,::1,2000::/3"))
	assert.Equal(t, http.StatusOK, call(t, http.MethodGet, in.url("/api/v1/ping")).status)
	assert.Equal(t, 1, countLines(in, `"level":"WARN"`, "broad trusted-proxy", `"prefix":"112.0.0.0/4"`), "\n%s", in.logs())
	assert.Equal(t, 1, countLines(in, `"level":"WARN"`, "broad trusted-proxy", `"prefix":"2000::/3"`), "\n%s", in.logs())
	assert.Equal(t, 2, countLines(in, "broad trusted-proxy"), "once per broad entry, nothing for ::1\n%s", in.logs())
}

// TestE2EInventedKeysMeetTheGuard: in api-key mode at the shipped local
// limiter defaults (10/s, burst 20), 200 requests with invented keys from
// one address are answered 429 by the per-IP guard once its budget is
// spent, and none reaches Redis.
func TestE2EInventedKeysMeetTheGuard(t *testing.T) {
	rs := redistest.Start(t)
	keysFile := t.TempDir() + "/api-keys"
	writeKeysFile(t, keysFile, "e2e-verified-key-0001")
	env := append(apiKeyEnv(t, rs.Addr(), keysFile), "APP_WEB_LOCAL_LIMIT_ENABLED=true")
	in := startInstance(t, env)
	before := dbSize(t, rs)

	const requests, workers = 200, 8
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var mu sync.Mutex
	codes := map[int]int{}
	work := make(chan struct{}, requests)
	for range requests {
		work <- struct{}{}
	}
	close(work)
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			key := make([]byte, 16)
			for range work {
				_, _ = rand.Read(key)
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.url("/api/v1/ping"), nil)
				if err != nil {
					return
				}
				req.Header.Set("X-API-Key", hex.EncodeToString(key))
				resp, err := hc.Do(req)
				code := -1
				if err == nil {
					_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	require.NoError(t, ctx.Err())
	t.Logf("%d invented keys in %v: %v", requests, elapsed.Round(time.Millisecond), codes)
	assert.Equal(t, requests, codes[401]+codes[429], "only 401 and 429: %v", codes)
	// What must hold: at most the burst plus what the bucket refilled while
	// the requests ran got past the guard (to a 401).
	assert.LessOrEqual(t, float64(codes[401]), 20+10*elapsed.Seconds()+1, "the guard let more through than its budget")
	assert.Greater(t, codes[429], requests/2, "most invented keys are answered by the guard")
	assert.Equal(t, before, dbSize(t, rs), "no Redis state for an unverified client")
	assert.Zero(t, commandCalls(t, rs, "evalsha")+commandCalls(t, rs, "eval"), "no evaluation ran")
	text := call(t, http.MethodGet, in.url("/metrics")).body
	assert.Contains(t, text, fmt.Sprintf(`tlb_local_limit_responses_total{status="429"} %d`, codes[429]))
	assert.Contains(t, text, fmt.Sprintf(`tlb_identity_refusals_total{status="401"} %d`, codes[401]))
}

// TestE2EIPv6PrefixForwarded: with the Redis limiter and the default
// APP_WEB_IPV6_PREFIX (64), forwarded IPv6 clients of one /64 share one
// budget; another /64 has its own; an IPv4-mapped client is its IPv4 client.
func TestE2EIPv6PrefixForwarded(t *testing.T) {
	rs := redistest.Start(t)
	in := startInstance(t, enabledEnv(t, rs.Addr())) // trusts 127.0.0.1: X-Forwarded-For names the client
	from := func(client string) int {
		return call(t, http.MethodGet, in.url("/api/v1/ping"), "X-Forwarded-For", client).status
	}
	for i := range 10 {
		require.Equal(t, http.StatusOK, from(fmt.Sprintf("2001:db8:1:2::%x", i+1)), "request %d", i)
	}
	assert.Equal(t, http.StatusTooManyRequests, from("2001:db8:1:2:ffff::9"), "the same /64: the global policy's 10 are spent")
	assert.Equal(t, http.StatusOK, from("2001:db8:1:3::1"), "another /64: its own budget")
	for range 10 {
		require.Equal(t, http.StatusOK, from("192.0.2.7"))
	}
	assert.Equal(t, http.StatusTooManyRequests, from("::ffff:192.0.2.7"), "a mapped address is its IPv4 client")
	assert.Equal(t, http.StatusOK, from("::ffff:192.0.2.8"), "mapped addresses are not grouped by an IPv6 prefix")
}

// netnsClientSource and netnsClientURL make the test binary an HTTP client
// (TestMain): one GET of the URL from the source address, the status code
// printed on stdout. TestE2EIPv6PrefixNetns runs it inside the namespace.
const (
	netnsClientSource = "TLB_E2E_NETNS_CLIENT_SOURCE"
	netnsClientURL    = "TLB_E2E_NETNS_CLIENT_URL"
)

func netnsClient(source, url string) int {
	ip := net.ParseIP(source)
	if ip == nil {
		fmt.Fprintf(os.Stderr, "netns client: bad source %q\n", source)
		return 3
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 5 * time.Second}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true, Proxy: nil}}
	resp, err := hc.Get(url)
	if err != nil {
		fmt.Fprintf(os.Stderr, "netns client: %v\n", err)
		return 3
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	fmt.Println(resp.StatusCode)
	return 0
}

// ipv6Absent says why IPv6 cannot be used on this machine, or "".
func ipv6Absent() string {
	if _, err := os.Stat("/proc/net/if_inet6"); err != nil {
		return "the kernel has no IPv6 (/proc/net/if_inet6 absent)"
	}
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return "cannot listen on [::1]: " + err.Error()
	}
	_ = ln.Close()
	return ""
}

// TestE2EIPv6PrefixNetns: the binary with the local per-IP guard (burst 3,
// no Redis) runs in a network namespace of its own (unshare --net; the
// namespace goes away with the process), whose loopback carries
// fd00:7462:0:1::1, ::2 (one /64) and fd00:7462:0:2::1 (another /64); real
// TCP clients from those source addresses, run inside the namespace
// (nsenter), show that one /64 is one client at the default
// APP_WEB_IPV6_PREFIX=64 and two at 128. Skipped only where IPv6 is absent.
func TestE2EIPv6PrefixNetns(t *testing.T) {
	bin := binary(t)
	if why := ipv6Absent(); why != "" {
		t.Skip("IPv6 absent: " + why)
	}
	for _, tool := range []string{"unshare", "nsenter", "ip"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "%s (util-linux / iproute2) is needed for the namespace", tool)
	}
	self, err := os.Executable()
	require.NoError(t, err)
	const (
		server    = "fd00:7462:0:1::1"
		sameNet   = "fd00:7462:0:1::2"
		otherNet  = "fd00:7462:0:2::1"
		setupOnLo = "ip link set lo up && ip -6 addr add " + server + "/64 dev lo nodad && ip -6 addr add " + sameNet + "/64 dev lo nodad && ip -6 addr add " + otherNet + "/64 dev lo nodad"
	)
	for _, c := range []struct {
		prefix string
		want   []int // server, server, server, sameNet, otherNet
	}{
		{"", []int{200, 200, 200, 429, 200}},    // the default, 64
		{"128", []int{200, 200, 200, 200, 200}}, // every address its own client
	} {
		t.Run("prefix="+c.prefix, func(t *testing.T) {
			args := []string{"--net"}
			if os.Geteuid() != 0 {
				args = append(args, "--user", "--map-root-user")
			}
			args = append(args, "sh", "-c", setupOnLo+` && exec "$0" -addr "[`+server+`]:0"`, bin)
			cmd := exec.Command("unshare", args...)
			env := []string{"APP_WEB_LOCAL_LIMIT_BURST", "3", "APP_WEB_LOCAL_LIMIT_RATE", "0.01", "APP_WEB_LOCAL_LIMIT_IDLE_TTL", "10m"}
			if c.prefix != "" {
				env = append(env, "APP_WEB_IPV6_PREFIX", c.prefix)
			}
			cmd.Env = baseEnv(env...)
			in := startCmd(t, cmd)
			get := func(source string) int {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				nsenter := exec.CommandContext(ctx, "nsenter", "--net=/proc/"+strconv.Itoa(in.cmd.Process.Pid)+"/ns/net", self)
				if os.Geteuid() != 0 {
					nsenter.Args = append(nsenter.Args[:1], append([]string{"--user=/proc/" + strconv.Itoa(in.cmd.Process.Pid) + "/ns/user"}, nsenter.Args[1:]...)...)
				}
				nsenter.Env = append(os.Environ(), netnsClientSource+"="+source, netnsClientURL+"="+in.url("/api/v1/ping"))
				out, err := nsenter.Output()
				var stderr string
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = string(ee.Stderr)
				}
				require.NoError(t, err, "client from %s: %s", source, stderr)
				sc := bufio.NewScanner(strings.NewReader(string(out)))
				code := 0
				for sc.Scan() {
					if n, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
						code = n
					}
				}
				return code
			}
			got := []int{get(server), get(server), get(server), get(sameNet), get(otherNet)}
			assert.Equal(t, c.want, got, "\n%s", in.logs())
		})
	}
}
