package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
)

// The flood (issue 24 item 3): one subject over its limit hammered at
// floodConcurrency, beside floodWellBehaved subjects well under theirs.
const (
	floodConcurrency = 64
	// floodWellBehaved subjects, asked round robin by floodWellWorkers
	// workers; their limit is benchLimit, so every call is admitted.
	floodWellBehaved = 1_000
	floodWellWorkers = 4
	// floodLimit per hour is the flooding subject's limit, spent before
	// the runs: every flood call is denied.
	floodLimit = 10
	// floodOfferedRate is the flood's offered load (requests per second)
	// beside the well-behaved subjects: the abusive client of issue 24.
	floodOfferedRate = 50_000
)

// Flood families: this project's provider with and without the local
// denial cache (token bucket), and the peers.
const (
	FloodCached   = "provider_denial_cache"
	FloodUncached = "provider"
)

// floodOrder is the order of the flood's limiters inside a repetition.
var floodOrder = []string{FloodCached, FloodUncached, FamilyRedisRate, FamilyUlule}

// Flood phases of one repetition.
const (
	FloodPhaseFlood = "flood"      // the flooding subject alone
	FloodPhaseWell  = "well"       // the well-behaved subjects alone
	FloodPhaseMixed = "flood+well" // both at once
)

// FloodRun is one timed run of the flood phase.
type FloodRun struct {
	Limiter string  `json:"limiter"`
	Phase   string  `json:"phase"`
	Rep     int     `json:"rep"`
	Seconds float64 `json:"seconds"`
	// Denied and DeniedPerSec: flooding calls answered "denied" (every
	// flooding call must be); with the well-behaved subjects the flood is
	// offered at floodOfferedRate, alone it runs closed loop.
	Denied       int64   `json:"denied"`
	DeniedPerSec float64 `json:"deniedPerSec"`
	// Admitted and WellP99Micros: well-behaved calls (every one must be
	// admitted) and their p99 latency.
	Admitted      int64   `json:"admitted"`
	WellP99Micros float64 `json:"wellP99Micros"`
	// RedisCommands are the server's command calls during the run, those
	// the scripts run inside included (the harness's INFO and CONFIG
	// excluded); ScriptCalls only EVALSHA and EVAL, one per round trip
	// of every limiter here.
	RedisCommands int64 `json:"redisCommands"`
	ScriptCalls   int64 `json:"scriptCalls"`
	// ServerCPUPerSec is redis-server's CPU seconds per second of the run.
	ServerCPUPerSec float64  `json:"serverCpuPerSec"`
	Errors          int64    `json:"errors"`
	ErrorSamples    []string `json:"errorSamples,omitempty"`
}

// FloodSummary is the median over repetitions per limiter.
type FloodSummary struct {
	Limiter string `json:"limiter"`
	// DeniedPerSec (flood alone), CommandsPerDenied (its Redis commands
	// per denied call, inner script commands included) and
	// ScriptCallsPerDenied (round trips per denied call).
	DeniedPerSec         float64 `json:"deniedPerSec"`
	CommandsPerDenied    float64 `json:"commandsPerDenied"`
	ScriptCallsPerDenied float64 `json:"scriptCallsPerDenied"`
	// ServerCPUPerSec during the flood alone.
	ServerCPUPerSec float64 `json:"serverCpuPerSec"`
	// WellP99Micros alone and during the flood, and their ratio (paired
	// by repetition).
	WellP99Micros        float64 `json:"wellP99Micros"`
	WellP99MicrosFlooded float64 `json:"wellP99MicrosFlooded"`
	WellP99Ratio         float64 `json:"wellP99Ratio"`
}

// floodPhase runs the flood: per repetition and limiter, the flood
// alone, the well-behaved subjects alone, then both at once.
func floodPhase(ctx context.Context, cfg Config, srv *Server) ([]FloodRun, []FloodSummary, error) {
	lims, err := newFloodLimiters(ctx, srv.Addr)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		for _, l := range lims {
			_ = l.close()
		}
	}()
	cfg.logf("== flood: one denied subject at c=%d beside %d well-behaved subjects (%d workers), %d repetitions", floodConcurrency, floodWellBehaved, floodWellWorkers, cfg.Reps)
	var runs []FloodRun
	for rep := range cfg.Reps {
		order := slices.Clone(lims)
		for range rep % len(order) { // rotate: no limiter always first
			order = append(order[1:], order[0])
		}
		for _, l := range order {
			for _, phase := range []string{FloodPhaseFlood, FloodPhaseWell, FloodPhaseMixed} {
				r, err := floodRun(ctx, cfg, srv, l, phase, rep)
				if err != nil {
					return nil, nil, err
				}
				runs = append(runs, r)
			}
		}
	}
	sums := summarizeFlood(runs)
	for _, s := range sums {
		cfg.logf("   %-22s %12.0f denied/s %8.4f script calls/denied  well p99 %7.1f µs alone, %7.1f µs flooded (x%.2f)  server CPU %.2f s/s",
			s.Limiter, s.DeniedPerSec, s.ScriptCallsPerDenied, s.WellP99Micros, s.WellP99MicrosFlooded, s.WellP99Ratio, s.ServerCPUPerSec)
	}
	return runs, sums, nil
}

// floodRun is one timed run of l in phase.
func floodRun(ctx context.Context, cfg Config, srv *Server, l *floodLimiter, phase string, rep int) (FloodRun, error) {
	r := FloodRun{Limiter: l.name, Phase: phase, Rep: rep}
	hot := phase != FloodPhaseWell
	well := phase != FloodPhaseFlood
	var next atomic.Uint64
	wellOp := func() error { return l.well(ctx, int(next.Add(1)%floodWellBehaved)) }
	// Warm-up: connections open, scripts loaded.
	if err := parallel(floodWellWorkers, cfg.Warmup, func(int) error { return wellOp() }); err != nil {
		return r, fmt.Errorf("bench: flood warm-up %s: %w", l.name, err)
	}
	if err := srv.ResetStats(ctx); err != nil {
		return r, err
	}
	cpu0, err := srv.serverCPU(ctx)
	if err != nil {
		return r, err
	}
	var stop atomic.Bool
	var denied, admitted, nerr atomic.Int64
	var mu sync.Mutex
	var samples []string
	fail := func(err error) {
		nerr.Add(1)
		mu.Lock()
		if len(samples) < maxErrorsKept {
			samples = append(samples, err.Error())
		}
		mu.Unlock()
	}
	capped := func(n *atomic.Int64) bool { return cfg.MaxOpsPerRun > 0 && n.Load() >= cfg.MaxOpsPerRun }
	hists := make([]Histogram, floodWellWorkers)
	var wg sync.WaitGroup
	start := time.Now()
	timer := time.AfterFunc(cfg.RunDuration, func() { stop.Store(true) })
	// With the well-behaved subjects, the flood is an offered load (the
	// issue's abusive client at floodOfferedRate), the same for every
	// limiter: a closed loop of 64 workers answered locally in a
	// microsecond would spin both cores, starving redis-server and the
	// well-behaved workers alike, which no flood arriving over a network
	// does. Alone, the flood runs closed loop: its throughput is the
	// limiter's ceiling.
	paced := well
	interval := time.Duration(float64(time.Second) * floodConcurrency / floodOfferedRate)
	if hot {
		for range floodConcurrency {
			wg.Go(func() {
				for n := 0; !stop.Load() && !capped(&denied); n++ {
					if paced {
						// Worker w's n-th request is due at start +
						// n x floodConcurrency / floodOfferedRate; a
						// limiter slower than that runs behind, never
						// waits.
						if d := time.Until(start.Add(time.Duration(n) * interval)); d > 0 {
							time.Sleep(d)
						}
					}
					if err := l.hot(ctx); err != nil {
						fail(err)
						continue
					}
					denied.Add(1)
				}
			})
		}
	}
	if well {
		for w := range floodWellWorkers {
			wg.Go(func() {
				for !stop.Load() && !capped(&admitted) {
					t0 := time.Now()
					err := wellOp()
					hists[w].Record(time.Since(t0))
					if err != nil {
						fail(err)
						continue
					}
					admitted.Add(1)
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	timer.Stop()
	cpu1, err := srv.serverCPU(ctx)
	if err != nil {
		return r, err
	}
	info, err := srv.infoText(ctx, "commandstats")
	if err != nil {
		return r, err
	}
	cmds, err := redisinfo.CommandStats(info)
	if err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	for name, st := range cmds {
		if name == "info" || name == "config" || strings.HasPrefix(name, "config|") {
			continue
		}
		r.RedisCommands += st.Calls
		if name == "evalsha" || name == "eval" {
			r.ScriptCalls += st.Calls
		}
	}
	var all Histogram
	for i := range hists {
		all.Merge(&hists[i])
	}
	r.Seconds = elapsed.Seconds()
	r.Denied, r.Admitted = denied.Load(), admitted.Load()
	r.DeniedPerSec = float64(r.Denied) / r.Seconds
	if well && all.Count() > 0 {
		r.WellP99Micros = micros(all.Quantile(0.99))
	}
	r.ServerCPUPerSec = (cpu1 - cpu0) / r.Seconds
	r.Errors, r.ErrorSamples = nerr.Load(), samples
	return r, nil
}
