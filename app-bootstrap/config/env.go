package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Prefix is the prefix of every variable this package reads.
const Prefix = "APP_"

// rawConfig mirrors the environment one to one; Load validates it into a
// Config. Field order is the order in which problems are reported.
type rawConfig struct {
	RateLimit       rawRateLimit  `envPrefix:"RATE_LIMIT_"`
	Cache           rawCache      `envPrefix:"CACHE_"`
	Web             rawWeb        `envPrefix:"WEB_"`
	RLS             rawRLS        `envPrefix:"RLS_"`
	LogFormat       string        `env:"LOG_FORMAT" envDefault:"auto"`
	LogLevel        string        `env:"LOG_LEVEL" envDefault:"info"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"15s"`
}

type rawRateLimit struct {
	Enabled        bool          `env:"ENABLED" envDefault:"false"`
	Provider       string        `env:"PROVIDER"`
	Role           string        `env:"ROLE" envDefault:"coordination"`
	FailurePolicy  string        `env:"FAILURE_POLICY" envDefault:"fail-closed"`
	Redis          rawRedis      `envPrefix:"REDIS_"`
	KeySecret      Secret        `env:"KEY_SECRET"`
	KeySecretFile  string        `env:"KEY_SECRET_FILE"`
	KeyPrefix      string        `env:"KEY_PREFIX" envDefault:"tlb"`
	CommandTimeout time.Duration `env:"COMMAND_TIMEOUT" envDefault:"250ms"`
	DialTimeout    time.Duration `env:"DIAL_TIMEOUT" envDefault:"250ms"`
	PoolTimeout    time.Duration `env:"POOL_TIMEOUT" envDefault:"250ms"`
	MaxInFlight    *int          `env:"MAX_IN_FLIGHT"` // unset: PoolSize
	PoolSize       int           `env:"POOL_SIZE" envDefault:"64"`
	// PipelineMaxBatch bounds a batch of pipelined program calls; 1 is off.
	PipelineMaxBatch int    `env:"PIPELINE_MAX_BATCH" envDefault:"16"`
	DefaultPolicy    string `env:"DEFAULT_POLICY"`
	PoliciesFile     string `env:"POLICIES_FILE"`
	AllowSharedRedis bool   `env:"ALLOW_SHARED_REDIS" envDefault:"false"`
	Topology         rawTopology
	// Circuit breaker (docs/degraded-mode.md).
	BreakerThreshold     int           `env:"BREAKER_THRESHOLD" envDefault:"5"`
	BreakerProbeInterval time.Duration `env:"BREAKER_PROBE_INTERVAL" envDefault:"1s"`
	// ReplicationAcks and ReplicationAckTimeout: opt-in WAIT after each
	// program call (validate_topology.go).
	ReplicationAcks       int            `env:"REPLICATION_ACKS" envDefault:"0"`
	ReplicationAckTimeout *time.Duration `env:"REPLICATION_ACK_TIMEOUT"` // unset: COMMAND_TIMEOUT/2
	// Local emergency fallback table bound (docs/degraded-mode.md).
	FallbackMaxSubjects int `env:"FALLBACK_MAX_SUBJECTS" envDefault:"10000"`
	// Local denial cache table bound, 0 off (ADR 0022).
	DenialCacheMaxEntries int `env:"DENIAL_CACHE_MAX_ENTRIES" envDefault:"10000"`
	// Server-policy checks (docs/operations.md, "Server settings").
	AllowEviction         bool `env:"ALLOW_EVICTION" envDefault:"false"`
	SkipServerConfigCheck bool `env:"SKIP_SERVER_CONFIG_CHECK" envDefault:"false"`
}

// rawTopology is the coordination Redis topology (validate_topology.go).
type rawTopology struct {
	Mode                 string `env:"REDIS_MODE" envDefault:"standalone"`
	Addrs                string `env:"REDIS_ADDRS"`
	MasterName           string `env:"REDIS_MASTER_NAME"`
	SentinelUsername     string `env:"SENTINEL_USERNAME"`
	SentinelPassword     Secret `env:"SENTINEL_PASSWORD"`
	SentinelPasswordFile string `env:"SENTINEL_PASSWORD_FILE"`
}

type rawCache struct {
	Enabled  bool          `env:"ENABLED" envDefault:"false"`
	Redis    rawCacheRedis `envPrefix:"REDIS_"`
	Topology rawTopology
}

type rawCacheRedis struct {
	Conn           rawRedis
	KeySecret      Secret        `env:"KEY_SECRET"`
	KeySecretFile  string        `env:"KEY_SECRET_FILE"`
	KeyPrefix      string        `env:"KEY_PREFIX" envDefault:"tlb"`
	DB             int           `env:"DB" envDefault:"0"`
	CommandTimeout time.Duration `env:"COMMAND_TIMEOUT" envDefault:"100ms"`
	DialTimeout    time.Duration `env:"DIAL_TIMEOUT" envDefault:"250ms"`
	PoolTimeout    time.Duration `env:"POOL_TIMEOUT" envDefault:"250ms"`
	PoolSize       int           `env:"POOL_SIZE" envDefault:"16"`
}

// rawRedis is the connection part shared by the coordination and cache
// sections; each section has its own copy under its own prefix.
type rawRedis struct {
	Addr         string `env:"ADDR"`
	Username     string `env:"USERNAME"`
	Password     Secret `env:"PASSWORD"`
	PasswordFile string `env:"PASSWORD_FILE"`
	TLS          rawTLS `envPrefix:"TLS_"`
}

type rawTLS struct {
	Enabled            bool   `env:"ENABLED" envDefault:"false"`
	CAFile             string `env:"CA_FILE"`
	CertFile           string `env:"CERT_FILE"`
	KeyFile            string `env:"KEY_FILE"`
	ServerName         string `env:"SERVER_NAME"`
	InsecureSkipVerify bool   `env:"INSECURE_SKIP_VERIFY" envDefault:"false"`
}

type rawWeb struct {
	Addr              string         `env:"ADDR" envDefault:":8080"`
	AdminAddr         string         `env:"ADMIN_ADDR"`
	IPv6Prefix        int            `env:"IPV6_PREFIX" envDefault:"64"`
	SubjectSecret     Secret         `env:"SUBJECT_SECRET"`
	SubjectSecretFile string         `env:"SUBJECT_SECRET_FILE"`
	TrustedProxies    []string       `env:"TRUSTED_PROXIES" envSeparator:","`
	EvaluationTimeout *time.Duration `env:"EVALUATION_TIMEOUT"` // unset: derived
	LocalLimitEnabled bool           `env:"LOCAL_LIMIT_ENABLED" envDefault:"true"`
	LocalLimitRate    float64        `env:"LOCAL_LIMIT_RATE" envDefault:"10"`
	LocalLimitBurst   int            `env:"LOCAL_LIMIT_BURST" envDefault:"20"`
	LocalLimitMax     int            `env:"LOCAL_LIMIT_MAX_CLIENTS" envDefault:"10000"`
	LocalLimitIdleTTL time.Duration  `env:"LOCAL_LIMIT_IDLE_TTL" envDefault:"5m"`
	Identity          string         `env:"IDENTITY" envDefault:"ip"`
	APIKeysFile       string         `env:"API_KEYS_FILE"`
	IdentityHeader    string         `env:"IDENTITY_HEADER"`
	LegacyRateLimit   bool           `env:"RATELIMIT_LEGACY_HEADERS" envDefault:"true"`
}

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

// parseEnv runs env/v11 and rewrites its parse errors to name the variable
// rather than the Go field: the parsers record the variable being set (OnSet
// runs just before each field's parser, and parsing is sequential).
func parseEnv(raw any, environ map[string]string) error {
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
