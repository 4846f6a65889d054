package redisclient

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// dialAttempts is go-redis DialerRetries: exactly one attempt per dial, so a
// refused or black-holed address costs at most one DialTimeout.
const dialAttempts = 1

// ErrInvalid is what the checks wrap when a Profile names no Invalid error
// of its own.
var ErrInvalid = errors.New("invalid redis client options")

// Profile is what one capability decides about its clients, beside the
// settings every client of the adapter shares (Options.Universal). The rate
// capability's clients neither honour the caller's context nor cap dials;
// the cache's do both.
type Profile struct {
	// ContextDeadline sets go-redis ContextTimeoutEnabled: the caller's
	// context deadline bounds each command's socket I/O.
	ContextDeadline bool
	// CapActiveConns sets MaxActiveConns to PoolSize: a dial beyond the pool
	// fails at once (ErrPoolExhausted) instead of waiting for a turn.
	CapActiveConns bool
	// ProbeOnConnect makes a PING the last step of every new connection's
	// handshake, so that a server that refuses the connection (maxclients,
	// AUTH required) fails it before the first command is written.
	ProbeOnConnect bool
	// OwnDialFailures replaces go-redis's dial circuit with the
	// capability's own (dialCircuit): go-redis counts every failed dial of
	// a pool, over its whole life, and resets the count only from a
	// background probe it starts when the count reaches PoolSize, dialing
	// once a second; a successful dial never resets it. So after any
	// history of PoolSize failed dials (outages, restarts) every dial fails
	// at once with the last, stale, dial error until that probe succeeds,
	// up to a second after the server is back, and a lost reply's retry,
	// which needs a new connection, is refused though the server is healthy
	// (issue 33). The own circuit counts failures in a row, which a
	// successful dial ends, with go-redis's bound on dials to an
	// unreachable server (PoolSize failures in a row, then one dial a
	// second); a failed dial is still a *DialError before any command byte.
	OwnDialFailures bool
	// WaitsWithinCommand requires DialTimeout and PoolTimeout not to exceed
	// CommandTimeout (checked by CheckClient).
	WaitsWithinCommand bool
	// Invalid is wrapped by every error the profile's checks report (the
	// capability's own sentinel); nil means ErrInvalid.
	Invalid error
}

// DialFunc opens a network connection; it must honour ctx.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Options are the settings of one capability's clients. Its caller has
// validated them (each capability has its own configuration type and
// rules); Options only builds.
type Options struct {
	// Username and Password authenticate every connection (ACL or
	// requirepass); both optional.
	Username string
	Password string
	// DB is the database selected on connect (0 in a cluster).
	DB int
	// TLSConfig enables TLS when non-nil. It is cloned, MinVersion defaults
	// to TLS 1.2, and an empty ServerName is the dialed host's name; the
	// dialer performs the handshake.
	TLSConfig *tls.Config
	// Protocol is the RESP version (2 or 3).
	Protocol int
	// ClientName is sent with CLIENT SETNAME on every connection (optional).
	ClientName string
	// DialTimeout bounds one dial, TLS handshake included (one attempt).
	DialTimeout time.Duration
	// CommandTimeout is every command's socket read and write timeout.
	CommandTimeout time.Duration
	// PoolSize bounds the connections in use; PoolTimeout the wait for one.
	PoolSize    int
	PoolTimeout time.Duration
	// Dialer opens the TCP connection instead of a net.Dialer (optional;
	// proxies, fault injection). TLS is layered on top of it.
	Dialer DialFunc
	// Profile is the capability's own part.
	Profile Profile
}

// Universal is the one go-redis option set of a capability's clients: the
// standalone client (Simple), the Sentinel-mode client (Failover), the
// cluster client (Cluster) and every cluster node client are all derived
// from it. addrs are the server, the sentinels or the seed nodes.
//
// Fixed for every capability: no retries and no redirects of go-redis's
// own (MaxRetries and MaxRedirects -1: in go-redis 0 means 3, and a retry
// after a write could apply a non-idempotent command twice), one dial
// attempt, read and write timeouts equal to CommandTimeout, no dedicated
// pipeline pool, no CLIENT SETINFO traffic, no maintenance notifications,
// no client-side caching, TLS done by the dialer (go-redis's TLSConfig
// stays nil) so that a failed handshake is a dial error like any other.
func (o Options) Universal(addrs []string) *redis.UniversalOptions {
	u := &redis.UniversalOptions{
		Addrs:      append([]string(nil), addrs...),
		ClientName: o.ClientName,
		Dialer:     o.dialer(),
		Protocol:   o.Protocol,
		Username:   o.Username,
		Password:   o.Password,
		DB:         o.DB,

		MaxRedirects:    -1,
		MaxRetries:      -1,
		MinRetryBackoff: -1,
		MaxRetryBackoff: -1,

		DialTimeout:   o.DialTimeout,
		DialerRetries: dialAttempts,

		ReadTimeout:           o.CommandTimeout,
		WriteTimeout:          o.CommandTimeout,
		ContextTimeoutEnabled: o.Profile.ContextDeadline,

		// PoolSize is go-redis's turn semaphore: at most PoolSize commands
		// hold a connection at once. MaxActiveConns is the profile's: with
		// it go-redis answers a dial at the cap with ErrPoolExhausted even
		// while a turn is free.
		PoolSize:         o.PoolSize,
		PoolTimeout:      o.PoolTimeout,
		PipelinePoolSize: -1,

		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if o.Profile.CapActiveConns {
		u.MaxActiveConns = o.PoolSize
	}
	if o.Profile.ProbeOnConnect {
		u.OnConnect = probeConn
	}
	return u
}

// dialer is the go-redis Dialer of o's clients: newDialer, behind the
// capability's own dial circuit under Profile.OwnDialFailures.
func (o Options) dialer() DialFunc {
	d := newDialer(o.Dialer, o.DialTimeout, tlsConfig(o.TLSConfig))
	if o.Profile.OwnDialFailures {
		return newDialCircuit(d, o.PoolSize).DialContext
	}
	return d
}

// Simple is the standalone client's options at addr: Universal's, as
// go-redis's Simple derives them.
func (o Options) Simple(addr string) *redis.Options {
	return o.Universal([]string{addr}).Simple()
}
