package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Bounds on numeric settings. A value outside them is a configuration
// mistake, not a tuning choice.
const (
	// maxTimeout is the adapters' bound (redisrate.MaxTimeout,
	// rediscache.MaxTimeout) for the Redis timeouts.
	maxTimeout     = 10 * time.Second
	maxWebTimeout  = time.Minute
	maxShutdown    = 10 * time.Minute
	maxPoolSize    = 1024
	maxDB          = 15
	maxProxies     = 256
	maxLocalRate   = 1e9
	maxLocalBurst  = 1_000_000_000
	maxLocalClient = 10_000_000
	maxIdleTTL     = 24 * time.Hour
)

// Supported values of the selection variables in v1.
const (
	ProviderRedis     = "redis"
	RoleCoordination  = "coordination"
	FailClosedPolicy  = "fail-closed"
	EmbeddedPolicies  = "embedded:default-policies.json"
	envRateLimitGroup = Prefix + "RATE_LIMIT_"
	envCacheGroup     = Prefix + "CACHE_"
	envWebGroup       = Prefix + "WEB_"
)

// FromEnviron turns os.Environ()-style "K=V" entries into the map Load takes.
func FromEnviron(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// Load parses and validates the APP_ variables in environ. On failure it
// returns every problem found, joined, each a *VarError naming its variable
// (see VarErrors). Files named by _FILE variables and the policy file are
// read; nothing else is touched.
func Load(environ map[string]string) (Config, error) {
	var raw rawConfig
	if err := parseEnv(&raw, environ); err != nil {
		return Config{}, err
	}
	v := &errs{}
	cfg := Config{}
	cfg.RateLimit = v.rateLimit(raw.RateLimit)
	cfg.Cache = v.cache(raw.Cache)
	cfg.Web = v.web(raw.Web, cfg.RateLimit)
	cfg.Log = v.log(raw.LogFormat, raw.LogLevel)
	cfg.ShutdownTimeout = v.duration(Prefix+"SHUTDOWN_TIMEOUT", raw.ShutdownTimeout, maxShutdown)
	if cfg.RateLimit.Enabled && cfg.Cache.Enabled && !cfg.RateLimit.AllowSharedRedis &&
		sameEndpoint(cfg.RateLimit.Redis.Addr, cfg.Cache.Redis.Addr) {
		v.add(envRateLimitGroup+"REDIS_ADDR", ErrSharedRedis,
			"%s is also %sREDIS_ADDR; coordination needs its own redis (set %sALLOW_SHARED_REDIS=true to accept the shared server)",
			cfg.RateLimit.Redis.Addr, envCacheGroup, envRateLimitGroup)
	}
	if err := v.err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// parseEnv runs env/v11 and rewrites its parse errors to name the variable
// rather than the Go field: the parsers record the variable being set (OnSet
// runs just before each field's parser, and parsing is sequential).
func parseEnv(raw *rawConfig, environ map[string]string) error {
	if environ == nil {
		environ = map[string]string{}
	}
	var current string
	wrap := func(parse func(string) (any, error)) env.ParserFunc {
		return func(s string) (any, error) {
			out, err := parse(s)
			if err != nil {
				return nil, &VarError{Var: current, Err: fmt.Errorf("%w: %q: %w", ErrInvalid, bounded(s), err)}
			}
			return out, nil
		}
	}
	opts := env.Options{
		Prefix:      Prefix,
		Environment: environ,
		OnSet:       func(key string, _ any, _ bool) { current = key },
		FuncMap: map[reflect.Type]env.ParserFunc{
			reflect.TypeFor[bool](): wrap(func(s string) (any, error) { return strconv.ParseBool(s) }),
			reflect.TypeFor[int](): wrap(func(s string) (any, error) {
				n, err := strconv.ParseInt(s, 10, 0)
				return int(n), err
			}),
			reflect.TypeFor[float64](): wrap(func(s string) (any, error) { return strconv.ParseFloat(s, 64) }),
			reflect.TypeFor[time.Duration](): wrap(func(s string) (any, error) {
				return time.ParseDuration(s)
			}),
		},
	}
	err := env.ParseWithOptions(raw, opts)
	if err == nil {
		return nil
	}
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	out := &errs{}
	for _, e := range agg.Errors {
		// env.ParseError does not unwrap; the parsers put a *VarError in it.
		var pe env.ParseError
		var ve *VarError
		if errors.As(e, &pe) && errors.As(pe.Err, &ve) {
			out.list = append(out.list, ve)
			continue
		}
		out.list = append(out.list, fmt.Errorf("%w: %w", ErrInvalid, e))
	}
	return out.err()
}

func (v *errs) rateLimit(r rawRateLimit) RateLimit {
	const g = envRateLimitGroup
	if !r.Enabled {
		return RateLimit{}
	}
	out := RateLimit{Enabled: true, AllowSharedRedis: r.AllowSharedRedis}
	switch r.Provider {
	case ProviderRedis:
	case "":
		v.add(g+"PROVIDER", ErrRequired, "set it to %q when %sENABLED=true", ProviderRedis, g)
	default:
		v.add(g+"PROVIDER", ErrUnsupported, "%q: the only provider is %q", bounded(r.Provider), ProviderRedis)
	}
	if r.Role != RoleCoordination {
		v.add(g+"ROLE", ErrUnsupported, "%q: the only role is %q", bounded(r.Role), RoleCoordination)
	}
	if r.FailurePolicy != FailClosedPolicy {
		v.add(g+"FAILURE_POLICY", ErrUnsupported, "%q: the limiter only fails closed (%q)", bounded(r.FailurePolicy), FailClosedPolicy)
	}
	out.Redis = v.redis(g+"REDIS_", r.Redis)
	out.KeyPrefix = v.keyPrefix(g+"KEY_PREFIX", r.KeyPrefix)
	out.KeySecret = v.keySecret(g+"KEY_SECRET", r.KeySecret, r.KeySecretFile)
	out.CommandTimeout = v.duration(g+"COMMAND_TIMEOUT", r.CommandTimeout, maxTimeout)
	out.DialTimeout = v.duration(g+"DIAL_TIMEOUT", r.DialTimeout, maxTimeout)
	out.PoolTimeout = v.duration(g+"POOL_TIMEOUT", r.PoolTimeout, maxTimeout)
	out.PoolSize = v.bound(g+"POOL_SIZE", r.PoolSize, maxPoolSize)
	out.MaxInFlight = v.bound(g+"MAX_IN_FLIGHT", r.MaxInFlight, maxPoolSize)
	if out.PoolSize > 0 && out.MaxInFlight > out.PoolSize {
		v.add(g+"MAX_IN_FLIGHT", ErrInvalid, "%d exceeds %sPOOL_SIZE (%d): every admitted evaluation needs a connection", out.MaxInFlight, g, out.PoolSize)
	}
	v.notAbove(g+"DIAL_TIMEOUT", out.DialTimeout, g+"COMMAND_TIMEOUT", out.CommandTimeout)
	v.notAbove(g+"POOL_TIMEOUT", out.PoolTimeout, g+"COMMAND_TIMEOUT", out.CommandTimeout)

	var set PolicySet
	var err error
	if r.PoliciesFile == "" {
		out.PoliciesSource = EmbeddedPolicies
		set, err = ParsePolicies(strings.NewReader(DefaultPoliciesJSON()))
	} else {
		out.PoliciesSource = r.PoliciesFile
		set, err = readPolicyFile(r.PoliciesFile)
	}
	if err != nil {
		// One line per problem, each naming the variable.
		var pfe *PolicyFileError
		if errors.As(err, &pfe) {
			for _, e := range pfe.Problems {
				v.wrap(g+"POLICIES_FILE", fmt.Errorf("%s: %w", out.PoliciesSource, e))
			}
		} else {
			v.wrap(g+"POLICIES_FILE", fmt.Errorf("%s: %w", out.PoliciesSource, err))
		}
	}
	out.Policies = set
	switch {
	case r.DefaultPolicy == "":
		v.add(g+"DEFAULT_POLICY", ErrRequired, "name the policy for API routes no policy's routes match")
	case err != nil:
		// The file is already reported; the default cannot be checked.
	default:
		id := ratelimit.PolicyID(r.DefaultPolicy)
		if _, ok := set.Policy(id); !ok {
			v.add(g+"DEFAULT_POLICY", ErrInvalid, "%q is not defined in %s (defined: %s)", bounded(r.DefaultPolicy), out.PoliciesSource, strings.Join(set.IDs(), ", "))
		}
		out.DefaultPolicy = id
	}
	return out
}

func (v *errs) cache(c rawCache) Cache {
	const g = envCacheGroup + "REDIS_"
	if !c.Enabled {
		return Cache{}
	}
	r := c.Redis
	return Cache{
		Enabled:        true,
		Redis:          v.redis(g, r.Conn),
		KeyPrefix:      v.keyPrefix(g+"KEY_PREFIX", r.KeyPrefix),
		KeySecret:      v.keySecret(g+"KEY_SECRET", r.KeySecret, r.KeySecretFile),
		DB:             v.between(g+"DB", r.DB, 0, maxDB),
		CommandTimeout: v.duration(g+"COMMAND_TIMEOUT", r.CommandTimeout, maxTimeout),
		DialTimeout:    v.duration(g+"DIAL_TIMEOUT", r.DialTimeout, maxTimeout),
		PoolTimeout:    v.duration(g+"POOL_TIMEOUT", r.PoolTimeout, maxTimeout),
		PoolSize:       v.bound(g+"POOL_SIZE", r.PoolSize, maxPoolSize),
	}
}

func (v *errs) web(w rawWeb, rl RateLimit) Web {
	const g = envWebGroup
	out := Web{Addr: w.Addr}
	if _, _, err := net.SplitHostPort(w.Addr); err != nil {
		v.add(g+"ADDR", ErrInvalid, "%q: want [host]:port: %w", bounded(w.Addr), err)
	}
	if rl.Enabled || !w.SubjectSecret.IsZero() || w.SubjectSecretFile != "" {
		out.SubjectSecret = v.keySecret(g+"SUBJECT_SECRET", w.SubjectSecret, w.SubjectSecretFile)
	}
	for _, s := range w.TrustedProxies {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := parsePrefix(s)
		if err != nil {
			v.add(g+"TRUSTED_PROXIES", ErrInvalid, "%q: want an IP or CIDR: %w", bounded(s), err)
			continue
		}
		out.TrustedProxies = append(out.TrustedProxies, p)
	}
	if len(out.TrustedProxies) > maxProxies {
		v.add(g+"TRUSTED_PROXIES", ErrInvalid, "%d entries, at most %d", len(out.TrustedProxies), maxProxies)
	}
	out.EvaluationTimeout = v.duration(g+"EVALUATION_TIMEOUT", w.EvaluationTimeout, maxWebTimeout)
	if rl.Enabled && rl.CommandTimeout > 0 && out.EvaluationTimeout > 0 && out.EvaluationTimeout <= rl.CommandTimeout {
		v.add(g+"EVALUATION_TIMEOUT", ErrInvalid, "%v must exceed %sCOMMAND_TIMEOUT (%v), or every evaluation fails its deadline precheck", out.EvaluationTimeout, envRateLimitGroup, rl.CommandTimeout)
	}
	out.LocalLimit.Enabled = w.LocalLimitEnabled
	if w.LocalLimitEnabled {
		if math.IsNaN(w.LocalLimitRate) || math.IsInf(w.LocalLimitRate, 0) || w.LocalLimitRate <= 0 || w.LocalLimitRate > maxLocalRate {
			v.add(g+"LOCAL_LIMIT_RATE", ErrInvalid, "%v: want a finite rate in (0, %g] per second", w.LocalLimitRate, maxLocalRate)
		} else {
			out.LocalLimit.Rate = w.LocalLimitRate
		}
		out.LocalLimit.Burst = v.bound(g+"LOCAL_LIMIT_BURST", w.LocalLimitBurst, maxLocalBurst)
		out.LocalLimit.MaxClients = v.bound(g+"LOCAL_LIMIT_MAX_CLIENTS", w.LocalLimitMax, maxLocalClient)
		out.LocalLimit.IdleTTL = v.duration(g+"LOCAL_LIMIT_IDLE_TTL", w.LocalLimitIdleTTL, maxIdleTTL)
		// Dropping an idle client must never grant more than waiting would:
		// the idle TTL covers a full refill (Burst/Rate seconds).
		if l := out.LocalLimit; l.Rate > 0 && l.Burst > 0 && l.IdleTTL > 0 && l.IdleTTL.Seconds() < float64(l.Burst)/l.Rate {
			v.add(g+"LOCAL_LIMIT_IDLE_TTL", ErrInvalid, "%v is shorter than the bucket refill time %sLOCAL_LIMIT_BURST/%sLOCAL_LIMIT_RATE = %.3fs", l.IdleTTL, g, g, float64(l.Burst)/l.Rate)
		}
	}
	return out
}

func (v *errs) log(format, level string) Log {
	out := Log{}
	switch f := LogFormat(strings.ToLower(format)); f {
	case LogAuto, LogJSON, LogText:
		out.Format = f
	default:
		v.add(Prefix+"LOG_FORMAT", ErrUnsupported, "%q: want json, text or auto", bounded(format))
	}
	if err := out.Level.UnmarshalText([]byte(level)); err != nil {
		v.add(Prefix+"LOG_LEVEL", ErrInvalid, "%q: want debug, info, warn or error", bounded(level))
	}
	return out
}

// redis validates one endpoint section; name is its prefix, e.g.
// "APP_RATE_LIMIT_REDIS_".
func (v *errs) redis(name string, r rawRedis) Redis {
	out := Redis{Addr: r.Addr, Username: r.Username}
	if r.Addr == "" {
		v.add(name+"ADDR", ErrRequired, "no redis address (host:port)")
	} else if _, port, err := net.SplitHostPort(r.Addr); err != nil || port == "" {
		v.add(name+"ADDR", ErrInvalid, "%q: want host:port", bounded(r.Addr))
	}
	out.Password, _ = v.secret(name+"PASSWORD", r.Password, r.PasswordFile)
	out.TLS, out.tlsConfig = v.tls(name+"TLS_", r.TLS, r.Addr)
	return out
}

func (v *errs) tls(name string, t rawTLS, addr string) (TLS, *tls.Config) {
	settings := TLS{Enabled: t.Enabled, CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName}
	if t.InsecureSkipVerify {
		v.add(name+"INSECURE_SKIP_VERIFY", ErrUnsupported, "certificate verification cannot be disabled; configure %sCA_FILE instead", name)
	}
	if !t.Enabled {
		for _, f := range []struct{ v, s string }{{"CA_FILE", t.CAFile}, {"CERT_FILE", t.CertFile}, {"KEY_FILE", t.KeyFile}, {"SERVER_NAME", t.ServerName}} {
			if f.s != "" {
				v.add(name+f.v, ErrConflict, "set but %sENABLED is false", name)
			}
		}
		return settings, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		pool := x509.NewCertPool()
		switch {
		case err != nil:
			v.add(name+"CA_FILE", ErrInvalid, "%w", err)
		case !pool.AppendCertsFromPEM(pem):
			v.add(name+"CA_FILE", ErrInvalid, "%s holds no PEM certificate", t.CAFile)
		default:
			cfg.RootCAs = pool
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			v.add(name+"CERT_FILE", ErrInvalid, "with %sKEY_FILE: %w", name, err)
		} else {
			cfg.Certificates = []tls.Certificate{cert}
		}
	case t.CertFile != "":
		v.add(name+"KEY_FILE", ErrRequired, "%sCERT_FILE is set", name)
	case t.KeyFile != "":
		v.add(name+"CERT_FILE", ErrRequired, "%sKEY_FILE is set", name)
	}
	return settings, cfg
}

// secret resolves NAME and NAME_FILE: at most one may be set; the file's
// content, less one trailing newline, is the value. It reports whether a
// value was set.
func (v *errs) secret(name string, direct Secret, file string) (Secret, bool) {
	fileVar := name + "_FILE"
	switch {
	case !direct.IsZero() && file != "":
		v.add(name, ErrConflict, "both %s and %s are set; set one", name, fileVar)
		return Secret{}, false
	case file != "":
		b, err := readSecretFile(file)
		if err != nil {
			v.add(fileVar, ErrInvalid, "%w", err)
			return Secret{}, false
		}
		if len(b) == 0 {
			v.add(fileVar, ErrInvalid, "%s is empty", file)
			return Secret{}, false
		}
		return Secret{v: b}, true
	default:
		return direct, !direct.IsZero()
	}
}

// keySecret resolves an HMAC secret (NAME or NAME_FILE), which is required
// and at least keyspace.MinSecretLen bytes.
func (v *errs) keySecret(name string, direct Secret, file string) keyspace.Secret {
	s, set := v.secret(name, direct, file)
	if !set {
		if direct.IsZero() && file == "" {
			v.add(name, ErrRequired, "an HMAC secret of at least %d bytes (or set %s_FILE)", keyspace.MinSecretLen, name)
		}
		return keyspace.Secret{}
	}
	ks, err := keyspace.NewSecret(s.v)
	if err != nil {
		v.add(name, ErrInvalid, "%w", err)
	}
	return ks
}

func readSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFileLen+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxSecretFileLen {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxSecretFileLen)
	}
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b, nil
}

func (v *errs) keyPrefix(name, p string) string {
	if !keyspace.IsSegment(p) {
		v.add(name, ErrInvalid, "%q must be 1..%d bytes of [a-z0-9._-] starting with [a-z0-9]", bounded(p), keyspace.MaxSegmentLen)
	}
	return p
}

// duration accepts d in 1ms..max (no setting here is meaningful below a
// millisecond, and the Redis clients reject it).
func (v *errs) duration(name string, d, max time.Duration) time.Duration {
	if d < time.Millisecond || d > max {
		v.add(name, ErrInvalid, "%v: want a positive duration of at least 1ms and at most %v", d, max)
		return 0
	}
	return d
}

// notAbove reports d > limit (both already validated, zero if invalid).
func (v *errs) notAbove(name string, d time.Duration, limitName string, limit time.Duration) {
	if d > 0 && limit > 0 && d > limit {
		v.add(name, ErrInvalid, "%v exceeds %s (%v)", d, limitName, limit)
	}
}

// between accepts n in min..max.
func (v *errs) between(name string, n, min, max int) int {
	if n < min || n > max {
		v.add(name, ErrInvalid, "%d: want %d..%d", n, min, max)
		return 0
	}
	return n
}

// bound accepts n in 1..max.
func (v *errs) bound(name string, n, max int) int {
	if n < 1 || n > max {
		v.add(name, ErrInvalid, "%d: want 1..%d", n, max)
		return 0
	}
	return n
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// sameEndpoint reports whether two host:port addresses name the same server
// as far as configuration can tell: equal ports and equal hosts, with
// "localhost" standing for the loopback address.
func sameEndpoint(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return strings.EqualFold(a, b)
	}
	return pa == pb && canonicalHost(ha) == canonicalHost(hb)
}

func canonicalHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	switch h {
	case "", "localhost":
		return "127.0.0.1"
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().String()
	}
	return h
}

func bounded(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
