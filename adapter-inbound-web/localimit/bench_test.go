package localimit

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
)

const benchClients = 10_000

func benchKeys() []string {
	keys := make([]string, benchClients)
	for i := range keys {
		keys[i] = fmt.Sprint("client-", i)
	}
	return keys
}

// A generous rate so that both allow and refill arithmetic run.
const benchRate, benchBurst = 1e9, 1 << 20

// BenchmarkLocalLimiter: Allow for known clients in a table of 10,000.
func BenchmarkLocalLimiter(b *testing.B) {
	l, err := New(Config{Rate: benchRate, Burst: benchBurst, MaxClients: 2 * benchClients, IdleTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	keys := benchKeys()
	for _, k := range keys {
		l.Allow(k)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Allow(keys[i%benchClients])
		i++
	}
}

// BenchmarkLocalLimiterParallel is BenchmarkLocalLimiter from GOMAXPROCS
// goroutines.
func BenchmarkLocalLimiterParallel(b *testing.B) {
	l, err := New(Config{Rate: benchRate, Burst: benchBurst, MaxClients: 2 * benchClients, IdleTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	keys := benchKeys()
	for _, k := range keys {
		l.Allow(k)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919))
		for pb.Next() {
			l.Allow(keys[i%benchClients])
			i++
		}
	})
}

// BenchmarkRawRate is the floor: x/time/rate alone, 10,000 limiters indexed
// directly (no lookup, no table).
func BenchmarkRawRate(b *testing.B) {
	lims := make([]*rate.Limiter, benchClients)
	for i := range lims {
		lims[i] = rate.NewLimiter(benchRate, benchBurst)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		lims[i%benchClients].AllowN(time.Now(), 1)
		i++
	}
}

// BenchmarkRawRateMutexMap is the naive table: a mutex-guarded
// map[string]*rate.Limiter of 10,000 entries without any bound.
func BenchmarkRawRateMutexMap(b *testing.B) {
	var mu sync.Mutex
	m := make(map[string]*rate.Limiter, benchClients)
	keys := benchKeys()
	for _, k := range keys {
		m[k] = rate.NewLimiter(benchRate, benchBurst)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		mu.Lock()
		lim := m[keys[i%benchClients]]
		mu.Unlock()
		lim.AllowN(time.Now(), 1)
		i++
	}
}

// BenchmarkLocalLimiterNewClients: every call is a new client in a full
// table (insert + eviction).
func BenchmarkLocalLimiterNewClients(b *testing.B) {
	l, err := New(Config{Rate: benchRate, Burst: benchBurst, MaxClients: benchClients, IdleTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	now := time.Now()
	var h uint64
	for b.Loop() {
		h += 0x9E3779B97F4A7C15
		l.allowHash(h, now)
	}
}

// BenchmarkMiddleware: the whole HTTP middleware (identity + limiter) for
// 10,000 client IPs, over a bare handler.
func BenchmarkMiddleware(b *testing.B) {
	l, err := New(Config{Rate: benchRate, Burst: benchBurst, MaxClients: 2 * benchClients, IdleTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ids, err := subject.NewResolver(subject.Config{})
	if err != nil {
		b.Fatal(err)
	}
	h := l.Wrap(ids, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	reqs := make([]*http.Request, benchClients)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/", nil)
		reqs[i].RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255)
	}
	w := httptest.NewRecorder()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.ServeHTTP(w, reqs[i%benchClients])
		i++
	}
}
