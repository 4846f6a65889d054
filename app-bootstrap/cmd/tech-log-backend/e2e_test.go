package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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

// End-to-end (service lane): the real binary, built by the test, with a
// private redis-server. Every wait is bounded.

const (
	startWait = 30 * time.Second
	stopWait  = 20 * time.Second
)

// e2ePolicies: "global" admits exactly 10 per subject (refill 1 per hour,
// so none during the test); "burst" refills a token per second, for the
// Retry-After check.
const e2ePolicies = `{"policies": [
  {"id": "global", "revision": 1, "algorithm": "token_bucket",
   "capacity": 10, "refillTokens": 1, "refillPeriod": "1h",
   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s",
   "failurePolicy": "fail-closed", "routes": ["GET /api/v1/ping"]},
  {"id": "burst", "revision": 1, "algorithm": "token_bucket",
   "capacity": 3, "refillTokens": 1, "refillPeriod": "1s",
   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s",
   "failurePolicy": "fail-closed", "routes": ["POST /api/v1/login"]}
]}`

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the service once per test binary run.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the binary (skipped with -short)")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tlb-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "tech-log-backend")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

func TestMain(m *testing.M) {
	if src := os.Getenv(netnsClientSource); src != "" {
		os.Exit(netnsClient(src, os.Getenv(netnsClientURL)))
	}
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// instance is one running service process.
type instance struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
	err  error // Wait's result, set before done closes

	mu     sync.Mutex
	lines  []string
	stdout lockedBuffer // everything the process wrote to stdout
}

func (in *instance) url(path string) string { return "http://" + in.addr + path }

func (in *instance) logs() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return strings.Join(in.lines, "\n")
}

// baseEnv is a minimal environment: no APP_ variable from the caller's
// environment leaks in.
func baseEnv(kv ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "APP_LOG_FORMAT=json", "APP_SHUTDOWN_TIMEOUT=5s"}
	for i := 0; i+1 < len(kv); i += 2 {
		env = append(env, kv[i]+"="+kv[i+1])
	}
	return env
}

// startInstance runs the binary with env and -addr 127.0.0.1:0, keeps its
// stdout and stderr lines, and waits for its "listening" log line to learn
// the port.
func startInstance(t *testing.T, env []string) *instance {
	t.Helper()
	cmd := exec.Command(binary(t), "-addr", "127.0.0.1:0")
	cmd.Env = env
	return startCmd(t, cmd)
}

// startCmd is startInstance for a prepared command (the binary, possibly
// behind a wrapper that execs it, such as unshare).
func startCmd(t *testing.T, cmd *exec.Cmd) *instance {
	t.Helper()
	in := &instance{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout = &in.stdout
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	addrCh := make(chan string, 1)
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			in.mu.Lock()
			in.lines = append(in.lines, line)
			in.mu.Unlock()
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
				select {
				case addrCh <- rec.Addr:
				default:
				}
			}
		}
	}()
	go func() {
		<-scanDone // Wait closes the pipe: read it to the end first
		in.err = cmd.Wait()
		close(in.done)
	}()
	t.Cleanup(func() { in.stop(t) })
	select {
	case in.addr = <-addrCh:
	case <-in.done:
		t.Fatalf("instance exited before listening: %v\n%s", in.err, in.logs())
	case <-time.After(startWait):
		t.Fatalf("instance not listening after %v\n%s", startWait, in.logs())
	}
	return in
}

// stop sends SIGTERM and waits; SIGKILL if the graceful stop overruns.
func (in *instance) stop(t *testing.T) {
	select {
	case <-in.done:
		return
	default:
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.done:
	case <-time.After(stopWait):
		_ = in.cmd.Process.Kill()
		<-in.done
		t.Errorf("instance did not stop within %v of SIGTERM\n%s", stopWait, in.logs())
	}
}

var client = &http.Client{Timeout: 10 * time.Second}

type reply struct {
	status int
	header http.Header
	body   string
}

func call(t *testing.T, method, url string, header ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(t, err)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func enabledEnv(t *testing.T, redisAddr string) []string {
	t.Helper()
	policies := filepath.Join(t.TempDir(), "policies.json")
	require.NoError(t, os.WriteFile(policies, []byte(e2ePolicies), 0o600))
	return baseEnv(
		"APP_RATE_LIMIT_ENABLED", "true",
		"APP_RATE_LIMIT_PROVIDER", "redis",
		"APP_RATE_LIMIT_REDIS_ADDR", redisAddr,
		"APP_RATE_LIMIT_KEY_SECRET", "e2e-key-secret-0123456789abcdefghijklmnopq",
		"APP_RATE_LIMIT_POLICIES_FILE", policies,
		"APP_RATE_LIMIT_DEFAULT_POLICY", "global",
		"APP_WEB_SUBJECT_SECRET", "e2e-subject-secret-0123456789abcdefghijklm",
		"APP_WEB_LOCAL_LIMIT_ENABLED", "false",
		// The test is the trusted proxy: X-Forwarded-For names the client,
		// so one test process can be several clients.
		"APP_WEB_TRUSTED_PROXIES", "127.0.0.1,::1",
		"APP_LOG_LEVEL", "debug",
	)
}

// e2eSecrets are the secret values enabledEnv sets; no log line may hold one.
var e2eSecrets = []string{"e2e-key-secret-0123456789abcdefghijklmnopq", "e2e-subject-secret-0123456789abcdefghijklm"}

// TestE2EGlobalLimitAcrossInstances: two processes share one Redis; a
// subject gets exactly the policy's capacity across both, then 429s with
// Retry-After and RateLimit fields.
func TestE2EGlobalLimitAcrossInstances(t *testing.T) {
	rs := redistest.Start(t)
	env := enabledEnv(t, rs.Addr())
	a, b := startInstance(t, env), startInstance(t, env)

	const requests = 30
	allowed := map[string]int{}
	denied := 0
	for i := range requests {
		in := a
		if i%2 == 1 {
			in = b
		}
		r := call(t, http.MethodGet, in.url("/api/v1/ping"), "X-Forwarded-For", "198.51.100.1")
		switch r.status {
		case http.StatusOK:
			allowed[in.addr]++
			assert.Equal(t, "10", r.header.Get("RateLimit-Limit"))
		case http.StatusTooManyRequests:
			denied++
			assert.Equal(t, "10", r.header.Get("RateLimit-Limit"))
			assert.Equal(t, "0", r.header.Get("RateLimit-Remaining"))
			// The current draft's pair: r=0, t the seconds until the
			// bucket is full again (refill 1 per hour: close to 10h).
			assert.Regexp(t, `^"global";r=0;t=(3[0-5][0-9]{3}|36000)$`, r.header.Get("RateLimit"))
			assert.Equal(t, `"global";q=10;w=36000`, r.header.Get("RateLimit-Policy"))
			assert.Equal(t, strings.TrimPrefix(r.header.Get("RateLimit"), `"global";r=0;t=`), r.header.Get("RateLimit-Reset"), "the older field carries the same t")
			retry, err := strconv.Atoi(r.header.Get("Retry-After"))
			require.NoError(t, err, "Retry-After %q", r.header.Get("Retry-After"))
			assert.Greater(t, retry, 0)
		default:
			t.Fatalf("request %d: status %d: %s\n%s", i, r.status, r.body, in.logs())
		}
	}
	assert.Equal(t, 10, allowed[a.addr]+allowed[b.addr], "global capacity holds across instances: %v", allowed)
	assert.Equal(t, 5, allowed[a.addr], "alternating requests: each instance admitted half")
	assert.Equal(t, 5, allowed[b.addr])
	assert.Equal(t, requests-10, denied)

	// Another subject has its own budget.
	r := call(t, http.MethodGet, b.url("/api/v1/ping"), "X-Forwarded-For", "198.51.100.2")
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "9", r.header.Get("RateLimit-Remaining"))

	// Unlimited endpoints stay reachable.
	assert.Equal(t, http.StatusOK, call(t, http.MethodGet, a.url("/healthz")).status)
	assert.Equal(t, http.StatusOK, call(t, http.MethodGet, a.url("/readyz")).status)
	m := call(t, http.MethodGet, a.url("/metrics"))
	assert.Equal(t, http.StatusOK, m.status)
	assert.Contains(t, m.body, `tlb_ratelimit_outcomes_total{category="none",decision="allowed",kind="evaluated",policy="global"} 5`)
	assert.Contains(t, m.body, `tlb_ratelimit_outcomes_total{category="none",decision="denied",kind="evaluated",policy="global"} 10`)
	assert.NotContains(t, m.body, "198.51.100.1", "no subject in metrics")
	for _, in := range []*instance{a, b} {
		logs := in.logs()
		assert.Contains(t, logs, `"msg":"starting"`)
		for _, s := range append(e2eSecrets, "198.51.100.1") {
			assert.NotContains(t, logs, s, "debug logs never hold a secret or a raw subject")
		}
	}
}

// TestE2ERetryAfterIsHonest: after a 429, waiting Retry-After seconds is
// enough for the next request to pass, on either instance.
func TestE2ERetryAfterIsHonest(t *testing.T) {
	rs := redistest.Start(t)
	env := enabledEnv(t, rs.Addr())
	a, b := startInstance(t, env), startInstance(t, env)
	const subjectIP = "198.51.100.3"

	var denial reply
	for i := 0; i < 10; i++ {
		in := []*instance{a, b}[i%2]
		r := call(t, http.MethodPost, in.url("/api/v1/login"), "X-Forwarded-For", subjectIP)
		if r.status == http.StatusTooManyRequests {
			denial = r
			break
		}
		require.Equal(t, http.StatusOK, r.status, r.body)
	}
	require.Equal(t, http.StatusTooManyRequests, denial.status, "the burst policy (capacity 3) must deny within 10 requests")
	retry, err := strconv.Atoi(denial.header.Get("Retry-After"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, retry, 1)
	require.LessOrEqual(t, retry, 2, "one token per second: the wait is at most a second, rounded up")
	assert.Equal(t, "3", denial.header.Get("RateLimit-Limit"))
	assert.Contains(t, denial.header.Get("RateLimit-Policy"), "burst")

	time.Sleep(time.Duration(retry) * time.Second)
	r := call(t, http.MethodPost, b.url("/api/v1/login"), "X-Forwarded-For", subjectIP)
	assert.Equal(t, http.StatusOK, r.status, "after Retry-After the next request succeeds: %s", r.body)
}

// TestE2ERotatingAPIKeyIsOneClient: with the default identity (the client
// IP), a client that sends a fresh X-API-Key with every request is limited
// like one client, by the local limiter and by the Redis limiter.
func TestE2ERotatingAPIKeyIsOneClient(t *testing.T) {
	count := func(t *testing.T, in *instance, n int) (allowed, denied int) {
		t.Helper()
		for i := range n {
			r := call(t, http.MethodGet, in.url("/api/v1/ping"), "X-API-Key", fmt.Sprintf("rotating-key-%d", i))
			switch r.status {
			case http.StatusOK:
				allowed++
			case http.StatusTooManyRequests:
				denied++
			default:
				t.Fatalf("request %d: status %d: %s", i, r.status, r.body)
			}
		}
		return allowed, denied
	}
	t.Run("local limiter", func(t *testing.T) {
		// Burst 20 and a refill far slower than the test: exactly 20 pass.
		in := startInstance(t, baseEnv("APP_WEB_LOCAL_LIMIT_RATE", "0.01", "APP_WEB_LOCAL_LIMIT_IDLE_TTL", "1h"))
		allowed, denied := count(t, in, 30)
		assert.Equal(t, 20, allowed, "the burst of one client")
		assert.Equal(t, 10, denied)
	})
	t.Run("redis limiter", func(t *testing.T) {
		rs := redistest.Start(t)
		in := startInstance(t, enabledEnv(t, rs.Addr()))
		allowed, denied := count(t, in, 30)
		assert.Equal(t, 10, allowed, "the global policy's capacity for one client")
		assert.Equal(t, 20, denied)
	})
}
