package bench

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The lease phase (issue 37 item 5): one hot subject of a fixed-window
// policy with a lease (ADR 0042), asked by the leased provider (ratelease
// over redisrate.Provider), the same provider without the lease and
// redis_rate side by side; then a subject whose budget is nearly spent,
// leased against unleased.
const (
	// leaseHotLimit per hour is the hot subject's limit: never reached,
	// every call is admitted.
	leaseHotLimit = benchLimit
	// leaseMaxShare and leaseTTL are the lease of both policies.
	leaseMaxShare = 0.05
	leaseTTL      = 200 * time.Millisecond
	// leaseNearlyLimit per hour is the nearly spent subject's limit; it
	// is charged leaseNearlyLimit - remaining before each run, so a run
	// starts with remaining (Config.leaseNearlyRemaining) left and most
	// of its requests are denied.
	leaseNearlyLimit = 5_000
	// leaseNearlyConcurrency is the nearly spent scenario's workers.
	leaseNearlyConcurrency = 16
	// leaseHoldLimit and leaseHoldMaxHold are the concurrency limit of
	// the holds scenario: never reached at any concurrency measured.
	leaseHoldLimit   = ratelimit.MaxConcurrencyLimit
	leaseHoldMaxHold = ratelimit.DefaultMaxHold
)

// leaseNearlyRemaining is what a nearly spent run starts with: a few
// hundred (full mode: about 2% of one run's requests), fewer in smoke
// mode, whose runs stop after MaxOpsPerRun calls, so that they too end
// with denials.
func leaseNearlyRemaining(mode string) int64 {
	if mode == ModeSmoke {
		return 20
	}
	return 500
}

// Lease scenarios.
const (
	LeaseScenarioHot    = "hot"          // limit never reached
	LeaseScenarioNearly = "nearly-spent" // budget nearly spent: most requests denied
	// LeaseScenarioHolds is a concurrency limit's acquire and release
	// against one decision (issue 37 item 5, ADR 0041).
	LeaseScenarioHolds = "concurrency"
)

// Lease limiters.
const (
	LeaseLeased   = "provider_leased" // ratelease over redisrate.Provider
	LeaseUnleased = "provider"        // the same provider, no lease
	// LeaseHolding takes a slot of a concurrency limit and gives it back,
	// on the unleased provider: what a request under a concurrency limit
	// costs.
	LeaseHolding = "provider_holding"
)

// leaseHotOrder, leaseNearlyOrder and leaseHoldsOrder are the limiters of
// each scenario.
var (
	leaseHotOrder    = []string{LeaseLeased, LeaseUnleased, FamilyRedisRate}
	leaseNearlyOrder = []string{LeaseLeased, LeaseUnleased}
	leaseHoldsOrder  = []string{LeaseHolding, LeaseUnleased}
)

// leaseOrder is scenario's limiters, and its rank among the scenarios.
func leaseOrder(scenario string) (names []string, rank int) {
	switch scenario {
	case LeaseScenarioHot:
		return leaseHotOrder, 0
	case LeaseScenarioNearly:
		return leaseNearlyOrder, 1
	case LeaseScenarioHolds:
		return leaseHoldsOrder, 2
	}
	return nil, 3
}

// LeasePhase is everything the lease phase measured, with its own
// settings, date and commit: `make bench-lease` replaces it alone in a
// results.json of an earlier `make bench`.
type LeasePhase struct {
	Settings  LeaseSettings  `json:"settings"`
	Runs      []LeaseRun     `json:"runs"`
	Summaries []LeaseSummary `json:"summaries"`
}

// LeaseSettings are the lease phase's parameters.
type LeaseSettings struct {
	Mode         string    `json:"mode"`
	Started      time.Time `json:"started"`
	Finished     time.Time `json:"finished"`
	GitCommit    string    `json:"gitCommit,omitempty"`
	RedisVersion string    `json:"redisVersion"`
	Reps         int       `json:"reps"`
	RunSeconds   float64   `json:"runSeconds"`
	MaxOpsPerRun int64     `json:"maxOpsPerRun"`
	Warmup       int64     `json:"warmup"`
	Concurrency  []int     `json:"concurrency"`
	// HotLimit per HotWindowSeconds: the hot subject's fixed window.
	HotLimit         int64 `json:"hotLimit"`
	HotWindowSeconds int64 `json:"hotWindowSeconds"`
	// NearlyLimit per hour, NearlyRemaining left at the start of each run,
	// NearlyConcurrency workers.
	NearlyLimit       int64 `json:"nearlyLimit"`
	NearlyRemaining   int64 `json:"nearlyRemaining"`
	NearlyConcurrency int   `json:"nearlyConcurrency"`
	// MaxShare and TTLMillis: the lease of both policies.
	MaxShare  float64 `json:"maxShare"`
	TTLMillis int64   `json:"ttlMillis"`
	// PipelineMaxBatch of both providers (the shipped default).
	PipelineMaxBatch int `json:"pipelineMaxBatch"`
	// HoldLimit and HoldMaxHoldMillis: the holds scenario's concurrency
	// limit.
	HoldLimit         int64 `json:"holdLimit"`
	HoldMaxHoldMillis int64 `json:"holdMaxHoldMillis"`
}

// LeaseRun is one timed run of one limiter in one scenario.
type LeaseRun struct {
	Scenario    string  `json:"scenario"`
	Limiter     string  `json:"limiter"`
	Concurrency int     `json:"concurrency"`
	Rep         int     `json:"rep"`
	Seconds     float64 `json:"seconds"`
	// Admitted and Denied decisions; DecisionsPerSec counts both.
	Admitted        int64   `json:"admitted"`
	Denied          int64   `json:"denied"`
	AdmittedPerSec  float64 `json:"admittedPerSec"`
	DecisionsPerSec float64 `json:"decisionsPerSec"`
	P50Micros       float64 `json:"p50Micros"`
	P99Micros       float64 `json:"p99Micros"`
	// RedisCommands are INFO commandstats calls from the start of the
	// timed part until the limiter's leases were given back (the commands
	// the scripts run inside included; the harness's INFO and CONFIG
	// excluded); ScriptCalls only EVALSHA and EVAL.
	RedisCommands int64 `json:"redisCommands"`
	ScriptCalls   int64 `json:"scriptCalls"`
	// Reserved, Local and Returned (leased limiter only): reservations
	// admitted, admissions answered from a lease, units given back.
	Reserved     int64    `json:"reserved,omitempty"`
	Local        int64    `json:"local,omitempty"`
	Returned     int64    `json:"returned,omitempty"`
	Errors       int64    `json:"errors"`
	ErrorSamples []string `json:"errorSamples,omitempty"`
}

// leaseEvents counts a leaser's events (ratelease.Options.Observe).
type leaseEvents struct{ reserved, local, returned atomic.Int64 }

// leasePort is one run's decision function: admitted reports the
// decision, err an outcome that is no decision.
type leasePort func(ctx context.Context) (admitted bool, err error)

// Lease runs the lease phase alone (`make bench-lease`) against a private
// redis-server of its own, reps repetitions of cfg's runs.
func Lease(ctx context.Context, cfg Config, reps int) (_ *LeasePhase, err error) {
	if reps < 1 {
		return nil, fmt.Errorf("bench: lease: reps %d, want >= 1", reps)
	}
	cfg.Reps = reps
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	srv, err := StartServer(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := srv.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	cfg.logf("== redis-server %s on %s (private, no persistence)", srv.Version, srv.Addr)
	return leasePhase(ctx, cfg, srv)
}

// leasePhase runs the lease phase on srv (flushed first): the hot
// subject at every concurrency, each repetition running the three
// limiters in an order rotated by the repetition, then the nearly spent
// subject at leaseNearlyConcurrency, leased and unleased in an order
// alternating by repetition.
func leasePhase(ctx context.Context, cfg Config, srv *Server) (*LeasePhase, error) {
	if err := srv.Flush(ctx); err != nil {
		return nil, err
	}
	ph := &LeasePhase{Settings: LeaseSettings{
		Mode: cfg.Mode, Started: time.Now().UTC(), GitCommit: gitCommit(ctx, cfg.Root), RedisVersion: srv.Version,
		Reps: cfg.Reps, RunSeconds: cfg.RunDuration.Seconds(), MaxOpsPerRun: cfg.MaxOpsPerRun, Warmup: cfg.Warmup,
		Concurrency: cfg.Concurrency, HotLimit: leaseHotLimit, HotWindowSeconds: int64(time.Hour / time.Second),
		NearlyLimit: leaseNearlyLimit, NearlyRemaining: leaseNearlyRemaining(cfg.Mode), NearlyConcurrency: leaseNearlyConcurrency,
		MaxShare: leaseMaxShare, TTLMillis: leaseTTL.Milliseconds(), PipelineMaxBatch: benchPipelineBatch,
		HoldLimit: leaseHoldLimit, HoldMaxHoldMillis: leaseHoldMaxHold.Milliseconds(),
	}}
	set, err := newLeaseLimiters(ctx, srv.Addr)
	if err != nil {
		return nil, err
	}
	defer set.close()
	cfg.logf("== lease: one hot subject (fixed window, %d per hour, lease %.2f of it for %v) at c=%s, %d repetitions; then a nearly spent one (%d left of %d) at c=%d",
		int64(leaseHotLimit), leaseMaxShare, leaseTTL, joinInts(cfg.Concurrency), cfg.Reps, ph.Settings.NearlyRemaining, leaseNearlyLimit, leaseNearlyConcurrency)
	for _, c := range cfg.Concurrency {
		for rep := range cfg.Reps {
			n := len(leaseHotOrder)
			for k := range n {
				name := leaseHotOrder[(k+rep)%n]
				r, err := set.hotRun(ctx, cfg, srv, name, c, rep)
				if err != nil {
					return nil, err
				}
				ph.Runs = append(ph.Runs, r)
				cfg.logf("   hot c=%-2d rep %d %-16s %11.0f admitted/s  p99 %8.1fµs  %.5f commands/admitted  %d reservations",
					c, rep, name, r.AdmittedPerSec, r.P99Micros, perAdmitted(r.RedisCommands, r.Admitted), r.Reserved)
			}
		}
	}
	for rep := range cfg.Reps {
		order := leaseNearlyOrder
		if rep%2 == 1 {
			order = []string{order[1], order[0]}
		}
		for _, name := range order {
			r, err := set.nearlyRun(ctx, cfg, srv, name, rep, ph.Settings.NearlyRemaining)
			if err != nil {
				return nil, err
			}
			ph.Runs = append(ph.Runs, r)
			cfg.logf("   nearly-spent c=%d rep %d %-16s %9.0f decisions/s  p99 %8.1fµs  %d admitted, %d denied",
				leaseNearlyConcurrency, rep, name, r.DecisionsPerSec, r.P99Micros, r.Admitted, r.Denied)
		}
	}
	cfg.logf("== lease: a concurrency limit's acquire and release (%d slots) against one decision, at c=%s", int64(leaseHoldLimit), joinInts(cfg.Concurrency))
	for _, c := range cfg.Concurrency {
		for rep := range cfg.Reps {
			order := leaseHoldsOrder
			if rep%2 == 1 {
				order = []string{order[1], order[0]}
			}
			for _, name := range order {
				r, err := set.holdRun(ctx, cfg, srv, name, c, rep)
				if err != nil {
					return nil, err
				}
				ph.Runs = append(ph.Runs, r)
				cfg.logf("   concurrency c=%-2d rep %d %-16s %9.0f requests/s  p99 %8.1fµs  %.2f script calls/request",
					c, rep, name, r.AdmittedPerSec, r.P99Micros, perAdmitted(r.ScriptCalls, r.Admitted))
			}
		}
	}
	ph.Summaries = summarizeLease(ph.Runs)
	ph.Settings.Finished = time.Now().UTC()
	return ph, nil
}

// leaseRun times decide at concurrency c for cfg's run length (or
// MaxOpsPerRun calls), then calls done (a leaser gives its leases back)
// before it reads the server's command counts. hot: every call must be
// admitted.
func leaseRun(ctx context.Context, cfg Config, srv *Server, r LeaseRun, decide leasePort, done func(), hot bool) (LeaseRun, error) {
	if err := srv.ResetStats(ctx); err != nil {
		done()
		return r, err
	}
	hists := make([]Histogram, r.Concurrency)
	var admitted, denied, calls, nerr atomic.Int64
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
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	timer := time.AfterFunc(cfg.RunDuration, func() { stop.Store(true) })
	for w := range r.Concurrency {
		wg.Go(func() {
			h := &hists[w]
			for !stop.Load() && (cfg.MaxOpsPerRun == 0 || calls.Add(1) <= cfg.MaxOpsPerRun) {
				t0 := time.Now()
				ok, err := decide(ctx)
				h.Record(time.Since(t0))
				switch {
				case err != nil:
					fail(err)
				case ok:
					admitted.Add(1)
				case hot:
					fail(fmt.Errorf("%s: the hot subject was denied", r.Limiter))
				default:
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	timer.Stop()
	done()
	info, err := srv.infoText(ctx, "commandstats")
	if err != nil {
		return r, err
	}
	cmds, err := redisinfo.CommandStats(info)
	if err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	r.RedisCommands, r.ScriptCalls = countCommands(cmds)
	var all Histogram
	for i := range hists {
		all.Merge(&hists[i])
	}
	r.Seconds = elapsed.Seconds()
	r.Admitted, r.Denied = admitted.Load(), denied.Load()
	r.AdmittedPerSec = float64(r.Admitted) / r.Seconds
	r.DecisionsPerSec = float64(r.Admitted+r.Denied) / r.Seconds
	if all.Count() > 0 {
		r.P50Micros, r.P99Micros = micros(all.Quantile(0.50)), micros(all.Quantile(0.99))
	}
	r.Errors, r.ErrorSamples = nerr.Load(), samples
	if r.Errors > 0 {
		return r, fmt.Errorf("bench: lease %s %s c=%d rep %d: %d calls failed, e.g. %q", r.Scenario, r.Limiter, r.Concurrency, r.Rep, r.Errors, r.ErrorSamples)
	}
	return r, nil
}

// countCommands sums INFO commandstats calls but the harness's own (INFO,
// CONFIG), and separately the script calls (EVALSHA, EVAL).
func countCommands(cmds map[string]CommandStat) (total, scripts int64) {
	for name, st := range cmds {
		if name == "info" || name == "config" || strings.HasPrefix(name, "config|") {
			continue
		}
		total += st.Calls
		if name == "evalsha" || name == "eval" {
			scripts += st.Calls
		}
	}
	return total, scripts
}

// perAdmitted is n per admitted decision (0 when none was admitted).
func perAdmitted(n, admitted int64) float64 {
	if admitted == 0 {
		return 0
	}
	return float64(n) / float64(admitted)
}

// gitCommit is the repository's short HEAD, or "".
func gitCommit(ctx context.Context, root string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
