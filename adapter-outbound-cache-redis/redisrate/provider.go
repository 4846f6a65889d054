package redisrate

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

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
	minVer    redisinfo.Version
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
		keys:     keys,
		policies: make(map[ratelimit.PolicyID]*policyState, len(policies)),
		timeout:  opts.CommandTimeout,
		now:      opts.Now,
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.exec = newExecutor(client, p.now)
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
			v, err := redisinfo.ParseVersion(prog.MinRedisVersion)
			if err != nil {
				bad("program %s: MinRedisVersion: %v", prog.Name, err)
			} else if p.minRedis == "" || v.Compare(p.minVer) > 0 {
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
