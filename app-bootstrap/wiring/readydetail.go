package wiring

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
)

// Reason categories of a dependency that is not ready: the "reason" of the
// /readyz detail (docs/operations.md has a runbook entry for each).
const (
	ReasonTimeout          = "timeout"
	ReasonAuth             = "auth"
	ReasonLoading          = "loading"
	ReasonServerVersion    = "server_version"
	ReasonScriptDigest     = "script_digest"
	ReasonReplica          = "replica"
	ReasonEvictionPolicy   = "eviction_policy"
	ReasonConfigUnreadable = "server_config_unreadable"
	ReasonCircuitOpen      = "circuit_open"
	ReasonClosed           = "closed"
	ReasonClusterSlots     = "cluster_slots"
)

// DependencyDetail is one dependency in the /readyz detail. It holds no
// address, credential or error text: only the reason's category and what
// the server reported about itself.
type DependencyDetail struct {
	Name     string          `json:"name"`
	Ready    bool            `json:"ready"`
	Reason   string          `json:"reason,omitempty"`
	Server   *ServerDetail   `json:"server,omitempty"`
	Breakers []BreakerDetail `json:"breakers,omitempty"`
}

// BreakerDetail is one target's circuit breaker: the target's index (never
// its address), its hash-slot ranges in cluster mode, and the state.
type BreakerDetail struct {
	Target string `json:"target"`
	Slots  string `json:"slots,omitempty"`
	State  string `json:"state"`
}

// ServerDetail is what the last server-policy check read.
type ServerDetail struct {
	Version           string `json:"version"`
	Role              string `json:"role"`
	ConnectedReplicas int    `json:"connected_replicas"`
	// ReplicaLagSeconds is the largest replica lag, -1 without replicas.
	ReplicaLagSeconds int `json:"replica_lag_seconds"`
	// EvictionPolicy is maxmemory-policy, "unknown" when CONFIG was not read.
	EvictionPolicy   string `json:"eviction_policy"`
	EvictionAccepted bool   `json:"eviction_accepted,omitempty"`
	// Persistence is "aof", "rdb", "aof+rdb" or "none".
	Persistence         string    `json:"persistence"`
	RDBChangesSinceSave int64     `json:"rdb_changes_since_last_save"`
	RDBLastSave         time.Time `json:"rdb_last_save"`
	CheckedAt           time.Time `json:"checked_at"`
}

// ReadyDetail implements the health adapter's DetailChecker: Ready with
// one DependencyDetail per check.
func (r readiness) ReadyDetail(ctx context.Context) (any, error) {
	deps := make([]DependencyDetail, 0, len(r))
	var errs []error
	for _, c := range r {
		err := c.Check(ctx)
		d := DependencyDetail{Name: c.Name, Ready: err == nil}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
			d.Reason = reasonOf(err)
		}
		if c.Server != nil {
			if s, ok := c.Server(); ok {
				d.Server = &s
			}
		}
		if c.Breakers != nil {
			d.Breakers = c.Breakers()
		}
		deps = append(deps, d)
	}
	return deps, errors.Join(errs...)
}

// reasonOf is the category of a readiness error.
func reasonOf(err error) string {
	var ce *ConnError
	switch {
	case errors.As(err, &ce):
		return ce.Reason
	case errors.Is(err, redisrate.ErrEvictionPolicy):
		return ReasonEvictionPolicy
	case errors.Is(err, redisrate.ErrServerConfigUnreadable):
		return ReasonConfigUnreadable
	case errors.Is(err, redisrate.ErrReplica):
		return ReasonReplica
	case errors.Is(err, redisrate.ErrServerVersion):
		return ReasonServerVersion
	case errors.Is(err, redisrate.ErrScriptDigest):
		return ReasonScriptDigest
	case errors.Is(err, errBreakerOpen):
		return ReasonCircuitOpen
	case errors.Is(err, redisrate.ErrClosed):
		return ReasonClosed
	case errors.Is(err, redisrate.ErrClusterSlotUnserved):
		return ReasonClusterSlots
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return ReasonTimeout
	}
	switch redisrate.ServerRefusalReason(err) {
	case "auth":
		return ReasonAuth
	case "loading":
		return ReasonLoading
	}
	return ReasonConnection
}

// serverDetail is the coordination server as last checked.
func (c *coordination) serverDetail() (ServerDetail, bool) {
	st, ok := c.provider.ServerStatus()
	if !ok {
		return ServerDetail{}, false
	}
	policy := st.EvictionPolicy
	if policy == "" {
		policy = "unknown"
	}
	d := ServerDetail{
		Version:             st.Version,
		Role:                st.Role,
		ConnectedReplicas:   st.ConnectedReplicas,
		ReplicaLagSeconds:   st.ReplicaLagSeconds,
		EvictionPolicy:      policy,
		EvictionAccepted:    st.EvictionAccepted,
		Persistence:         st.Persistence(),
		RDBChangesSinceSave: st.RDBChangesSinceSave,
		CheckedAt:           st.CheckedAt.UTC(),
	}
	if st.RDBLastSaveUnix > 0 {
		d.RDBLastSave = time.Unix(st.RDBLastSaveUnix, 0).UTC()
	}
	return d, true
}

// breakerDetail is the coordination provider's breakers, one per target.
func (c *coordination) breakerDetail() []BreakerDetail {
	var out []BreakerDetail
	for _, tb := range c.provider.BreakerTargets() {
		out = append(out, BreakerDetail{Target: tb.Target, Slots: tb.Slots, State: string(tb.State)})
	}
	return out
}
