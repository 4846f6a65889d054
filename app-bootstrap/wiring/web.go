package wiring

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"

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

// maxLoginBody bounds what the example login handler reads.
const maxLoginBody = 16 << 10

// WebModule is the HTTP server. It takes ratelimit.EdgePort as optional:
// without it (rate limit disabled) no edge middleware and no subject
// pseudonymizer exist.
func WebModule() fx.Option {
	return fx.Module("web",
		fx.Provide(newHealth),
		fx.Provide(NewAPIKeys),
		fx.Provide(fx.Annotate(NewHandler, fx.ResultTags(`name:"root"`))),
		fx.Provide(fx.Annotate(NewAdminHandler, fx.ResultTags(`name:"admin"`))),
		fx.Provide(fx.Annotate(newServer, fx.ParamTags(``, ``, `name:"root"`, `name:"admin"`, ``, ``, ``))),
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
	// Policies, present with the rate-limit module, serves the edge
	// through the policy file's current generation (reloaded without a
	// restart); without it the edge is built once over Edge.
	Policies *Policies `optional:"true"`
	// APIKeys is the reloadable key set of APP_WEB_IDENTITY=api-key (see
	// NewAPIKeys); nil builds a fixed one from Config.Web.APIKeysFile.
	APIKeys *subject.APIKeys `optional:"true"`
}

// NewHandler builds the public listener's handler: /api/ behind, in this
// order, the local limiter keyed by client IP (when enabled: the per-IP
// guard, in every identity mode), the API-key gate (APP_WEB_IDENTITY=api-key:
// 401 before any Redis evaluation) and the edge middleware (when an EdgePort
// exists) limiting by the configured identity; and the unlimited /healthz
// and /readyz. Without APP_WEB_ADMIN_ADDR it also serves /metrics and the
// detailed /readyz document; with it, /readyz only says ready or not and
// /metrics is on the admin listener (NewAdminHandler).
func NewHandler(p HandlerParams) (http.Handler, error) {
	w := p.Config.Web
	id, err := NewIdentity(w, p.APIKeys)
	if err != nil {
		return nil, err
	}
	for _, pr := range w.BroadTrustedProxies() {
		p.Logger.Warn("a broad trusted-proxy network: every address in it may set X-Forwarded-For and the identity header",
			"var", config.Prefix+"WEB_TRUSTED_PROXIES", "prefix", pr.String())
	}
	resolver, gate := id.IPs, id.Gate

	var api http.Handler = apiRoutes()
	switch {
	case p.Policies != nil:
		routes := api
		h, err := p.Policies.Handler(func(cfg config.Config, port ratelimit.EdgePort) (http.Handler, error) {
			return edgeHandler(p, cfg, port, id.Subjects, routes)
		})
		if err != nil {
			return nil, err
		}
		api = h
	case p.Edge != nil:
		h, err := edgeHandler(p, p.Config, p.Edge, id.Subjects, api)
		if err != nil {
			return nil, err
		}
		api = h
	}
	// The gate runs behind the per-IP guard: a flood of invented keys from
	// one address is answered 429 once over its budget, without a SHA-256
	// or a key-set lookup per request; a 401 still costs no Redis state.
	if gate != nil {
		api = countRefusals(subject.Require(gate, markPassed(api)), p.Metrics.IdentityRefused)
	}
	if l := w.LocalLimit; l.Enabled {
		lim, err := localimit.New(localimit.Config{Rate: l.Rate, Burst: l.Burst, MaxClients: l.MaxClients, IdleTTL: l.IdleTTL})
		if err != nil {
			return nil, fmt.Errorf("web: local limiter: %w", err)
		}
		opts := localimit.WrapOptions{OmitLegacyFields: !w.LegacyRateLimitHeaders}
		api = countRefusals(lim.WrapWith(resolver, markPassed(api), opts), p.Metrics.LocalLimited)
	}

	root := http.NewServeMux()
	root.Handle("/api/", api)
	if w.AdminAddr != "" {
		p.Health.RegisterPublic(root)
		return root, nil
	}
	p.Health.Register(root)
	root.Handle("GET "+PathMetrics, p.Metrics.Handler())
	return root, nil
}

// edgeHandler is the edge middleware of cfg's policies over port in
// front of next, observed into p.Metrics.
func edgeHandler(p HandlerParams, cfg config.Config, port ratelimit.EdgePort, subjects subject.Identifier, next http.Handler) (http.Handler, error) {
	ec, err := EdgeConfig(cfg, port, subjects)
	if err != nil {
		return nil, err
	}
	known := metrics.KnownPolicies(policyIDs(cfg.RateLimit.Policies))
	ec.ShadowSkipped = func(id ratelimit.PolicyID) { p.Metrics.ShadowSkipped(id, known) }
	ec.Observer = edge.ObserverFunc(func(o edge.Observation) {
		p.Metrics.EdgeResponse(o.Policy, known, o.Admitted, o.Status)
		if o.Delay > 0 {
			p.Metrics.EdgeDelay(o.Policy, known, o.Delay, o.Abandoned, o.Refunded)
		}
	})
	mw, err := edge.New(ec)
	if err != nil {
		return nil, fmt.Errorf("web: edge middleware: %w", err)
	}
	return mw.Wrap(next), nil
}

// Identity is the client identity of the service's edge
// (APP_WEB_IDENTITY).
type Identity struct {
	// Subjects is what the edge limits by: the client IP, the identity
	// Gate verified, or a trusted proxy's principal.
	Subjects subject.Identifier
	// IPs is the client-IP resolver (trusted proxies, IPv6 prefix), the
	// local limiter's key in every mode.
	IPs *subject.Resolver
	// Gate verifies X-API-Key in front of the edge (api-key mode: 401
	// before any Redis evaluation); nil in the other modes.
	Gate *subject.APIKeys
}

// NewIdentity builds the identity of w. keys is the reloadable key set
// of api-key mode (NewAPIKeys); nil builds a fixed one from the digests
// in w.APIKeysFile. Its errors name the APP_ variable (CheckIdentity).
// NewHandler and the front door (package ratelimiter) both build it here.
func NewIdentity(w config.Web, keys *subject.APIKeys) (Identity, error) {
	resolver, err := subject.NewResolver(subject.Config{TrustedProxies: w.TrustedProxies, IPv6PrefixLen: w.IPv6Prefix})
	if err != nil {
		return Identity{}, fmt.Errorf("web: subject resolver: %w", err)
	}
	id := Identity{Subjects: resolver, IPs: resolver}
	switch w.Identity {
	case config.IdentityAPIKey:
		id.Gate = keys
		if id.Gate == nil {
			digests, err := apiKeyDigests(w.APIKeysFile)
			if err != nil {
				return Identity{}, fmt.Errorf("web: api keys: %w", err)
			}
			if id.Gate, err = subject.NewAPIKeys(digests); err != nil {
				return Identity{}, fmt.Errorf("web: api keys (%s): %w", envAPIKeysFile, err)
			}
		}
		id.Subjects = subject.FromContext
	case config.IdentityTrustedHeader:
		th, err := trustedHeader(w, resolver)
		if err != nil {
			return Identity{}, fmt.Errorf("web: identity header: %w", err)
		}
		id.Subjects = th
	}
	return id, nil
}

// EdgeConfig is the service's edge middleware configuration over port for
// cfg, limiting by subjects: the subject pseudonymizer of
// APP_WEB_SUBJECT_SECRET, the policy file's routes and default policy, the
// evaluation timeout and the RateLimit fields of APP_WEB_*. The caller
// adds an Observer if it wants one. NewHandler and the front door
// (package ratelimiter) both build their edge from it.
func EdgeConfig(cfg config.Config, port ratelimit.EdgePort, subjects subject.Identifier) (edge.Config, error) {
	w, rl := cfg.Web, cfg.RateLimit
	pseudo, err := subject.NewPseudonymizer(w.SubjectSecret)
	if err != nil {
		return edge.Config{}, fmt.Errorf("web: %w", err)
	}
	routes := make([]edge.Route, 0, len(rl.Policies.Routes))
	for _, r := range rl.Policies.Routes {
		routes = append(routes, edge.Route{Pattern: r.Pattern, Policy: r.Policy})
	}
	return edge.Config{
		Port:             port,
		Subjects:         subjects,
		OmitLegacyFields: !w.LegacyRateLimitHeaders,
		Pseudonymizer:    pseudo,
		DefaultPolicy:    rl.DefaultPolicy,
		Routes:           routes,
		Timeout:          w.EvaluationTimeout,
		Policies:         rl.Policies.Policies,
		// Shadow calls take at most a quarter of the in-flight bound
		// (ADR 0037).
		ShadowMaxInFlight: max(1, rl.MaxInFlight/4),
	}, nil
}

// AdminParams are the dependencies of the admin listener's handler.
type AdminParams struct {
	fx.In

	Config  config.Config
	Metrics *metrics.Metrics
	Health  *health.Handlers
}

// NewAdminHandler builds the admin listener's handler (APP_WEB_ADMIN_ADDR):
// /metrics, the detailed /readyz document and /healthz; nil when
// APP_WEB_ADMIN_ADDR is unset (no admin listener).
func NewAdminHandler(p AdminParams) http.Handler {
	if p.Config.Web.AdminAddr == "" {
		return nil
	}
	mux := http.NewServeMux()
	p.Health.Register(mux)
	mux.Handle("GET "+PathMetrics, p.Metrics.Handler())
	return mux
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
