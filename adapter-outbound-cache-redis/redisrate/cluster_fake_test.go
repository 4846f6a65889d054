package redisrate

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// fakeCluster is a one-node fake cluster: CLUSTER SLOTS maps every slot to
// itself, INFO and SCRIPT LOAD qualify it, and program calls are answered
// by program.
func fakeCluster(t *testing.T, program func(n int, args []string) respAction) *respServer {
	t.Helper()
	var mu sync.Mutex
	calls := 0
	var srv *respServer
	srv = startRESP(t, func(args []string) respAction {
		switch strings.ToLower(args[0]) {
		case "cluster":
			host, port, _ := net.SplitHostPort(srv.Addr())
			return respAction{reply: fmt.Sprintf("*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$%d\r\n%s\r\n:%s\r\n", len(host), host, port)}
		case "info":
			body := "redis_version:7.0.15\r\n"
			return respAction{reply: fmt.Sprintf("$%d\r\n%s\r\n", len(body), body)}
		case "script":
			sha := sha1Hex([]byte(args[2]))
			return respAction{reply: fmt.Sprintf("$40\r\n%s\r\n", sha)}
		case "evalsha", "eval":
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			return program(n, args)
		}
		return respAction{reply: "-ERR unexpected\r\n"}
	})
	return srv
}

func fakeClusterProvider(t *testing.T, srv *respServer, pol ratelimit.Policy) *Provider {
	t.Helper()
	cfg := clusterConfig()
	cc, err := NewClusterClient(cfg, []string{srv.Addr()})
	require.NoError(t, err)
	p, err := New(cc, testKeys(t), []ratelimit.Policy{pol}, Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	require.NoError(t, p.Start(redistest.AdminCtx(t)))
	return p
}

// TestClusterFollowsTryAgainAndClusterDown: TRYAGAIN and CLUSTERDOWN are
// refusals before anything ran, so the call is sent again (bounded), and
// its reply decides.
func TestClusterFollowsTryAgainAndClusterDown(t *testing.T) {
	pol := fixedPolicy(t, "api", 5, time.Minute)
	srv := fakeCluster(t, func(n int, args []string) respAction {
		switch n {
		case 1:
			return respAction{reply: "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"}
		case 2:
			return respAction{reply: "-CLUSTERDOWN The cluster is down\r\n"}
		}
		return respAction{reply: respInts(modelReplyInts(pol)...)}
	})
	p := fakeClusterProvider(t, srv, pol)
	out := ask(p, pol.ID(), subjectA, 1)
	assert.True(t, ratelimit.Admitted(out), "%v", out)
	assert.Equal(t, 3, srv.Count("evalsha"))
}

// TestClusterNeverResendsAfterWrite: a connection lost after the program
// was written is Indeterminate and the program is not sent again (go-redis's
// cluster loop would re-send it); a refusal that never ends stops after
// MaxClusterHops and is Unavailable.
func TestClusterNeverResendsAfterWrite(t *testing.T) {
	pol := fixedPolicy(t, "api", 5, time.Minute)
	srv := fakeCluster(t, func(int, []string) respAction { return respAction{close: true} })
	p := fakeClusterProvider(t, srv, pol)
	out := ask(p, pol.ID(), subjectA, 1)
	assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
	assert.Equal(t, 1, srv.Count("evalsha"), "never re-sent")

	srv2 := fakeCluster(t, func(int, []string) respAction { return respAction{reply: "-TRYAGAIN busy\r\n"} })
	p2 := fakeClusterProvider(t, srv2, pol)
	out = ask(p2, pol.ID(), subjectA, 1)
	u, ok := out.(ratelimit.Unavailable)
	require.Truef(t, ok, "%v", out)
	assert.Equal(t, ratelimit.CategoryServerRejected, u.Category)
	assert.Equal(t, MaxClusterHops, srv2.Count("evalsha"))
}

func modelReplyInts(p ratelimit.Policy) []int64 {
	var out []int64
	for _, v := range modelReply(p, time.Now(), 1) {
		out = append(out, v.(int64))
	}
	return out
}

// TestNewRefusesUnqualifiedClusterClients: a ClusterClient not built by
// NewClusterClient is refused, naming the option.
func TestNewRefusesUnqualifiedClusterClients(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	_, err := New(cc, testKeys(t), testPolicies(t), Options{CommandTimeout: testTimeout, MaxInFlight: 1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "MaxRedirects")
	assert.Contains(t, err.Error(), "MaxRetries")
}
