package redisrate

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
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
//
// With Options.ServerChecks, Start and Ready then check the server's own
// policies on a standalone or Sentinel endpoint (serverpolicy.go): a
// replica fails with ErrReplica, an evicting maxmemory-policy with
// ErrEvictionPolicy (unless accepted), a refused CONFIG GET with
// ErrServerConfigUnreadable (unless skipped); ServerStatus reports what
// was read.
//
// In cluster mode Start loads the slot map and qualifies every primary
// (version check, warm-up and, with ServerChecks, the server-policy
// checks); a primary met later (after a failover or a resharding) is
// qualified the same way before the first program call it receives, and a
// primary that fails is sent no program call (Unavailable{server_rejected}
// for a policy violation). Ready checks every primary's policies again.
func (p *Provider) Start(ctx context.Context) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if p.router != nil {
		if err := p.router.Refresh(ctx); err != nil {
			return fmt.Errorf("redisrate: start: %w", err)
		}
		for _, n := range p.router.Primaries() {
			// Start checks every primary again.
			if err := p.router.Requalify(ctx, n); err != nil {
				return fmt.Errorf("redisrate: start: %w", err)
			}
		}
		p.versionErr.Store(nil)
		return nil
	}
	if err := p.qualify(ctx, p.client); err != nil {
		return err
	}
	p.versionErr.Store(nil)
	return p.checkServer(ctx, "start", p.client)
}

// qualifyPrimary qualifies a cluster primary before its first program call:
// the version check and script warm-up (qualify), then the server-policy
// checks (checkServer), with the same errors as a standalone endpoint.
func (p *Provider) qualifyPrimary(ctx context.Context, c send.Commander) error {
	err := p.qualify(ctx, c)
	if err == nil {
		err = p.checkServer(ctx, "qualify", c)
	}
	if errors.Is(err, ErrServerVersion) || errors.Is(err, ErrScriptDigest) || isServerPolicyRefusal(err) {
		return refusedError{err} // the server answered; the send loop's breaker counts it so
	}
	return err
}

// refusedError marks a qualification error that refuses the server for
// what it answered (send.ErrQualificationRefused); its text is err's.
type refusedError struct{ err error }

func (e refusedError) Error() string   { return e.err.Error() }
func (e refusedError) Unwrap() []error { return []error{e.err, send.ErrQualificationRefused} }

// qualify runs the version check and the script warm-up on c.
func (p *Provider) qualify(ctx context.Context, c send.Commander) error {
	do := func(cmd redis.Cmder) error {
		ctx, cancel := context.WithTimeout(ctx, p.timeout)
		defer cancel()
		_ = c.Process(ctx, cmd)
		return cmd.Err()
	}
	info := redis.NewStringCmd(ctx, "info", "server")
	if err := do(info); err != nil {
		return fmt.Errorf("redisrate: start: INFO server: %w", err)
	}
	version, ok := redisinfo.Field(info.Val(), "redis_version")
	v, err := redisinfo.ParseVersion(version)
	if !ok || err != nil || v.Compare(p.minVer) < 0 {
		e := fmt.Errorf("redisrate: start: %w: server reports %q, programs need %s", ErrServerVersion, truncate(version), p.minRedis)
		p.versionErr.Store(&e)
		return e
	}
	for _, s := range p.scripts {
		load := redis.NewStringCmd(ctx, "script", "load", s.Source())
		if err := do(load); err != nil {
			return fmt.Errorf("redisrate: start: SCRIPT LOAD %s: %w", s.Name(), err)
		}
		if got := load.Val(); got != s.SHA() {
			return fmt.Errorf("redisrate: start: %w: %s loaded as %q, manifest has %s", ErrScriptDigest, s.Name(), truncate(got), s.SHA())
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
	if p.router != nil {
		return p.readyCluster(ctx)
	}
	ping := redis.NewStatusCmd(ctx, "ping")
	if err := p.do(ctx, ping); err != nil {
		return fmt.Errorf("redisrate: ready: PING: %w", err)
	}
	return p.checkServer(ctx, "ready", p.client)
}

// readyCluster: every slot has a primary in the slot map (loaded now if
// never loaded or marked stale) and every primary answers PING.
func (p *Provider) readyCluster(ctx context.Context) error {
	r := p.router
	if r.NeedsRefresh() {
		if err := r.Refresh(ctx); err != nil {
			return fmt.Errorf("redisrate: ready: %w", err)
		}
	}
	if slot, ok := r.UnservedSlot(); ok {
		return fmt.Errorf("redisrate: ready: %w: slot %d", ErrClusterSlotUnserved, slot)
	}
	for _, n := range r.Primaries() {
		ping := redis.NewStatusCmd(ctx, "ping")
		if err := p.do(ctx, ping, n.Client()); err != nil {
			return fmt.Errorf("redisrate: ready: PING %s: %w", n.Addr(), err)
		}
		if err := p.checkServer(ctx, "ready", n.Client()); err != nil {
			return fmt.Errorf("redisrate: primary %s: %w", n.Addr(), err)
		}
	}
	return nil
}

// do runs an administrative command with ctx bounded by the command
// timeout (the socket timeouts bound the rest).
// It goes to p.client, or to the one send.Commander given.
func (p *Provider) do(ctx context.Context, cmd redis.Cmder, to ...send.Commander) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	c := send.Commander(p.client)
	if len(to) == 1 {
		c = to[0]
	}
	_ = c.Process(ctx, cmd)
	return cmd.Err()
}

// Close stops the breaker's prober (waiting for a probe in flight) and
// closes the client. Evaluate answers Unavailable{closed} afterwards;
// a call already in flight ends as its client call does. Close is
// idempotent and returns the client's Close error.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		p.exec.ShutdownBreakers()
		p.closeErr = p.client.Close()
	})
	return p.closeErr
}
