package edge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func TestParseSFString(t *testing.T) {
	long := strings.Repeat("k", MaxIdempotencyKeyLen)
	for _, tt := range []struct {
		in, want string
		err      error
	}{
		{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{`  "a b"  `, "a b", nil},
		{`"a\"b\\c"`, `a"b\c`, nil},
		{`"` + long + `"`, long, nil},
		{`"` + long + `k"`, "", errKeyTooLong},
		{`""`, "", errKeyEmpty},
		{`abc`, "", errKeyNotSFStr},
		{`"abc`, "", errKeyNotSFStr},
		{`"abc"x`, "", errKeyNotSFStr},
		{`"abc";p=1`, "", errKeyNotSFStr},
		{`"a\nb"`, "", errKeyNotSFStr},
		{"\"a\tb\"", "", errKeyNotSFStr},
		{"\"a\x7fb\"", "", errKeyNotSFStr},
		{"\"é\"", "", errKeyNotSFStr},
		{`"a\x"`, "", errKeyNotSFStr},
		{`"a\"`, "", errKeyNotSFStr},
		{`:YWJj:`, "", errKeyNotSFStr},
		{``, "", errKeyNotSFStr},
		{`"`, "", errKeyNotSFStr},
	} {
		got, err := parseSFString(tt.in)
		if tt.err != nil {
			assert.ErrorIs(t, err, tt.err, tt.in)
			assert.ErrorIs(t, err, ErrInvalidIdempotencyKey, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}

// TestParseIdempotencyKey: a quoted value is an sf-string, anything else a
// bare key of visible ASCII without '"' and '\'; both forms of the same
// characters give the same key.
func TestParseIdempotencyKey(t *testing.T) {
	long := strings.Repeat("k", MaxIdempotencyKeyLen)
	for _, tt := range []struct {
		in, want string
		err      error
	}{
		{`abc123`, "abc123", nil},
		{`"abc123"`, "abc123", nil},
		{`  abc123 `, "abc123", nil},
		{`8e03978e-40d5-43e8-bc93-6894a57f9324`, "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{`:YWJj:`, ":YWJj:", nil},
		{`a,b;c=d/e?f`, "a,b;c=d/e?f", nil},
		{"~!", "~!", nil},
		{long, long, nil},
		{`"a b"`, "a b", nil},
		{`"a\"b"`, `a"b`, nil},
		{long + "k", "", errKeyTooLong},
		{``, "", errKeyEmpty},
		{`   `, "", errKeyEmpty},
		{`""`, "", errKeyEmpty},
		{`a b`, "", errKeyBadToken},
		{`a"b`, "", errKeyBadToken},
		{`a\b`, "", errKeyBadToken},
		{"a\tb", "", errKeyBadToken},
		{"a\x7f", "", errKeyBadToken},
		{"é", "", errKeyBadToken},
		{"a\x00", "", errKeyBadToken},
		{`"abc`, "", errKeyNotSFStr},
		{`"abc";p=1`, "", errKeyNotSFStr},
	} {
		got, err := parseIdempotencyKey(tt.in)
		if tt.err != nil {
			assert.ErrorIs(t, err, tt.err, tt.in)
			assert.ErrorIs(t, err, ErrInvalidIdempotencyKey, tt.in)
			assert.Empty(t, got)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}

// dedupConfig is baseConfig with policy "api" having a dedup window and
// "plain" none, routed under /plain/.
func dedupConfig(t *testing.T, port ratelimit.EdgePort) Config {
	cfg := baseConfig(t, port, t0)
	spec := func(id ratelimit.PolicyID, window time.Duration) ratelimit.PolicySpec {
		return ratelimit.PolicySpec{ID: id, Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
			Params: ratelimit.FixedWindow{Limit: 10, Window: time.Second}, MaxCost: 5, CleanupGrace: time.Second,
			FailurePolicy: ratelimit.FailClosed, DedupWindow: window}
	}
	cfg.Policies = []ratelimit.Policy{mustPolicy(t, spec("api", 10*time.Minute)), mustPolicy(t, spec("plain", 0))}
	cfg.Routes = []Route{{Pattern: "/plain/", Policy: "plain"}}
	return cfg
}

// TestIdempotencyKey: on a dedup route the header becomes an evaluation ID
// keyed by the subject (same key + same client = same ID; another client
// gets another ID; the key itself never reaches the port); on a route
// without dedup and without the header nothing changes.
func TestIdempotencyKey(t *testing.T) {
	port := &fakePort{out: decision(true, 10, 9, 0, time.Second)}
	m, err := New(dedupConfig(t, port))
	require.NoError(t, err)
	var calls atomic.Int64
	h := m.Wrap(okHandler(&calls))
	do := func(path, remote string, keys ...string) (*httptest.ResponseRecorder, ratelimit.Request) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = remote
		for _, k := range keys {
			req.Header.Add(IdempotencyKeyHeader, k)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		reqs := port.requests()
		if len(reqs) == 0 {
			return rec, ratelimit.Request{}
		}
		return rec, reqs[len(reqs)-1]
	}

	_, a1 := do("/api/x", "192.0.2.1:1", `"key-1"`)
	_, a2 := do("/api/x", "192.0.2.1:2", `"key-1"`)
	_, bare := do("/api/x", "192.0.2.1:3", `key-1`)
	_, b1 := do("/api/x", "192.0.2.2:1", `"key-1"`)
	_, a3 := do("/api/x", "192.0.2.1:1", `"key-2"`)
	require.NoError(t, a1.EvaluationID.Validate())
	assert.Equal(t, a1.EvaluationID, a2.EvaluationID, "same client, same key: same ID")
	assert.Equal(t, a1.EvaluationID, bare.EvaluationID, "the bare and the quoted form are one key")
	assert.NotEqual(t, a1.EvaluationID, b1.EvaluationID, "another client cannot reach this client's ID")
	assert.NotEqual(t, a1.EvaluationID, a3.EvaluationID)
	assert.NotContains(t, string(a1.EvaluationID), "key-1")
	require.NoError(t, a1.ValidateFor(dedupConfig(t, port).Policies[0]))

	_, none := do("/api/x", "192.0.2.1:1")
	assert.Empty(t, none.EvaluationID, "without the header nothing changes")
	rec, plain := do("/plain/x", "192.0.2.1:1", `"key-1"`)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, ratelimit.PolicyID("plain"), plain.PolicyID)
	assert.Empty(t, plain.EvaluationID, "a route without dedup ignores the header")
	rec, _ = do("/plain/x", "192.0.2.1:1", `not an sf-string`)
	assert.Equal(t, http.StatusOK, rec.Code, "ignored even when malformed")
	assert.Equal(t, int64(8), calls.Load())
}

// TestIdempotencyKeyInvalid: a malformed key on a dedup route is a 400
// problem naming the rule, the port is not asked (nothing charged), and
// neither the key nor the subject appear in the body.
func TestIdempotencyKeyInvalid(t *testing.T) {
	var seen []Observation
	port := &fakePort{out: decision(true, 10, 9, 0, time.Second)}
	cfg := dedupConfig(t, port)
	cfg.Observer = ObserverFunc(func(o Observation) { seen = append(seen, o) })
	m, err := New(cfg)
	require.NoError(t, err)
	var calls atomic.Int64
	h := m.Wrap(okHandler(&calls))
	for _, keys := range [][]string{{`secret token`}, {`secret"token`}, {`""`}, {`"a"`, `"b"`}, {`"` + strings.Repeat("s", MaxIdempotencyKeyLen+1) + `"`}, {`"secret";x=1`}} {
		req := httptest.NewRequest(http.MethodPost, "/api/x", nil)
		req.RemoteAddr = "192.0.2.1:1"
		for _, k := range keys {
			req.Header.Add(IdempotencyKeyHeader, k)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusBadRequest, rec.Code, keys)
		assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
		var body map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		assert.Equal(t, "invalid Idempotency-Key", body["title"])
		assert.Contains(t, body["detail"], "Idempotency-Key")
		assert.NotContains(t, rec.Body.String(), "secret")
	}
	assert.Empty(t, port.requests(), "nothing reached the port")
	assert.Zero(t, calls.Load())
	require.Len(t, seen, 6)
	assert.Equal(t, http.StatusBadRequest, seen[0].Status)
}

// TestIdempotencyKeyReused: the port's Incompatible{dedup_conflict} for a
// request carrying a key is the draft's 422; without a key it stays 503.
func TestIdempotencyKeyReused(t *testing.T) {
	port := &fakePort{out: ratelimit.Incompatible{PolicyID: "api", Category: ratelimit.CategoryDedupConflict}}
	m, err := New(dedupConfig(t, port))
	require.NoError(t, err)
	var calls atomic.Int64
	h := m.Wrap(okHandler(&calls))
	req := httptest.NewRequest(http.MethodPost, "/api/x", nil)
	req.RemoteAddr = "192.0.2.1:1"
	req.Header.Set(IdempotencyKeyHeader, `"k"`)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	assert.Contains(t, rec.Body.String(), `"category":"dedup_conflict"`)

	req.Header.Del(IdempotencyKeyHeader)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Zero(t, calls.Load())
}

// FuzzParseSFString: the parser never panics; what it accepts is 1..
// MaxIdempotencyKeyLen printable ASCII characters and quoting it again
// (escaping '"' and '\') parses back to the same key; what it refuses is
// one of the fixed reasons, none holding the input.
func FuzzParseSFString(f *testing.F) {
	for _, s := range []string{`"a"`, `  "a b"  `, `"a\"b\\c"`, `""`, `"`, `abc`, `"a";p=1`, "\"\xff\"", `"a\x"`, `"` + strings.Repeat("k", 256) + `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		key, err := parseSFString(in)
		if err != nil {
			switch err {
			case errKeyNotSFStr, errKeyEmpty, errKeyTooLong:
			default:
				t.Fatalf("unexpected error %v", err)
			}
			if key != "" {
				t.Fatalf("key %q with an error", key)
			}
			return
		}
		if len(key) < 1 || len(key) > MaxIdempotencyKeyLen {
			t.Fatalf("key of %d characters accepted", len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("byte %#x accepted", key[i])
			}
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		again, err := parseSFString(quoted)
		if err != nil || again != key {
			t.Fatalf("round trip of %q: %q, %v", key, again, err)
		}
	})
}

// FuzzParseIdempotencyKey: the parser never panics; a value starting with
// '"' (after spaces) is exactly parseSFString's; any other is accepted
// only as itself, 1..MaxIdempotencyKeyLen visible ASCII characters other
// than '"' and '\', and its sf-string form parses to the same key; every
// refusal is one of the fixed reasons, none holding the input.
func FuzzParseIdempotencyKey(f *testing.F) {
	for _, s := range []string{`abc123`, `"abc123"`, ` abc `, `a b`, `a"b`, `a\b`, "", `"`, "\xff", strings.Repeat("k", 256), `:YWJj:`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		key, err := parseIdempotencyKey(in)
		trimmed := strings.Trim(in, " ")
		if strings.HasPrefix(trimmed, `"`) {
			sf, sfErr := parseSFString(in)
			if key != sf || err != sfErr {
				t.Fatalf("quoted %q: %q, %v; parseSFString %q, %v", in, key, err, sf, sfErr)
			}
			return
		}
		if err != nil {
			switch err {
			case errKeyBadToken, errKeyEmpty, errKeyTooLong:
			default:
				t.Fatalf("unexpected error %v", err)
			}
			if key != "" {
				t.Fatalf("key %q with an error", key)
			}
			return
		}
		if key != trimmed || len(key) < 1 || len(key) > MaxIdempotencyKeyLen {
			t.Fatalf("bare %q accepted as %q", in, key)
		}
		for i := 0; i < len(key); i++ {
			if c := key[i]; c <= 0x20 || c > 0x7e || c == '"' || c == '\\' {
				t.Fatalf("byte %#x accepted in a bare key", c)
			}
		}
		again, err := parseIdempotencyKey(`"` + key + `"`)
		if err != nil || again != key {
			t.Fatalf("the sf-string form of %q: %q, %v", key, again, err)
		}
	})
}
