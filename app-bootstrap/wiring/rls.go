package wiring

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"go.uber.org/fx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsreload"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The variables naming the RLS listeners in bind errors.
const (
	envRLSAddr     = config.Prefix + "RLS_ADDR"
	envRLSHTTPAddr = config.Prefix + "RLS_HTTP_ADDR"
	envRLSDir      = config.Prefix + "RLS_CONFIG_DIR"
)

// RLSModule is Envoy's rate-limit service (docs/rls.md): the gRPC listener
// on APP_RLS_ADDR, the JSON one on APP_RLS_HTTP_ADDR when set, and the
// rule directory's watcher. Include it only when cfg.RLS.Enabled() (which
// config allows only with the Redis limiter on).
func RLSModule() fx.Option {
	return fx.Module("rls",
		fx.Provide(newRLSServer),
		fx.Invoke(func(*RLSServer) {}),
	)
}

// RLSServer runs the rate-limit service: OnStart loads the rules (the
// first generation and its Redis provider), binds the listeners and starts
// the watcher; OnStop stops them all and closes the last generation.
type RLSServer struct {
	cfg   config.Config
	log   *slog.Logger
	down  fx.Shutdowner
	svc   *rls.Service
	stats *metrics.RLS
	tls   *tls.Config // the gRPC listener's (CheckRLS); nil: plaintext

	grpc   *grpc.Server
	health *health.Server
	http   *http.Server // nil without APP_RLS_HTTP_ADDR
	w      *rlsreload.Watcher
	hup    chan os.Signal

	mu       sync.Mutex
	addr     string
	httpAddr string
	done     []chan struct{}
}

func newRLSServer(lc fx.Lifecycle, cfg config.Config, log *slog.Logger, m *metrics.Metrics, down fx.Shutdowner, pol *Policies) (*RLSServer, error) {
	log = log.With("component", "rls")
	pseud, err := rlsPseudonymizer(cfg.Web.SubjectSecret)
	if err != nil {
		return nil, fmt.Errorf("rls: %w", err)
	}
	keys, err := keyspace.NewBuilder(cfg.RateLimit.KeyPrefix, cfg.RateLimit.KeySecret)
	if err != nil {
		return nil, fmt.Errorf("rls: keyspace: %w", err)
	}
	tlsCfg, undecided, err := CheckRLS(cfg.RLS)
	if err != nil {
		return nil, fmt.Errorf("rls: %w", err)
	}
	stats := m.RegisterRLS()
	caches := &generationCaches{}
	if cfg.RateLimit.DenialCacheMaxEntries > 0 {
		m.RegisterRLSDenialCache(caches.stats)
	}
	ports := &rlsPorts{rl: cfg.RateLimit, keys: keys, m: m, log: log, caches: caches,
		policies: func() config.PolicySet { return pol.Config().RateLimit.Policies }}
	svc, err := rls.New(ports, pseud, rls.Options{
		Undecided:  undecided,
		ShadowMode: cfg.RLS.ShadowMode,
		Metrics:    rlsMetrics{stats},
		Log:        log,
	})
	if err != nil {
		return nil, fmt.Errorf("rls: %w", err)
	}
	s := &RLSServer{cfg: cfg, log: log, down: down, svc: svc, stats: stats, tls: tlsCfg}
	lc.Append(fx.Hook{OnStart: s.start, OnStop: s.stop})
	pol.Follow(PolicyFollower{Name: "rls (" + envRLSDir + ")", Check: s.checkPolicies, Follow: s.followPolicies})
	return s, nil
}

// rlsPseudonymizer is the HTTP edge's digest of a trusted-header
// principal, so that a descriptor user=alice and the principal alice are
// one subject.
func rlsPseudonymizer(secret keyspace.Secret) (rls.Pseudonymizer, error) {
	p, err := subject.NewPseudonymizer(secret)
	if err != nil {
		return nil, err
	}
	return rls.PseudonymizerFunc(func(s string) (ratelimit.SubjectDigest, error) {
		id, err := subject.NewPrincipal(s)
		if err != nil {
			return "", err
		}
		return p.Digest(id)
	}), nil
}

// Addr is the gRPC listener's bound address once started ("" before).
func (s *RLSServer) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// HTTPAddr is the JSON listener's bound address once started; "" before or
// without APP_RLS_HTTP_ADDR.
func (s *RLSServer) HTTPAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.httpAddr
}

// Reload reloads the rule directory now (as SIGHUP does).
func (s *RLSServer) Reload() error { return s.watcher().Reload() }

// watcher is the rule directory's watcher; nil before start.
func (s *RLSServer) watcher() *rlsreload.Watcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w
}

func (s *RLSServer) start(ctx context.Context) error {
	r := s.cfg.RLS
	s.hup = make(chan os.Signal, 1)
	w, err := rlsreload.New(rlsreload.Options{
		Dir:      r.ConfigDir,
		Signals:  s.hup,
		Validate: func(c *rlsconfig.Config) error { return s.svc.Load(c) },
		OnReload: func(t rlsreload.Trigger, _ *rlsconfig.Config, err error) {
			if err != nil {
				s.log.Error("rate-limit rules reload refused; the previous rules keep serving", "var", envRLSDir, "trigger", t.String(), "err", err)
				return
			}
			s.log.Info("rate-limit rules reloaded", "var", envRLSDir, "trigger", t.String())
		},
		OnWatchError: func(err error) { s.log.Warn("rate-limit rules watcher", "err", err) },
		Metrics:      rlsReloadMetrics{s.stats},
	})
	if err != nil {
		return fmt.Errorf("rls: rules (%s): %w", envRLSDir, err)
	}
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
	ln, err := net.Listen("tcp", r.Addr)
	if err != nil {
		_ = s.svc.Close()
		return fmt.Errorf("rls: listen on %s (%s): %w", r.Addr, envRLSAddr, err)
	}
	var hln net.Listener
	if r.HTTPAddr != "" {
		if hln, err = net.Listen("tcp", r.HTTPAddr); err != nil {
			_ = ln.Close()
			_ = s.svc.Close()
			return fmt.Errorf("rls: listen on %s (%s): %w", r.HTTPAddr, envRLSHTTPAddr, err)
		}
	}
	s.grpc, s.health = rls.NewGRPCServer(s.svc, rls.ServerOptions{TLS: s.tls})
	if err := w.Start(context.WithoutCancel(ctx)); err != nil {
		_ = ln.Close()
		if hln != nil {
			_ = hln.Close()
		}
		_ = s.svc.Close()
		return fmt.Errorf("rls: %w", err)
	}
	signal.Notify(s.hup, syscall.SIGHUP)
	s.mu.Lock()
	s.addr = ln.Addr().String()
	s.mu.Unlock()
	s.goServe("grpc", func() error { return s.grpc.Serve(ln) }, grpc.ErrServerStopped)
	s.log.Info("rls listening", "addr", ln.Addr().String(), "tls", s.tls != nil, "undecided", r.Undecided, "shadow_mode", r.ShadowMode)
	if hln != nil {
		s.http = newHTTPServer(rls.JSONHandler(s.svc, 0), s.log)
		s.mu.Lock()
		s.httpAddr = hln.Addr().String()
		s.mu.Unlock()
		s.goServe("http", func() error { return s.http.Serve(hln) }, http.ErrServerClosed)
		s.log.Info("rls json listening", "addr", hln.Addr().String())
	}
	return nil
}

// goServe runs serve until it returns; any error but stopped shuts the
// application down, as the web listeners do.
func (s *RLSServer) goServe(name string, serve func() error, stopped error) {
	done := make(chan struct{})
	s.mu.Lock()
	s.done = append(s.done, done)
	s.mu.Unlock()
	go func() {
		defer close(done)
		if err := serve(); err != nil && !errors.Is(err, stopped) {
			s.log.Error("rls server stopped", "listener", name, "err", err)
			_ = s.down.Shutdown(fx.ExitCode(1))
		}
	}()
}

// stop: NOT_SERVING, no more reloads, drain both listeners until ctx ends
// (then close what is left), and close the last generation.
func (s *RLSServer) stop(ctx context.Context) error {
	signal.Stop(s.hup)
	if w := s.watcher(); w != nil {
		w.Stop()
	}
	if s.health != nil {
		s.health.Shutdown()
	}
	var errs []error
	if s.grpc != nil {
		stopped := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			s.grpc.Stop()
			<-stopped
			errs = append(errs, fmt.Errorf("rls: grpc listener: %w", ctx.Err()))
		}
	}
	if s.http != nil {
		if err := s.http.Shutdown(ctx); err != nil {
			_ = s.http.Close()
			errs = append(errs, fmt.Errorf("rls: http listener: %w", err))
		}
	}
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	for _, d := range done {
		<-d
	}
	errs = append(errs, s.svc.Close())
	return errors.Join(errs...)
}

// rlsPorts builds a decision port per rule generation: a Redis provider
// with a client of its own (redisrate.Provider.Close closes it), the
// coordination client's settings, the limiter's keyspace (so that
// `policy: login` is the HTTP edge's state) and options, under the HTTP
// edge's decorators (decorate: the local fallback when a rule names a
// local-fallback policy, the denial cache when
// APP_RATE_LIMIT_DENIAL_CACHE_MAX_ENTRIES is not 0) and the metrics
// decorator. Every generation has its own decorators, started by For and
// stopped by its Close: a new generation's denial cache starts empty, so
// it never serves a denial of limits it does not have.
type rlsPorts struct {
	rl     config.RateLimit
	keys   *keyspace.Builder
	m      *metrics.Metrics
	log    *slog.Logger
	caches *generationCaches // the generations' denial caches, for metrics
	// policies is the policy file's set serving now (Policies): a rule
	// generation built after a policy reload has the reloaded policies.
	policies func() config.PolicySet
}

var _ rls.Ports = (*rlsPorts)(nil)

// Policy implements rls.Ports with the policy file.
func (p *rlsPorts) Policy(id ratelimit.PolicyID) (ratelimit.Policy, bool) {
	return p.policies().Policy(id)
}

// For implements rls.Ports.
func (p *rlsPorts) For(policies []ratelimit.Policy) (rls.Decider, error) {
	rl := p.rl
	rl.Policies = p.policies()
	client, err := coordinationClient(rl)
	if err != nil {
		return nil, fmt.Errorf("coordination client: %w", err)
	}
	provider, err := redisrate.New(client, p.keys, policies, providerOptions(rl))
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("provider: %w", err)
	}
	mine := make(map[ratelimit.PolicyID]bool, len(policies))
	for _, pol := range policies {
		mine[pol.ID()] = true
	}
	var off []ratelimit.PolicyID
	for _, id := range rl.Policies.NoDenialCache {
		if mine[id] {
			off = append(off, id)
		}
	}
	st, err := decorate(rl, below{provider: provider, client: client, keys: p.keys, log: p.log, policies: policies, noDenialCache: off})
	if err != nil {
		_ = provider.Close()
		return nil, err
	}
	if st.denial != nil {
		_ = st.denial.Start(context.Background()) // never fails: it retries by itself
		p.caches.add(st.denial)
	}
	ids := make([]ratelimit.PolicyID, 0, len(rl.Policies.Policies)+len(policies))
	for _, pol := range rl.Policies.Policies {
		ids = append(ids, pol.ID())
	}
	for _, pol := range policies {
		ids = append(ids, pol.ID())
	}
	return &rlsDecider{Edge: p.m.InstrumentEdge(st.port, ids).CountShadow(policies), st: st, provider: provider, caches: p.caches}, nil
}

// rlsDecider is one generation's decorated, instrumented provider.
type rlsDecider struct {
	*metrics.Edge
	st       stack
	provider *redisrate.Provider
	caches   *generationCaches
}

// Close stops the generation's decorators (the denial cache's
// subscription, the fallback's background pass), then closes the
// provider and its client.
func (d *rlsDecider) Close() error {
	d.st.close()
	if d.st.denial != nil {
		d.caches.retire(d.st.denial)
	}
	return d.provider.Close()
}

// rlsMetrics adapts metrics.RLS to rls.Metrics.
type rlsMetrics struct{ r *metrics.RLS }

func (m rlsMetrics) Decision(domain, key string, r rls.Result) { m.r.Decision(domain, key, string(r)) }
func (m rlsMetrics) Refused(reason string)                     { m.r.Refused(reason) }
func (m rlsMetrics) Folded(domain string)                      { m.r.Folded(domain) }
func (m rlsMetrics) RefundFailed(key string)                   { m.r.RefundFailed(key) }

// rlsReloadMetrics adapts metrics.RLS to rlsreload.Metrics.
type rlsReloadMetrics struct{ r *metrics.RLS }

func (m rlsReloadMetrics) Reload(r rlsreload.Result) { m.r.Reload(r.String()) }
