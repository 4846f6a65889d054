package redisrate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
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
	// dialAttempts is go-redis DialerRetries: exactly one attempt per dial,
	// so a refused or black-holed address costs at most one DialTimeout.
	dialAttempts = 1
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
var ErrTLSHandshake = errors.New("tls handshake")

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
	if host, port, err := net.SplitHostPort(c.Addr); err != nil || host == "" {
		bad("Addr %q must be host:port", c.Addr)
	} else if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		bad("Addr %q: port must be 1..65535", c.Addr)
	}
	if c.TLSConfig != nil && c.TLSConfig.MinVersion != 0 && c.TLSConfig.MinVersion < tls.VersionTLS12 {
		bad("TLSConfig.MinVersion %#x must be at least TLS 1.2", c.TLSConfig.MinVersion)
	}
	if c.Protocol != ProtocolRESP2 && c.Protocol != ProtocolRESP3 {
		bad("Protocol %d must be %d or %d", c.Protocol, ProtocolRESP2, ProtocolRESP3)
	}
	if c.CommandTimeout < time.Millisecond || c.CommandTimeout > MaxTimeout {
		bad("CommandTimeout %v must be in 1ms..%v", c.CommandTimeout, MaxTimeout)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"DialTimeout", c.DialTimeout}, {"PoolTimeout", c.PoolTimeout}} {
		switch {
		case d.v < time.Millisecond || d.v > MaxTimeout:
			bad("%s %v must be in 1ms..%v", d.name, d.v, MaxTimeout)
		case d.v > c.CommandTimeout && c.CommandTimeout > 0:
			bad("%s %v must not exceed CommandTimeout %v", d.name, d.v, c.CommandTimeout)
		}
	}
	if c.PoolSize < 1 || c.PoolSize > MaxPoolSize {
		bad("PoolSize %d must be in 1..%d", c.PoolSize, MaxPoolSize)
	}
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
	return redis.NewClient(clientOptions(cfg)), nil
}

// clientOptions is the standalone client's options: universalOptions
// for cfg.Addr, as go-redis's Simple derives them.
func clientOptions(cfg ClientConfig) *redis.Options {
	return universalOptions(cfg, []string{cfg.Addr}, tlsFor(cfg)).Simple()
}

// universalOptions is the one option set of the coordination client: the
// standalone client (Simple), the Sentinel-mode client (Failover) and the
// cluster client and its node clients (Cluster, Simple) are all derived
// from it, so every option failure certainty depends on is written once.
// addrs are the server, the sentinels or the seed nodes; tlsConfig is the
// dialer's TLS configuration (nil: none).
func universalOptions(cfg ClientConfig, addrs []string, tlsConfig *tls.Config) *redis.UniversalOptions {
	return &redis.UniversalOptions{
		Addrs:      append([]string(nil), addrs...),
		ClientName: cfg.ClientName,
		Dialer:     newDialer(cfg.Dialer, cfg.DialTimeout, tlsConfig),
		OnConnect:  probeConn,
		Protocol:   cfg.Protocol,
		Username:   cfg.Username,
		Password:   cfg.Password,

		// No retries and, in a cluster, no redirects of go-redis's own: a
		// retry after a write could apply the program twice.
		MaxRedirects:    -1,
		MaxRetries:      -1,
		MinRetryBackoff: -1,
		MaxRetryBackoff: -1,

		DialTimeout:   cfg.DialTimeout,
		DialerRetries: dialAttempts,

		ReadTimeout:           cfg.CommandTimeout,
		WriteTimeout:          cfg.CommandTimeout,
		ContextTimeoutEnabled: false,

		// PoolSize is go-redis's turn semaphore: at most PoolSize commands
		// hold a connection at once. MaxActiveConns stays 0 because go-redis
		// answers a dial at that cap with ErrPoolExhausted even while a turn
		// is free, which would turn a healthy burst into admission failures.
		PoolSize:         cfg.PoolSize,
		PoolTimeout:      cfg.PoolTimeout,
		PipelinePoolSize: -1,

		// TLSConfig stays nil: the dialer performs the handshake so that its
		// failure is a dial error like any other.
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
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
