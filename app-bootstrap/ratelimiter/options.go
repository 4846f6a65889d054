package ratelimiter

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
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
