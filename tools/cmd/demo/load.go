package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// demoPath is the route the load phase hits (the demo policy's route).
const demoPath = "/api/v1/ping"

// requestTimeout bounds every request of the load generator.
const requestTimeout = 5 * time.Second

// loadSpec is a bounded load: at most requests, for at most duration, paced
// at rate per second, from the clients named (distinct verified X-API-Key
// values); each client's requests alternate between the targets.
type loadSpec struct {
	targets     []*instance
	clients     []string
	requests    int
	duration    time.Duration
	rate        float64
	concurrency int
	path        string
}

// counts tallies responses.
type counts struct {
	requests, allowed, denied, failClosed, other, errors int
}

func (c *counts) add(status int, err error) {
	c.requests++
	switch {
	case err != nil:
		c.errors++
	case status == http.StatusOK:
		c.allowed++
	case status == http.StatusTooManyRequests:
		c.denied++
	case status == http.StatusServiceUnavailable:
		c.failClosed++
	default:
		c.other++
	}
}

// clientResult is one client's tally and the span of its requests (first
// send to last response), which bounds the server instants it was
// evaluated at.
type clientResult struct {
	name        string
	counts      counts
	first, last time.Time
}

// loadResult is the outcome of a load phase.
type loadResult struct {
	perTarget []counts
	perClient []clientResult
	total     counts
	elapsed   time.Duration
	// samples holds the first response of each non-200 status: its
	// rate-limit header fields and (for 503) its body.
	samples map[int]sample
	// categories counts the 503 responses by their problem category
	// (connection, circuit_open, ...).
	categories map[string]int
	// responses holds every answered request, in the order answered.
	responses []response
}

// response is one request of a load phase and what came back.
type response struct {
	target int // index into loadSpec.targets
	client string
	status int   // 0 when err is set
	err    error // a transport error: nothing is known of the request
	sent   time.Time
	got    time.Time
	header http.Header
	body   string
}

// sample is one response shown to the reader.
type sample struct {
	header http.Header
	body   string
}

// sampleFields are the response fields the demo shows.
var sampleFields = []string{"Retry-After", "RateLimit", "RateLimit-Policy", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Content-Type"}

func clientName(i int) string { return fmt.Sprintf("demo-client-%d", i+1) }

// clientNames returns the names of the first n clients.
func clientNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = clientName(i)
	}
	return out
}

// apiKeysFile is the keys file accepting names as API keys: their SHA-256
// digests, one per line.
func apiKeysFile(names []string) string {
	var b strings.Builder
	for _, n := range names {
		sum := sha256.Sum256([]byte(n))
		b.WriteString(hex.EncodeToString(sum[:]) + "\n")
	}
	return b.String()
}

// runLoad drives spec and returns the tallies. It stops sending at the
// request count, the duration, or ctx, whichever comes first, and waits for
// every request sent.
func runLoad(ctx context.Context, spec loadSpec) loadResult {
	res := loadResult{perTarget: make([]counts, len(spec.targets)), perClient: make([]clientResult, len(spec.clients)), samples: map[int]sample{}, categories: map[string]int{}}
	for i, n := range spec.clients {
		res.perClient[i].name = n
	}
	httpc := &http.Client{
		Timeout:   requestTimeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: spec.concurrency, DisableCompression: true},
	}
	defer httpc.CloseIdleConnections()

	// The duration bounds the dispatch only: a request sent is always
	// answered or fails (requestTimeout), and counted, so no admission
	// goes uncounted because the phase ended while it was in flight.
	reqCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, spec.duration)
	defer cancel()
	jobs := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range spec.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				c := i % len(spec.clients)
				t := (i / len(spec.clients)) % len(spec.targets)
				sent := time.Now()
				status, smp, err := get(reqCtx, httpc, "http://"+spec.targets[t].addr+spec.path, spec.clients[c])
				got := time.Now()
				mu.Lock()
				if _, seen := res.samples[status]; err == nil && status != http.StatusOK && !seen {
					res.samples[status] = smp
				}
				if err == nil && status == http.StatusServiceUnavailable {
					res.categories[problemCategory(smp.body)]++
				}
				res.responses = append(res.responses, response{target: t, client: spec.clients[c], status: status, err: err, sent: sent, got: got, header: smp.header, body: smp.body})
				res.perTarget[t].add(status, err)
				res.total.add(status, err)
				cr := &res.perClient[c]
				cr.counts.add(status, err)
				if cr.first.IsZero() || sent.Before(cr.first) {
					cr.first = sent
				}
				if got.After(cr.last) {
					cr.last = got
				}
				mu.Unlock()
			}
		}()
	}
	start := time.Now()
	interval := time.Duration(float64(time.Second) / spec.rate)
dispatch:
	for i := 0; i < spec.requests; i++ {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				break dispatch
			}
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			break dispatch
		}
	}
	close(jobs)
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

func get(ctx context.Context, c *http.Client, url, apiKey string) (int, sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, sample{}, err
	}
	req.Header.Set("X-API-Key", apiKey)
	resp, err := c.Do(req)
	if err != nil {
		return 0, sample{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, sample{header: resp.Header, body: string(body)}, nil
}

// problemCategory is the "category" of a 503 problem body ("unknown" when
// it has none).
func problemCategory(body string) string {
	var p struct {
		Category string `json:"category"`
	}
	if json.Unmarshal([]byte(body), &p) != nil || p.Category == "" {
		return "unknown"
	}
	return p.Category
}

// outageLoad is phase 2's load, the same in every mode: client's 30
// requests at 20/s, 2 at a time, spread over instances, while Redis is
// down. The error is ctx's, when the run was stopped.
func outageLoad(ctx context.Context, instances []*instance, client string) (loadResult, error) {
	outage := runLoad(ctx, loadSpec{
		targets:     instances,
		clients:     []string{client},
		requests:    30,
		duration:    10 * time.Second,
		rate:        20,
		concurrency: 2,
		path:        demoPath,
	})
	return outage, ctx.Err()
}
