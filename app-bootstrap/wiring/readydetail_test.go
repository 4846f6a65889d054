package wiring

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

type readyzBody struct {
	Ready        bool               `json:"ready"`
	Detail       string             `json:"detail"`
	Dependencies []DependencyDetail `json:"dependencies"`
}

func readyz(t *testing.T, srv *Server) (int, readyzBody, string) {
	t.Helper()
	resp, body := do(t, http.MethodGet, "http://"+srv.Addr()+PathReadyz)
	var b readyzBody
	require.NoError(t, json.Unmarshal([]byte(body), &b), body)
	return resp.StatusCode, b, body
}

// TestReadyzDetail: /readyz describes the coordination dependency: ready,
// version, role, replicas, eviction policy and persistence; not ready with
// the reason's category; never the address or a credential.
func TestReadyzDetail(t *testing.T) {
	rs := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, rs.Client().Do(ctx, aclRateUser(t)...).Err())
	kv := append(enabledKV(rs.Addr()), "APP_RATE_LIMIT_REDIS_USERNAME", "tlb-rate", "APP_RATE_LIMIT_REDIS_PASSWORD", "rate-test-pass")
	srv, _ := startGraph(t, kv...)

	code, b, raw := readyz(t, srv)
	require.Equal(t, http.StatusOK, code, raw)
	assert.True(t, b.Ready)
	require.Len(t, b.Dependencies, 1)
	d := b.Dependencies[0]
	assert.Equal(t, "ratelimit", d.Name)
	assert.True(t, d.Ready)
	assert.Empty(t, d.Reason)
	require.NotNil(t, d.Server)
	assert.Equal(t, rs.Version(), d.Server.Version)
	assert.Equal(t, "master", d.Server.Role)
	assert.Equal(t, 0, d.Server.ConnectedReplicas)
	assert.Equal(t, "noeviction", d.Server.EvictionPolicy)
	assert.Equal(t, "none", d.Server.Persistence)
	assert.False(t, d.Server.CheckedAt.IsZero())
	assert.Equal(t, []BreakerDetail{{Target: "0", State: "closed"}}, d.Breakers, "one target, its breaker closed")
	assert.NotContains(t, raw, rs.Addr())
	assert.NotContains(t, raw, "rate-test-pass")
	assert.NotContains(t, raw, "tlb-rate")

	require.NoError(t, rs.Client().ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
	code, b, raw = readyz(t, srv)
	require.Equal(t, http.StatusServiceUnavailable, code, raw)
	assert.Equal(t, "readiness check failed", b.Detail)
	assert.False(t, b.Ready)
	require.Len(t, b.Dependencies, 1)
	assert.False(t, b.Dependencies[0].Ready)
	assert.Equal(t, ReasonEvictionPolicy, b.Dependencies[0].Reason)
	assert.Equal(t, "allkeys-lru", b.Dependencies[0].Server.EvictionPolicy)
	assert.NotContains(t, raw, rs.Addr())
}

// TestReadyzDetailRedisDown: never reached, the dependency has no server
// detail and the reason is connection.
func TestReadyzDetailRedisDown(t *testing.T) {
	down := newQuietListener(t)
	addr := down.Addr()
	require.NoError(t, down.ln.Close())
	srv, _ := startGraph(t, enabledKV(addr)...)
	code, b, raw := readyz(t, srv)
	require.Equal(t, http.StatusServiceUnavailable, code, raw)
	require.Len(t, b.Dependencies, 1)
	assert.Equal(t, ReasonConnection, b.Dependencies[0].Reason)
	assert.Nil(t, b.Dependencies[0].Server)
	assert.NotContains(t, raw, addr)
}

type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

var _ redis.Error = redisErr("")

func TestReasonOf(t *testing.T) {
	for want, err := range map[string]error{
		ReasonTLS:              &ConnError{Var: "X", Reason: ReasonTLS, Err: io.EOF},
		ReasonEvictionPolicy:   fmt.Errorf("x: %w", redisrate.ErrEvictionPolicy),
		ReasonConfigUnreadable: redisrate.ErrServerConfigUnreadable,
		ReasonReplica:          redisrate.ErrReplica,
		ReasonServerVersion:    redisrate.ErrServerVersion,
		ReasonScriptDigest:     redisrate.ErrScriptDigest,
		ReasonCircuitOpen:      errBreakerOpen,
		ReasonClosed:           redisrate.ErrClosed,
		ReasonClusterSlots:     redisrate.ErrClusterSlotUnserved,
		ReasonTimeout:          context.DeadlineExceeded,
		ReasonAuth:             fmt.Errorf("PING: %w", redisErr("WRONGPASS invalid username-password pair")),
		ReasonLoading:          redisErr("LOADING Redis is loading the dataset in memory"),
		ReasonConnection:       errors.New("dial tcp: connection refused"),
	} {
		assert.Equal(t, want, reasonOf(err), "%v", err)
	}
}
