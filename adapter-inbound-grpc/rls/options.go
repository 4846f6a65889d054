package rls

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Undecided says what the service answers when a descriptor's outcome is
// not Evaluated (Unavailable, Indeterminate, Incompatible). The zero value
// is invalid.
type Undecided int

// The undecided modes.
const (
	// UndecidedFailClosed answers OVER_LIMIT with the header
	// UndecidedHeader naming the outcome (the default).
	UndecidedFailClosed Undecided = iota + 1
	// UndecidedError answers gRPC UNAVAILABLE, so that Envoy's own
	// failure_mode_deny decides.
	UndecidedError
)

// String returns "fail-closed" or "error".
func (u Undecided) String() string {
	switch u {
	case UndecidedFailClosed:
		return "fail-closed"
	case UndecidedError:
		return "error"
	}
	return fmt.Sprintf("Undecided(%d)", int(u))
}

// ErrInvalidOption is wrapped by the errors of ParseUndecided and
// Options.Validate.
var ErrInvalidOption = errors.New("invalid rls option")

// ParseUndecided parses "fail-closed" or "error".
func ParseUndecided(s string) (Undecided, error) {
	switch s {
	case "fail-closed":
		return UndecidedFailClosed, nil
	case "error":
		return UndecidedError, nil
	}
	return 0, fmt.Errorf("%w: undecided %q is not fail-closed or error", ErrInvalidOption, bound(s))
}

// Bounds limit what one request may carry; a request beyond any of them
// is refused with INVALID_ARGUMENT before anything is decided.
type Bounds struct {
	// MaxDescriptors per request, 1..MaxSetDescriptors.
	MaxDescriptors int
	// MaxEntries per descriptor.
	MaxEntries int
	// MaxKeyLen bounds the domain and every entry key, in bytes.
	MaxKeyLen int
	// MaxValueLen bounds every entry value, in bytes.
	MaxValueLen int
	// MaxHitsAddend bounds hits_addend, the request's and each
	// descriptor's.
	MaxHitsAddend uint64
}

// MaxSetDescriptors is the highest accepted Bounds.MaxDescriptors: every
// descriptor may be one evaluation and one refund.
const MaxSetDescriptors = 64

// DefaultBounds are the bounds used when Options.Bounds is the zero value.
var DefaultBounds = Bounds{MaxDescriptors: 16, MaxEntries: 8, MaxKeyLen: 128, MaxValueLen: 512, MaxHitsAddend: 1 << 20}

// Options configure a Service.
type Options struct {
	// Undecided is the answer to an undecided outcome; 0 means
	// UndecidedFailClosed.
	Undecided Undecided
	// ShadowMode makes every rule a shadow rule: decided and counted,
	// never enforced. A single rule is one with shadow_mode: true, or
	// when it names a shadow policy (ratelimit.Shadow, ADR 0037).
	ShadowMode bool
	// NoHeaders leaves response_headers_to_add empty (no RateLimit,
	// RateLimit-Policy, Retry-After fields).
	NoHeaders bool
	// NegativeHits honours is_negative_hits (a refund of up to the
	// descriptor's hits, never above the limit). Off, a descriptor with
	// it is refused: it would let any client refill any budget.
	NegativeHits bool
	// Bounds; the zero value means DefaultBounds.
	Bounds Bounds
	// DetailedMetricCap bounds the distinct detailed_metric keys counted
	// under their own label; 0 means 1000, negative folds all.
	DetailedMetricCap int
	// EvaluationTimeout bounds each request's decisions (the port's
	// deadline) when the caller's context allows longer; 0 means 1s.
	EvaluationTimeout time.Duration
	// Metrics; nil means NopMetrics.
	Metrics Metrics
	// Log; nil discards.
	Log *slog.Logger
	// Now is the clock for deadlines; nil means time.Now.
	Now func() time.Time
}

// withDefaults fills the zero fields and validates the rest.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	if o.Undecided == 0 {
		o.Undecided = UndecidedFailClosed
	}
	if o.Undecided != UndecidedFailClosed && o.Undecided != UndecidedError {
		errs = append(errs, fmt.Errorf("%w: Undecided %v", ErrInvalidOption, o.Undecided))
	}
	if o.Bounds == (Bounds{}) {
		o.Bounds = DefaultBounds
	}
	b := o.Bounds
	if b.MaxDescriptors < 1 || b.MaxDescriptors > MaxSetDescriptors {
		errs = append(errs, fmt.Errorf("%w: Bounds.MaxDescriptors %d not in 1..%d", ErrInvalidOption, b.MaxDescriptors, MaxSetDescriptors))
	}
	if b.MaxEntries < 1 || b.MaxEntries > 64 {
		errs = append(errs, fmt.Errorf("%w: Bounds.MaxEntries %d not in 1..64", ErrInvalidOption, b.MaxEntries))
	}
	if b.MaxKeyLen < 1 || b.MaxKeyLen > 1024 {
		errs = append(errs, fmt.Errorf("%w: Bounds.MaxKeyLen %d not in 1..1024", ErrInvalidOption, b.MaxKeyLen))
	}
	if b.MaxValueLen < 1 || b.MaxValueLen > 4096 {
		errs = append(errs, fmt.Errorf("%w: Bounds.MaxValueLen %d not in 1..4096", ErrInvalidOption, b.MaxValueLen))
	}
	if b.MaxHitsAddend < 1 || b.MaxHitsAddend > 1<<32 {
		errs = append(errs, fmt.Errorf("%w: Bounds.MaxHitsAddend %d not in 1..%d", ErrInvalidOption, b.MaxHitsAddend, uint64(1)<<32))
	}
	if o.DetailedMetricCap == 0 {
		o.DetailedMetricCap = 1000
	}
	if o.EvaluationTimeout == 0 {
		o.EvaluationTimeout = time.Second
	}
	if o.EvaluationTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: EvaluationTimeout %v is negative", ErrInvalidOption, o.EvaluationTimeout))
	}
	if o.Metrics == nil {
		o.Metrics = NopMetrics{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, errors.Join(errs...)
}

func bound(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
