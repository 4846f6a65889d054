package wiring

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
)

// startGraph runs the whole graph on kv and returns the server and the log.
// The log is written by the graph's background goroutines (the denial
// cache's subscription among them) while the test reads it: a locked buffer.
func startGraph(t *testing.T, kv ...string) (*Server, *lockedBuffer) {
	t.Helper()
	var logs lockedBuffer
	cfg := loadConfig(t, kv...)
	var srv *Server
	app := fxtest.New(t, Options(cfg, slog.New(slog.NewTextHandler(&logs, nil))), fx.Populate(&srv))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	return srv, &logs
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers and readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p under the lock.
func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns what was written so far.
func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func readyErr(t *testing.T, kv ...string) error {
	t.Helper()
	lc := fxtest.NewLifecycle(t)
	p, err := newPolicies(lc, loadConfig(t, kv...), quietLogger(), metrics.New())
	require.NoError(t, err)
	c := p.current().c
	lc.RequireStart()
	t.Cleanup(lc.RequireStop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Ready(ctx)
}

// TestEvictingServerIsNotReady: with maxmemory-policy allkeys-lru the
// service starts but is never ready; the readiness error names the policy
// and APP_RATE_LIMIT_ALLOW_EVICTION. With that variable true it is ready,
// logs a warning and sets tlb_redis_eviction_accepted.
func TestEvictingServerIsNotReady(t *testing.T) {
	rs := redistest.Start(t, redistest.WithConfig("maxmemory-policy", "allkeys-lru"))
	err := readyErr(t, enabledKV(rs.Addr())...)
	require.ErrorIs(t, err, redisrate.ErrEvictionPolicy)
	assert.Contains(t, err.Error(), "maxmemory-policy is allkeys-lru")
	assert.Contains(t, err.Error(), "APP_RATE_LIMIT_ALLOW_EVICTION=true")

	srv, _ := startGraph(t, enabledKV(rs.Addr())...)
	resp, body := do(t, http.MethodGet, "http://"+srv.Addr()+PathReadyz)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)

	srv, logs := startGraph(t, append(enabledKV(rs.Addr()), "APP_RATE_LIMIT_ALLOW_EVICTION", "true")...)
	resp, body = do(t, http.MethodGet, "http://"+srv.Addr()+PathReadyz)
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Contains(t, logs.String(), "may evict live limiter state: accepted by APP_RATE_LIMIT_ALLOW_EVICTION=true")
	assert.Contains(t, logs.String(), "maxmemory_policy=allkeys-lru")
	_, m := do(t, http.MethodGet, "http://"+srv.Addr()+PathMetrics)
	assert.Contains(t, m, "tlb_redis_eviction_accepted 1")
	assert.Contains(t, m, "tlb_redis_eviction_policy_safe 0")
}

// TestServerStatusMetrics: a healthy primary is exported as such.
func TestServerStatusMetrics(t *testing.T) {
	rs := redistest.Start(t, redistest.WithConfig("appendonly", "yes"))
	srv, logs := startGraph(t, enabledKV(rs.Addr())...)
	resp, _ := do(t, http.MethodGet, "http://"+srv.Addr()+PathReadyz)
	require.Equal(t, http.StatusOK, resp.StatusCode, logs.String())
	_, m := do(t, http.MethodGet, "http://"+srv.Addr()+PathMetrics)
	for _, line := range []string{"tlb_redis_role_primary 1", "tlb_redis_connected_replicas 0", "tlb_redis_replica_lag_seconds -1",
		"tlb_redis_aof_enabled 1", "tlb_redis_rdb_save_configured 0", "tlb_redis_eviction_policy_safe 1", "tlb_redis_eviction_accepted 0"} {
		assert.Contains(t, m, line+"\n")
	}
}

// TestReplicaIsRefusedAtStart: a standalone endpoint that is a replica
// fails start-up, naming the address variable.
func TestReplicaIsRefusedAtStart(t *testing.T) {
	primary := redistest.Start(t)
	primary.Require(t, redistest.CapReplicate)
	replica := redistest.Start(t)
	host, port, _ := strings.Cut(primary.Addr(), ":")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, replica.Client().ReplicaOf(ctx, host, port).Err())
	t.Cleanup(func() { _ = replica.Client().ReplicaOf(context.Background(), "NO", "ONE").Err() })

	app := fx.New(Options(loadConfig(t, enabledKV(replica.Addr())...), quietLogger()), fx.NopLogger)
	err := app.Start(ctx)
	require.Error(t, err)
	assert.ErrorIs(t, err, redisrate.ErrReplica)
	assert.Contains(t, err.Error(), "role:slave")
	assert.Contains(t, err.Error(), "APP_RATE_LIMIT_REDIS_ADDR")
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer stopCancel()
	_ = app.Stop(stopCtx)
}

// TestConfigDisabledNeedsExplicitSkip: a user without CONFIG (a managed
// Redis that disables it) is not ready, naming
// APP_RATE_LIMIT_SKIP_SERVER_CONFIG_CHECK; with it the service is ready.
func TestConfigDisabledNeedsExplicitSkip(t *testing.T) {
	rs := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, rs.Client().Do(ctx, "ACL", "SETUSER", "no-config", "on", ">pw", "~*", "+@all", "-config").Err())
	kv := append(enabledKV(rs.Addr()), "APP_RATE_LIMIT_REDIS_USERNAME", "no-config", "APP_RATE_LIMIT_REDIS_PASSWORD", "pw")
	err := readyErr(t, kv...)
	require.ErrorIs(t, err, redisrate.ErrServerConfigUnreadable)
	assert.Contains(t, err.Error(), "APP_RATE_LIMIT_SKIP_SERVER_CONFIG_CHECK=true")

	srv, logs := startGraph(t, append(kv, "APP_RATE_LIMIT_SKIP_SERVER_CONFIG_CHECK", "true")...)
	resp, body := do(t, http.MethodGet, "http://"+srv.Addr()+PathReadyz)
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Contains(t, logs.String(), "eviction policy not checked")
}
