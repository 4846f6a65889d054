package ratelimiter

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/edge"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/wiring"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Limiter is a distributed rate limiter with the service's defaults. Most
// callers want Allow, or Middleware in a net/http server. It is safe for
// concurrent use; Close it when done.
type Limiter struct {
	svc     *wiring.Limiter
	port    ratelimit.EdgePort
	cfg     config.Config
	pseudo  *subject.Pseudonymizer
	edge    *edge.Middleware
	gateIDs subject.Identifier
	now     func() time.Time
}

// FromEnv is New with the service's APP_ variables (os.Environ) as
// Options.Env: the same variables, defaults, validation and errors as the
// service, each naming its variable. APP_RATE_LIMIT_ENABLED and
// APP_RATE_LIMIT_PROVIDER default to true and redis here (the front door
// is the Redis limiter); the policies come from
// APP_RATE_LIMIT_POLICIES_FILE. Its start-up checks are bounded by
// StartTimeout, as the service's are; use New with Options.Env for
// another bound.
func FromEnv() (*Limiter, error) {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	return New(ctx, Options{Env: config.FromEnviron(os.Environ())})
}

// StartTimeout bounds FromEnv's start-up checks: the service's own start
// timeout (fx's default).
const StartTimeout = 15 * time.Second

// New builds the limiter of opts and runs the service's start-up checks
// (server version, programs, server policy) within ctx. A server that is
// too old, hashes the programs differently or is a replica is an error;
// one that cannot be reached is not (as in the service): the limiter then
// fails closed (Allow returns an *UnavailableError) until it can, and
// Ready says so.
func New(ctx context.Context, opts Options) (*Limiter, error) {
	cfg, err := opts.load()
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	svc, err := wiring.NewLimiter(cfg.RateLimit, opts.Client, log)
	if err != nil {
		return nil, optionError(err, "Client", opts.Client != nil)
	}
	l, err := newLimiter(cfg, svc, opts.Identify)
	if err == nil {
		err = svc.Start(ctx)
	}
	if err != nil {
		_ = svc.Close()
		return nil, fmt.Errorf("ratelimiter: %w", err)
	}
	return l, nil
}

func newLimiter(cfg config.Config, svc *wiring.Limiter, identify subject.Identifier) (*Limiter, error) {
	port := svc.Port()
	pseudo, err := subject.NewPseudonymizer(cfg.Web.SubjectSecret)
	if err != nil {
		return nil, err
	}
	l := &Limiter{svc: svc, port: port, cfg: cfg, pseudo: pseudo, now: time.Now}
	id, err := wiring.NewIdentity(cfg.Web, nil)
	if err != nil {
		return nil, err
	}
	subjects := id.Subjects
	if identify != nil {
		subjects = identify
	} else if id.Gate != nil {
		l.gateIDs = id.Gate
	}
	ec, err := wiring.EdgeConfig(cfg, port, subjects)
	if err != nil {
		return nil, err
	}
	if l.edge, err = edge.New(ec); err != nil {
		return nil, fmt.Errorf("middleware: %w", err)
	}
	return l, nil
}

// Allow asks for one unit of policyID for subject (any printable ASCII
// name of up to 1024 bytes, such as "project:123" or a user ID; it is
// pseudonymized before it reaches Redis). A denial is a Decision with
// Allowed false and a nil error. When the limiter could not decide, the
// error is an *UnavailableError, *IndeterminateError or
// *IncompatibleError (all wrap ErrUndecided): treat every error as "do
// not admit", the fail-closed path.
func (l *Limiter) Allow(ctx context.Context, policyID, subject string) (Decision, error) {
	return l.AllowN(ctx, policyID, subject, 1)
}

// AllowN is Allow for n units (1..the policy's MaxCost).
func (l *Limiter) AllowN(ctx context.Context, policyID, subject string, n int64) (Decision, error) {
	id := ratelimit.PolicyID(policyID)
	digest, err := l.Subject(subject)
	if err != nil {
		if id.Validate() != nil {
			id = ""
		}
		return Decision{}, &UnavailableError{Outcome: ratelimit.Unavailable{PolicyID: id, Category: ratelimit.CategoryInvalidRequest, Cause: err}}
	}
	now := l.now()
	out := l.port.Evaluate(ctx, ratelimit.Request{
		PolicyID: id, SubjectDigest: digest, Cost: n, Deadline: now.Add(l.cfg.Web.EvaluationTimeout),
	})
	return decide(out, now)
}

// Subject is the pseudonym Allow sends for subject, for callers of
// Limiter: the same as the middleware's for a principal of that name.
func (l *Limiter) Subject(name string) (ratelimit.SubjectDigest, error) {
	id, err := subject.NewPrincipal(name)
	if err != nil {
		return "", err
	}
	return l.pseudo.Digest(id)
}

// Middleware limits next as the service's edge does: the client identity
// (Options.Identify, or APP_WEB_IDENTITY: the client IP by default, X-
// Forwarded-For only from APP_WEB_TRUSTED_PROXIES), each route's policy
// (Limit.WithRoutes) or DefaultPolicy, the RateLimit and RateLimit-Policy
// fields, 429 with Retry-After when denied, and 503 problem+json without
// calling next when the limiter could not decide (docs/http.md).
func (l *Limiter) Middleware(next http.Handler) http.Handler {
	h := l.edge.Wrap(next)
	if l.gateIDs != nil {
		// api-key mode: an unverified key is 401 before any evaluation.
		h = subject.Require(l.gateIDs, h)
	}
	return h
}

// Limiter is the port itself, for outcomes unflattened: policy sets
// (EvaluateSet), refunds, evaluation IDs, costs, the local-fallback and
// denial-cache sources. Requests need a Deadline (EvaluationTimeout from
// now) and a SubjectDigest (Subject).
func (l *Limiter) Limiter() ratelimit.EdgePort { return l.port }

// EvaluationTimeout is the deadline Allow gives each evaluation: the
// service's, derived from the command timeout (2x, or 3x with a dedup
// policy) unless APP_WEB_EVALUATION_TIMEOUT sets it.
func (l *Limiter) EvaluationTimeout() time.Duration { return l.cfg.Web.EvaluationTimeout }

// Config is the validated configuration the limiter was built from
// (secrets redacted in every textual form).
func (l *Limiter) Config() config.Config { return l.cfg }

// Provider is the redisrate provider under the decorators: breaker state,
// pipeline and dedup statistics, server status.
func (l *Limiter) Provider() *redisrate.Provider { return l.svc.Provider() }

// Ready reports whether the limiter can decide (the service's /readyz
// check): nil once the coordination server has passed the start-up checks
// and answers.
func (l *Limiter) Ready(ctx context.Context) error { return l.svc.Ready(ctx) }

// Close stops the denial cache and the fallback and closes the client.
// Allow answers an *UnavailableError afterwards. It is idempotent.
func (l *Limiter) Close() error { return l.svc.Close() }
