package wiring

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

const (
	testKeySecret     = "test-key-secret-0123456789abcdefghijklmnop"
	testSubjectSecret = "test-subject-secret-0123456789abcdefghijkl"
	testCacheSecret   = "test-cache-secret-0123456789abcdefghijklmn"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// loadConfig builds a Config from kv pairs over a base that binds the web
// server to a free loopback port.
func loadConfig(t *testing.T, kv ...string) config.Config {
	t.Helper()
	env := map[string]string{"APP_WEB_ADDR": "127.0.0.1:0"}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	cfg, err := config.Load(env)
	require.NoError(t, err)
	return cfg
}

// enabledKV enables the Redis limiter against addr.
func enabledKV(addr string) []string {
	return []string{
		"APP_RATE_LIMIT_ENABLED", "true",
		"APP_RATE_LIMIT_PROVIDER", "redis",
		"APP_RATE_LIMIT_REDIS_ADDR", addr,
		"APP_RATE_LIMIT_KEY_SECRET", testKeySecret,
		"APP_RATE_LIMIT_DEFAULT_POLICY", "api",
		"APP_RATE_LIMIT_POLICIES_FILE", "../examples/policies.json",
		"APP_WEB_SUBJECT_SECRET", testSubjectSecret,
		"APP_WEB_LOCAL_LIMIT_ENABLED", "false",
	}
}

// httpClient has no keep-alive, so no connection goroutine outlives a
// request (goleak).
func httpClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

func do(t *testing.T, method, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(""))
	require.NoError(t, err)
	resp, err := httpClient().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(t, err)
	return resp, string(b)
}

// quietListener listens on a free loopback port and never accepts; Accepted
// reports whether any client connected (the kernel completes connections
// into the backlog without Accept).
type quietListener struct{ ln *net.TCPListener }

func newQuietListener(t *testing.T) *quietListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	return &quietListener{ln: ln.(*net.TCPListener)}
}

func (q *quietListener) Addr() string { return q.ln.Addr().String() }

func (q *quietListener) Accepted(t *testing.T) bool {
	t.Helper()
	require.NoError(t, q.ln.SetDeadline(time.Now().Add(200*time.Millisecond)))
	c, err := q.ln.Accept()
	if err == nil {
		_ = c.Close()
		return true
	}
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "accept: %v", err)
	return false
}
