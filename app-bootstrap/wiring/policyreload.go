package wiring

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/fx"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/dirwatch"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

const envPoliciesFile = config.Prefix + "RATE_LIMIT_POLICIES_FILE"

// ErrPolicyReloadRefused wraps every refused policy reload: the file did
// not pass, and the previous policies keep serving.
var ErrPolicyReloadRefused = errors.New("policy reload refused, the previous policies keep serving")

// The results of a policy reload (tlb_ratelimit_policy_reloads_total).
const (
	reloadApplied   = "applied"
	reloadUnchanged = "unchanged"
	reloadRefused   = "refused"
)

// Policies serves the policy file (APP_RATE_LIMIT_POLICIES_FILE) and
// reloads it without a restart: on SIGHUP, and on every change of the
// file that a watch of its directory sees (a write, a rename over it, a
// Kubernetes ConfigMap's ..data symlink swap), debounced. Most callers
// want Handler (the web edge over the serving generation) and Reload.
//
// A reload reads and checks the whole file as start-up does
// (config.ReloadPolicies), refuses a policy changed without a new
// revision, asks every follower (the RLS) whether it can serve the new
// set, then builds a new generation (policyGen) and swaps it in
// atomically: each request runs on exactly one generation, the one
// current when it started, and the previous generation closes once its
// requests have finished (at most the shutdown timeout). Anything wrong
// refuses the whole file: logged with the reason, counted, and the
// previous generation keeps serving. A file that serves alike is
// unchanged: nothing is rebuilt. Safe for concurrent use.
type Policies struct {
	log   *slog.Logger
	m     *metrics.Metrics
	stats *metrics.PolicyReload
	drain time.Duration
	cur   atomic.Pointer[policyGen]

	mu        sync.Mutex // serializes reloads and registration
	digest    [sha256.Size]byte
	build     func(config.Config, ratelimit.EdgePort) (http.Handler, error)
	followers []PolicyFollower
	w         *dirwatch.Watcher
	hup       chan os.Signal
	retiring  sync.WaitGroup
	stopped   bool
}

// PolicyFollower is a part of the service that serves the policy file's
// policies too (the RLS's `rate_limit: {policy: X}` rules). Check runs
// before a reload is applied and may refuse it; Follow runs after.
type PolicyFollower struct {
	// Name says who refused, in the refusal's error.
	Name string
	// Check, when not nil, returns an error when the follower cannot
	// serve the new set; the reload is then refused whole.
	Check func(config.PolicySet) error
	// Follow, when not nil, runs once the new set serves.
	Follow func(config.PolicySet)
}

func newPolicies(lc fx.Lifecycle, cfg config.Config, log *slog.Logger, m *metrics.Metrics) (*Policies, error) {
	g, err := newPolicyGen(cfg, nil, log, m)
	if err != nil {
		return nil, err
	}
	p := &Policies{log: log.With("component", "ratelimit"), m: m, stats: m.RegisterPolicyReload(), drain: cfg.ShutdownTimeout}
	p.cur.Store(g)
	if data, err := os.ReadFile(cfg.RateLimit.PoliciesSource); err == nil {
		p.digest = sha256.Sum256(data)
	}
	lc.Append(fx.Hook{OnStart: p.start, OnStop: p.stop})
	return p, nil
}

// current is the generation serving now; never nil.
func (p *Policies) current() *policyGen { return p.cur.Load() }

// acquire returns the current generation read-locked: release it with
// g.mu.RUnlock.
func (p *Policies) acquire() *policyGen {
	for {
		if g := p.cur.Load(); g.acquire() {
			return g
		}
		// Retired between Load and RLock: the next one is current.
	}
}

// Config is the configuration with the policies serving now.
func (p *Policies) Config() config.Config { return p.current().cfg }

// Handler returns the handler that serves each request with the web edge
// of the generation current when it arrives. build makes a generation's
// edge (its routes, policies and port); it runs now for the serving
// generation and again for each reloaded one before it serves (an error
// refuses that reload). Call it once.
func (p *Policies) Handler(build func(cfg config.Config, port ratelimit.EdgePort) (http.Handler, error)) (http.Handler, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.current()
	h, err := build(g.cfg, g.edge)
	if err != nil {
		return nil, err
	}
	g.handler, p.build = h, build
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := p.acquire()
		defer g.mu.RUnlock()
		g.handler.ServeHTTP(w, r)
	}), nil
}

// Follow adds f to the parts told of every reload.
func (p *Policies) Follow(f PolicyFollower) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.followers = append(p.followers, f)
}

// Reload reloads the policy file now, as SIGHUP does (trigger "call").
// It returns nil when the file was applied or is unchanged; otherwise
// the error wraps ErrPolicyReloadRefused and the reason, and the previous
// policies keep serving. Without a policy file it returns
// config.ErrNoPolicyFile.
func (p *Policies) Reload() error { return p.reload(dirwatch.TriggerCall) }

func (p *Policies) start(ctx context.Context) error {
	if err := p.current().start(ctx); err != nil {
		return err
	}
	if err := p.watch(ctx); err != nil {
		// fx runs no OnStop for a hook whose OnStart failed.
		_ = p.current().close()
		return err
	}
	return nil
}

// watch counts the start-up load and starts the file watch and SIGHUP.
func (p *Policies) watch(ctx context.Context) error {
	p.stats.Loaded(revisions(p.current().cfg.RateLimit.Policies), time.Now())
	p.hup = make(chan os.Signal, 1)
	path := p.current().cfg.RateLimit.PoliciesSource
	if !policyFile(p.current().cfg) {
		// The front door's given policies: nothing to watch or reload.
		return nil
	}
	base := filepath.Base(path)
	w, err := dirwatch.New(dirwatch.Options{
		Dir:     filepath.Dir(path),
		Signals: p.hup,
		// The file itself, and the ..data symlink a ConfigMap mount swaps
		// (the file is a symlink through it).
		Match:        func(name string) bool { return name == base || strings.HasPrefix(name, "..data") },
		Reload:       func(t dirwatch.Trigger) { _ = p.reload(t) },
		OnWatchError: func(err error) { p.log.Warn("policy file watcher", "var", envPoliciesFile, "err", err) },
	})
	if err != nil {
		return fmt.Errorf("rate limit: policy file watch (%s): %w", envPoliciesFile, err)
	}
	p.w = w
	if err := p.w.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("rate limit: policy file watch (%s): %w", envPoliciesFile, err)
	}
	signal.Notify(p.hup, syscall.SIGHUP)
	return nil
}

// stop: no more reloads, wait for retiring generations, close the current
// one.
func (p *Policies) stop(context.Context) error {
	if p.hup != nil {
		signal.Stop(p.hup)
	}
	if p.w != nil {
		p.w.Stop()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.retiring.Wait()
	return p.current().close()
}

// policyFile reports whether cfg's policies come from a file.
func policyFile(cfg config.Config) bool {
	s := cfg.RateLimit.PoliciesSource
	return s != "" && s != config.PoliciesGiven
}

// revisions maps each policy's ID to its revision, for the metrics.
func revisions(set config.PolicySet) map[string]int64 {
	out := make(map[string]int64, len(set.Policies))
	for _, p := range set.Policies {
		out[string(p.ID())] = p.Revision()
	}
	return out
}

// noPolicyReload is the SIGHUP handler of a service without the Redis
// limiter (no policy file): it logs that there is nothing to reload.
func noPolicyReload(lc fx.Lifecycle, log *slog.Logger) {
	onSIGHUP(lc, func() {
		log.Info("SIGHUP: no policy file to reload (the Redis limiter is off)", "var", envPoliciesFile)
	})
}
