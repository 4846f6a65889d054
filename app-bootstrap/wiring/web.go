package wiring

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/fx"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/edge"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/health"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/localimit"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The service's HTTP paths.
const (
	PathPing    = "/api/v1/ping"
	PathLogin   = "/api/v1/login"
	PathHealthz = health.LivenessPath
	PathReadyz  = health.ReadinessPath
	PathMetrics = "/metrics"
)

// Server timeouts: bounded so that slow clients cannot hold connections.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
	maxLoginBody      = 16 << 10
)

// WebModule is the HTTP server. It takes ratelimit.EdgePort as optional:
// without it (rate limit disabled) no edge middleware and no subject
// pseudonymizer exist.
func WebModule() fx.Option {
	return fx.Module("web",
		fx.Provide(newHealth),
		fx.Provide(NewAPIKeys),
		fx.Provide(fx.Annotate(NewHandler, fx.ResultTags(`name:"root"`))),
		fx.Provide(fx.Annotate(newServer, fx.ParamTags(``, ``, `name:"root"`, ``, ``, ``))),
		fx.Invoke(func(*Server) {}),
	)
}

// HandlerParams are the dependencies of the service's root handler.
type HandlerParams struct {
	fx.In

	Config  config.Config
	Logger  *slog.Logger
	Metrics *metrics.Metrics
	Health  *health.Handlers
	// Edge is present only when the rate-limit module is included.
	Edge ratelimit.EdgePort `optional:"true"`
	// APIKeys is the reloadable key set of APP_WEB_IDENTITY=api-key (see
	// NewAPIKeys); nil builds a fixed one from Config.Web.APIKeys.
	APIKeys *subject.APIKeys `optional:"true"`
}

// NewHandler builds the root handler: /api/ behind, in this order, the
// API-key gate (APP_WEB_IDENTITY=api-key: 401 before any limiter), the local
// limiter keyed by client IP (when enabled) and the edge middleware (when an
// EdgePort exists) limiting by the configured identity; and the unlimited
// /healthz, /readyz and /metrics.
func NewHandler(p HandlerParams) (http.Handler, error) {
	w := p.Config.Web
	resolver, err := subject.NewResolver(subject.Config{TrustedProxies: w.TrustedProxies})
	if err != nil {
		return nil, fmt.Errorf("web: subject resolver: %w", err)
	}
	// identity is what the edge limits by; gate, in api-key mode, verifies
	// the key in front of everything and hands the identity on in the
	// request context.
	var identity subject.Identifier = resolver
	var gate *subject.APIKeys
	switch w.Identity {
	case config.IdentityAPIKey:
		gate = p.APIKeys
		if gate == nil {
			if gate, err = subject.NewAPIKeys(w.APIKeys); err != nil {
				return nil, fmt.Errorf("web: api keys (%sAPI_KEYS_FILE): %w", config.Prefix+"WEB_", err)
			}
		}
		identity = subject.FromContext
	case config.IdentityTrustedHeader:
		th, err := subject.NewTrustedHeader(w.IdentityHeader, resolver)
		if err != nil {
			return nil, fmt.Errorf("web: identity header (%sIDENTITY_HEADER): %w", config.Prefix+"WEB_", err)
		}
		identity = th
	}

	var api http.Handler = apiRoutes()
	if p.Edge != nil {
		pseudo, err := subject.NewPseudonymizer(w.SubjectSecret)
		if err != nil {
			return nil, fmt.Errorf("web: %w", err)
		}
		rl := p.Config.RateLimit
		routes := make([]edge.Route, 0, len(rl.Policies.Routes))
		for _, r := range rl.Policies.Routes {
			routes = append(routes, edge.Route{Pattern: r.Pattern, Policy: r.Policy})
		}
		ids := make([]ratelimit.PolicyID, 0, len(rl.Policies.Policies))
		for _, pol := range rl.Policies.Policies {
			ids = append(ids, pol.ID())
		}
		known := metrics.KnownPolicies(ids)
		mw, err := edge.New(edge.Config{
			Port:             p.Edge,
			Subjects:         identity,
			OmitLegacyFields: !w.LegacyRateLimitHeaders,
			Pseudonymizer:    pseudo,
			DefaultPolicy:    rl.DefaultPolicy,
			Routes:           routes,
			Timeout:          w.EvaluationTimeout,
			Policies:         rl.Policies.Policies,
			Observer: edge.ObserverFunc(func(o edge.Observation) {
				p.Metrics.EdgeResponse(o.Policy, known, o.Admitted, o.Status)
			}),
		})
		if err != nil {
			return nil, fmt.Errorf("web: edge middleware: %w", err)
		}
		api = mw.Wrap(api)
	}
	if l := w.LocalLimit; l.Enabled {
		lim, err := localimit.New(localimit.Config{Rate: l.Rate, Burst: l.Burst, MaxClients: l.MaxClients, IdleTTL: l.IdleTTL})
		if err != nil {
			return nil, fmt.Errorf("web: local limiter: %w", err)
		}
		opts := localimit.WrapOptions{OmitLegacyFields: !w.LegacyRateLimitHeaders}
		api = countRefusals(lim.WrapWith(resolver, markPassed(api), opts), p.Metrics.LocalLimited)
	}
	if gate != nil {
		api = countRefusals(subject.Require(gate, markPassed(api)), p.Metrics.IdentityRefused)
	}

	root := http.NewServeMux()
	root.Handle("/api/", api)
	p.Health.Register(root)
	root.Handle("GET "+PathMetrics, p.Metrics.Handler())
	return root, nil
}

// passedKey marks, in a request's context, the flag the local limiter's next
// handler sets: a request whose flag is still false after the limiter ran
// was answered by the limiter itself.
type passedKey struct{}

func markPassed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f, ok := r.Context().Value(passedKey{}).(*bool); ok {
			*f = true
		}
		next.ServeHTTP(w, r)
	})
}

// countRefusals calls count with the status of every response stage writes
// itself, that is every request whose next handler (wrapped in markPassed)
// did not run: the local limiter's 429 (tlb_local_limit_responses_total),
// the identity gate's 401/400 (tlb_identity_refusals_total).
func countRefusals(stage http.Handler, count func(status int)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		passed := false
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		stage.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), passedKey{}, &passed)))
		if !passed {
			count(sw.status)
		}
	})
}

// statusWriter records the status written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// apiRoutes are the example API: enough to see both policies at work.
func apiRoutes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathPing, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"pong": true})
	})
	// The login example accepts any small body and checks nothing: it only
	// shows the tighter login policy in front of a sensitive endpoint.
	mux.HandleFunc("POST "+PathLogin, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxLoginBody))
		writeJSON(w, http.StatusOK, map[string]any{"status": "example login accepted"})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Server is the HTTP server bound by OnStart and shut down gracefully by
// OnStop within the stop timeout (APP_SHUTDOWN_TIMEOUT).
type Server struct {
	srv    *http.Server
	cfg    config.Web
	log    *slog.Logger
	down   fx.Shutdowner
	health *health.Handlers

	mu   sync.Mutex
	addr string
	done chan struct{}
}

func newServer(lc fx.Lifecycle, cfg config.Config, h http.Handler, log *slog.Logger, down fx.Shutdowner, hh *health.Handlers) *Server {
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		cfg:    cfg.Web,
		log:    log.With("component", "http"),
		down:   down,
		health: hh,
	}
	lc.Append(fx.Hook{OnStart: s.start, OnStop: s.stop})
	return s
}

// Addr is the bound address once started ("" before).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

func (s *Server) start(context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("web: listen on %s (APP_WEB_ADDR / -addr): %w", s.cfg.Addr, err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.addr, s.done = ln.Addr().String(), done
	s.mu.Unlock()
	s.log.Info("listening", "addr", ln.Addr().String())
	go func() {
		defer close(done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
			_ = s.down.Shutdown(fx.ExitCode(1))
		}
	}()
	return nil
}

// stop turns /readyz to 503, drains in-flight requests until ctx ends, then
// closes what is left.
func (s *Server) stop(ctx context.Context) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	s.health.Drain()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.log.Warn("graceful shutdown incomplete; closing remaining connections", "err", err)
		_ = s.srv.Close()
	}
	<-done
	return err
}
