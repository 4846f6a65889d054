package config

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Config is the validated start-up configuration. Build it with Load; the
// zero value is not valid. It is immutable after Load and safe to share.
// Every secret in it prints redacted.
type Config struct {
	RateLimit RateLimit
	Cache     Cache
	Web       Web
	// RLS is the Envoy rate-limit service, APP_RLS_*; off unless
	// APP_RLS_ADDR is set.
	RLS RLS
	Log Log
	// ShutdownTimeout bounds graceful shutdown (APP_SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration
}

// RateLimit is the distributed (Redis coordination) limiter, APP_RATE_LIMIT_*.
// When Enabled is false every other field is left at its zero value: nothing
// of the limiter is read, validated or built.
type RateLimit struct {
	Enabled bool
	// Redis is the dedicated coordination endpoint; it never falls back to
	// the cache's.
	Redis Redis
	// KeyPrefix is the first segment of every key (default tlb).
	KeyPrefix string
	// KeySecret is the keyspace HMAC secret (>= 32 bytes).
	KeySecret keyspace.Secret
	// CommandTimeout is the fixed per-command timeout; DialTimeout and
	// PoolTimeout bound connecting and waiting for a pooled connection.
	CommandTimeout time.Duration
	DialTimeout    time.Duration
	PoolTimeout    time.Duration
	// MaxInFlight bounds concurrent evaluations (admission semaphore);
	// PoolSize when APP_RATE_LIMIT_MAX_IN_FLIGHT is unset.
	MaxInFlight int
	// PoolSize bounds the coordination client's connection pool.
	PoolSize int
	// PipelineMaxBatch bounds the program calls written together as one
	// pipeline (APP_RATE_LIMIT_PIPELINE_MAX_BATCH; 1: every call alone).
	PipelineMaxBatch int
	// DefaultPolicy applies to API routes no policy's routes match.
	DefaultPolicy ratelimit.PolicyID
	// Policies is the parsed policy file.
	Policies PolicySet
	// PoliciesSource is the policy file's path (APP_RATE_LIMIT_POLICIES_FILE).
	PoliciesSource string
	// AllowSharedRedis records APP_RATE_LIMIT_ALLOW_SHARED_REDIS.
	AllowSharedRedis bool
	// Topology is the coordination Redis topology: standalone (Redis.Addr),
	// sentinel or cluster (APP_RATE_LIMIT_REDIS_MODE and friends).
	Topology Topology
	// BreakerThreshold is the run of connection failures or timeouts that
	// opens the circuit breaker (0: no breaker); BreakerProbeInterval the
	// longest wait between recovery probes while it is open.
	BreakerThreshold     int
	BreakerProbeInterval time.Duration
	// ReplicationAcks (0 = off) is how many replicas must acknowledge an
	// admission (WAIT, pipelined behind the program call); an admission
	// with fewer is not admitted. ReplicationAckTimeout bounds the WAIT
	// (COMMAND_TIMEOUT/2 when unset).
	ReplicationAcks       int
	ReplicationAckTimeout time.Duration
	// FallbackMaxSubjects bounds the local emergency fallback's table
	// (used only when a policy is local-fallback).
	FallbackMaxSubjects int
	// DenialCacheMaxEntries bounds the local denial cache's table
	// (APP_RATE_LIMIT_DENIAL_CACHE_MAX_ENTRIES, ADR 0022); 0 turns the
	// cache off.
	DenialCacheMaxEntries int
	// AllowEviction (APP_RATE_LIMIT_ALLOW_EVICTION) accepts a
	// maxmemory-policy other than noeviction, with a warning log and the
	// tlb_redis_eviction_accepted metric; otherwise such a server is never
	// ready.
	AllowEviction bool
	// SkipServerConfigCheck (APP_RATE_LIMIT_SKIP_SERVER_CONFIG_CHECK) does
	// not read the server's CONFIG, for a managed Redis that disables it;
	// the eviction policy is then unchecked.
	SkipServerConfigCheck bool
}

// Cache is the optional Redis cache, APP_CACHE_*. It has its own endpoint,
// credentials, secret and timeouts and is never read by the rate limiter.
type Cache struct {
	Enabled   bool
	Redis     Redis
	KeyPrefix string
	KeySecret keyspace.Secret
	// DB is the logical database of the cache server.
	DB             int
	CommandTimeout time.Duration
	DialTimeout    time.Duration
	PoolTimeout    time.Duration
	PoolSize       int
	// Topology is the cache Redis topology (APP_CACHE_REDIS_MODE and
	// friends): standalone (Redis.Addr), sentinel or cluster.
	Topology Topology
}

// Redis is one Redis endpoint with its credentials and TLS settings.
type Redis struct {
	// Addr is host:port.
	Addr     string
	Username string
	Password Secret
	// TLS is the TLS settings as configured (file paths, not contents).
	TLS TLS
	// tlsConfig is built from TLS when TLS.Enabled; nil means plaintext.
	tlsConfig *tls.Config
}

// TLSConfig returns a copy of the client TLS configuration, or nil when TLS
// is off.
func (r Redis) TLSConfig() *tls.Config {
	if r.tlsConfig == nil {
		return nil
	}
	return r.tlsConfig.Clone()
}

// TLS is the configured TLS settings of a Redis endpoint.
// InsecureSkipVerify has no field: certificate verification cannot be
// turned off.
type TLS struct {
	Enabled    bool
	CAFile     string
	CertFile   string
	KeyFile    string
	ServerName string
}

// Web is the HTTP server, APP_WEB_*.
type Web struct {
	// Addr is the listen address (APP_WEB_ADDR, overridden by -addr).
	Addr string
	// AdminAddr is the admin listener's address (APP_WEB_ADMIN_ADDR), ""
	// when unset. When set, /metrics and the detailed /readyz document are
	// served there only, and the public listener's /readyz says ready or
	// not without detail.
	AdminAddr string
	// IPv6Prefix is the prefix length (32..128, APP_WEB_IPV6_PREFIX,
	// default 64) an IPv6 client address is masked to before it becomes an
	// IP identity or a local-limiter client: every address of one /64 is
	// one client by default. IPv4 (and IPv4-mapped IPv6) addresses are
	// whole.
	IPv6Prefix int
	// SubjectSecret is the HMAC secret that pseudonymizes client
	// identities; set (>= 32 bytes) whenever the Redis limiter is enabled,
	// zero otherwise unless configured.
	SubjectSecret keyspace.Secret
	// TrustedProxies are the peers whose X-Forwarded-For is honoured;
	// empty means never. No entry has prefix length 0 (Load refuses
	// 0.0.0.0/0 and ::/0); IPv4-mapped IPv6 prefixes are unmapped.
	TrustedProxies []netip.Prefix
	// EvaluationTimeout is the deadline given to each rate-limit
	// evaluation; it exceeds RateLimit.CommandTimeout. When
	// APP_WEB_EVALUATION_TIMEOUT is unset it is DefaultEvaluationTimeout, or
	// when the Redis limiter is enabled EvaluationTimeoutFactor times the
	// command timeout (DedupEvaluationTimeoutFactor times it when a policy
	// has a dedup window: room for the retry of a lost reply).
	EvaluationTimeout time.Duration
	// EvaluationTimeoutSet records that APP_WEB_EVALUATION_TIMEOUT was
	// set; when it was not, ReloadPolicies derives EvaluationTimeout again
	// from the reloaded policies.
	EvaluationTimeoutSet bool
	// LocalLimit is the legacy in-process limiter.
	LocalLimit LocalLimit
	// Identity is what the edge limits by (APP_WEB_IDENTITY); the local
	// limiter is keyed by client IP whatever it is.
	Identity IdentityMode
	// APIKeysFile is the keys file (APP_WEB_API_KEYS_FILE), set exactly
	// when Identity is IdentityAPIKey. config does not read its digests:
	// the wiring does (wiring.CheckIdentity at start-up, then SIGHUP
	// reloads), naming this variable in its errors (ADR 0036).
	APIKeysFile string
	// IdentityHeader is the principal header of IdentityTrustedHeader
	// (APP_WEB_IDENTITY_HEADER), canonical form; "" otherwise. Which
	// headers the edge refuses (X-Forwarded-For, ...) is the web
	// adapter's rule, checked by wiring.CheckIdentity.
	IdentityHeader string
	// LegacyRateLimitHeaders sends RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset beside RateLimit and RateLimit-Policy
	// (APP_WEB_RATELIMIT_LEGACY_HEADERS, default true).
	LegacyRateLimitHeaders bool
}

// Broadest trusted-proxy prefixes accepted without a warning: an entry
// shorter than these (but not 0, which Load refuses) starts the service
// with a warning line (BroadTrustedProxies).
const (
	BroadProxyBitsIPv4 = 8
	BroadProxyBitsIPv6 = 32
)

// BroadTrustedProxies are the TrustedProxies entries broader than /8
// (IPv4) or /32 (IPv6): every address in them may set X-Forwarded-For and
// the identity header. The service logs them once at start.
func (w Web) BroadTrustedProxies() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range w.TrustedProxies {
		if (p.Addr().Is4() && p.Bits() < BroadProxyBitsIPv4) || (!p.Addr().Is4() && p.Bits() < BroadProxyBitsIPv6) {
			out = append(out, p)
		}
	}
	return out
}

// IdentityMode selects the client identity the edge limits by.
type IdentityMode string

// The identity modes (APP_WEB_IDENTITY).
const (
	// IdentityIP: the client IP (trusted proxies honoured); the default.
	IdentityIP IdentityMode = "ip"
	// IdentityAPIKey: an X-API-Key whose SHA-256 digest is in
	// APP_WEB_API_KEYS_FILE; any other request gets 401 before a limiter.
	IdentityAPIKey IdentityMode = "api-key"
	// IdentityTrustedHeader: the principal in APP_WEB_IDENTITY_HEADER, from
	// APP_WEB_TRUSTED_PROXIES only; from anyone else the client IP.
	IdentityTrustedHeader IdentityMode = "trusted-header"
)

// LocalLimit configures the legacy in-process per-client token bucket.
type LocalLimit struct {
	Enabled bool
	// Rate is tokens per second per client; Burst the bucket size.
	Rate  float64
	Burst int
	// MaxClients bounds the client table; IdleTTL evicts idle clients.
	MaxClients int
	IdleTTL    time.Duration
}

// LogFormat selects the log encoding.
type LogFormat string

// The log formats. Auto is text when stderr is a terminal, JSON otherwise.
const (
	LogAuto LogFormat = "auto"
	LogJSON LogFormat = "json"
	LogText LogFormat = "text"
)

// Log configures log/slog output.
type Log struct {
	Format LogFormat
	Level  slog.Level
}

// String summarizes the configuration for a start-up log line. Secrets
// appear as their length only.
func (c Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "web{addr=%s", c.Web.Addr)
	if c.Web.AdminAddr != "" {
		fmt.Fprintf(&b, " admin_addr=%s", c.Web.AdminAddr)
	}
	fmt.Fprintf(&b, " ipv6_prefix=%d local_limit=%v", c.Web.IPv6Prefix, c.Web.LocalLimit.Enabled)
	if c.Web.LocalLimit.Enabled {
		fmt.Fprintf(&b, " rate=%g/s burst=%d max_clients=%d", c.Web.LocalLimit.Rate, c.Web.LocalLimit.Burst, c.Web.LocalLimit.MaxClients)
	}
	fmt.Fprintf(&b, " trusted_proxies=%d subject_secret=%s identity=%s", len(c.Web.TrustedProxies), secretState(c.Web.SubjectSecret), c.Web.Identity)
	switch c.Web.Identity {
	case IdentityAPIKey:
		fmt.Fprintf(&b, " api_keys_file=%s", c.Web.APIKeysFile)
	case IdentityTrustedHeader:
		fmt.Fprintf(&b, " identity_header=%s", c.Web.IdentityHeader)
	}
	fmt.Fprintf(&b, " ratelimit_legacy_headers=%v}", c.Web.LegacyRateLimitHeaders)
	fmt.Fprintf(&b, " rate_limit{enabled=%v", c.RateLimit.Enabled)
	if r := c.RateLimit; r.Enabled {
		fmt.Fprintf(&b, " redis=%s topology=%s default_policy=%s policies=%d source=%s key_prefix=%s key_secret=%s command_timeout=%v max_in_flight=%d pool_size=%d pipeline_max_batch=%d replication_acks=%d",
			r.Redis, r.Topology, r.DefaultPolicy, len(r.Policies.Policies), r.PoliciesSource, r.KeyPrefix, secretState(r.KeySecret), r.CommandTimeout, r.MaxInFlight, r.PoolSize, r.PipelineMaxBatch, r.ReplicationAcks)
	}
	fmt.Fprintf(&b, "} cache{enabled=%v", c.Cache.Enabled)
	if k := c.Cache; k.Enabled {
		fmt.Fprintf(&b, " redis=%s topology=%s key_prefix=%s key_secret=%s command_timeout=%v pool_size=%d", k.Redis, k.Topology, k.KeyPrefix, secretState(k.KeySecret), k.CommandTimeout, k.PoolSize)
	}
	fmt.Fprintf(&b, "} rls{enabled=%v", c.RLS.Enabled())
	if r := c.RLS; r.Enabled() {
		fmt.Fprintf(&b, " addr=%s http_addr=%s config_dir=%s undecided=%s shadow_mode=%v tls=%v mtls=%v",
			r.Addr, r.HTTPAddr, r.ConfigDir, r.Undecided, r.ShadowMode, r.TLS(), r.TLSClientCAFile != "")
	}
	fmt.Fprintf(&b, "} log{format=%s level=%s} shutdown_timeout=%v", c.Log.Format, c.Log.Level, c.ShutdownTimeout)
	return b.String()
}

// LogValue implements slog.LogValuer with the same redaction as String.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// String renders the endpoint without its password.
func (r Redis) String() string {
	s := r.Addr
	if r.Username != "" {
		s = r.Username + "@" + s
	}
	if !r.Password.IsZero() {
		s += " password=" + Redacted
	}
	if r.TLS.Enabled {
		s += " tls"
	}
	return s
}

// LogValue implements slog.LogValuer.
func (r Redis) LogValue() slog.Value { return slog.StringValue(r.String()) }

// secretState prints a keyspace secret as Redacted, or "unset".
func secretState(s keyspace.Secret) string {
	if s.IsZero() {
		return "unset"
	}
	return Redacted
}
