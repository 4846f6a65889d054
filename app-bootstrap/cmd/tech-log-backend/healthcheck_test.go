package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHealthcheckMode: -healthcheck exits 0 when GET /healthz on the
// listen address answers 200 and 1 (with one line) on any other status or
// when nothing listens; it reads APP_WEB_ADDR when -addr is absent and
// probes a wildcard host on loopback. It never loads the configuration: a
// broken one does not matter.
func TestHealthcheckMode(t *testing.T) {
	var mu sync.Mutex
	status := http.StatusOK
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, r.URL.Path)
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	broken := []string{"APP_RATE_LIMIT_ENABLED=true", "APP_LOG_FORMAT=xml"}

	var stderr bytes.Buffer
	assert.Equal(t, exitOK, run([]string{"-healthcheck", "-addr", "127.0.0.1:" + port}, broken, &stderr), stderr.String())
	assert.Equal(t, exitOK, run([]string{"-healthcheck"}, append(broken, "APP_WEB_ADDR=:"+port), &stderr), stderr.String())
	assert.Equal(t, exitOK, run([]string{"-healthcheck"}, append(broken, "APP_WEB_ADDR=0.0.0.0:"+port), &stderr), stderr.String())
	mu.Lock()
	assert.Equal(t, []string{"/healthz", "/healthz", "/healthz"}, paths)
	status = http.StatusServiceUnavailable
	mu.Unlock()
	assert.Empty(t, stderr.String())

	assert.Equal(t, exitFailure, run([]string{"-healthcheck", "-addr", "127.0.0.1:" + port}, nil, &stderr))
	assert.Contains(t, stderr.String(), "503 Service Unavailable")

	// A closed port: bind one, close it, probe it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())
	stderr.Reset()
	assert.Equal(t, exitFailure, run([]string{"-healthcheck", "-addr", closed}, nil, &stderr))
	assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), stderr.String())

	stderr.Reset()
	assert.Equal(t, exitFailure, run([]string{"-healthcheck", "-addr", "nonsense"}, nil, &stderr))
	assert.Contains(t, stderr.String(), "want [host]:port")
}
