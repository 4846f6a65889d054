package health

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Paths the handlers are registered at by Register.
const (
	LivenessPath  = "/healthz"
	ReadinessPath = "/readyz"
)

// Bounds on Config.Timeout.
const (
	DefaultTimeout = time.Second
	MaxTimeout     = 30 * time.Second
)

// ErrInvalidConfig is wrapped by every Config.Validate error.
var ErrInvalidConfig = errors.New("invalid health config")

// ReadinessChecker reports whether a dependency can serve. Ready must return
// by ctx's deadline; a nil error means ready. The error text is never sent to
// clients.
type ReadinessChecker interface {
	Ready(ctx context.Context) error
}

// Detailer is implemented by a readiness error whose detail is safe to
// show: /readyz puts ReadinessDetail (short, fixed text: no address, no
// secret) in its problem body instead of the generic "readiness check
// failed". Other error text is never sent.
type Detailer interface {
	ReadinessDetail() string
}

// CheckerFunc adapts a function to ReadinessChecker.
type CheckerFunc func(ctx context.Context) error

// Ready calls f(ctx).
func (f CheckerFunc) Ready(ctx context.Context) error { return f(ctx) }

// Config configures the handlers. The zero value is valid: no checker (always
// ready), DefaultTimeout.
type Config struct {
	// Checker, optional, decides readiness.
	Checker ReadinessChecker
	// Timeout bounds each readiness check; 0 means DefaultTimeout; at most
	// MaxTimeout.
	Timeout time.Duration
	// OnCheck, optional, is told the result of every readiness check (for
	// metrics or logs); err is the checker's error, which may hold
	// addresses: log it, do not send it.
	OnCheck func(err error, took time.Duration)
}

// Validate reports an invalid Timeout.
func (c Config) Validate() error {
	if c.Timeout < 0 || c.Timeout > MaxTimeout {
		return fmt.Errorf("%w: Timeout %v not in [0, %v]", ErrInvalidConfig, c.Timeout, MaxTimeout)
	}
	return nil
}

// Handlers serves /healthz and /readyz. It is safe for concurrent use; build
// it with New.
type Handlers struct {
	checker  ReadinessChecker
	timeout  time.Duration
	onCheck  func(error, time.Duration)
	draining atomic.Bool
}

// New validates cfg and returns the handlers.
func New(cfg Config) (*Handlers, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Handlers{checker: cfg.Checker, timeout: cfg.Timeout, onCheck: cfg.OnCheck}
	if h.timeout == 0 {
		h.timeout = DefaultTimeout
	}
	return h, nil
}

// Register adds "GET /healthz" and "GET /readyz" (GET patterns also match
// HEAD) to mux.
func (h *Handlers) Register(mux *http.ServeMux) {
	mux.Handle("GET "+LivenessPath, h.Liveness())
	mux.Handle("GET "+ReadinessPath, h.Readiness())
}

// RegisterPublic adds "GET /healthz" and the summary "GET /readyz"
// (ReadinessSummary) to mux: the pair for a public listener when the
// detailed document is served on an admin listener (Register).
func (h *Handlers) RegisterPublic(mux *http.ServeMux) {
	mux.Handle("GET "+LivenessPath, h.Liveness())
	mux.Handle("GET "+ReadinessPath, h.ReadinessSummary())
}

// ReadinessSummary runs the same check as Readiness but says only whether
// the service is ready: 200 "ready", or 503 with a problem body whose detail
// is "not ready" (or "shutting down" while draining). No dependency, reason
// or server description is written, whatever the checker offers.
func (h *Handlers) ReadinessSummary() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.answered(w) {
			return
		}
		if _, err := h.runCheck(r, h.checker.Ready); err != nil {
			writeNotReady(w, "not ready")
			return
		}
		writeText(w, http.StatusOK, "ready\n")
	})
}

// answered writes the answers that need no check (503 "shutting down"
// while draining, 200 "ready" without a checker) and reports whether it
// wrote one.
func (h *Handlers) answered(w http.ResponseWriter) bool {
	switch {
	case h.draining.Load():
		writeNotReady(w, "shutting down")
	case h.checker == nil:
		writeText(w, http.StatusOK, "ready\n")
	default:
		return false
	}
	return true
}

// runCheck runs check within the readiness timeout, reports its error and
// duration to OnCheck, and says whether the timeout (or the request's end)
// stopped it.
func (h *Handlers) runCheck(r *http.Request, check func(context.Context) error) (timedOut bool, err error) {
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	start := time.Now()
	err = check(ctx)
	if h.onCheck != nil {
		h.onCheck(err, time.Since(start))
	}
	return err != nil && (errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil), err
}

// Drain makes /readyz answer 503 from now on, so that load balancers stop
// sending traffic before shutdown. /healthz is unaffected.
func (h *Handlers) Drain() { h.draining.Store(true) }

// Liveness answers 200 "ok" while the process serves.
func (h *Handlers) Liveness() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok\n")
	})
}

// Readiness answers 200 "ready" when there is no checker or it returns nil
// within the timeout, and 503 with a short problem body otherwise.
func (h *Handlers) Readiness() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.answered(w) {
			return
		}
		if dc, ok := h.checker.(DetailChecker); ok {
			h.serveDetail(w, r, dc)
			return
		}
		timedOut, err := h.runCheck(r, h.checker.Ready)
		switch {
		case err == nil:
			writeText(w, http.StatusOK, "ready\n")
		case timedOut:
			writeNotReady(w, "readiness check timed out")
		default:
			detail := "readiness check failed"
			var d Detailer
			if errors.As(err, &d) {
				detail = d.ReadinessDetail()
			}
			writeNotReady(w, detail)
		}
	})
}

func writeText(w http.ResponseWriter, status int, body string) {
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func writeNotReady(w http.ResponseWriter, detail string) {
	body := `{"type":"about:blank","title":"not ready","status":503,"detail":` + strconv.Quote(detail) + `}`
	hd := w.Header()
	hd.Set("Content-Type", "application/problem+json")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(body))
}
