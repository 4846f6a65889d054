package ratelimiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/edge"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/wiring"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Options configure New. Addr, Secret and Policies are all a first program
// needs; every other field is optional, and every setting of the service
// is reachable through Env.
type Options struct {
	// Addr is the coordination Redis, host:port
	// (APP_RATE_LIMIT_REDIS_ADDR). It must be dedicated to the limiter
	// (never a cache's server).
	Addr string
	// Secret, at least 32 bytes from your secret store, keys both HMACs:
	// the key secret (key names) and the subject secret (pseudonyms) are
	// derived from it under distinct labels (DeriveSecrets). Every
	// instance sharing a budget needs the same Secret. Set KeySecret and
	// SubjectSecret instead to give the two yourself.
	Secret string
	// KeySecret and SubjectSecret, instead of Secret, are the service's
	// APP_RATE_LIMIT_KEY_SECRET and APP_WEB_SUBJECT_SECRET (>= 32 bytes
	// each).
	KeySecret, SubjectSecret string
	// Policies by ID. Without them, Env must name a policy file
	// (APP_RATE_LIMIT_POLICIES_FILE).
	Policies Policies
	// DefaultPolicy is the policy Middleware applies to requests no
	// policy's routes match (APP_RATE_LIMIT_DEFAULT_POLICY); optional with
	// a single policy, which is then the default.
	DefaultPolicy string
	// KeyPrefix is the first segment of every key
	// (APP_RATE_LIMIT_KEY_PREFIX, default "tlb").
	KeyPrefix string
	// Client, instead of Addr, is your own coordination client: a
	// *redis.Client (standalone or Sentinel failover) or a
	// *redis.ClusterClient, best built with redisrate.NewClient,
	// NewFailoverClient or NewClusterClient. Its options must keep the
	// certainty rules (MaxRetries -1, one dial attempt, ReadTimeout and
	// WriteTimeout equal to the command timeout,
	// ContextTimeoutEnabled false, ...); New refuses any other, naming the
	// option. Its PoolSize is the pool (APP_RATE_LIMIT_POOL_SIZE). On
	// success the limiter owns it and Close closes it.
	Client redis.UniversalClient
	// Env holds any further APP_ variable of the service, with the same
	// meaning, defaults and validation (README "Configuration"): Sentinel
	// and cluster (APP_RATE_LIMIT_REDIS_MODE...), TLS, ACL user and
	// password, timeouts, pool, breaker, denial cache, pipelining,
	// replication acknowledgements, and the middleware's identity
	// (APP_WEB_IDENTITY, APP_WEB_TRUSTED_PROXIES...). A variable that a
	// field above also sets is a conflict.
	Env map[string]string
	// Identify, optional, is who Middleware limits: your own
	// subject.Identifier (a verified principal). Nil: the service's
	// identity of APP_WEB_IDENTITY, by default the client IP.
	Identify subject.Identifier
	// Logger receives the service's log lines (Redis unreachable at start,
	// breaker changes); nil is slog.Default().
	Logger *slog.Logger
}

// Port is the port Limiter hands out: the service's decorator stack,
// answering every outcome unflattened.
type Port interface {
	ratelimit.EdgePort
	ratelimit.SetPort
	ratelimit.Refunder
}

// Limiter is a distributed rate limiter with the service's defaults. Most
// callers want Allow, or Middleware in a net/http server. It is safe for
// concurrent use; Close it when done.
type Limiter struct {
	svc     *wiring.Limiter
	port    Port
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
	port, ok := svc.Port().(Port)
	if !ok {
		return nil, fmt.Errorf("port %T is not a SetPort and Refunder", svc.Port())
	}
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
func (l *Limiter) Limiter() Port { return l.port }

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

// The APP_ variables the typed Options set.
const (
	envEnabled       = config.Prefix + "RATE_LIMIT_ENABLED"
	envProvider      = config.Prefix + "RATE_LIMIT_PROVIDER"
	envAddr          = config.Prefix + "RATE_LIMIT_REDIS_ADDR"
	envKeySecret     = config.Prefix + "RATE_LIMIT_KEY_SECRET"
	envSubjectSecret = config.Prefix + "WEB_SUBJECT_SECRET"
	envKeyPrefix     = config.Prefix + "RATE_LIMIT_KEY_PREFIX"
	envDefault       = config.Prefix + "RATE_LIMIT_DEFAULT_POLICY"
	envPoolSize      = config.Prefix + "RATE_LIMIT_POOL_SIZE"
)

// ErrInvalidOptions is wrapped by every Options error of New.
var ErrInvalidOptions = errors.New("ratelimiter: invalid options")

// load turns opts into the APP_ variables and loads them with the
// service's config.Load (or LoadWith, for Policies): one set of defaults
// and one validation. An error on a variable a typed field set names the
// field beside the variable.
func (opts Options) load() (config.Config, error) {
	env := make(map[string]string, len(opts.Env)+8)
	for k, v := range opts.Env {
		env[k] = v
	}
	from := map[string]string{} // variable -> the Options field that set it
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	set := func(name, value, field string) {
		if value == "" {
			return
		}
		if _, ok := env[name]; ok && from[name] == "" {
			bad("Options.%s and Env[%s] are both set; set one", field, name)
			return
		}
		env[name], from[name] = value, field
	}
	if _, ok := env[envEnabled]; !ok {
		env[envEnabled] = "true"
	} else if on, err := strconv.ParseBool(env[envEnabled]); err == nil && !on {
		bad("Env[%s] is false: the front door is the Redis limiter; remove it", envEnabled)
	}
	if _, ok := env[envProvider]; !ok {
		env[envProvider] = config.ProviderRedis
	}
	set(envAddr, opts.Addr, "Addr")
	if opts.Client != nil {
		if opts.Addr != "" {
			bad("Options.Addr and Options.Client are both set; set one")
		}
		addr, pool := endpoint(opts.Client)
		set(envAddr, addr, "Client")
		if _, ok := env[envPoolSize]; !ok {
			set(envPoolSize, strconv.Itoa(pool), "Client")
		}
	}
	switch {
	case opts.Secret != "" && (opts.KeySecret != "" || opts.SubjectSecret != ""):
		bad("Options.Secret and Options.KeySecret/SubjectSecret are both set; set Secret, or the two")
	case opts.Secret != "":
		k, s, err := DeriveSecrets(opts.Secret)
		if err != nil {
			bad("Options.Secret: %w", err)
			break
		}
		set(envKeySecret, k, "Secret")
		set(envSubjectSecret, s, "Secret")
	default:
		set(envKeySecret, opts.KeySecret, "KeySecret")
		set(envSubjectSecret, opts.SubjectSecret, "SubjectSecret")
	}
	set(envKeyPrefix, opts.KeyPrefix, "KeyPrefix")
	ids := make([]string, 0, len(opts.Policies))
	for id := range opts.Policies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	def := opts.DefaultPolicy
	if def == "" && len(ids) == 1 {
		def = ids[0]
	}
	set(envDefault, def, "DefaultPolicy")
	if len(errs) > 0 {
		return config.Config{}, errors.Join(errs...)
	}
	// A required variable nobody set is the field's to set.
	for name, field := range map[string]string{envAddr: "Addr", envKeySecret: "Secret", envSubjectSecret: "Secret", envDefault: "DefaultPolicy"} {
		if _, ok := env[name]; !ok {
			from[name] = field
		}
	}

	var cfg config.Config
	var err error
	if len(ids) == 0 {
		cfg, err = config.Load(env)
	} else {
		defs := make([]config.PolicyDef, 0, len(ids))
		for _, id := range ids {
			defs = append(defs, opts.Policies[id].def(id))
		}
		set, perr := config.NewPolicySet(defs)
		if perr != nil {
			return config.Config{}, fmt.Errorf("%w: Options.Policies: %w", ErrInvalidOptions, perr)
		}
		cfg, err = config.LoadWith(env, set)
	}
	if err == nil {
		return cfg, nil
	}
	// Name the field beside the variable it set.
	vars := config.VarErrors(err)
	out := make([]error, 0, len(vars))
	for _, ve := range vars {
		if f := from[ve.Var]; f != "" {
			out = append(out, fmt.Errorf("%w: Options.%s: %w", ErrInvalidOptions, f, ve))
		} else {
			out = append(out, fmt.Errorf("%w: %w", ErrInvalidOptions, ve))
		}
	}
	if len(out) == 0 {
		return config.Config{}, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return config.Config{}, errors.Join(out...)
}

// clientAddr stands for a caller's client whose options name no host:port
// (a Sentinel failover client): the configuration needs an address, which
// only error messages show.
const clientAddr = "options-client:0"

// endpoint is the address and pool size of a caller's client, as the
// configuration takes them.
func endpoint(c redis.UniversalClient) (addr string, pool int) {
	addr = clientAddr
	switch v := c.(type) {
	case *redis.Client:
		o := v.Options()
		if _, _, err := net.SplitHostPort(o.Addr); err == nil {
			addr = o.Addr
		}
		return addr, o.PoolSize
	case *redis.ClusterClient:
		o := v.Options()
		if len(o.Addrs) > 0 {
			addr = o.Addrs[0]
		}
		return addr, o.PoolSize
	}
	return addr, redisrate.MaxPoolSize
}

// optionError names the Options field behind an error of the composition
// (a caller's client refused by redisrate.New).
func optionError(err error, field string, given bool) error {
	if given && (errors.Is(err, redisrate.ErrInvalidConfig) || errors.Is(err, redisrate.ErrUnsupportedClient)) {
		return fmt.Errorf("%w: Options.%s: %w", ErrInvalidOptions, field, err)
	}
	return fmt.Errorf("ratelimiter: %w", err)
}
