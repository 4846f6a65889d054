package wiring

import (
	"errors"
	"fmt"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
)

// The variables of the server-policy checks, named in their errors.
const (
	envAllowEviction = config.Prefix + "RATE_LIMIT_ALLOW_EVICTION"
	envSkipConfig    = config.Prefix + "RATE_LIMIT_SKIP_SERVER_CONFIG_CHECK"
)

// explainServerPolicy adds to a server-policy error the setting that
// fixes or accepts it; other errors pass unchanged.
func explainServerPolicy(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redisrate.ErrEvictionPolicy):
		return fmt.Errorf("%w; set maxmemory-policy noeviction on the server, or accept the risk with %s=true", err, envAllowEviction)
	case errors.Is(err, redisrate.ErrServerConfigUnreadable):
		return fmt.Errorf("%w; grant +config|get, or start without the eviction check with %s=true", err, envSkipConfig)
	case errors.Is(err, redisrate.ErrReplica):
		return fmt.Errorf("%w; point %sRATE_LIMIT_REDIS_ADDR at the primary", err, config.Prefix)
	}
	return err
}

// warnServerPolicy logs what the operator accepted: an evicting policy
// (APP_RATE_LIMIT_ALLOW_EVICTION) or an unchecked one
// (APP_RATE_LIMIT_SKIP_SERVER_CONFIG_CHECK).
func (c *coordination) warnServerPolicy() {
	st, ok := c.provider.ServerStatus()
	if !ok {
		return
	}
	if st.EvictionAccepted {
		c.log.Warn("coordination redis may evict live limiter state: accepted by "+envAllowEviction+"=true; an evicted key silently reopens its limit",
			"maxmemory_policy", st.EvictionPolicy, "metric", metrics.RedisEvictionAcceptedMetric)
	}
	if st.EvictionPolicy == "" {
		c.log.Warn("coordination redis eviction policy not checked: " + envSkipConfig + "=true")
	}
	if st.Persistence() == "none" {
		c.log.Info("coordination redis has no persistence: a restart loses all limiter state (every subject starts with a full limit)")
	}
}

// serverGauges is the provider's last server status for the metrics.
func (c *coordination) serverGauges() (metrics.ServerGauges, bool) {
	st, ok := c.provider.ServerStatus()
	if !ok {
		return metrics.ServerGauges{}, false
	}
	return metrics.ServerGauges{
		Primary:             st.Role == "master",
		ConnectedReplicas:   st.ConnectedReplicas,
		ReplicaLagSeconds:   st.ReplicaLagSeconds,
		AOFEnabled:          st.AOFEnabled,
		RDBSaveConfigured:   st.RDBSaveConfigured,
		RDBChangesSinceSave: st.RDBChangesSinceSave,
		RDBLastSaveUnix:     st.RDBLastSaveUnix,
		EvictionPolicy:      st.EvictionPolicy,
		EvictionAccepted:    st.EvictionAccepted,
	}, true
}
