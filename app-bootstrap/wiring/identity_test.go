package wiring

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// newRequest is serve's request (peer 192.0.2.10) without serving it.
func newRequest(method, target string, header ...string) *http.Request {
	req := httptest.NewRequest(method, target, strings.NewReader(""))
	req.RemoteAddr = "192.0.2.10:5555"
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func writeKeys(t *testing.T, keys ...string) string {
	t.Helper()
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(subject.DigestAPIKey(k).String() + "\n")
	}
	path := filepath.Join(t.TempDir(), "api-keys")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

// TestWebAPIKeyMode: the per-IP guard runs first, in front of the key
// check: invented keys from one address get 401 (never reaching the port)
// until the address's local budget is spent, then 429 from the guard; a
// known key is the subject, whatever the address.
func TestWebAPIKeyMode(t *testing.T) {
	kv := append(enabledKV("127.0.0.1:1"),
		"APP_WEB_IDENTITY", "api-key", "APP_WEB_API_KEYS_FILE", writeKeys(t, "key-alpha", "key-beta"),
		"APP_WEB_LOCAL_LIMIT_ENABLED", "true", "APP_WEB_LOCAL_LIMIT_BURST", "3", "APP_WEB_LOCAL_LIMIT_RATE", "0.01", "APP_WEB_LOCAL_LIMIT_IDLE_TTL", "10m")
	cfg := loadConfig(t, kv...)
	port := fakePort(decision(true, 4, 0))
	h := newTestHandler(t, cfg, port)

	codes := []int{}
	for i := range 10 {
		rec := serve(h, http.MethodGet, PathPing, "X-API-Key", "invented-key-"+strings.Repeat("x", i))
		codes = append(codes, rec.Code)
		assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
		assert.NotContains(t, rec.Body.String(), "invented-key")
		if rec.Code == http.StatusUnauthorized {
			assert.NotEmpty(t, rec.Header().Get("WWW-Authenticate"))
		}
	}
	assert.Equal(t, []int{401, 401, 401, 429, 429, 429, 429, 429, 429, 429}, codes, "burst 3: the guard answers the rest")
	assert.Empty(t, port.Requests(), "an unknown key never reaches the port")
	assert.Equal(t, http.StatusTooManyRequests, serve(h, http.MethodGet, PathPing, "X-API-Key", "key-alpha").Code,
		"the spent address is refused whatever its key")

	// Another address: its own bucket; no key is 401.
	at := func(remote string, header ...string) *httptest.ResponseRecorder {
		req := newRequest(http.MethodGet, PathPing, header...)
		req.RemoteAddr = remote
		rec := newRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	assert.Equal(t, http.StatusUnauthorized, at("198.51.100.9:1").Code, "no key")
	digestAt := func(remote, key string) ratelimit.SubjectDigest {
		require.Equal(t, http.StatusOK, at(remote, "X-API-Key", key).Code)
		reqs := port.Requests()
		return reqs[len(reqs)-1].SubjectDigest
	}
	alpha := digestAt("198.51.100.1:1", "key-alpha")
	assert.Equal(t, alpha, digestAt("198.51.100.2:1", "key-alpha"), "the key is the subject, not the address")
	assert.NotEqual(t, alpha, digestAt("198.51.100.3:1", "key-beta"))
	text := metricsText(t, h)
	assert.Contains(t, text, `tlb_local_limit_responses_total{status="429"} 8`)
	assert.Contains(t, text, `tlb_identity_refusals_total{status="401"} 4`, "three unknown keys and one missing")
}

// TestWebTrustedHeaderMode: the principal header counts from a trusted
// proxy only.
func TestWebTrustedHeaderMode(t *testing.T) {
	kv := append(enabledKV("127.0.0.1:1"),
		"APP_WEB_IDENTITY", "trusted-header", "APP_WEB_IDENTITY_HEADER", "X-Authenticated-User", "APP_WEB_TRUSTED_PROXIES", "192.0.2.10")
	cfg := loadConfig(t, kv...)
	port := fakePort(decision(true, 4, 0))
	h := newTestHandler(t, cfg, port)
	digest := func(remote string, header ...string) ratelimit.SubjectDigest {
		req := newRequest(http.MethodGet, PathPing, header...)
		req.RemoteAddr = remote
		rec := newRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		reqs := port.Requests()
		return reqs[len(reqs)-1].SubjectDigest
	}
	alice := digest("192.0.2.10:1", "X-Authenticated-User", "alice")
	assert.Equal(t, alice, digest("192.0.2.10:2", "X-Authenticated-User", "alice"))
	assert.NotEqual(t, alice, digest("192.0.2.10:1", "X-Authenticated-User", "bob"))
	direct := digest("203.0.113.5:1")
	assert.Equal(t, direct, digest("203.0.113.5:1", "X-Authenticated-User", "alice"), "from an untrusted peer the header is ignored: the peer's IP")
	assert.NotEqual(t, alice, direct)
}

func TestWebLegacyFieldsSwitch(t *testing.T) {
	for _, legacy := range []string{"true", "false"} {
		cfg := loadConfig(t, append(enabledKV("127.0.0.1:1"), "APP_WEB_RATELIMIT_LEGACY_HEADERS", legacy)...)
		h := newTestHandler(t, cfg, fakePort(decision(false, 0, 1500*time.Millisecond)))
		rec := serve(h, http.MethodPost, PathLogin)
		require.Equal(t, http.StatusTooManyRequests, rec.Code)
		assert.Regexp(t, `^"login";r=0;t=(29|30)$`, rec.Header().Get("RateLimit"))
		assert.Equal(t, `"login";q=5;w=60`, rec.Header().Get("RateLimit-Policy"))
		if legacy == "true" {
			assert.Equal(t, "5", rec.Header().Get("RateLimit-Limit"))
		} else {
			assert.Empty(t, rec.Header().Values("RateLimit-Limit"))
		}
	}
}

func TestReloadAPIKeys(t *testing.T) {
	path := writeKeys(t, "old-key")
	keys, err := subject.NewAPIKeys([]subject.APIKeyDigest{subject.DigestAPIKey("old-key")})
	require.NoError(t, err)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	require.NoError(t, os.WriteFile(path, []byte(subject.DigestAPIKey("new-key").String()+"\n"+subject.DigestAPIKey("other").String()+"\n"), 0o600))
	reloadAPIKeys(keys, path, log)
	assert.Equal(t, 2, keys.Len())
	_, err = keys.Identify(newRequest(http.MethodGet, "/", "X-API-Key", "new-key"))
	require.NoError(t, err)
	assert.Contains(t, logs.String(), "api keys reloaded")

	require.NoError(t, os.WriteFile(path, []byte("raw-key-pasted-by-mistake\n"), 0o600))
	reloadAPIKeys(keys, path, log)
	assert.Equal(t, 2, keys.Len(), "a broken file keeps the previous set")
	_, err = keys.Identify(newRequest(http.MethodGet, "/", "X-API-Key", "new-key"))
	require.NoError(t, err)
	assert.Contains(t, logs.String(), "api keys reload failed; keeping the previous set")
	assert.Contains(t, logs.String(), "APP_WEB_API_KEYS_FILE")
	assert.NotContains(t, logs.String(), "raw-key-pasted-by-mistake")
}
