package main_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// Secret and subject leak scan (service lane, issue 7's security item):
// one full run of the real binary with the Redis limiter and the cache
// enabled, ACL users with passwords, distinctive random secrets (partly via
// _FILE variables), debug JSON logging, traffic that produces 200, 429, 400
// and (wrong password, then a killed Redis) 503, and a configuration-error
// run. Every byte the run produced is scanned for every secret, password,
// raw API key and raw client IP, and for the hex and base64 encodings of
// each.

// lockedBuffer is an io.Writer safe for the exec copier goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (c *leakCorpus) add(source, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == nil {
		c.src = map[string]*strings.Builder{}
	}
	b, ok := c.src[source]
	if !ok {
		b = &strings.Builder{}
		c.src[source] = b
	}
	b.WriteString(text)
	b.WriteByte('\n')
}

// addReply records a response's status line, every header and its body.
func (c *leakCorpus) addReply(source string, r reply) {
	var b strings.Builder
	fmt.Fprintf(&b, "status %d\n", r.status)
	names := make([]string, 0, len(r.header))
	for k := range r.header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(r.header[k], ", "))
	}
	b.WriteString(r.body)
	c.add(source, b.String())
}

// send is call with repeatable headers (h is sent as is).
func send(t *testing.T, method, url string, h http.Header) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	req.Header = h
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(t, err)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// TestE2ENoSecretOrSubjectLeaks: see the file comment. The scanned sources
// are the processes' stdout and stderr (every log line, debug level),
// every response (status, headers, body) including /metrics, /readyz and
// /healthz before and after the kill, both Redis servers (keys, values,
// DUMP, CLIENT LIST, ACL LOG, SLOWLOG), and the config-error run's output.
func TestE2ENoSecretOrSubjectLeaks(t *testing.T) {
	slowlog := []redistest.Option{redistest.WithConfig("slowlog-log-slower-than", "0"), redistest.WithConfig("slowlog-max-len", "100000")}
	coord := redistest.Start(t, slowlog...)
	coord.Require(t, redistest.CapKill)
	cacheSrv := redistest.Start(t, slowlog...)

	var (
		keySecret      = randomToken(t, "lk-ks-")
		subjectSecret  = randomToken(t, "lk-ss-")
		cacheSecret    = randomToken(t, "lk-cs-")
		coordPassword  = randomToken(t, "lk-pw-")
		cachePassword  = randomToken(t, "lk-cp-")
		wrongPassword  = randomToken(t, "lk-wp-")
		apiKey         = randomToken(t, "lk-ak-")
		otherKey       = randomToken(t, "lk-ok-")
		configSecret   = randomToken(t, "lk-cfg-")
		configPassword = randomToken(t, "lk-cfp-")
		shortSecret    = "lk-short-" + randomToken(t, "")[:8]
	)
	rb := make([]byte, 2)
	_, err := rand.Read(rb)
	require.NoError(t, err)
	clientIP := fmt.Sprintf("198.18.%d.%d", rb[0], 1+rb[1]%250) // benchmarking range: never a real peer here

	aclUser(t, coord, "tlb-rate", coordPassword)
	aclUser(t, cacheSrv, "tlb-cache", cachePassword)

	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	policies := write("policies.json", e2ePolicies)
	pwFile := write("coord-password", coordPassword+"\n")
	subjectFile := write("subject-secret", subjectSecret)
	cacheSecretFile := write("cache-secret", cacheSecret+"\n")

	env := func(password []string, trusted string) []string {
		return baseEnv(
			"APP_LOG_LEVEL", "debug",
			"APP_RATE_LIMIT_ENABLED", "true",
			"APP_RATE_LIMIT_PROVIDER", "redis",
			"APP_RATE_LIMIT_REDIS_ADDR", coord.Addr(),
			"APP_RATE_LIMIT_REDIS_USERNAME", "tlb-rate",
			password[0], password[1],
			"APP_RATE_LIMIT_KEY_SECRET", keySecret,
			"APP_RATE_LIMIT_POLICIES_FILE", policies,
			"APP_RATE_LIMIT_DEFAULT_POLICY", "global",
			"APP_WEB_SUBJECT_SECRET_FILE", subjectFile,
			"APP_WEB_TRUSTED_PROXIES", trusted,
			"APP_WEB_LOCAL_LIMIT_ENABLED", "false",
			"APP_CACHE_ENABLED", "true",
			"APP_CACHE_REDIS_ADDR", cacheSrv.Addr(),
			"APP_CACHE_REDIS_USERNAME", "tlb-cache",
			"APP_CACHE_REDIS_PASSWORD", cachePassword,
			"APP_CACHE_REDIS_KEY_SECRET_FILE", cacheSecretFile,
		)
	}
	trusted := startInstance(t, env([]string{"APP_RATE_LIMIT_REDIS_PASSWORD_FILE", pwFile}, "127.0.0.1/32,::1/128"))
	// keyed verifies API keys: the keys file holds the SHA-256 digest of
	// apiKey only.
	keysFile := write("api-keys", subject.DigestAPIKey(apiKey).String()+"\n")
	keyed := startInstance(t, append(env([]string{"APP_RATE_LIMIT_REDIS_PASSWORD_FILE", pwFile}, "192.0.2.0/24"),
		"APP_WEB_IDENTITY=api-key", "APP_WEB_API_KEYS_FILE="+keysFile))
	untrusted := startInstance(t, env([]string{"APP_RATE_LIMIT_REDIS_PASSWORD", coordPassword}, "192.0.2.0/24"))
	wrong := startInstance(t, env([]string{"APP_RATE_LIMIT_REDIS_PASSWORD", wrongPassword}, "127.0.0.1/32"))

	corpus := &leakCorpus{}
	statuses := map[string]map[int]int{}
	hit := func(label string, in *instance, method, path string, h http.Header) reply {
		t.Helper()
		r := send(t, method, in.url(path), h)
		corpus.addReply("responses", r)
		if statuses[label] == nil {
			statuses[label] = map[int]int{}
		}
		statuses[label][r.status]++
		return r
	}
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	probes := func(stage string) {
		for _, in := range []*instance{trusted, untrusted, wrong, keyed} {
			for _, p := range []string{"/metrics", "/readyz", "/healthz"} {
				hit(stage+" "+p, in, http.MethodGet, p, nil)
			}
		}
	}

	// 200s then 429s: the raw (unverified, so ignored) API key, the
	// forwarded IP through a trusted proxy, and the same forwarded IP
	// through an untrusted one (ignored). The key and the untrusted
	// forwarding are both the loopback peer: one budget.
	for range 12 {
		hit("api key", trusted, http.MethodGet, "/api/v1/ping", hdr("X-API-Key", apiKey))
		hit("trusted xff", trusted, http.MethodGet, "/api/v1/ping", hdr("X-Forwarded-For", clientIP))
		hit("untrusted xff", untrusted, http.MethodGet, "/api/v1/ping", hdr("X-Forwarded-For", clientIP+", 127.0.0.1"))
	}
	for range 5 {
		hit("login", untrusted, http.MethodPost, "/api/v1/login", hdr("X-API-Key", apiKey, "X-Forwarded-For", clientIP))
	}
	// api-key mode: the verified key is a subject (200s, then 429s); an
	// unknown, a repeated and an oversized key are refused (401, 400).
	for range 12 {
		hit("verified key", keyed, http.MethodGet, "/api/v1/ping", hdr("X-API-Key", apiKey))
	}
	hit("unknown key", keyed, http.MethodGet, "/api/v1/ping", hdr("X-API-Key", otherKey))
	hit("unknown key", keyed, http.MethodGet, "/api/v1/ping", hdr("X-API-Key", strings.Repeat(otherKey, 64)))
	hit("repeated key", keyed, http.MethodGet, "/api/v1/ping", hdr("X-API-Key", apiKey, "X-API-Key", otherKey))
	// In ip mode, an ambiguous and an oversized key: unverified keys are no identity,
	// so these are the loopback peer's (already spent) budget: 429s.
	hit("bad key", trusted, http.MethodGet, "/api/v1/ping", hdr("X-API-Key", apiKey, "X-API-Key", otherKey))
	hit("bad key", trusted, http.MethodGet, "/api/v1/ping", hdr("X-API-Key", strings.Repeat(otherKey, 64)))
	// 503s: a wrong coordination password.
	for range 3 {
		hit("wrong password", wrong, http.MethodGet, "/api/v1/ping", hdr("X-API-Key", apiKey, "X-Forwarded-For", clientIP))
	}
	probes("up")

	dump, coordKeys := redisDump(t, coord)
	corpus.add("coordination redis", dump)
	assert.Positive(t, coordKeys, "the limiter wrote state to be scanned")
	assert.Contains(t, dump, "user=tlb-rate", "the service authenticated as the ACL user")
	assert.Contains(t, strings.ToLower(dump), "slowlog [[", "the slowlog holds the service's commands")
	assert.Contains(t, strings.ToLower(dump), "evalsha", "the slowlog holds the service's program calls")
	cacheDump, _ := redisDump(t, cacheSrv)
	corpus.add("cache redis", cacheDump)

	// 503s: the coordination server is gone.
	coord.Kill()
	for range 3 {
		hit("redis down", trusted, http.MethodGet, "/api/v1/ping", hdr("X-API-Key", apiKey))
		hit("redis down", trusted, http.MethodGet, "/api/v1/ping", hdr("X-Forwarded-For", clientIP))
		hit("redis down", untrusted, http.MethodGet, "/api/v1/ping", hdr("X-Forwarded-For", clientIP))
	}
	probes("down")

	for _, in := range []*instance{trusted, untrusted, wrong, keyed} {
		in.stop(t) // shutdown lines are logged too
	}
	for name, in := range map[string]*instance{"trusted": trusted, "untrusted": untrusted, "wrong password": wrong, "api-key": keyed} {
		corpus.add("stderr "+name, in.logs())
	}
	corpus.add("stdout", trusted.stdout.String()+untrusted.stdout.String()+wrong.stdout.String()+keyed.stdout.String())

	// Configuration errors with the secrets set (and conflicting or
	// too-short ones): a value that does not parse (reported alone), and
	// values that parse but are invalid (every problem reported).
	for _, run := range []struct {
		timeout string
		want    []string
	}{
		{"soon", []string{"APP_RATE_LIMIT_COMMAND_TIMEOUT"}},
		{"20s", []string{"APP_RATE_LIMIT_COMMAND_TIMEOUT", "APP_RATE_LIMIT_REDIS_PASSWORD", "APP_WEB_SUBJECT_SECRET", "APP_CACHE_REDIS_KEY_SECRET"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), startWait)
		cmd := exec.CommandContext(ctx, binary(t))
		cmd.Env = baseEnv(
			"APP_RATE_LIMIT_ENABLED", "true",
			"APP_RATE_LIMIT_PROVIDER", "redis",
			"APP_RATE_LIMIT_REDIS_ADDR", "127.0.0.1:6399",
			"APP_RATE_LIMIT_REDIS_USERNAME", "tlb-rate",
			"APP_RATE_LIMIT_REDIS_PASSWORD", configPassword,
			"APP_RATE_LIMIT_REDIS_PASSWORD_FILE", pwFile,
			"APP_RATE_LIMIT_KEY_SECRET", configSecret,
			"APP_RATE_LIMIT_COMMAND_TIMEOUT", run.timeout,
			"APP_RATE_LIMIT_DEFAULT_POLICY", "global",
			"APP_WEB_SUBJECT_SECRET", shortSecret,
			"APP_CACHE_ENABLED", "true",
			"APP_CACHE_REDIS_ADDR", "127.0.0.1:6398",
			"APP_CACHE_REDIS_PASSWORD", cachePassword,
			"APP_CACHE_REDIS_KEY_SECRET", keySecret,
			"APP_CACHE_REDIS_KEY_SECRET_FILE", cacheSecretFile,
		)
		var cfgOut, cfgErr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &cfgOut, &cfgErr
		err := cmd.Run()
		cancel()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "timeout %s: want a non-zero exit, got %v\n%s", run.timeout, err, cfgErr.String())
		assert.Equal(t, 2, exit.ExitCode(), "timeout %s", run.timeout)
		for _, v := range run.want {
			assert.Contains(t, cfgErr.String(), "config: "+v+":", "timeout %s: %s is reported", run.timeout, v)
		}
		corpus.add("config error", cfgOut.String()+cfgErr.String())
	}

	// The run covered what it claims to.
	for label, want := range map[string][]int{
		"api key":        {http.StatusOK, http.StatusTooManyRequests},
		"trusted xff":    {http.StatusOK, http.StatusTooManyRequests},
		"untrusted xff":  {http.StatusOK, http.StatusTooManyRequests},
		"login":          {http.StatusOK, http.StatusTooManyRequests},
		"bad key":        {http.StatusTooManyRequests},
		"verified key":   {http.StatusOK, http.StatusTooManyRequests},
		"unknown key":    {http.StatusUnauthorized},
		"repeated key":   {http.StatusBadRequest},
		"wrong password": {http.StatusServiceUnavailable},
		"redis down":     {http.StatusServiceUnavailable},
		"down /readyz":   {http.StatusServiceUnavailable},
		"up /metrics":    {http.StatusOK},
	} {
		for _, code := range want {
			assert.Positive(t, statuses[label][code], "%s: want a %d (got %v)", label, code, statuses[label])
		}
	}
	assert.Equal(t, 10, statuses["trusted xff"][http.StatusOK], "the forwarded client is one subject")
	assert.Equal(t, 10, statuses["api key"][http.StatusOK]+statuses["untrusted xff"][http.StatusOK],
		"an unverified key is no identity and an untrusted peer's X-Forwarded-For is ignored: both are the loopback peer, one global budget")
	assert.Equal(t, 10, statuses["verified key"][http.StatusOK], "the verified key's own global budget")
	assert.Equal(t, 3, statuses["up /readyz"][http.StatusOK], "ready with the right password")
	assert.Equal(t, 1, statuses["up /readyz"][http.StatusServiceUnavailable], "not ready with the wrong one")
	responses := corpus.src["responses"].String()
	assert.Contains(t, responses, `tlb_ratelimit_outcomes_total{category="none",decision="denied"`, "the scanned metrics hold the run's outcomes")
	assert.Contains(t, corpus.src["stderr trusted"].String(), `"level":"DEBUG"`, "debug logging is on")
	assert.Contains(t, corpus.src["stderr trusted"].String(), `"msg":"starting"`)
	assert.Contains(t, corpus.src["stderr trusted"].String(), `"msg":"stopped"`)

	needles := map[string]string{}
	for name, s := range map[string]string{
		"rate-limit key secret": keySecret, "subject secret": subjectSecret, "cache key secret": cacheSecret,
		"coordination password": coordPassword, "cache password": cachePassword, "wrong password": wrongPassword,
		"raw API key": apiKey, "second API key": otherKey,
		"config-run key secret": configSecret, "config-run password": configPassword, "too-short subject secret": shortSecret,
	} {
		for enc, v := range encodings(s) {
			needles[name+" ("+enc+")"] = v
		}
		// A truncated rendering still gives a token's random core away.
		if len(s) > 32 {
			needles[name+" (core)"] = s[len(s)-32:][:16]
		}
	}
	needles["raw client IP"] = clientIP
	names := make([]string, 0, len(needles))
	for name := range needles {
		names = append(names, name)
	}
	sort.Strings(names)
	require.Len(t, corpus.src, 9, "every source was collected")
	for source, text := range corpus.src {
		t.Logf("scanned %s: %d bytes for %d needles", source, text.Len(), len(needles))
		if source != "stdout" { // the service logs to stderr; stdout is scanned but may be empty
			require.NotEmpty(t, strings.TrimSpace(text.String()), source)
		}
		for _, name := range names {
			// The haystack is not printed: it is large, and it holds the leak.
			if i := strings.Index(text.String(), needles[name]); i >= 0 {
				t.Errorf("%s contains the %s at byte %d", source, name, i)
			}
		}
	}
}
