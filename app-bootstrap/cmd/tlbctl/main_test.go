package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/wiring"
)

// aclRateUser and aclCtlUser are the ACL users of docs/operations.md,
// word for word (test passwords): the provider's and tlbctl's.
func aclRateUser(t testing.TB) []any {
	return redistest.DocumentedACLUser(t, "tlb-rate", "rate-test-pass")
}

func aclCtlUser(t testing.TB) []any {
	return redistest.DocumentedACLUser(t, "tlb-ctl", "ctl-test-pass")
}

const testAPIKey = "tlbctl-test-api-key-0001"

// testPolicies refill one token an hour, so the state a test reads does not
// move while it runs (a fixed window could roll over between the requests
// and the inspection). "api" is GCRA (ADR 0021), "login" a token bucket.
const testPolicies = `{"policies": [
  {"id": "api", "revision": 1, "algorithm": "gcra",
   "rate": 1, "period": "1h", "burst": 100,
   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s",
   "failurePolicy": "fail-closed", "routes": ["GET /api/"]},
  {"id": "login", "revision": 3, "algorithm": "token_bucket",
   "capacity": 5, "refillTokens": 1, "refillPeriod": "1h",
   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s",
   "failurePolicy": "fail-closed", "routes": ["POST /api/v1/login"]},
  {"id": "queue", "revision": 1, "algorithm": "leaky_bucket",
   "rate": 1, "period": "1h", "queueSize": 2, "delayAfter": 2,
   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s",
   "failurePolicy": "fail-closed", "routes": ["GET /api/v1/queue"]}
]}`

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// setup starts a server with both users and returns it with the service's
// environment (api-key identity, the example policies) plus tlbctl's user.
func setup(t *testing.T) (*redistest.Server, map[string]string) {
	t.Helper()
	rs := redistest.Start(t)
	require.NoError(t, rs.Client().Do(ctxT(t), aclRateUser(t)...).Err())
	require.NoError(t, rs.Client().Do(ctxT(t), aclCtlUser(t)...).Err())
	keysFile := filepath.Join(t.TempDir(), "api-keys")
	require.NoError(t, os.WriteFile(keysFile, []byte(subject.DigestAPIKey(testAPIKey).String()+"\n"), 0o600))
	policies := filepath.Join(t.TempDir(), "policies.json")
	require.NoError(t, os.WriteFile(policies, []byte(testPolicies), 0o600))
	return rs, map[string]string{
		"APP_RATE_LIMIT_ENABLED":         "true",
		"APP_RATE_LIMIT_PROVIDER":        "redis",
		"APP_RATE_LIMIT_REDIS_ADDR":      rs.Addr(),
		"APP_RATE_LIMIT_REDIS_USERNAME":  "tlb-rate",
		"APP_RATE_LIMIT_REDIS_PASSWORD":  "rate-test-pass",
		"APP_RATE_LIMIT_KEY_SECRET":      "tlbctl-key-secret-0123456789abcdefghijkl",
		"APP_RATE_LIMIT_POLICIES_FILE":   policies,
		"APP_RATE_LIMIT_DEFAULT_POLICY":  "api",
		"APP_RATE_LIMIT_COMMAND_TIMEOUT": "1s",
		"APP_RATE_LIMIT_DIAL_TIMEOUT":    "1s",
		"APP_RATE_LIMIT_POOL_TIMEOUT":    "1s",
		"APP_WEB_SUBJECT_SECRET":         "tlbctl-subject-secret-0123456789abcdefgh",
		"APP_WEB_IDENTITY":               "api-key",
		"APP_WEB_API_KEYS_FILE":          keysFile,
		"APP_WEB_LOCAL_LIMIT_ENABLED":    "false",
		"APP_WEB_ADDR":                   "127.0.0.1:0",
		EnvUsername:                      "tlb-ctl",
		EnvPassword:                      "ctl-test-pass",
	}
}

func environ(env map[string]string, kv ...string) []string {
	m := map[string]string{}
	for k, v := range env {
		m[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

type result struct {
	code           int
	stdout, stderr string
}

func tlbctl(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return tlbctlIn(t, env, "", args...)
}

// tlbctlIn runs tlbctl with stdin as its standard input.
func tlbctlIn(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(ctxT(t), args, env, strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// keyOf is the state key an inspect output names.
func keyOf(stdout string) string {
	for _, l := range strings.Split(stdout, "\n") {
		if k, ok := strings.CutPrefix(l, "key         "); ok {
			return k
		}
	}
	return "(no key line)"
}

// keyFile writes an API key file (with the trailing newline an editor
// leaves) and returns its path.
func keyFile(t *testing.T, key string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "api-key")
	require.NoError(t, os.WriteFile(p, []byte(key+"\n"), 0o600))
	return p
}

// serve runs the service in-process on env and sends n requests as the
// API-key client, returning the last status.
func serve(t *testing.T, env map[string]string, method, path string, n int) int {
	t.Helper()
	cfg, err := config.Load(env)
	require.NoError(t, err)
	var srv *wiring.Server
	app := fxtest.New(t, wiring.Options(cfg, wiring.NewLogger(config.Log{Format: config.LogText, Level: 8}, &bytes.Buffer{})), fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	status := 0
	for range n {
		req, err := http.NewRequest(method, "http://"+srv.Addr()+path, nil)
		require.NoError(t, err)
		req.Header.Set(subject.APIKeyHeader, testAPIKey)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		status = resp.StatusCode
	}
	return status
}

func TestCheckHealthyServer(t *testing.T) {
	_, env := setup(t)
	r := tlbctl(t, environ(env), "check")
	require.Equal(t, exitOK, r.code, "%s\n%s", r.stdout, r.stderr)
	for _, name := range []string{"connection", "tls", "server version", "role", "eviction policy", "persistence", "scripts", "provider acl"} {
		assert.Contains(t, r.stdout, name, r.stdout)
	}
	assert.NotContains(t, r.stdout, statusProblem)
	assert.Contains(t, r.stdout, "as tlb-ctl")
	assert.Contains(t, r.stdout, "user tlb-rate may run all")
	assert.NotContains(t, r.stdout+r.stderr, "pass", "no password printed")
}

func TestCheckFindsProblems(t *testing.T) {
	rs, env := setup(t)
	require.NoError(t, rs.Client().ConfigSet(ctxT(t), "maxmemory-policy", "volatile-lru").Err())
	require.NoError(t, rs.Client().Do(ctxT(t), "ACL", "SETUSER", "tlb-rate", "-pexpire").Err())
	r := tlbctl(t, environ(env), "check")
	assert.Equal(t, exitProblem, r.code, r.stdout)
	assert.Regexp(t, `eviction policy\s+PROBLEM\s+maxmemory-policy volatile-lru`, r.stdout)
	assert.Regexp(t, `provider acl\s+PROBLEM\s+user tlb-rate may not run: PEXPIRE`, r.stdout)
	assert.Contains(t, r.stderr, "2 problem(s) found")
}

func TestCheckUnreachable(t *testing.T) {
	_, env := setup(t)
	r := tlbctl(t, environ(env, "APP_RATE_LIMIT_REDIS_ADDR", "127.0.0.1:1"), "check")
	assert.Equal(t, exitProblem, r.code)
	assert.Regexp(t, `connection\s+PROBLEM`, r.stdout)
	assert.Regexp(t, `role\s+skipped`, r.stdout)
}

// TestInspectAndResetMatchTheService: after the service limited the API
// key (two logins) and an IP (one GET), inspect shows exactly that state
// under the derivation of tlbctl; reset without --yes changes nothing, with
// --yes deletes the one key and logs it without the subject.
func TestInspectAndResetMatchTheService(t *testing.T) {
	rs, env := setup(t)
	require.Equal(t, http.StatusOK, serve(t, env, http.MethodPost, "/api/v1/login", 2))
	kf := keyFile(t, testAPIKey)

	r := tlbctl(t, environ(env), "inspect", "--policy", "login", "--api-key-file", kf)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr, "no warning: the service identifies by API key")
	assert.Contains(t, r.stdout, "policy      login (revision 3, token_bucket)")
	assert.Contains(t, r.stdout, "subject     api-key sha256 "+subject.DigestAPIKey(testAPIKey).String())
	assert.NotContains(t, r.stdout, testAPIKey, "the key itself is never printed")
	assert.Contains(t, r.stdout, "state       present")
	assert.Contains(t, r.stdout, "remaining   3 of 5 (consumed 2)")
	assert.Contains(t, r.stdout, "stored      algorithm=token_bucket revision=3 schema=2")
	assert.Regexp(t, `ttl         \d`, r.stdout)
	assert.Contains(t, r.stdout, "reset at")

	stdin := tlbctlIn(t, environ(env), testAPIKey+"\n", "inspect", "--policy", "login", "--api-key-file", "-")
	require.Equal(t, exitOK, stdin.code, stdin.stderr)
	assert.Contains(t, stdin.stdout, "key         "+keyOf(r.stdout), "the key from standard input is the same subject")
	assert.Contains(t, stdin.stdout, "remaining   3 of 5 (consumed 2)")

	other := tlbctl(t, environ(env), "inspect", "--policy", "login", "--api-key-file", keyFile(t, "another-key"))
	require.Equal(t, exitOK, other.code)
	assert.Contains(t, other.stdout, "state       absent")
	assert.Contains(t, other.stderr, "warning: the key (SHA-256 "+subject.DigestAPIKey("another-key").String()+") is not in APP_WEB_API_KEYS_FILE")
	ip := tlbctl(t, environ(env), "inspect", "--policy", "login", "--ip", "127.0.0.1")
	require.Equal(t, exitOK, ip.code)
	assert.Contains(t, ip.stdout, "state       absent", "the API key, not the IP, was the identity")
	assert.Contains(t, ip.stderr, "warning: APP_WEB_IDENTITY is api-key: the service never identifies a client by its IP address")

	keys, err := rs.Client().Keys(ctxT(t), "tlb:rate:login:*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1)
	assert.Contains(t, r.stdout, "key         "+keys[0], "tlbctl derives the service's key")

	dry := tlbctl(t, environ(env), "reset", "--policy", "login", "--api-key-file", kf)
	require.Equal(t, exitOK, dry.code, dry.stderr)
	assert.Contains(t, dry.stdout, "would delete")
	assert.Contains(t, dry.stdout, "--yes")
	n, err := rs.Client().Exists(ctxT(t), keys[0]).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "without --yes nothing is deleted")

	done := tlbctl(t, environ(env), "reset", "--policy", "login", "--api-key-file", kf, "--yes")
	require.Equal(t, exitOK, done.code, done.stderr)
	assert.Contains(t, done.stdout, "deleted")
	assert.Contains(t, done.stderr, `"msg":"tlbctl reset"`)
	assert.Contains(t, done.stderr, `"key":"`+keys[0]+`"`)
	assert.Contains(t, done.stderr, `"subject_kind":"api-key"`)
	assert.Regexp(t, `"subject_digest":"[A-Za-z0-9_-]{22,}"`, done.stderr)
	assert.Contains(t, done.stderr, `"redis_user":"tlb-ctl"`)
	assert.NotContains(t, done.stderr, testAPIKey, "the audit log holds no subject")
	n, err = rs.Client().Exists(ctxT(t), keys[0]).Result()
	require.NoError(t, err)
	assert.Zero(t, n)

	again := tlbctl(t, environ(env), "inspect", "--policy", "login", "--api-key-file", kf)
	assert.Contains(t, again.stdout, "state       absent")
}

// TestBadInputChangesNothing: every bad input is one line on stderr, exit
// 2, and no command reaches Redis.
func TestBadInputChangesNothing(t *testing.T) {
	rs, env := setup(t)
	require.NoError(t, rs.Client().ConfigResetStat(ctxT(t)).Err())
	kf := keyFile(t, testAPIKey)
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	huge := filepath.Join(t.TempDir(), "huge")
	require.NoError(t, os.WriteFile(huge, bytes.Repeat([]byte("p"), config.MaxSecretFileLen+1), 0o600))
	ctlFile := func(path string) []string {
		return environ(env, EnvPassword, "", EnvPasswordFile, path)
	}
	noOwn := environ(env, EnvUsername, "", EnvPassword, "")
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no command", environ(env), nil, "usage:"},
		{"unknown command", environ(env), []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown policy", environ(env), []string{"inspect", "--policy", "nope", "--ip", "10.0.0.1"}, `--policy "nope": unknown policy`},
		{"malformed address", environ(env), []string{"reset", "--policy", "login", "--ip", "10.0.0.300", "--yes"}, `--ip "10.0.0.300": not an IP address`},
		{"two subjects", environ(env), []string{"inspect", "--policy", "login", "--ip", "10.0.0.1", "--principal", "alice"}, "exactly one of --api-key-file, --principal and --ip"},
		{"no subject", environ(env), []string{"reset", "--policy", "login"}, "exactly one of --api-key-file, --principal and --ip"},
		{"no policy", environ(env), []string{"inspect", "--ip", "10.0.0.1"}, "--policy is required"},
		{"unknown flag", environ(env), []string{"check", "--force"}, "flag provided but not defined"},
		{"audit log on inspect", environ(env), []string{"inspect", "--policy", "login", "--ip", "10.0.0.1", "--audit-log", "/tmp/x"}, "flag provided but not defined: -audit-log"},
		{"audit log a directory", environ(env), []string{"reset", "--policy", "login", "--ip", "10.0.0.1", "--yes", "--audit-log", t.TempDir()}, "--audit-log"},
		{"missing secret", environ(env, "APP_WEB_SUBJECT_SECRET", ""), []string{"reset", "--policy", "login", "--ip", "10.0.0.1", "--yes"}, "APP_WEB_SUBJECT_SECRET"},
		{"limiter off", environ(env, "APP_RATE_LIMIT_ENABLED", "false"), []string{"check"}, "APP_RATE_LIMIT_ENABLED is not true"},
		{"password without user", environ(env, EnvUsername, ""), []string{"check"}, EnvPassword + " is set but " + EnvUsername + " is not"},
		{"user without password", environ(env, EnvPassword, ""), []string{"check"}, EnvUsername + " is set but neither " + EnvPassword + " nor " + EnvPasswordFile + " is"},
		{"no own credentials", noOwn, []string{"inspect", "--policy", "login", "--api-key-file", kf}, EnvUsername + " is not set: tlbctl connects as its own ACL user"},
		{"no own credentials, check", noOwn, []string{"check"}, "or pass --use-service-credentials"},
		{"service credentials with own", environ(env), []string{"check", "--use-service-credentials"}, "--use-service-credentials: unset " + EnvUsername},
		{"password twice", environ(env, EnvPasswordFile, kf), []string{"check"}, EnvPassword + " and " + EnvPasswordFile + " are both set"},
		{"password file missing", ctlFile("/nonexistent/ctl-pass"), []string{"check"}, EnvPasswordFile + ": open /nonexistent/ctl-pass: no such file"},
		{"password file empty", ctlFile(empty), []string{"check"}, EnvPasswordFile + ": " + empty + " is empty"},
		{"password file too large", ctlFile(huge), []string{"check"}, EnvPasswordFile + ": " + huge + " is larger than 65536 bytes"},
		{"api key file empty", environ(env), []string{"inspect", "--policy", "login", "--api-key-file", empty}, "--api-key-file: " + empty + " is empty"},
		{"api key file too large", environ(env), []string{"inspect", "--policy", "login", "--api-key-file", huge}, "--api-key-file: " + huge + " is larger than"},
		{"api key stdin empty", environ(env), []string{"inspect", "--policy", "login", "--api-key-file", "-"}, "--api-key-file: standard input is empty"},
		{"blank principal", environ(env), []string{"inspect", "--policy", "login", "--principal", "  "}, "--principal: empty"},
		{"principal not printable", environ(env), []string{"inspect", "--policy", "login", "--principal", "al\x01ice"}, "--principal: invalid principal: byte 2 is not printable ascii"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tlbctl(t, tc.env, tc.args...)
			assert.Equal(t, exitUsage, r.code, r.stderr)
			assert.Contains(t, r.stderr, tc.want)
			if tc.name != "no command" {
				assert.Equal(t, 1, strings.Count(strings.TrimSpace(r.stderr), "\n")+1, "one line: %q", r.stderr)
			}
			assert.Empty(t, r.stdout)
		})
	}
	stats := redistest.CommandStats(t, rs.Client())
	for _, cmd := range []string{"del", "get", "ping", "hello", "auth"} {
		assert.NotContains(t, stats, cmd, "bad input reached Redis")
	}
}
