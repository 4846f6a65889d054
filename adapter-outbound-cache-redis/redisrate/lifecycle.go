package redisrate

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
)

// Start checks the server version against the programs' MinRedisVersion and
// loads every program with SCRIPT LOAD (a warm-up: correctness relies on the
// NOSCRIPT fallback, since a restart or failover empties the script cache).
// If the server is too old or its version unreadable it returns an error
// wrapping ErrServerVersion and from then on Evaluate answers
// Incompatible{server_version} until a later Start succeeds. A transport
// failure is returned as is and changes nothing. Each command is bounded by
// the command timeout; ctx bounds the wait for a connection.
func (p *Provider) Start(ctx context.Context) error {
	if p.closed.Load() {
		return ErrClosed
	}
	info := redis.NewStringCmd(ctx, "info", "server")
	if err := p.do(ctx, info); err != nil {
		return fmt.Errorf("redisrate: start: INFO server: %w", err)
	}
	version, ok := redisinfo.Field(info.Val(), "redis_version")
	v, err := redisinfo.ParseVersion(version)
	if !ok || err != nil || v.Compare(p.minVer) < 0 {
		e := fmt.Errorf("redisrate: start: %w: server reports %q, programs need %s", ErrServerVersion, truncate(version), p.minRedis)
		p.versionErr.Store(&e)
		return e
	}
	p.versionErr.Store(nil)
	for _, s := range p.scripts {
		load := redis.NewStringCmd(ctx, "script", "load", s.source)
		if err := p.do(ctx, load); err != nil {
			return fmt.Errorf("redisrate: start: SCRIPT LOAD %s: %w", s.name, err)
		}
		if got := load.Val(); got != s.shaHex {
			return fmt.Errorf("redisrate: start: %w: %s loaded as %q, manifest has %s", ErrScriptDigest, s.name, truncate(got), s.shaHex)
		}
	}
	return nil
}

// Ready reports whether the provider can serve: not closed, no version
// failure from Start, and the server answers PING within the command
// timeout.
func (p *Provider) Ready(ctx context.Context) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if e := p.versionErr.Load(); e != nil {
		return *e
	}
	ping := redis.NewStatusCmd(ctx, "ping")
	if err := p.do(ctx, ping); err != nil {
		return fmt.Errorf("redisrate: ready: PING: %w", err)
	}
	return nil
}

// do runs an administrative command with ctx bounded by the command
// timeout (the socket timeouts bound the rest).
func (p *Provider) do(ctx context.Context, cmd redis.Cmder) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	_ = p.client.Process(ctx, cmd)
	return cmd.Err()
}

// Close closes the client. Evaluate answers Unavailable{closed} afterwards;
// a call already in flight ends as its client call does. Close is
// idempotent and returns the client's Close error.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		p.closeErr = p.client.Close()
	})
	return p.closeErr
}
