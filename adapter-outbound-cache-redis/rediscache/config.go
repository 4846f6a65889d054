package rediscache

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/redisclient"
)

// Bounds on Config fields.
const (
	// MaxTimeout bounds DialTimeout, CommandTimeout and PoolTimeout: a cache
	// that cannot answer within it is better treated as down.
	MaxTimeout = 10 * time.Second
	// MaxPoolSize bounds PoolSize.
	MaxPoolSize = 1024
	// ClientName is the CLIENT SETNAME of every cache connection, so that an
	// operator can tell cache connections from coordination ones.
	ClientName = "tlb-cache"
)

// redacted is what String prints instead of a set password.
const redacted = "[redacted]"

// ErrInvalidConfig is wrapped by every Config.Validate error.
var ErrInvalidConfig = errors.New("invalid cache redis config")

// Config configures the cache's own Redis client. It is never shared with, or
// derived from, the coordination client's configuration. The zero value is
// invalid; start from DefaultConfig. Every textual form redacts Password.
type Config struct {
	// Addr is host:port of the cache Redis (TCP only).
	Addr string
	// Username is the ACL user; empty means the default user.
	Username string
	// Password is the ACL password or requirepass; never printed.
	Password string
	// DB is the logical database selected on connect, >= 0.
	DB int
	// TLSConfig, when non-nil, enables TLS; it is cloned by NewClient, and
	// the dialer performs the handshake, checking each dialed host against
	// its own name unless ServerName is set. MinVersion, if set, must be at
	// least TLS 1.2.
	TLSConfig *tls.Config
	// DialTimeout bounds one connection attempt (only one is made per
	// dial), in 1ms..MaxTimeout.
	DialTimeout time.Duration
	// CommandTimeout is the socket read and write timeout of every command,
	// in 1ms..MaxTimeout.
	CommandTimeout time.Duration
	// PoolSize is the hard bound on open connections, 1..MaxPoolSize.
	PoolSize int
	// PoolTimeout bounds the wait for a free connection, in 1ms..MaxTimeout.
	PoolTimeout time.Duration
}

// DefaultConfig returns a valid Config for addr with bounded timeouts
// suited to a cache on the same network: a cache answer that takes longer
// than a database read is worthless.
func DefaultConfig(addr string) Config {
	return Config{
		Addr:           addr,
		DialTimeout:    500 * time.Millisecond,
		CommandTimeout: 200 * time.Millisecond,
		PoolSize:       32,
		PoolTimeout:    200 * time.Millisecond,
	}
}

// Validate reports every invalid field, each error wrapping ErrInvalidConfig
// and naming the field. It never includes the password.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	errs = append(errs, profile.CheckAddr("addr", c.Addr))
	if c.DB < 0 {
		bad("db %d must be >= 0", c.DB)
	}
	errs = append(errs,
		profile.CheckTLS("tls min version", c.TLSConfig),
		profile.CheckTimeout("dial timeout", c.DialTimeout, MaxTimeout),
		profile.CheckTimeout("command timeout", c.CommandTimeout, MaxTimeout),
		profile.CheckTimeout("pool timeout", c.PoolTimeout, MaxTimeout),
		profile.CheckPoolSize("pool size", c.PoolSize, MaxPoolSize))
	return errors.Join(errs...)
}

// String implements fmt.Stringer with the password redacted.
func (c Config) String() string {
	pw := ""
	if c.Password != "" {
		pw = redacted
	}
	tlsMode := "off"
	if c.TLSConfig != nil {
		tlsMode = "on"
		if c.TLSConfig.InsecureSkipVerify {
			tlsMode = "on(insecure-skip-verify)"
		}
	}
	return fmt.Sprintf("rediscache.Config{Addr:%q Username:%q Password:%q DB:%d TLS:%s DialTimeout:%v CommandTimeout:%v PoolSize:%d PoolTimeout:%v}",
		c.Addr, c.Username, pw, c.DB, tlsMode, c.DialTimeout, c.CommandTimeout, c.PoolSize, c.PoolTimeout)
}

// GoString implements fmt.GoStringer (the %#v verb) with the password redacted.
func (c Config) GoString() string { return c.String() }

// LogValue implements slog.LogValuer with the password redacted.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// NewClient validates cfg and returns the cache's own client.
//
// Retries are disabled (MaxRetries -1; in go-redis 0 means 3). Set is
// idempotent, but SetIfAbsent and CompareAndReplace are not: if a first
// attempt was applied and only its reply was lost, a retry finds its own
// write and reports false, so a caller would be told it lost a race it won.
// Without retries every true/false is the truth and every failure is an
// error, which FailOpen turns into a miss, and a cache miss only costs a
// recomputation. Dials are attempted once within DialTimeout, the pool is
// hard-bounded at PoolSize with no separate pipeline pool, and the caller's
// context deadline is honoured (ContextTimeoutEnabled): a cache answer after
// the caller gave up is worthless and every cache operation is safe to
// abandon. The caller owns the client and must Close it.
func NewClient(cfg Config) (*redis.Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return clientOptions(cfg).NewClient(cfg.Addr), nil
}

// profile is the cache client's part of the adapter's one option set
// (internal/redisclient): the caller's context deadline bounds every
// command, and dials are capped at PoolSize (MaxActiveConns).
var profile = redisclient.Profile{
	ContextDeadline: true,
	CapActiveConns:  true,
	Invalid:         ErrInvalidConfig,
}

// clientOptions maps cfg to the adapter's one client option set, with the
// cache's profile, RESP3 and ClientName: the standalone, Sentinel-mode and
// cluster clients are all built from it.
func clientOptions(cfg Config) redisclient.Options {
	return redisclient.Options{
		Username:       cfg.Username,
		Password:       cfg.Password,
		DB:             cfg.DB,
		TLSConfig:      cfg.TLSConfig,
		Protocol:       3,
		ClientName:     ClientName,
		DialTimeout:    cfg.DialTimeout,
		CommandTimeout: cfg.CommandTimeout,
		PoolSize:       cfg.PoolSize,
		PoolTimeout:    cfg.PoolTimeout,
		Profile:        profile,
	}
}
