package metrics

import (
	"io"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDenialCacheExported: the denial cache's stats are read at scrape
// time, each under its name.
func TestDenialCacheExported(t *testing.T) {
	m := New()
	st := DenialCacheStats{Hits: 7, Invalidations: 2, Evicted: 1, Entries: 3, MaxEntries: 10, Live: true}
	m.RegisterDenialCache(func() DenialCacheStats { return st })
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		require.Equal(t, 200, rec.Code)
		body, _ := io.ReadAll(rec.Body)
		return string(body)
	}
	text := scrape()
	for _, want := range []string{
		DenialCacheHitsTotal + " 7", DenialCacheInvalidationsTotal + " 2", DenialCacheEvictedTotal + " 1",
		DenialCacheEntries + " 3", DenialCacheMaxEntries + " 10", DenialCacheLive + " 1",
	} {
		assert.Contains(t, text, want+"\n")
	}
	st.Live, st.Hits = false, 9
	text = scrape()
	assert.Contains(t, text, DenialCacheLive+" 0\n")
	assert.Contains(t, text, DenialCacheHitsTotal+" 9\n")
}

// TestRLSDenialCacheExported: the RLS generations' caches have names of
// their own, beside the edge's.
func TestRLSDenialCacheExported(t *testing.T) {
	m := New()
	m.RegisterDenialCache(func() DenialCacheStats { return DenialCacheStats{Hits: 1} })
	m.RegisterRLSDenialCache(func() DenialCacheStats { return DenialCacheStats{Hits: 5, Entries: 2, MaxEntries: 8, Live: true} })
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{DenialCacheHitsTotal + " 1", RLSDenialCacheHitsTotal + " 5", RLSDenialCacheEntries + " 2",
		RLSDenialCacheMaxEntries + " 8", RLSDenialCacheLive + " 1", RLSDenialCacheInvalidationsTotal + " 0", RLSDenialCacheEvictedTotal + " 0"} {
		assert.Contains(t, string(body), want+"\n")
	}
}
