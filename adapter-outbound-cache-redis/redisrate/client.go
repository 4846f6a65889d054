package redisrate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/redisclient"
)

// Bounds and fixed settings of the coordination client.
const (
	// MaxTimeout bounds CommandTimeout, DialTimeout and PoolTimeout: a
	// rate-limit decision that takes longer is worth less than a fast denial.
	MaxTimeout = 10 * time.Second
	// MaxPoolSize bounds PoolSize.
	MaxPoolSize = 1024
	// ProtocolRESP2 and ProtocolRESP3 are the accepted ClientConfig.Protocol
	// values. RESP2 is the recommended one: it has no out-of-band push frames,
	// so nothing but the program's reply is ever read on a command's
	// connection. The programs' replies arrive identically under both.
	ProtocolRESP2 = 2
	ProtocolRESP3 = 3
)

// redacted is what String prints instead of a set password.
const redacted = "[redacted]"

// ErrInvalidConfig is wrapped by every ClientConfig.Validate and Options
// error.
var ErrInvalidConfig = errors.New("invalid rate-limit redis config")

// ErrTLSHandshake is wrapped by every failed TLS handshake of the
// coordination client's dialer (with the crypto/tls or crypto/x509 error
// alongside), so that a caller can tell a TLS problem (wrong CA, server
// name, expired certificate, a plaintext port) from an unreachable server.
// It is the adapter's one dialer's (internal/redisclient).
var ErrTLSHandshake = redisclient.ErrTLSHandshake

// ClientConfig configures the coordination client: its own connection pool,
// never shared with the cache capability. The zero value is invalid; every
// field without "optional" must be set. Every textual form redacts Password.
type ClientConfig struct {
	// Addr is host:port of the coordination Redis (TCP).
	Addr string
	// Username is the ACL user (optional; empty is the default user).
	Username string
	// Password is the ACL password or requirepass (optional); never printed.
	Password string
	// TLSConfig enables TLS when non-nil (optional). NewClient clones it,
	// fills ServerName from Addr when empty and requires TLS 1.2 or later.
	TLSConfig *tls.Config
	// Protocol is ProtocolRESP2 or ProtocolRESP3.
	Protocol int
	// CommandTimeout is the fixed socket read and write timeout of every
	// command, in 1ms..MaxTimeout. The Provider's Options.CommandTimeout
	// must equal it.
	CommandTimeout time.Duration
	// DialTimeout bounds the single dial attempt, in 1ms..CommandTimeout.
	DialTimeout time.Duration
	// PoolSize is the bound on connections in use, 1..MaxPoolSize.
	PoolSize int
	// PoolTimeout bounds the wait for a free connection, in
	// 1ms..CommandTimeout.
	PoolTimeout time.Duration
	// ClientName is sent with CLIENT SETNAME on each new connection
	// (optional; empty sends nothing). It must be a single word.
	ClientName string
	// Dialer, when non-nil, opens the TCP connection instead of a
	// net.Dialer (optional; for proxies and fault-injection tests). It must
	// honour ctx. TLS, when configured, is layered on top of it.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Validate reports every invalid field, each error wrapping ErrInvalidConfig
// and naming the field. It never includes the password.
func (c ClientConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	errs = append(errs,
		profile.CheckAddr("Addr", c.Addr),
		profile.CheckTLS("TLSConfig.MinVersion", c.TLSConfig))
	if c.Protocol != ProtocolRESP2 && c.Protocol != ProtocolRESP3 {
		bad("Protocol %d must be %d or %d", c.Protocol, ProtocolRESP2, ProtocolRESP3)
	}
	errs = append(errs, profile.CheckTimeout("CommandTimeout", c.CommandTimeout, MaxTimeout))
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"DialTimeout", c.DialTimeout}, {"PoolTimeout", c.PoolTimeout}} {
		if err := profile.CheckTimeout(d.name, d.v, MaxTimeout); err != nil {
			errs = append(errs, err)
		} else if d.v > c.CommandTimeout && c.CommandTimeout > 0 {
			bad("%s %v must not exceed CommandTimeout %v", d.name, d.v, c.CommandTimeout)
		}
	}
	errs = append(errs, profile.CheckPoolSize("PoolSize", c.PoolSize, MaxPoolSize))
	for i := 0; i < len(c.ClientName); i++ {
		if ch := c.ClientName[i]; ch <= ' ' || ch > '~' {
			bad("ClientName must be printable ASCII without spaces (byte %d)", i)
			break
		}
	}
	return errors.Join(errs...)
}

// String implements fmt.Stringer with the password redacted.
func (c ClientConfig) String() string {
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
	return fmt.Sprintf("redisrate.ClientConfig{Addr:%q Username:%q Password:%q TLS:%s Protocol:%d CommandTimeout:%v DialTimeout:%v PoolSize:%d PoolTimeout:%v ClientName:%q CustomDialer:%t}",
		c.Addr, c.Username, pw, tlsMode, c.Protocol, c.CommandTimeout, c.DialTimeout, c.PoolSize, c.PoolTimeout, c.ClientName, c.Dialer != nil)
}

// GoString implements fmt.GoStringer with the password redacted.
func (c ClientConfig) GoString() string { return c.String() }

// LogValue implements slog.LogValuer with the password redacted.
func (c ClientConfig) LogValue() slog.Value { return slog.StringValue(c.String()) }

// NewClient validates cfg and builds the coordination client. Its options are
// fixed for failure certainty (docs/failure-certainty.md): go-redis retries
// off (MaxRetries -1: in go-redis 0 means 3), one dial attempt, read and
// write timeouts equal to CommandTimeout, the caller's context not used as a
// socket deadline (ContextTimeoutEnabled false: the caller deadline is an
// admission precheck), a bounded pool, no dedicated pipeline pool, no
// maintenance notifications, no client-side caching and no CLIENT SETINFO
// traffic. Connections are dialed lazily; NewClient does no I/O.
func NewClient(cfg ClientConfig) (*redis.Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return clientOptions(cfg).NewClient(cfg.Addr), nil
}

// profile is the coordination client's part of the adapter's one option
// set (internal/redisclient): the caller's context is never a socket
// deadline (ContextTimeoutEnabled false), dials are not capped beyond the
// pool (MaxActiveConns 0: go-redis answers a dial at that cap with
// ErrPoolExhausted even while a turn is free, which would turn a healthy
// burst into admission failures), every new connection ends its handshake
// with a PING (a refusing server fails the dial, Unavailable, not the
// program call, Indeterminate), and dial and pool waits fit in one command
// timeout.
var profile = redisclient.Profile{
	ProbeOnConnect:     true,
	OwnDialFailures:    true,
	WaitsWithinCommand: true,
	Invalid:            ErrInvalidConfig,
}

// clientOptions maps cfg to the adapter's one client option set: the
// standalone client, the Sentinel-mode client, the cluster client and its
// node clients are all built from it.
func clientOptions(cfg ClientConfig) redisclient.Options {
	return redisclient.Options{
		Username:       cfg.Username,
		Password:       cfg.Password,
		TLSConfig:      cfg.TLSConfig,
		Protocol:       cfg.Protocol,
		ClientName:     cfg.ClientName,
		DialTimeout:    cfg.DialTimeout,
		CommandTimeout: cfg.CommandTimeout,
		PoolSize:       cfg.PoolSize,
		PoolTimeout:    cfg.PoolTimeout,
		Dialer:         cfg.Dialer,
		Profile:        profile,
	}
}

// checkClientOptions verifies the go-redis options (as normalized by
// go-redis) that failure certainty depends on.
func checkClientOptions(o *redis.Options, opts Options) error {
	return profile.CheckClient(o, limits(opts))
}

// limits is what New checks a client's options against.
func limits(opts Options) redisclient.Limits {
	return redisclient.Limits{CommandTimeout: opts.CommandTimeout, MaxInFlight: opts.MaxInFlight}
}
