package ratefallback

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Provider is what the fallback needs of the provider it decorates
// (redisrate.Provider has it): decisions, a decision with a charge ahead
// of it in the same round trip, and a charge alone.
type Provider interface {
	ratelimit.EdgePort
	// EvaluateAfterCharge is Evaluate with units charged to the subject
	// first, in the same round trip; charged: the server ran the charge.
	EvaluateAfterCharge(ctx context.Context, req ratelimit.Request, units int64) (out ratelimit.Outcome, charged bool)
	// Charge charges units to the subject alone; an allowed Evaluated
	// outcome means the server ran it.
	Charge(ctx context.Context, req ratelimit.Request, units int64) ratelimit.Outcome
}

var _ Provider = (*redisrate.Provider)(nil)

// Bounds and defaults of Options.
const (
	// DefaultMaxSubjects is Options.MaxSubjects when 0: the legacy local
	// limiter's default table size.
	DefaultMaxSubjects = 10_000
	// MaxSubjects bounds Options.MaxSubjects.
	MaxSubjects = 1_000_000
	// DefaultReconcileEvery is Options.ReconcileEvery when 0.
	DefaultReconcileEvery = time.Second
	// maxBackoff caps the wait before a failed charge is tried again by
	// the background pass.
	maxBackoff = 8 * time.Second
)

// Options configures a Fallback.
type Options struct {
	// Policies are the provider's policies; the LocalFallback ones are
	// decided locally when the provider cannot decide, the others pass
	// through. Required (at least one).
	Policies []ratelimit.Policy
	// CommandTimeout is the provider's command timeout: a background
	// charge gets redisrate.EvaluationTimeout of it as its deadline.
	// Required, 1ms..redisrate.MaxTimeout.
	CommandTimeout time.Duration
	// MaxSubjects bounds the local table (subjects of every local-fallback
	// policy together), 1..MaxSubjects; 0 means DefaultMaxSubjects. A
	// subject that finds the table full of live state is not decided
	// locally: the Unavailable outcome stands, with ErrTableFull.
	MaxSubjects int
	// ReconcileEvery spaces the background passes that charge pending
	// admissions no request has carried, and sweep expired entries;
	// 10ms..1m, 0 means DefaultReconcileEvery. A failed charge waits
	// twice as long each time (at most 8 s; a charge the open breaker
	// refused costs nothing and does not back off) before the next pass
	// retries it.
	ReconcileEvery time.Duration
	// Now is the local clock (optional; time.Now).
	Now func() time.Time
}

// Errors of New and of local decisions.
var (
	// ErrInvalidOptions wraps every error New returns.
	ErrInvalidOptions = errors.New("ratefallback: invalid options")
	// ErrTableFull is the cause added to an Unavailable outcome that the
	// fallback could not decide because its table was full.
	ErrTableFull = errors.New("local fallback table full")
)

// New returns the fallback over p and starts its background pass (when a
// policy is LocalFallback). It fails, starting nothing, if opts are
// invalid or a policy's share cannot be built.
func New(p Provider, opts Options) (*Fallback, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	if p == nil {
		bad("provider: nil")
	}
	if len(opts.Policies) == 0 {
		bad("Options.Policies: none given")
	}
	if opts.CommandTimeout < time.Millisecond || opts.CommandTimeout > redisrate.MaxTimeout {
		bad("Options.CommandTimeout %v must be in 1ms..%v", opts.CommandTimeout, redisrate.MaxTimeout)
	}
	if opts.MaxSubjects == 0 {
		opts.MaxSubjects = DefaultMaxSubjects
	}
	if opts.MaxSubjects < 1 || opts.MaxSubjects > MaxSubjects {
		bad("Options.MaxSubjects %d must be in 1..%d", opts.MaxSubjects, MaxSubjects)
	}
	if opts.ReconcileEvery == 0 {
		opts.ReconcileEvery = DefaultReconcileEvery
	}
	if opts.ReconcileEvery < 10*time.Millisecond || opts.ReconcileEvery > time.Minute {
		bad("Options.ReconcileEvery %v must be in 10ms..1m", opts.ReconcileEvery)
	}
	f := &Fallback{
		p: p, local: map[ratelimit.PolicyID]*localPolicy{}, max: opts.MaxSubjects, now: opts.Now,
		every: opts.ReconcileEvery, budget: redisrate.EvaluationTimeout(opts.CommandTimeout, false),
		table: map[string]*entry{}, stop: make(chan struct{}),
	}
	if f.now == nil {
		f.now = time.Now
	}
	for i, pol := range opts.Policies {
		if pol.IsZero() {
			bad("Options.Policies[%d]: zero policy", i)
			continue
		}
		if pol.FailurePolicy() != ratelimit.LocalFallback {
			continue
		}
		share, err := SharePolicy(pol)
		if err != nil {
			bad("policy %q: local share: %v", pol.ID(), err)
			continue
		}
		f.local[pol.ID()] = &localPolicy{global: pol, share: share, reserve: (pol.FallbackInstances() - 1) * share.Limit()}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(f.local) > 0 {
		f.wg.Add(1)
		go f.background()
	}
	return f, nil
}
