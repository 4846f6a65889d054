package edge

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

func benchRequests(n int) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/api/v1/ping", nil)
		reqs[i].RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255)
	}
	return reqs
}

func runBench(b *testing.B, h http.Handler) {
	reqs := benchRequests(1000)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, reqs[i%len(reqs)])
		i++
	}
}

// BenchmarkBareHandler is the baseline: the handler alone.
func BenchmarkBareHandler(b *testing.B) {
	runBench(b, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
}

// BenchmarkMiddlewareAllowed: identity, digest, route lookup, port call and
// RateLimit-* fields over the bare handler, with a fake port.
func BenchmarkMiddlewareAllowed(b *testing.B) {
	benchMiddleware(b, ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Limit: 100, Remaining: 50, ResetAt: time.Now().Add(time.Minute), PolicyID: "api"}})
}

// BenchmarkMiddlewareUnavailable: the fail-closed 503 path.
func BenchmarkMiddlewareUnavailable(b *testing.B) {
	benchMiddleware(b, ratelimit.Unavailable{PolicyID: "api", RetryAfter: time.Second, Category: ratelimit.CategoryConnection})
}

func benchMiddleware(b *testing.B, out ratelimit.Outcome) {
	cfg := baseConfig(b, &ratelimittest.Fake{Outcome: out, DontRecord: true}, time.Now())
	cfg.Now = nil
	cfg.Routes = []Route{{Pattern: "POST /api/v1/login", Policy: "login"}, {Pattern: "GET /api/", Policy: "api"}}
	m, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	runBench(b, m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })))
}
