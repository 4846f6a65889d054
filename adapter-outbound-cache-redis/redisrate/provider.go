package redisrate

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
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
	// MaxInFlight bounds the concurrent program calls to each target (the
	// standalone or Sentinel primary, or each cluster primary: go-redis
	// keeps a pool per node), 1..the client's PoolSize. A call beyond its
	// target's bound is answered Unavailable{admission} at once; a hung
	// primary cannot take another primary's share (ADR 0023).
	MaxInFlight int
	// Now returns the current time (optional; time.Now). Tests set it.
	Now func() time.Time
	// Breaker configures the circuit breaker (optional; the zero value
	// has none). See BreakerOptions and docs/degraded-mode.md.
	Breaker BreakerOptions
	// ReplicationAcks, when > 0, pipelines WAIT ReplicationAcks
	// ReplicationAckTimeout right behind every program call, on the same
	// connection (optional; 0 is off, at most MaxReplicationAcks). An
	// ALLOWED reply acknowledged by fewer replicas is not admitted:
	// Indeterminate{replication}, the consumption stays counted.
	ReplicationAcks int
	// ReplicationAckTimeout bounds WAIT: 1ms..CommandTimeout/2 when
	// ReplicationAcks > 0 (the program and WAIT share the read timeout).
	ReplicationAckTimeout time.Duration
	// PipelineMaxBatch, when > 1, writes concurrent program calls together
	// (optional; 0 and 1 send every call alone): at most
	// ceil(MaxInFlight/PipelineMaxBatch) calls or batches are on the wire
	// at once per target (the server, or each cluster primary); a call
	// that finds them all busy is queued and written with the calls queued
	// beside it, at most PipelineMaxBatch per batch, as one pipeline when
	// a turn frees. A lone call is sent at once. Per-command failure
	// certainty and the at-most-once rule hold (docs/failure-certainty.md,
	// "Pipelined calls"; docs/adr/0012-pipelined-program-calls.md).
	// 0..MaxPoolSize.
	PipelineMaxBatch int
	// ServerChecks, when set, makes Start and Ready check the server's
	// own policies (role, eviction policy) and record its status
	// (ServerStatus). Optional; nil checks nothing. See serverpolicy.go.
	ServerChecks *ServerChecks
}

// MaxReplicationAcks bounds Options.ReplicationAcks.
const MaxReplicationAcks = 16

// coordinationClient is the provider's view of its client.
type coordinationClient interface {
	send.Commander
	Close() error
}

// Provider implements ratelimit.EdgePort over the dedicated coordination
// client. It is safe for concurrent use. Build it with New, call Start once
// before serving (version check and script warm-up), Ready for readiness,
// and Close at shutdown; after Close every Evaluate answers
// Unavailable{closed}. The zero value is invalid.
type Provider struct {
	client coordinationClient
	exec   *send.Executor
	router *send.ClusterRouter // set in cluster mode (client is then router)
	// acks is Options.ReplicationAcks (WAIT behind every program call).
	acks      int64
	keys      *keyspace.Builder
	policies  map[ratelimit.PolicyID]*policyState
	scripts   []*send.Script // distinct programs of the policies, for Start
	minRedis  string         // highest MinRedisVersion among them
	minVer    redisinfo.Version
	timeout   time.Duration
	retryHint time.Duration
	now       func() time.Time

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	// versionErr is set by Start when the server is too old; Evaluate then
	// answers Incompatible{server_version} without sending.
	versionErr atomic.Pointer[error]
	// server is the server-policy checks' state (serverpolicy.go).
	server serverState
	// dedupRetries counts the retries of Indeterminate dedup calls.
	dedupRetries struct {
		decided, failed atomic.Uint64
		// mu guards failedBy: the failed retries by the outcome kind and
		// category the retry got (a rare path; the keys are bounded by
		// the enums).
		mu       sync.Mutex
		failedBy map[DedupRetryFailure]uint64
	}
	// refundFailures counts the set members whose refund failed (set.go).
	refundFailures atomic.Uint64
	// setScript is the policy-set program (programs.SetProgram, ADR 0026).
	setScript *send.Script
	// callPerMember decides every set member in its own call, as members
	// in different cluster slots are: the unit tests' way to the refund
	// path on a fake server.
	callPerMember bool
}

var _ ratelimit.EdgePort = (*Provider)(nil)

// New builds a Provider over client for policies (at least one, distinct
// IDs). client must be a *redis.Client (standalone or failover) configured
// as NewClient does: retries off, one dial attempt, ReadTimeout =
// WriteTimeout = opts.CommandTimeout, DialTimeout and PoolTimeout no longer,
// ContextTimeoutEnabled false, no client-side cache, no maintenance
// notifications, PoolSize >= opts.MaxInFlight. On success the Provider owns
// client and closes it in Close; on error client is left to the caller. New
// does no I/O.
//
// client may also be a *redis.ClusterClient built by NewClusterClient
// (MaxRedirects -1, node clients with NewClient's options): the Provider
// then routes each program call to the slot's primary itself and follows
// only the cluster's refusals (MOVED, ASK, TRYAGAIN, CLUSTERDOWN), never
// re-sending a command that may have run.
func New(client redis.UniversalClient, keys *keyspace.Builder, policies []ratelimit.Policy, opts Options) (*Provider, error) {
	switch c := client.(type) {
	case *redis.Client:
		if c == nil {
			break
		}
		if err := checkClientOptions(c.Options(), opts); err != nil {
			return nil, err
		}
		return newProvider(c, keys, policies, opts)
	case *redis.ClusterClient:
		if c == nil {
			break
		}
		if err := checkClusterOptions(c.Options(), opts); err != nil {
			return nil, err
		}
		now := opts.Now
		if now == nil {
			now = time.Now
		}
		r := send.NewClusterRouter(c, opts.CommandTimeout, now)
		p, err := newProvider(r, keys, policies, opts)
		if err != nil {
			return nil, err
		}
		r.SetQualify(p.qualifyPrimary)
		p.router = r
		p.exec.UseCluster(r)
		return p, nil
	}
	return nil, fmt.Errorf("%w: %T (supported: *redis.Client, standalone or failover, and *redis.ClusterClient from NewClusterClient)", ErrUnsupportedClient, client)
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
	if err := validateBreaker(opts.Breaker); err != nil {
		errs = append(errs, err)
	}
	switch {
	case opts.ReplicationAcks < 0 || opts.ReplicationAcks > MaxReplicationAcks:
		bad("Options.ReplicationAcks %d must be in 0..%d", opts.ReplicationAcks, MaxReplicationAcks)
	case opts.ReplicationAcks > 0 && (opts.ReplicationAckTimeout < time.Millisecond || opts.ReplicationAckTimeout > opts.CommandTimeout/2):
		bad("Options.ReplicationAckTimeout %v must be in 1ms..CommandTimeout/2 (%v) with ReplicationAcks", opts.ReplicationAckTimeout, opts.CommandTimeout/2)
	case opts.ReplicationAcks == 0 && opts.ReplicationAckTimeout != 0:
		bad("Options.ReplicationAckTimeout %v is set but ReplicationAcks is 0", opts.ReplicationAckTimeout)
	}
	if opts.PipelineMaxBatch < 0 || opts.PipelineMaxBatch > MaxPoolSize {
		bad("Options.PipelineMaxBatch %d must be in 0..%d (0 and 1: off)", opts.PipelineMaxBatch, MaxPoolSize)
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
		// Not loaded at Start: the first set call on a server is one
		// NOSCRIPT and one EVAL, as after a SCRIPT FLUSH.
		setScript: send.NewScript(programs.SetProgram()),
	}
	if opts.ServerChecks != nil {
		c := *opts.ServerChecks
		p.server.checks = &c
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.exec = send.New(client, p.now)
	p.acks = int64(opts.ReplicationAcks)
	p.exec.SetReplicationAcks(p.acks, opts.ReplicationAckTimeout.Milliseconds())
	p.retryHint = max(MinFailureRetryAfter, opts.CommandTimeout)
	// One script per source: policies with the same parameters and
	// revision share their bound program.
	bySHA := map[string]*send.Script{}
	for i, pol := range policies {
		if pol.IsZero() {
			bad("policies[%d]: zero policy (not built by ratelimit.NewPolicy)", i)
			continue
		}
		if _, dup := p.policies[pol.ID()]; dup {
			bad("policies[%d]: duplicate policy id %q", i, pol.ID())
			continue
		}
		scriptFor := func(prog programs.Program) *send.Script {
			s := bySHA[prog.SHA1]
			if s == nil {
				s = send.NewScript(prog)
				bySHA[prog.SHA1] = s
				p.scripts = append(p.scripts, s)
				v, err := redisinfo.ParseVersion(prog.MinRedisVersion)
				if err != nil {
					bad("program %s: MinRedisVersion: %v", prog.Name, err)
				} else if p.minRedis == "" || v.Compare(p.minVer) > 0 {
					p.minRedis, p.minVer = prog.MinRedisVersion, v
				}
			}
			return s
		}
		// The policy's programs, rendered bound to it in one lookup (ADR
		// 0030, ADR 0035): decision, charge, dedup and refund take the
		// parameters as constants of their source, their ARGV the revision
		// and the cost (and the dedup entries, the refund's instant).
		bundle, err := programs.ForPolicy(pol)
		if err != nil {
			bad("policies[%d] %q: %v", i, pol.ID(), err)
			continue
		}
		s := scriptFor(bundle.Decide)
		var dedup *send.Script
		var dedupArgv []any
		var dedupIDArg int
		if pol.DedupWindow() != 0 {
			if !bundle.HasDedup {
				bad("policies[%d] %q: no dedup program for algorithm %v", i, pol.ID(), pol.Algorithm())
				continue
			}
			dedup = scriptFor(bundle.Dedup)
			dedupArgv = append(programs.BoundArgs(pol, 1), programs.DedupArgs(pol, "")...)
			if len(dedupArgv) != bundle.Dedup.ArgCount {
				bad("policies[%d] %q: %d dedup program arguments, want %d", i, pol.ID(), len(dedupArgv), bundle.Dedup.ArgCount)
				continue
			}
			// The dedup entries follow BoundArgs (programs.DedupArgs).
			dedupIDArg = len(dedupArgv) - programs.ArgCountDedup + programs.ArgDedupID
		}
		boundArgv := programs.BoundArgs(pol, 1)
		if len(boundArgv) != bundle.Decide.ArgCount || len(boundArgv) <= programs.ArgCost {
			bad("policies[%d] %q: %d program arguments, want %d", i, pol.ID(), len(boundArgv), bundle.Decide.ArgCount)
			continue
		}
		if len(boundArgv) != bundle.Charge.ArgCount {
			bad("policies[%d] %q: %d charge program arguments, want %d", i, pol.ID(), len(boundArgv), bundle.Charge.ArgCount)
			continue
		}
		// A queue is never a set member (ADR 0028): no part to prepare.
		setMember, _ := programs.NewSetMember(pol)
		var lease, giveBack *send.Script
		if bundle.HasLease {
			lease, giveBack = send.NewScript(bundle.Lease), send.NewScript(bundle.GiveBack)
		}
		p.policies[pol.ID()] = &policyState{
			policy:     pol,
			script:     s,
			boundArgv:  boundArgv,
			argv:       programs.BoundArgs(pol, 1),
			id:         string(pol.ID()),
			revision:   strconv.FormatInt(pol.Revision(), 10),
			algorithm:  pol.Algorithm().String(),
			certainty:  pol.Certainty(),
			dedup:      dedup,
			dedupArgv:  dedupArgv,
			dedupIDArg: dedupIDArg,
			charge:     send.NewScript(bundle.Charge),
			refund:     send.NewScript(bundle.Refund),
			lease:      lease,
			giveBack:   giveBack,
			setMember:  setMember,
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	p.exec.SetMaxInFlight(opts.MaxInFlight)
	if opts.PipelineMaxBatch > 1 {
		// Slots enough to carry MaxInFlight calls in full batches.
		p.exec.EnableBatching((opts.MaxInFlight+opts.PipelineMaxBatch-1)/opts.PipelineMaxBatch, opts.PipelineMaxBatch)
	}
	p.exec.SetBreakers(opts.Breaker, opts.CommandTimeout)
	return p, nil
}
