package redisrate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
)

// EvictionPolicyNone is the only maxmemory-policy that cannot drop live
// limiter state: every state key has a TTL, so volatile-* policies may
// evict it as well as allkeys-* (and an evicted key silently reopens a
// limit).
const EvictionPolicyNone = "noeviction"

// Errors of the server-policy checks (ServerChecks).
var (
	// ErrReplica: the endpoint reports a role other than master; every
	// program call would be refused (READONLY).
	ErrReplica = errors.New("coordination endpoint is not a primary")
	// ErrEvictionPolicy: maxmemory-policy is not noeviction and
	// ServerChecks.AllowEviction is false.
	ErrEvictionPolicy = errors.New("maxmemory-policy may evict live limiter state")
	// ErrServerConfigUnreadable: CONFIG GET maxmemory-policy was refused
	// (a managed Redis may disable CONFIG, or the ACL user lacks
	// +config|get) and ServerChecks.SkipConfig is false.
	ErrServerConfigUnreadable = errors.New("server configuration unreadable")
)

// ServerChecks configures the checks of the server's own policies that
// Start and Ready run on the endpoint (standalone or Sentinel-managed), or
// on every cluster primary when it is qualified: at Start, and before the
// first program call to a primary met later (failover, resharding). The
// zero value checks everything.
type ServerChecks struct {
	// AllowEviction accepts a maxmemory-policy other than noeviction; the
	// status then says EvictionAccepted.
	AllowEviction bool
	// SkipConfig does not read CONFIG (for a managed Redis that disables
	// it); the eviction policy is then unknown and unchecked.
	SkipConfig bool
}

// ServerStatus is what the last server-policy check read: the server's
// version, role and replication, eviction policy and persistence. It holds
// no address and no credential.
type ServerStatus struct {
	// CheckedAt is when the status was read.
	CheckedAt time.Time
	// Version is redis_version.
	Version string
	// Role is "master" or "slave".
	Role string
	// ConnectedReplicas is connected_slaves (on a primary).
	ConnectedReplicas int
	// ReplicaLagSeconds is the largest lag of a connected replica in
	// seconds as the primary reports it; -1 without replicas.
	ReplicaLagSeconds int
	// EvictionPolicy is maxmemory-policy, "" when not read (SkipConfig or
	// refused).
	EvictionPolicy string
	// EvictionAccepted is true when EvictionPolicy is not noeviction and
	// AllowEviction accepted it.
	EvictionAccepted bool
	// AOFEnabled is aof_enabled.
	AOFEnabled bool
	// RDBSaveConfigured is true when the server has RDB save points
	// (CONFIG GET save is not empty); false also when not read.
	RDBSaveConfigured bool
	// RDBLastSaveUnix is rdb_last_save_time; RDBChangesSinceSave is
	// rdb_changes_since_last_save: what a restart without AOF would lose.
	RDBLastSaveUnix     int64
	RDBChangesSinceSave int64
}

// Persistence summarizes the persistence settings: "aof", "rdb",
// "aof+rdb" or "none" (a restart loses all limiter state).
func (s ServerStatus) Persistence() string {
	switch {
	case s.AOFEnabled && s.RDBSaveConfigured:
		return "aof+rdb"
	case s.AOFEnabled:
		return "aof"
	case s.RDBSaveConfigured:
		return "rdb"
	}
	return "none"
}

// serverState is the provider's server-policy state.
type serverState struct {
	checks *ServerChecks
	status atomic.Pointer[ServerStatus]
}

// ServerStatus returns the status of the last server-policy check, and
// false when none has completed (or the checks are off). In cluster mode it
// is the status of the primary checked last.
func (p *Provider) ServerStatus() (ServerStatus, bool) {
	s := p.server.status.Load()
	if s == nil {
		return ServerStatus{}, false
	}
	return *s, true
}

// checkServer reads the server's role, replication, persistence and
// eviction policy on to (the endpoint, or one cluster primary), stores the
// status and returns the first policy violation. It does nothing when the
// checks are off.
func (p *Provider) checkServer(ctx context.Context, phase string, to send.Commander) error {
	if p.server.checks == nil {
		return nil
	}
	checks := *p.server.checks
	do := func(cmd redis.Cmder) error { return p.do(ctx, cmd, to) }
	info := redis.NewStringCmd(ctx, "info", "server", "replication", "persistence")
	if err := do(info); err != nil {
		return fmt.Errorf("redisrate: %s: INFO: %w", phase, err)
	}
	text := info.Val()
	st := ServerStatus{CheckedAt: p.now(), ReplicaLagSeconds: -1}
	st.Version, _ = redisinfo.Field(text, "redis_version")
	st.Role, _ = redisinfo.Field(text, "role")
	st.ConnectedReplicas = atoiField(text, "connected_slaves")
	replicas, _ := redisinfo.Replicas(text) // a malformed line: lag unknown (-1)
	for _, r := range replicas {
		st.ReplicaLagSeconds = max(st.ReplicaLagSeconds, int(r.Lag))
	}
	st.AOFEnabled = atoiField(text, "aof_enabled") == 1
	st.RDBLastSaveUnix = int64(atoiField(text, "rdb_last_save_time"))
	st.RDBChangesSinceSave = int64(atoiField(text, "rdb_changes_since_last_save"))

	var cfgErr error
	if !checks.SkipConfig {
		cfg := redis.NewMapStringStringCmd(ctx, "config", "get", "maxmemory-policy")
		if err := do(cfg); err != nil {
			cfgErr = err
		} else {
			st.EvictionPolicy = cfg.Val()["maxmemory-policy"]
			save := redis.NewMapStringStringCmd(ctx, "config", "get", "save")
			if err := do(save); err != nil {
				cfgErr = err
			} else {
				st.RDBSaveConfigured = strings.TrimSpace(save.Val()["save"]) != ""
			}
		}
	}
	st.EvictionAccepted = st.EvictionPolicy != "" && st.EvictionPolicy != EvictionPolicyNone && checks.AllowEviction
	p.server.status.Store(&st)

	switch {
	case st.Role != "master":
		return fmt.Errorf("redisrate: %s: %w: it reports role:%s (a replica refuses every program call with READONLY)", phase, ErrReplica, truncate(st.Role))
	case cfgErr != nil:
		var rerr redis.Error
		if !errors.As(cfgErr, &rerr) {
			return fmt.Errorf("redisrate: %s: CONFIG GET: %w", phase, cfgErr) // transport: not a policy verdict
		}
		return fmt.Errorf("redisrate: %s: %w: CONFIG GET maxmemory-policy answered %q (a managed Redis may disable CONFIG; the ACL user needs +config|get)", phase, ErrServerConfigUnreadable, truncate(cfgErr.Error()))
	case st.EvictionPolicy != "" && st.EvictionPolicy != EvictionPolicyNone && !checks.AllowEviction:
		return fmt.Errorf("redisrate: %s: %w: maxmemory-policy is %s; only %s is safe for coordination", phase, ErrEvictionPolicy, truncate(st.EvictionPolicy), EvictionPolicyNone)
	}
	return nil
}

// isServerPolicyRefusal reports whether err is a server-policy violation
// (checkServer's refusal of a primary), as opposed to a failure to read.
func isServerPolicyRefusal(err error) bool {
	return errors.Is(err, ErrReplica) || errors.Is(err, ErrEvictionPolicy) || errors.Is(err, ErrServerConfigUnreadable)
}

// atoiField is an INFO field as an int, 0 when absent or malformed.
func atoiField(text, name string) int {
	v, _ := redisinfo.Field(text, name)
	n, _ := strconv.Atoi(v)
	return n
}
