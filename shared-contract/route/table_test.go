package route_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/route"
)

// TestTable: the pattern check the policy parser shares with the edge's
// route table.
func TestTable(t *testing.T) {
	p := route.NewTable()
	require.NoError(t, p.Add("GET /api/"))
	require.NoError(t, p.Add("POST /api/v1/login"))
	assert.Error(t, p.Add("GET api"), "malformed")
	assert.Error(t, p.Add("GET /api/"), "duplicate")
	assert.Error(t, p.Add("/api/v1/x"), "conflicts with GET /api/ (neither is more specific)")
	require.NoError(t, p.Add("GET /api/v1/files/{id}"), "a failed Add leaves the set usable")
}

// TestTableHandler: a request gets the handler of the most specific
// pattern it matches, and ServeMux's own handler when it matches none.
func TestTableHandler(t *testing.T) {
	p := route.NewTable()
	api, login := http.NotFoundHandler(), http.RedirectHandler("/", http.StatusFound)
	require.NoError(t, p.Handle("GET /api/", api))
	require.NoError(t, p.Handle("POST /api/v1/login", login))
	assert.Equal(t, login, p.Handler(httptest.NewRequest(http.MethodPost, "/api/v1/login", nil)))
	assert.NotNil(t, p.Handler(httptest.NewRequest(http.MethodGet, "/other", nil)))
}
