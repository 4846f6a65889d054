package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// WorkersPerConn is how many closed-loop workers share one gRPC connection
// in Load.
const WorkersPerConn = 16

// LoadResult is one closed-loop load run.
type LoadResult struct {
	Workers  int
	Elapsed  time.Duration
	OK       int64
	Over     int64
	Errors   int64
	FirstErr error
	// Latencies of every completed call, sorted.
	Latencies []time.Duration
}

// Calls is the number of completed calls (OK or OVER_LIMIT).
func (r LoadResult) Calls() int64 { return r.OK + r.Over }

// PerSecond is completed calls per second.
func (r LoadResult) PerSecond() float64 { return float64(r.Calls()) / r.Elapsed.Seconds() }

// OverPerSecond is OVER_LIMIT answers per second.
func (r LoadResult) OverPerSecond() float64 { return float64(r.Over) / r.Elapsed.Seconds() }

// Quantile is the q-quantile (0..1) of the latencies, 0 without calls.
func (r LoadResult) Quantile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(q * float64(len(r.Latencies)-1))
	return r.Latencies[i]
}

// maxLoadDuration bounds every load run.
const maxLoadDuration = 2 * time.Minute

// Load runs workers closed-loop callers of ShouldRateLimit against addr for
// d (at most maxLoadDuration): each sends req, waits for the answer and
// sends the next. A call that fails counts in Errors (the first error is
// kept); each caller stops at its first error.
func Load(ctx context.Context, addr string, workers int, d time.Duration, req func(worker int) *rlsv3.RateLimitRequest) (LoadResult, error) {
	if workers < 1 {
		return LoadResult{}, errors.New("envoyrls: load needs at least one worker")
	}
	d = min(d, maxLoadDuration)
	nconn := (workers + WorkersPerConn - 1) / WorkersPerConn
	clients := make([]*Client, 0, nconn)
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	for range nconn {
		c, err := Dial(addr)
		if err != nil {
			return LoadResult{}, err
		}
		clients = append(clients, c)
	}
	// One call per connection first, so that connecting is not measured.
	for _, c := range clients {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.ShouldRateLimit(wctx, req(0))
		cancel()
		if err != nil {
			return LoadResult{}, fmt.Errorf("envoyrls: load warm-up on %s: %w", addr, err)
		}
	}
	type part struct {
		ok, over, errs int64
		first          error
		lat            []time.Duration
	}
	parts := make([]part, workers)
	lctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &parts[w]
			p.lat = make([]time.Duration, 0, 4096)
			c := clients[w/WorkersPerConn]
			r := req(w)
			for {
				t0 := time.Now()
				if !t0.Before(deadline) {
					return
				}
				resp, err := c.rls.ShouldRateLimit(lctx, r)
				if err != nil {
					p.errs++
					p.first = err
					return
				}
				p.lat = append(p.lat, time.Since(t0))
				if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
					p.over++
				} else {
					p.ok++
				}
			}
		}()
	}
	wg.Wait()
	res := LoadResult{Workers: workers, Elapsed: time.Since(start)}
	for _, p := range parts {
		res.OK += p.ok
		res.Over += p.over
		res.Errors += p.errs
		if res.FirstErr == nil && p.first != nil {
			res.FirstErr = p.first
		}
		res.Latencies = append(res.Latencies, p.lat...)
	}
	slices.Sort(res.Latencies)
	return res, nil
}
