package redisrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Retry-after hints of failed outcomes (docs/failure-certainty.md).
const (
	// MinFailureRetryAfter is the least RetryAfter of an Unavailable or
	// Indeterminate outcome; the hint is max(MinFailureRetryAfter,
	// CommandTimeout): a retry sooner than one command timeout would meet
	// the same condition.
	MinFailureRetryAfter = time.Second
	// MaxClockRetryAfter caps the hint of Unavailable{clock_unsafe}, which
	// is otherwise the wait until the server clock is back within the
	// tolerated regression.
	MaxClockRetryAfter = time.Minute
)

// Errors of the Provider. Outcome causes wrap them; Start, Ready and New
// return them.
var (
	// ErrClosed: the provider has been closed.
	ErrClosed = errors.New("rate-limit provider is closed")
	// ErrServerVersion: the server is older than a program's
	// MinRedisVersion, or its version could not be read.
	ErrServerVersion = errors.New("redis server version below the programs' minimum")
	// ErrScriptDigest: SCRIPT LOAD answered a digest other than the
	// manifest's: the server does not hash the embedded source as expected.
	ErrScriptDigest = errors.New("script digest differs from the manifest")
	// ErrUnknownPolicy: the request names a policy the provider lacks.
	ErrUnknownPolicy = errors.New("unknown rate-limit policy")
	// ErrDeadlineTooShort: the caller's remaining deadline is shorter than
	// the command timeout, so the call is not sent.
	ErrDeadlineTooShort = errors.New("remaining deadline shorter than the command timeout")
	// ErrInFlightFull: MaxInFlight calls are already in flight.
	ErrInFlightFull = errors.New("in-flight bound reached")
	// ErrNilContext: Evaluate was called with a nil context.
	ErrNilContext = errors.New("nil context")
	// ErrPanic: Evaluate recovered from a panic.
	ErrPanic = errors.New("panic while evaluating")
	// ErrClockUnsafe, ErrStateIncompatible and ErrInvalidArguments are the
	// causes of the outcomes for the program statuses of the same names.
	ErrClockUnsafe       = errors.New("program answered CLOCK_UNSAFE")
	ErrStateIncompatible = errors.New("program answered STATE_INCOMPATIBLE")
	ErrInvalidArguments  = errors.New("program answered INVALID")
	// ErrUnsupportedClient: New was given a client type R1 does not qualify.
	ErrUnsupportedClient = errors.New("unsupported redis client")
)

// CallError is the Cause of an outcome produced by a failed program call. It
// says which command failed and whether go-redis had begun writing it.
type CallError struct {
	// Command is "evalsha" or "eval".
	Command string
	// Program is the program name, e.g. "rate-fixed-window-v1".
	Program string
	// Written is true once the command may have left the process.
	Written bool
	// Err is the go-redis error.
	Err error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("redisrate: %s %s (written=%t): %v", e.Command, e.Program, e.Written, e.Err)
}

// Unwrap exposes the go-redis error.
func (e *CallError) Unwrap() error { return e.Err }

// Options configures a Provider.
type Options struct {
	// CommandTimeout is the fixed command timeout; it must equal the
	// client's ReadTimeout and WriteTimeout. A request whose remaining
	// deadline is shorter is answered Unavailable{deadline} unsent.
	CommandTimeout time.Duration
	// MaxInFlight bounds concurrent program calls, 1..the client's
	// PoolSize. A call beyond it is answered Unavailable{admission} at once.
	MaxInFlight int
	// Now returns the current time (optional; time.Now). Tests set it.
	Now func() time.Time
}

// coordinationClient is the provider's view of its client.
type coordinationClient interface {
	commander
	Close() error
}

// Provider implements ratelimit.EdgePort over the dedicated coordination
// client. It is safe for concurrent use. Build it with New, call Start once
// before serving (version check and script warm-up), Ready for readiness,
// and Close at shutdown; after Close every Evaluate answers
// Unavailable{closed}. The zero value is invalid.
type Provider struct {
	client    coordinationClient
	exec      *executor
	keys      *keyspace.Builder
	policies  map[ratelimit.PolicyID]*policyState
	scripts   []*script // distinct programs of the policies, for Start
	minRedis  string    // highest MinRedisVersion among them
	minVer    version
	timeout   time.Duration
	retryHint time.Duration
	sem       chan struct{}
	now       func() time.Time

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	// versionErr is set by Start when the server is too old; Evaluate then
	// answers Incompatible{server_version} without sending.
	versionErr atomic.Pointer[error]
}

var _ ratelimit.EdgePort = (*Provider)(nil)

// policyState is everything per policy that does not depend on the request.
type policyState struct {
	policy    ratelimit.Policy
	script    *script
	argv      []any // programs.Args(policy, 1); the executor substitutes the cost
	id        string
	revision  string
	algorithm string
	certainty ratelimit.Certainty
}

// New builds a Provider over client for policies (at least one, distinct
// IDs). client must be a *redis.Client (standalone or failover) configured
// as NewClient does: retries off, one dial attempt, ReadTimeout =
// WriteTimeout = opts.CommandTimeout, DialTimeout and PoolTimeout no longer,
// ContextTimeoutEnabled false, no client-side cache, no maintenance
// notifications, PoolSize >= opts.MaxInFlight. On success the Provider owns
// client and closes it in Close; on error client is left to the caller. New
// does no I/O.
func New(client redis.UniversalClient, keys *keyspace.Builder, policies []ratelimit.Policy, opts Options) (*Provider, error) {
	c, ok := client.(*redis.Client)
	if !ok || c == nil {
		return nil, fmt.Errorf("%w: %T (R1 supports *redis.Client only; cluster and ring are not qualified)", ErrUnsupportedClient, client)
	}
	if err := checkClientOptions(c.Options(), opts); err != nil {
		return nil, err
	}
	return newProvider(c, keys, policies, opts)
}

// checkClientOptions verifies the go-redis options (as normalized by
// go-redis) that failure certainty depends on.
func checkClientOptions(o *redis.Options, opts Options) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: client "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if o.MaxRetries != 0 { // go-redis normalizes -1 to 0 and 0 to 3
		bad("MaxRetries allows %d retries: set -1 (a retry after a write could apply the program twice)", o.MaxRetries)
	}
	if o.DialerRetries != dialAttempts {
		bad("DialerRetries %d: set %d", o.DialerRetries, dialAttempts)
	}
	if o.ContextTimeoutEnabled {
		bad("ContextTimeoutEnabled must be false (the caller deadline is an admission precheck)")
	}
	if o.ReadTimeout != opts.CommandTimeout || o.WriteTimeout != opts.CommandTimeout {
		bad("ReadTimeout %v and WriteTimeout %v must equal CommandTimeout %v", o.ReadTimeout, o.WriteTimeout, opts.CommandTimeout)
	}
	if o.DialTimeout > opts.CommandTimeout {
		bad("DialTimeout %v exceeds CommandTimeout %v", o.DialTimeout, opts.CommandTimeout)
	}
	if o.PoolTimeout > opts.CommandTimeout {
		bad("PoolTimeout %v exceeds CommandTimeout %v", o.PoolTimeout, opts.CommandTimeout)
	}
	if opts.MaxInFlight > o.PoolSize {
		bad("PoolSize %d is below MaxInFlight %d", o.PoolSize, opts.MaxInFlight)
	}
	if o.ClientSideCache != nil || o.ClientSideCacheConfig != nil {
		bad("client-side caching must be off")
	}
	if o.MaintNotificationsConfig == nil || o.MaintNotificationsConfig.Mode != "disabled" {
		bad("maintenance notifications must be disabled")
	}
	if o.Limiter != nil {
		bad("Limiter must be nil (MaxInFlight is the admission bound)")
	}
	return errors.Join(errs...)
}

// newProvider builds the Provider over any coordinationClient; New checks
// the client's options first.
func newProvider(client coordinationClient, keys *keyspace.Builder, policies []ratelimit.Policy, opts Options) (*Provider, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if keys == nil {
		bad("keys: nil keyspace builder")
	}
	if opts.CommandTimeout < time.Millisecond || opts.CommandTimeout > MaxTimeout {
		bad("Options.CommandTimeout %v must be in 1ms..%v", opts.CommandTimeout, MaxTimeout)
	}
	if opts.MaxInFlight < 1 {
		bad("Options.MaxInFlight %d must be >= 1", opts.MaxInFlight)
	}
	if len(policies) == 0 {
		bad("policies: none given")
	}
	if err := programs.Verify(); err != nil {
		errs = append(errs, fmt.Errorf("redisrate: programs: %w", err))
	}
	p := &Provider{
		client:   client,
		exec:     newExecutor(client),
		keys:     keys,
		policies: make(map[ratelimit.PolicyID]*policyState, len(policies)),
		timeout:  opts.CommandTimeout,
		now:      opts.Now,
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.retryHint = max(MinFailureRetryAfter, opts.CommandTimeout)
	byName := map[string]*script{}
	for i, pol := range policies {
		if pol.IsZero() {
			bad("policies[%d]: zero policy (not built by ratelimit.NewPolicy)", i)
			continue
		}
		if _, dup := p.policies[pol.ID()]; dup {
			bad("policies[%d]: duplicate policy id %q", i, pol.ID())
			continue
		}
		prog, ok := programs.ForAlgorithm(pol.Algorithm())
		if !ok {
			bad("policies[%d] %q: no program for algorithm %v", i, pol.ID(), pol.Algorithm())
			continue
		}
		s := byName[prog.Name]
		if s == nil {
			s = newScript(prog)
			byName[prog.Name] = s
			p.scripts = append(p.scripts, s)
			v, err := parseVersion(prog.MinRedisVersion)
			if err != nil {
				bad("program %s: MinRedisVersion: %v", prog.Name, err)
			} else if p.minRedis == "" || compareVersions(v, p.minVer) > 0 {
				p.minRedis, p.minVer = prog.MinRedisVersion, v
			}
		}
		argv := programs.Args(pol, 1)
		if len(argv) != prog.ArgCount || len(argv) <= programs.ArgCost {
			bad("policies[%d] %q: %d program arguments, want %d", i, pol.ID(), len(argv), prog.ArgCount)
			continue
		}
		p.policies[pol.ID()] = &policyState{
			policy:    pol,
			script:    s,
			argv:      argv,
			id:        string(pol.ID()),
			revision:  strconv.FormatInt(pol.Revision(), 10),
			algorithm: pol.Algorithm().String(),
			certainty: pol.Certainty(),
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	p.sem = make(chan struct{}, opts.MaxInFlight)
	return p, nil
}

// Evaluate implements ratelimit.EdgePort. It never panics and never returns
// nil. In order: request validation (Unavailable{invalid_request}; a passed
// deadline alone is Unavailable{deadline}), policy lookup
// (Unavailable{unknown_policy}), cost against MaxCost (invalid_request),
// closed (Unavailable{closed}), server version (Incompatible{server_version}
// when Start found the server too old), deadline precheck (the earlier of
// req.Deadline and ctx's deadline must leave at least CommandTimeout:
// Unavailable{deadline}), the in-flight bound (Unavailable{admission}, no
// waiting); none of these sends anything. Then one program call (EVALSHA,
// one EVAL on NOSCRIPT) whose reply or failure is mapped as
// docs/failure-certainty.md describes.
func (p *Provider) Evaluate(ctx context.Context, req ratelimit.Request) (out ratelimit.Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = ratelimit.Incompatible{
				PolicyID: knownID(req.PolicyID),
				Category: ratelimit.CategoryProgramFault,
				Cause:    fmt.Errorf("redisrate: %w: %s", ErrPanic, truncate(fmt.Sprint(r))),
			}
		}
	}()
	if ctx == nil {
		return p.unavailable(knownID(req.PolicyID), ratelimit.CategoryInvalidRequest, ErrNilContext)
	}
	now := p.now()
	if err := req.Validate(now); err != nil {
		cat := ratelimit.CategoryInvalidRequest
		if onlyDeadlinePassed(err) {
			cat = ratelimit.CategoryDeadline
		}
		return p.unavailable(knownID(req.PolicyID), cat, err)
	}
	ps := p.policies[req.PolicyID]
	if ps == nil {
		return p.unavailable(req.PolicyID, ratelimit.CategoryUnknownPolicy, fmt.Errorf("redisrate: %w: %q", ErrUnknownPolicy, req.PolicyID))
	}
	if err := req.ValidateFor(ps.policy); err != nil {
		return p.unavailable(req.PolicyID, ratelimit.CategoryInvalidRequest, err)
	}
	if p.closed.Load() {
		return p.unavailable(req.PolicyID, ratelimit.CategoryClosed, ErrClosed)
	}
	if e := p.versionErr.Load(); e != nil {
		return ratelimit.Incompatible{PolicyID: req.PolicyID, Category: ratelimit.CategoryServerVersion, Cause: *e}
	}
	if err := ctx.Err(); err != nil {
		return p.unavailable(req.PolicyID, ratelimit.CategoryDeadline, err)
	}
	if !p.deadlineAllows(ctx, req) {
		return p.unavailable(req.PolicyID, ratelimit.CategoryDeadline, ErrDeadlineTooShort)
	}
	select {
	case p.sem <- struct{}{}:
	default:
		return p.unavailable(req.PolicyID, ratelimit.CategoryAdmission, ErrInFlightFull)
	}
	defer func() { <-p.sem }()

	key, err := stateKey(p.keys, ps.id, ps.revision, ps.algorithm, req.SubjectDigest)
	if err != nil {
		return p.unavailable(req.PolicyID, ratelimit.CategoryInvalidRequest, err)
	}
	a, fellBack := p.exec.run(ctx, ps.script, key, ps.argv, req.Cost, func() bool { return p.deadlineAllows(ctx, req) })
	if a.err != nil {
		if !fellBack && a.written && isNoScript(a.err) {
			// NOSCRIPT ran nothing, and too little deadline is left for EVAL.
			return p.unavailable(req.PolicyID, ratelimit.CategoryDeadline, fmt.Errorf("redisrate: after NOSCRIPT: %w", ErrDeadlineTooShort))
		}
		return p.failed(ps, a)
	}
	r, err := parseReply(a.val, ps.policy)
	if err != nil {
		return ratelimit.Incompatible{PolicyID: req.PolicyID, Category: ratelimit.CategoryMalformedReply, Cause: err}
	}
	switch r.Status {
	case programs.StatusAllowed, programs.StatusDenied:
		return ratelimit.Evaluated{Decision: ratelimit.Decision{
			Allowed:        r.Status == programs.StatusAllowed,
			Limit:          r.Limit,
			Remaining:      r.Remaining,
			RetryAfter:     millis(r.RetryAfterMillis),
			ResetAt:        time.UnixMilli(r.ResetAtMillis),
			PolicyID:       req.PolicyID,
			PolicyRevision: ps.policy.Revision(),
			Source:         ratelimit.GlobalRedis,
			Certainty:      ps.certainty,
		}}
	case programs.StatusClockUnsafe:
		return ratelimit.Unavailable{PolicyID: req.PolicyID, RetryAfter: p.clockHint(r), Category: ratelimit.CategoryClockUnsafe, Cause: ErrClockUnsafe}
	case programs.StatusStateIncompatible:
		return ratelimit.Incompatible{PolicyID: req.PolicyID, Category: ratelimit.CategoryStateIncompatible, Cause: ErrStateIncompatible}
	case programs.StatusInvalid:
		return ratelimit.Incompatible{PolicyID: req.PolicyID, Category: ratelimit.CategoryInvalidArguments, Cause: ErrInvalidArguments}
	}
	// parseReply admits only the five statuses; fail closed regardless.
	return ratelimit.Incompatible{PolicyID: req.PolicyID, Category: ratelimit.CategoryMalformedReply, Cause: ErrMalformedReply}
}

// deadlineAllows reports whether the earlier of req.Deadline and ctx's
// deadline leaves at least one command timeout.
func (p *Provider) deadlineAllows(ctx context.Context, req ratelimit.Request) bool {
	return req.EffectiveDeadline(ctx).Sub(p.now()) >= p.timeout
}

func (p *Provider) unavailable(id ratelimit.PolicyID, cat ratelimit.Category, cause error) ratelimit.Outcome {
	return ratelimit.Unavailable{PolicyID: id, RetryAfter: p.retryHint, Category: cat, Cause: cause}
}

// failed maps a failed program call through the classifier.
func (p *Provider) failed(ps *policyState, a attempt) ratelimit.Outcome {
	v := classify(a.err, a.written)
	cause := &CallError{Command: a.command, Program: ps.script.name, Written: a.written, Err: a.err}
	id := ps.policy.ID()
	switch v.kind {
	case ratelimit.KindUnavailable:
		return ratelimit.Unavailable{PolicyID: id, RetryAfter: p.retryHint, Category: v.category, Cause: cause}
	case ratelimit.KindIndeterminate:
		return ratelimit.Indeterminate{PolicyID: id, RetryAfter: p.retryHint, Category: v.category, Cause: cause}
	default:
		return ratelimit.Incompatible{PolicyID: id, Category: v.category, Cause: cause}
	}
}

// clockHint is the RetryAfter of Unavailable{clock_unsafe}: the program's
// wait until the regression is tolerated again, within
// [retryHint, MaxClockRetryAfter]; MaxClockRetryAfter when the server clock
// is past MaxServerMillis (no wait heals that).
func (p *Provider) clockHint(r programs.Reply) time.Duration {
	if r.EffectiveNowMillis == 0 {
		return MaxClockRetryAfter
	}
	return min(max(millis(r.RetryAfterMillis), p.retryHint), MaxClockRetryAfter)
}

// millis converts ms to a Duration, saturating instead of overflowing (a
// policy horizon may exceed the ~292 years a Duration holds).
func millis(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ms) * time.Millisecond
}

// knownID returns id when it is a syntactically valid PolicyID and ""
// otherwise, so that an invalid request cannot put arbitrary text into an
// outcome's PolicyID (a metric label).
func knownID(id ratelimit.PolicyID) ratelimit.PolicyID {
	if keyspace.IsSegment(string(id)) {
		return id
	}
	return ""
}

// onlyDeadlinePassed reports whether the validation error err consists of
// nothing but ratelimit.ErrDeadlinePassed.
func onlyDeadlinePassed(err error) bool {
	errs := []error{err}
	var re *ratelimit.RequestError
	if !errors.As(err, &re) || re != err {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		}
	}
	for _, e := range errs {
		var re *ratelimit.RequestError
		if !errors.As(e, &re) || re.Field != "Deadline" || !errors.Is(re.Err, ratelimit.ErrDeadlinePassed) {
			return false
		}
	}
	return len(errs) > 0
}

// Start checks the server version against the programs' MinRedisVersion and
// loads every program with SCRIPT LOAD (a warm-up: correctness relies on the
// NOSCRIPT fallback, since a restart or failover empties the script cache).
// If the server is too old or its version unreadable it returns an error
// wrapping ErrServerVersion and from then on Evaluate answers
// Incompatible{server_version} until a later Start succeeds. A transport
// failure is returned as is and changes nothing. Each command is bounded by
// the command timeout; ctx bounds the wait for a connection.
func (p *Provider) Start(ctx context.Context) error {
	if p.closed.Load() {
		return ErrClosed
	}
	info := redis.NewStringCmd(ctx, "info", "server")
	if err := p.do(ctx, info); err != nil {
		return fmt.Errorf("redisrate: start: INFO server: %w", err)
	}
	version, ok := infoField(info.Val(), "redis_version")
	v, err := parseVersion(version)
	if !ok || err != nil || compareVersions(v, p.minVer) < 0 {
		e := fmt.Errorf("redisrate: start: %w: server reports %q, programs need %s", ErrServerVersion, truncate(version), p.minRedis)
		p.versionErr.Store(&e)
		return e
	}
	p.versionErr.Store(nil)
	for _, s := range p.scripts {
		load := redis.NewStringCmd(ctx, "script", "load", s.source)
		if err := p.do(ctx, load); err != nil {
			return fmt.Errorf("redisrate: start: SCRIPT LOAD %s: %w", s.name, err)
		}
		if got := load.Val(); got != s.shaHex {
			return fmt.Errorf("redisrate: start: %w: %s loaded as %q, manifest has %s", ErrScriptDigest, s.name, truncate(got), s.shaHex)
		}
	}
	return nil
}

// Ready reports whether the provider can serve: not closed, no version
// failure from Start, and the server answers PING within the command
// timeout.
func (p *Provider) Ready(ctx context.Context) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if e := p.versionErr.Load(); e != nil {
		return *e
	}
	ping := redis.NewStatusCmd(ctx, "ping")
	if err := p.do(ctx, ping); err != nil {
		return fmt.Errorf("redisrate: ready: PING: %w", err)
	}
	return nil
}

// do runs an administrative command with ctx bounded by the command
// timeout (the socket timeouts bound the rest).
func (p *Provider) do(ctx context.Context, cmd redis.Cmder) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	_ = p.client.Process(ctx, cmd)
	return cmd.Err()
}

// Close closes the client. Evaluate answers Unavailable{closed} afterwards;
// a call already in flight ends as its client call does. Close is
// idempotent and returns the client's Close error.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		p.closeErr = p.client.Close()
	})
	return p.closeErr
}

// infoField returns field's value from an INFO reply.
func infoField(info, field string) (string, bool) {
	for line := range strings.Lines(info) {
		name, value, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if ok && name == field {
			return value, true
		}
	}
	return "", false
}

// version is major.minor.patch.
type version [3]int

// parseVersion parses "major.minor.patch" (a missing patch is 0).
func parseVersion(s string) (version, error) {
	var v version
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("version %q: want major.minor.patch", truncate(s))
	}
	for i, part := range parts {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return v, fmt.Errorf("version %q: part %d is not a number", truncate(s), i)
		}
		v[i] = n
	}
	return v, nil
}

func compareVersions(a, b version) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}
