package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratecarry"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// TestAPIKeyOnCommandLineRefused: every spelling of --api-key is refused
// with one line that points to --api-key-file, never echoes the value,
// and sends nothing to Redis.
func TestAPIKeyOnCommandLineRefused(t *testing.T) {
	rs, env := setup(t)
	require.NoError(t, rs.Client().ConfigResetStat(ctxT(t)).Err())
	for _, args := range [][]string{
		{"inspect", "--policy", "login", "--api-key", testAPIKey},
		{"inspect", "--policy", "login", "--api-key=" + testAPIKey},
		{"reset", "-api-key", testAPIKey, "--policy", "login", "--yes"},
		{"reset", "--policy", "login", "-api-key=" + testAPIKey},
		{"check", "--api-key", testAPIKey},
		{"inspect", "--policy", "login", "--api-key"},
	} {
		r := tlbctl(t, environ(env), args...)
		assert.Equal(t, exitUsage, r.code, args)
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
		assert.Contains(t, r.stderr, "--api-key is refused (a key on the command line lands in ps and shell history): put it in a file and pass --api-key-file FILE, or pipe it with --api-key-file -")
		assert.NotContains(t, r.stderr, testAPIKey)
		assert.Empty(t, r.stdout)
	}
	stats := redistest.CommandStats(t, rs.Client())
	for _, cmd := range []string{"get", "del", "auth", "hello"} {
		assert.NotContains(t, stats, cmd, "a refused command reached Redis")
	}
}

// TestServiceCredentialsOnlyWhenAsked: without tlbctl's own user, nothing
// connects unless --use-service-credentials, which then connects as the
// service's user (tlb-rate: it may read the state, and may not delete it);
// tlbctl's password is read from a file by the service's rules (one
// trailing newline dropped).
func TestServiceCredentialsOnlyWhenAsked(t *testing.T) {
	rs, env := setup(t)
	require.Equal(t, http.StatusOK, serve(t, env, http.MethodPost, "/api/v1/login", 1))
	kf := keyFile(t, testAPIKey)
	noOwn := environ(env, EnvUsername, "", EnvPassword, "")

	refused := tlbctl(t, noOwn, "reset", "--policy", "login", "--api-key-file", kf, "--yes")
	assert.Equal(t, exitUsage, refused.code)
	assert.Equal(t, "tlbctl: "+EnvUsername+" is not set: tlbctl connects as its own ACL user (tlb-ctl, docs/operations.md); set "+EnvUsername+" and "+EnvPassword+" (or "+EnvPasswordFile+"), or pass --use-service-credentials to connect as the service's user\n", refused.stderr)

	svc := tlbctl(t, noOwn, "inspect", "--policy", "login", "--api-key-file", kf, "--use-service-credentials")
	require.Equal(t, exitOK, svc.code, svc.stderr)
	assert.Contains(t, svc.stdout, "remaining   4 of 5 (consumed 1)")
	del := tlbctl(t, noOwn, "reset", "--policy", "login", "--api-key-file", kf, "--yes", "--use-service-credentials")
	assert.Equal(t, exitProblem, del.code)
	assert.Contains(t, del.stderr, "as tlb-rate")
	assert.Contains(t, del.stderr, "NOPERM")
	keys, err := rs.Client().Keys(ctxT(t), "tlb:rate:login:*").Result()
	require.NoError(t, err)
	assert.Len(t, keys, 1, "the service's user could not delete")

	pwFile := filepath.Join(t.TempDir(), "ctl-pass")
	require.NoError(t, os.WriteFile(pwFile, []byte("ctl-test-pass\n"), 0o600))
	own := tlbctl(t, environ(env, EnvPassword, "", EnvPasswordFile, pwFile), "check")
	require.Equal(t, exitOK, own.code, "%s\n%s", own.stdout, own.stderr)
	assert.Contains(t, own.stdout, "as tlb-ctl")
}

// TestAuditLogAppended: each reset appends one JSON line (the digest and
// key, no subject) to --audit-log, after what the file held; a new file
// is created 0600.
func TestAuditLogAppended(t *testing.T) {
	rs, env := setup(t)
	delete(env, "APP_WEB_IDENTITY")
	delete(env, "APP_WEB_API_KEYS_FILE")
	require.Equal(t, http.StatusOK, serve(t, env, http.MethodGet, "/api/v1/ping", 1))
	dir := t.TempDir()
	fresh := filepath.Join(dir, "new.log")

	r := tlbctl(t, environ(env), "reset", "--policy", "api", "--ip", "127.0.0.1", "--yes", "--audit-log", fresh)
	require.Equal(t, exitOK, r.code, r.stderr)
	fi, err := os.Stat(fresh)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	b, err := os.ReadFile(fresh)
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(r.stderr), strings.TrimSpace(string(b)), "the line on stderr is the line in the file")
	assert.Contains(t, string(b), `"subject_kind":"ip"`)
	assert.NotContains(t, string(b), `"127.0.0.1"`, "no client address in the audit line")
	assert.NotContains(t, string(b), "pass", "no password in the audit line")

	require.Equal(t, http.StatusOK, serve(t, env, http.MethodGet, "/api/v1/ping", 1))
	r2 := tlbctl(t, environ(env), "reset", "--policy", "api", "--ip", "127.0.0.1", "--yes", "--audit-log", fresh)
	require.Equal(t, exitOK, r2.code, r2.stderr)
	b, err = os.ReadFile(fresh)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 2, "appended, not overwritten")
	for _, l := range lines {
		assert.Regexp(t, `^\{"time":"[^"]+","level":"INFO","msg":"tlbctl reset","policy":"api","revision":1,"subject_kind":"ip","subject_digest":"[^"]+","key":"tlb:rate:api:s:v2:[^"]+","deleted":1,"redis_user":"tlb-ctl","redis":"127\.0\.0\.1:\d+","pid":\d+,"os_user":"[^"]+"\}$`, l)
	}
	n := dataKeys(t, rs)
	assert.Zero(t, n)

	// Without --yes nothing is deleted and nothing is logged.
	require.Equal(t, http.StatusOK, serve(t, env, http.MethodGet, "/api/v1/ping", 1))
	dry := tlbctl(t, environ(env), "reset", "--policy", "api", "--ip", "127.0.0.1", "--audit-log", fresh)
	require.Equal(t, exitOK, dry.code, dry.stderr)
	assert.Empty(t, dry.stderr)
	b2, err := os.ReadFile(fresh)
	require.NoError(t, err)
	assert.Equal(t, b, b2)
}

// dataKeys counts rs's keys but the revision catalog, which the service
// records at start (ratecarry.Catalog).
func dataKeys(t *testing.T, rs *redistest.Server) int64 {
	t.Helper()
	return redistest.KeyCount(t, rs.Client(), ":rate:"+ratecarry.KeyRegionCatalog+":")
}
