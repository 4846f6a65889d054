package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	ulule "github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
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

// floodLimiter is one limiter of the flood: hot answers the flooding
// subject (nil only for a denial), well a well-behaved subject i (nil only
// for an admission).
type floodLimiter struct {
	name  string
	hot   func(ctx context.Context) error
	well  func(ctx context.Context, i int) error
	close func() error
}

// newFloodLimiters builds the flood's limiters against addr, each over its
// own client, and spends the flooding subject's limit on each.
func newFloodLimiters(ctx context.Context, addr string) (out []*floodLimiter, err error) {
	defer func() {
		if err != nil {
			for _, l := range out {
				_ = l.close()
			}
			out = nil
		}
	}()
	cfg := clientConfig(addr)
	// A connection for every worker, for every limiter alike; the
	// provider's in-flight bound is the pool size.
	cfg.PoolSize = floodConcurrency + floodWellWorkers
	subs := newSubjects(floodWellBehaved) // index floodWellBehaved: the flooding subject
	hotSubject := subs[floodWellBehaved]
	deadline := time.Now().Add(30 * 24 * time.Hour)
	spec := func(id ratelimit.PolicyID, limit int64) (ratelimit.Policy, error) {
		return ratelimit.NewPolicy(ratelimit.PolicySpec{ID: id, Revision: 1, Algorithm: ratelimit.AlgorithmTokenBucket,
			Params:  ratelimit.TokenBucket{Capacity: limit, RefillTokens: limit, RefillPeriod: time.Hour},
			MaxCost: 1, CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.FailClosed})
	}
	hotPol, err := spec("fh", floodLimit)
	if err != nil {
		return nil, err
	}
	wellPol, err := spec("fw", benchLimit)
	if err != nil {
		return nil, err
	}
	for _, cached := range []bool{true, false} {
		keys, err := keyBuilder(fmt.Sprintf("flood-%t", cached))
		if err != nil {
			return out, err
		}
		c, err := redisrate.NewClient(cfg)
		if err != nil {
			return out, err
		}
		pols := []ratelimit.Policy{hotPol, wellPol}
		prov, err := redisrate.New(c, keys, pols, redisrate.Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
		if err != nil {
			_ = c.Close()
			return out, fmt.Errorf("bench: flood provider: %w", err)
		}
		if err := prov.Start(ctx); err != nil {
			_ = prov.Close()
			return out, fmt.Errorf("bench: flood provider start: %w", err)
		}
		var port ratelimit.EdgePort = prov
		name, closeAll := FloodUncached, prov.Close
		if cached {
			// As the service composes it, without the subscription (no
			// reset happens here; its heartbeat would add one PUBLISH a
			// second).
			dc, err := ratedenial.New(prov, ratedenial.Options{Policies: pols, Keys: keys})
			if err != nil {
				_ = prov.Close()
				return out, fmt.Errorf("bench: denial cache: %w", err)
			}
			port, name = dc, FloodCached
			closeAll = func() error { dc.Close(); return prov.Close() }
		}
		out = append(out, &floodLimiter{name: name, close: closeAll,
			hot: func(ctx context.Context) error {
				o := port.Evaluate(ctx, ratelimit.Request{PolicyID: "fh", SubjectDigest: hotSubject, Cost: 1, Deadline: deadline})
				if e, ok := o.(ratelimit.Evaluated); !ok || e.Decision.Allowed {
					return fmt.Errorf("%s: flooding call not denied: %v", name, o)
				}
				return nil
			},
			well: func(ctx context.Context, i int) error {
				o := port.Evaluate(ctx, ratelimit.Request{PolicyID: "fw", SubjectDigest: subs[i], Cost: 1, Deadline: deadline})
				if !ratelimit.Admitted(o) {
					return fmt.Errorf("%s: well-behaved call not admitted: %v", name, o)
				}
				return nil
			}})
	}

	rc, err := redisrate.NewClient(cfg)
	if err != nil {
		return out, err
	}
	rl := redis_rate.NewLimiter(rc)
	hotLimit, wellLimit := redis_rate.PerHour(floodLimit), redis_rate.Limit{Rate: benchLimit, Burst: benchLimit, Period: time.Hour}
	out = append(out, &floodLimiter{name: FamilyRedisRate, close: rc.Close,
		hot: func(ctx context.Context) error {
			res, err := rl.Allow(ctx, "flood:"+string(hotSubject), hotLimit)
			if err != nil {
				return err
			}
			if res.Allowed != 0 {
				return fmt.Errorf("redis_rate: flooding call allowed: %+v", *res)
			}
			return nil
		},
		well: func(ctx context.Context, i int) error {
			res, err := rl.Allow(ctx, "flood:"+string(subs[i]), wellLimit)
			if err != nil {
				return err
			}
			if res.Allowed != 1 {
				return fmt.Errorf("redis_rate: well-behaved call denied: %+v", *res)
			}
			return nil
		}})

	uc, err := redisrate.NewClient(cfg)
	if err != nil {
		return out, err
	}
	store, err := ulredis.NewStoreWithOptions(uc, ulule.StoreOptions{Prefix: "flood", MaxRetry: ulule.DefaultMaxRetry})
	if err != nil {
		_ = uc.Close()
		return out, fmt.Errorf("bench: ulule store: %w", err)
	}
	ulHot := ulule.New(store, ulule.Rate{Period: time.Hour, Limit: floodLimit})
	ulWell := ulule.New(store, ulule.Rate{Period: time.Hour, Limit: benchLimit})
	out = append(out, &floodLimiter{name: FamilyUlule, close: uc.Close,
		hot: func(ctx context.Context) error {
			res, err := ulHot.Get(ctx, string(hotSubject))
			if err != nil {
				return err
			}
			if !res.Reached {
				return fmt.Errorf("ulule: flooding call not limited: %+v", res)
			}
			return nil
		},
		well: func(ctx context.Context, i int) error {
			res, err := ulWell.Get(ctx, string(subs[i]))
			if err != nil {
				return err
			}
			if res.Reached {
				return fmt.Errorf("ulule: well-behaved call limited: %+v", res)
			}
			return nil
		}})

	// Spend the flooding subject's limit on each (the calls that admit).
	for _, l := range out {
		denied := false
		for range floodLimit + 2 {
			if l.hot(ctx) == nil {
				denied = true
				break
			}
		}
		if !denied {
			return out, fmt.Errorf("bench: flood %s: the flooding subject is never denied", l.name)
		}
	}
	return out, nil
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

// summarizeFlood takes the medians per limiter; the p99 ratio is paired
// by repetition.
func summarizeFlood(runs []FloodRun) []FloodSummary {
	var out []FloodSummary
	for _, name := range floodOrder {
		pick := func(phase string, f func(FloodRun) float64) []float64 {
			var vs []float64
			for _, r := range runs {
				if r.Limiter == name && r.Phase == phase {
					vs = append(vs, f(r))
				}
			}
			return vs
		}
		deniedPerSec := pick(FloodPhaseFlood, func(r FloodRun) float64 { return r.DeniedPerSec })
		if len(deniedPerSec) == 0 {
			continue
		}
		alone := pick(FloodPhaseWell, func(r FloodRun) float64 { return r.WellP99Micros })
		flooded := pick(FloodPhaseMixed, func(r FloodRun) float64 { return r.WellP99Micros })
		var ratios []float64
		for k := range min(len(alone), len(flooded)) {
			if alone[k] > 0 {
				ratios = append(ratios, flooded[k]/alone[k])
			}
		}
		out = append(out, FloodSummary{
			Limiter:      name,
			DeniedPerSec: median(deniedPerSec),
			CommandsPerDenied: median(pick(FloodPhaseFlood, func(r FloodRun) float64 {
				if r.Denied == 0 {
					return 0
				}
				return float64(r.RedisCommands) / float64(r.Denied)
			})),
			ScriptCallsPerDenied: median(pick(FloodPhaseFlood, func(r FloodRun) float64 {
				if r.Denied == 0 {
					return 0
				}
				return float64(r.ScriptCalls) / float64(r.Denied)
			})),
			ServerCPUPerSec:      median(pick(FloodPhaseFlood, func(r FloodRun) float64 { return r.ServerCPUPerSec })),
			WellP99Micros:        median(alone),
			WellP99MicrosFlooded: median(flooded),
			WellP99Ratio:         median(ratios),
		})
	}
	return out
}

// floodSummary returns the summary of limiter.
func (res *Results) floodSummary(limiter string) (FloodSummary, bool) {
	for _, s := range res.FloodSummaries {
		if s.Limiter == limiter {
			return s, true
		}
	}
	return FloodSummary{}, false
}

// validateFlood checks the flood's runs: every repetition of every
// limiter in every phase, every flooding call denied, every well-behaved
// call admitted.
func validateFlood(res *Results) []error {
	var errs []error
	if want := res.Settings.Reps * len(floodOrder) * 3; len(res.Flood) != want {
		errs = append(errs, fmt.Errorf("bench: results: %d flood runs, want %d", len(res.Flood), want))
	}
	for _, r := range res.Flood {
		hot, well := r.Phase != FloodPhaseWell, r.Phase != FloodPhaseFlood
		if r.Errors != 0 || r.Seconds <= 0 || (hot && r.Denied < 1) || (well && (r.Admitted < 1 || r.WellP99Micros <= 0)) {
			errs = append(errs, fmt.Errorf("bench: results: flood run %s %s rep %d: errors %d %v, denied %d, admitted %d, p99 %.1f", r.Limiter, r.Phase, r.Rep, r.Errors, r.ErrorSamples, r.Denied, r.Admitted, r.WellP99Micros))
		}
	}
	if len(res.FloodSummaries) != len(floodOrder) {
		errs = append(errs, errors.New("bench: results: flood summaries missing"))
	}
	return errs
}

// floodTargets judges the flood (issue 24 item 3) on the provider with
// the denial cache.
func floodTargets(res *Results) []Target {
	cached, ok := res.floodSummary(FloodCached)
	ratio := func(peer string) (float64, string, bool) {
		p, pok := res.floodSummary(peer)
		if !ok || !pok || p.DeniedPerSec <= 0 {
			return 0, "", false
		}
		return cached.DeniedPerSec / p.DeniedPerSec, fmt.Sprintf("%.0f vs %.0f denied/s (medians)", cached.DeniedPerSec, p.DeniedPerSec), true
	}
	var ts []Target
	ts = append(ts, judged(Target{ID: TargetFloodCommands, Title: "Issue 24: Redis commands per denied request of the flooding subject (denial cache)", Goal: "<= 0.01", Op: "<=", Threshold: 0.01, Unit: "commands"},
		cached.CommandsPerDenied, "flood alone", ok))
	v, w, found := ratio(FamilyRedisRate)
	ts = append(ts, judged(Target{ID: TargetFloodVsRedisRate, Title: "Issue 24: denial throughput on the flood vs redis_rate", Goal: ">= 10x", Op: ">=", Threshold: 10, Unit: "x"}, v, w, found))
	v, w, found = ratio(FamilyUlule)
	ts = append(ts, judged(Target{ID: TargetFloodVsUlule, Title: "Issue 24: denial throughput on the flood vs ulule", Goal: ">= 10x", Op: ">=", Threshold: 10, Unit: "x"}, v, w, found))
	ts = append(ts, judged(Target{ID: TargetFloodWellP99, Title: "Issue 24: p99 of the well-behaved subjects during the flood vs without it (denial cache)", Goal: "<= 1.2x", Op: "<=", Threshold: 1.2, Unit: "x"},
		cached.WellP99Ratio, fmt.Sprintf("%.1f µs flooded vs %.1f µs alone (medians; ratio paired by repetition)", cached.WellP99MicrosFlooded, cached.WellP99Micros), ok))
	return ts
}

// renderFlood is the flood section of docs/performance.md.
func renderFlood(b *strings.Builder, res *Results) {
	fmt.Fprintf(b, "One subject over its limit (token bucket, %d per hour, spent first) hammered by %d workers, beside %d well-behaved subjects asked round robin by %d workers; each limiter over its own client; medians of %d repetitions of %.1f s per phase: the flood alone (closed loop: the limiter's ceiling), the well-behaved subjects alone, both (the flood offered at %d requests/s, the same for every limiter; one slower than that runs behind).\n\n",
		floodLimit, floodConcurrency, floodWellBehaved, floodWellWorkers, res.Settings.Reps, res.Settings.RunSeconds, floodOfferedRate)
	fmt.Fprintf(b, "![The flood: denials per second, and the well-behaved p99 alone and during the flood](%s)\n\n", FloodChartDocPath)
	fmt.Fprintf(b, "| limiter | denied/s (flood alone) | Redis commands per denied (script calls; inner commands included) | redis-server CPU (s/s) during the flood | well-behaved p99 alone | during the flood | ratio |\n|---|---|---|---|---|---|---|\n")
	rr, rrOK := res.floodSummary(FamilyRedisRate)
	for _, s := range res.FloodSummaries {
		cpu := fmt.Sprintf("%.3f", s.ServerCPUPerSec)
		if rrOK && rr.ServerCPUPerSec > 0 {
			cpu += fmt.Sprintf(" (%.2fx redis_rate's)", s.ServerCPUPerSec/rr.ServerCPUPerSec)
		}
		fmt.Fprintf(b, "| %s | %.0f | %.4f (%.4f) | %s | %.1f µs | %.1f µs | %.2fx |\n",
			s.Limiter, s.DeniedPerSec, s.ScriptCallsPerDenied, s.CommandsPerDenied, cpu, s.WellP99Micros, s.WellP99MicrosFlooded, s.WellP99Ratio)
	}
}

// FloodChartFile is the flood's chart inside the output directory, and
// FloodChartDocPath how docs/performance.md links it.
const (
	FloodChartFile    = "flood.png"
	FloodChartDocPath = "../bench/flood.png"
)

// RenderFloodChart draws the flood's two figures per limiter as bars:
// denials per second of the flood alone and the well-behaved subjects'
// p99 alone and during the flood.
func RenderFloodChart(res *Results) ([]byte, error) {
	if len(res.FloodSummaries) == 0 {
		return nil, errors.New("bench: flood chart: no flood summaries")
	}
	var denied, alone, flooded plotter.Values
	var names []string
	for _, s := range res.FloodSummaries {
		names = append(names, s.Limiter)
		denied = append(denied, s.DeniedPerSec)
		alone = append(alone, s.WellP99Micros/1000)
		flooded = append(flooded, s.WellP99MicrosFlooded/1000)
	}
	width := vg.Points(18)
	left := plot.New()
	left.Title.Text = fmt.Sprintf("Flood alone: denials per second (one subject, %d workers)", floodConcurrency)
	left.Y.Label.Text = "denied requests per second (median)"
	bars, err := plotter.NewBarChart(denied, width)
	if err != nil {
		return nil, fmt.Errorf("bench: flood chart: %w", err)
	}
	bars.Color = colorToken
	left.Add(bars, plotter.NewGrid())
	left.NominalX(names...)

	right := plot.New()
	right.Title.Text = fmt.Sprintf("Well-behaved p99, alone and beside a flood of %d req/s", floodOfferedRate)
	right.Y.Label.Text = "p99 latency, ms (median)"
	a, err := plotter.NewBarChart(alone, width)
	if err != nil {
		return nil, fmt.Errorf("bench: flood chart: %w", err)
	}
	f, err := plotter.NewBarChart(flooded, width)
	if err != nil {
		return nil, fmt.Errorf("bench: flood chart: %w", err)
	}
	a.Color, f.Color = colorFixed, colorUlule
	a.Offset, f.Offset = -width/2, width/2
	right.Add(a, f, plotter.NewGrid())
	right.Legend.Add("alone", a)
	right.Legend.Add("during the flood", f)
	right.Legend.Top = true
	right.NominalX(names...)

	img := vgimg.New(12*vg.Inch, 5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadY: vg.Points(10), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4)}
	left.Draw(tiles.At(dc, 0, 0))
	right.Draw(tiles.At(dc, 1, 0))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("bench: flood chart png: %w", err)
	}
	return buf.Bytes(), nil
}
