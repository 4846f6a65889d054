package metrics

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// Names of the coordination server's status metrics (RegisterServerStatus).
const (
	RedisRolePrimary            = "tlb_redis_role_primary"
	RedisConnectedReplicas      = "tlb_redis_connected_replicas"
	RedisReplicaLagSeconds      = "tlb_redis_replica_lag_seconds"
	RedisAOFEnabled             = "tlb_redis_aof_enabled"
	RedisRDBSaveConfigured      = "tlb_redis_rdb_save_configured"
	RedisRDBChangesSinceSave    = "tlb_redis_rdb_changes_since_last_save"
	RedisRDBLastSaveTimestamp   = "tlb_redis_rdb_last_save_timestamp_seconds"
	RedisEvictionPolicySafe     = "tlb_redis_eviction_policy_safe"
	RedisEvictionAcceptedMetric = "tlb_redis_eviction_accepted"
)

// ServerGauges is the coordination server's status as the metrics export
// it; the wiring fills it from the provider's last server-policy check.
type ServerGauges struct {
	Primary             bool
	ConnectedReplicas   int
	ReplicaLagSeconds   int // -1: no replica
	AOFEnabled          bool
	RDBSaveConfigured   bool
	RDBChangesSinceSave int64
	RDBLastSaveUnix     int64
	// EvictionPolicy is maxmemory-policy, "" when unknown.
	EvictionPolicy string
	// EvictionAccepted: a policy other than noeviction accepted by
	// APP_RATE_LIMIT_ALLOW_EVICTION.
	EvictionAccepted bool
}

// RegisterServerStatus exports the coordination server's status read at
// scrape time from status (false: nothing read yet, every gauge NaN). Call
// it once.
func (m *Metrics) RegisterServerStatus(status func() (ServerGauges, bool)) {
	gauge := func(name, help string, f func(ServerGauges) float64) {
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			s, ok := status()
			if !ok {
				return math.NaN()
			}
			return f(s)
		}))
	}
	gauge(RedisRolePrimary, "1 when the coordination endpoint reports role:master at the last check, 0 for a replica.", func(s ServerGauges) float64 { return b2f(s.Primary) })
	gauge(RedisConnectedReplicas, "Replicas connected to the coordination primary at the last check.", func(s ServerGauges) float64 { return float64(s.ConnectedReplicas) })
	gauge(RedisReplicaLagSeconds, "Largest replica lag in seconds the coordination primary reports (-1 without replicas): admits a failover could lose.", func(s ServerGauges) float64 { return float64(s.ReplicaLagSeconds) })
	gauge(RedisAOFEnabled, "1 when the coordination server has AOF enabled.", func(s ServerGauges) float64 { return b2f(s.AOFEnabled) })
	gauge(RedisRDBSaveConfigured, "1 when the coordination server has RDB save points (0 also when CONFIG was not read).", func(s ServerGauges) float64 { return b2f(s.RDBSaveConfigured) })
	gauge(RedisRDBChangesSinceSave, "Writes since the last RDB save: what a restart without AOF would lose.", func(s ServerGauges) float64 { return float64(s.RDBChangesSinceSave) })
	gauge(RedisRDBLastSaveTimestamp, "Unix time of the coordination server's last RDB save.", func(s ServerGauges) float64 { return float64(s.RDBLastSaveUnix) })
	gauge(RedisEvictionPolicySafe, "1 when maxmemory-policy is noeviction, 0 for any other policy, -1 when unknown (CONFIG not read).", func(s ServerGauges) float64 {
		switch s.EvictionPolicy {
		case "":
			return -1
		case "noeviction":
			return 1
		}
		return 0
	})
	gauge(RedisEvictionAcceptedMetric, "1 when an evicting maxmemory-policy is accepted by APP_RATE_LIMIT_ALLOW_EVICTION=true: live limiter state may be evicted and a limit silently reopened.", func(s ServerGauges) float64 { return b2f(s.EvictionAccepted) })
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
