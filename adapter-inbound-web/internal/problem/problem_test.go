package problem

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Retry-After", "3")
	p := New(http.StatusTooManyRequests, "too many requests")
	p.Policy = "login"
	Write(rec, p)
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	assert.Equal(t, "3", rec.Header().Get("Retry-After"), "fields set before are kept")
	assert.Equal(t, strconv.Itoa(rec.Body.Len()), rec.Header().Get("Content-Length"))
	var got map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	assert.Equal(t, map[string]any{"type": "about:blank", "title": "too many requests", "status": float64(429), "policy": "login"}, got,
		"empty extensions are omitted")
}
