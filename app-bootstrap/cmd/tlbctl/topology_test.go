package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// withACLUsers applies the tlb-rate and tlb-ctl ACL lines (plus extra
// permissions) on every server: ACL users are per server, not replicated.
func withACLUsers(t *testing.T, servers []*redistest.Server, extra ...any) {
	t.Helper()
	for _, s := range servers {
		require.NoError(t, s.Client().Do(ctxT(t), append(append([]any{}, aclRateUser(t)...), extra...)...).Err(), s.Addr())
		require.NoError(t, s.Client().Do(ctxT(t), append(append([]any{}, aclCtlUser(t)...), extra...)...).Err(), s.Addr())
	}
}

// topologyEnv is setup's service environment pointed at a topology
// instead of the standalone server.
func topologyEnv(env map[string]string, mode string, addrs []string, master string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	delete(out, "APP_RATE_LIMIT_REDIS_ADDR")
	out["APP_RATE_LIMIT_REDIS_MODE"] = mode
	out["APP_RATE_LIMIT_REDIS_ADDRS"] = strings.Join(addrs, ",")
	if master != "" {
		out["APP_RATE_LIMIT_REDIS_MASTER_NAME"] = master
	}
	return out
}

// TestInspectAndResetOnCluster: the service limits an API key on a Redis
// Cluster; tlbctl (the key from a file) finds that very key on the primary
// of its slot, reset deletes it there and appends the audit line to
// --audit-log; check runs its server checks on every primary.
func TestInspectAndResetOnCluster(t *testing.T) {
	_, base := setup(t)
	cl := redistest.StartCluster(t, redistest.WithReplicasPerPrimary(0))
	withACLUsers(t, cl.Nodes(), clusterACL...)
	env := topologyEnv(base, "cluster", cl.Addrs(), "")
	require.Equal(t, http.StatusOK, serve(t, env, http.MethodPost, "/api/v1/login", 2))

	var written []string
	for _, n := range cl.Nodes() {
		keys, err := n.Client().Keys(ctxT(t), "tlb:rate:login:*").Result()
		require.NoError(t, err)
		written = append(written, keys...)
	}
	require.Len(t, written, 1, "the service wrote one state key")
	owner := cl.SlotOwner(redistest.Slot(written[0]))

	kf := keyFile(t, testAPIKey)
	r := tlbctl(t, environ(env), "inspect", "--policy", "login", "--api-key-file", kf)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, written[0], keyOf(r.stdout))
	assert.Contains(t, r.stdout, "state       present")
	assert.Contains(t, r.stdout, "remaining   3 of 5 (consumed 2)")

	audit := filepath.Join(t.TempDir(), "audit.log")
	done := tlbctl(t, environ(env), "reset", "--policy", "login", "--api-key-file", kf, "--yes", "--audit-log", audit)
	require.Equal(t, exitOK, done.code, done.stderr)
	assert.Contains(t, done.stdout, "deleted")
	n, err := owner.Client().Exists(ctxT(t), written[0]).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "reset deleted the service's key on its primary")
	b, err := os.ReadFile(audit)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(b), "\n"))
	assert.Contains(t, string(b), `"key":"`+written[0]+`"`)
	assert.Contains(t, string(b), `"redis":"cluster(`)
	assert.NotContains(t, string(b), testAPIKey)

	again := tlbctl(t, environ(env), "inspect", "--policy", "login", "--api-key-file", kf)
	require.Equal(t, exitOK, again.code, again.stderr)
	assert.Contains(t, again.stdout, "state       absent")

	check := tlbctl(t, environ(env), "check")
	require.Equal(t, exitOK, check.code, "%s\n%s", check.stdout, check.stderr)
	assert.Regexp(t, `connection\s+ok\s+cluster\(`, check.stdout)
	assert.Regexp(t, `primaries\s+info\s+3: `, check.stdout)
	for _, p := range cl.Primaries() {
		assert.Regexp(t, `role `+p.Addr()+`\s+ok\s+master`, check.stdout)
		assert.Regexp(t, `provider acl `+p.Addr()+`\s+ok\s+user tlb-rate may run all 20 provider commands`, check.stdout)
	}

	// The provider reads the slot map itself: without +cluster|slots on a
	// primary, check names it.
	first := cl.Primaries()[0]
	require.NoError(t, first.Client().Do(ctxT(t), "ACL", "SETUSER", "tlb-rate", "-cluster|slots").Err())
	check = tlbctl(t, environ(env), "check")
	assert.Equal(t, exitProblem, check.code, check.stdout)
	assert.Regexp(t, `provider acl `+first.Addr()+`\s+PROBLEM\s+user tlb-rate may not run: CLUSTER\|SLOTS`, check.stdout)
}

// TestInspectAndResetOnSentinel: the service limits a trusted-header
// principal through a Sentinel set; tlbctl --principal finds that very key
// on the primary and reset deletes it.
func TestInspectAndResetOnSentinel(t *testing.T) {
	_, base := setup(t)
	sn := redistest.StartSentinel(t, redistest.WithSentinelReplicas(1))
	withACLUsers(t, sn.Servers())
	env := principalEnv(topologyEnv(base, "sentinel", sn.SentinelAddrs(), sn.MasterName()))
	require.Equal(t, http.StatusOK, servePrincipal(t, env, "alice@example.org", 2))

	primary := sn.Master()
	written, err := primary.Client().Keys(ctxT(t), "tlb:rate:login:*").Result()
	require.NoError(t, err)
	require.Len(t, written, 1, "the service wrote one state key")

	r := tlbctl(t, environ(env), "inspect", "--policy", "login", "--principal", "alice@example.org")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	assert.Equal(t, written[0], keyOf(r.stdout))
	assert.Contains(t, r.stdout, "subject     principal alice@example.org")
	assert.Contains(t, r.stdout, "remaining   3 of 5 (consumed 2)")

	done := tlbctl(t, environ(env), "reset", "--policy", "login", "--principal", "alice@example.org", "--yes")
	require.Equal(t, exitOK, done.code, done.stderr)
	assert.Contains(t, done.stderr, `"subject_kind":"principal"`)
	assert.Contains(t, done.stderr, `"redis":"sentinel(`)
	assert.NotContains(t, done.stderr, "alice")
	n, err := primary.Client().Exists(ctxT(t), written[0]).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "reset deleted the service's key on the primary")

	check := tlbctl(t, environ(env), "check")
	require.Equal(t, exitOK, check.code, "%s\n%s", check.stdout, check.stderr)
	assert.Regexp(t, `connection\s+ok\s+sentinel\(`, check.stdout)
	assert.Regexp(t, `role\s+ok\s+master`, check.stdout)
}

// clusterACL are the permissions cluster mode adds to both users.
var clusterACL = []any{"+cluster|slots"}
