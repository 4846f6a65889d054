package rediscache

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/redisclient"
)

// validateTopology checks cfg for a client of several servers: Addr must be
// empty (the addresses come from addrs, distinct host:port, named field),
// the rest as Config.Validate.
func validateTopology(cfg Config, field string, addrs []string) error {
	var errs []error
	if cfg.Addr != "" {
		errs = append(errs, fmt.Errorf("%w: addr %q must be empty with a topology (give the addresses as %s)", ErrInvalidConfig, cfg.Addr, field))
	}
	cfg.Addr = "topology:1" // checked below
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, profile.CheckAddrs(field, addrs)...)
	return errors.Join(errs...)
}

// NewFailoverClient builds the cache client in Sentinel mode: go-redis's
// failover client for masterName, found through the sentinels at addrs
// (sentinelUsername and sentinelPassword authenticate to them), with every
// option NewClient fixes (no retries, one dial, the caller's deadline
// honoured). cfg.Addr must be empty. The caller owns the client.
func NewFailoverClient(cfg Config, masterName string, addrs []string, sentinelUsername, sentinelPassword string) (*redis.Client, error) {
	err := errors.Join(validateTopology(cfg, "sentinel addrs", addrs), profile.CheckMasterName("master name", masterName))
	if err != nil {
		return nil, err
	}
	return clientOptions(cfg).NewFailoverClient(redisclient.Sentinel{
		MasterName: masterName, Addrs: addrs, Username: sentinelUsername, Password: sentinelPassword,
	}), nil
}

// NewClusterClient builds the cache client in Cluster mode over the seed
// nodes addrs, with NewClient's options per node and no redirects or
// retries (MaxRedirects -1): SetIfAbsent and CompareAndReplace are not
// idempotent, and go-redis re-sends after EOF and timeouts in the same loop
// that follows redirects. A MOVED or ASK reply is therefore an error (a
// miss through FailOpen) while go-redis reloads its slot map in the
// background. Every cache operation touches one key. cfg.Addr must be empty
// and cfg.DB 0 (a cluster has one database). The caller owns the client.
func NewClusterClient(cfg Config, addrs []string) (*redis.ClusterClient, error) {
	err := validateTopology(cfg, "cluster addrs", addrs)
	if cfg.DB != 0 {
		err = errors.Join(err, fmt.Errorf("%w: db %d: a cluster has database 0 only", ErrInvalidConfig, cfg.DB))
	}
	if err != nil {
		return nil, err
	}
	return clientOptions(cfg).NewClusterClient(addrs), nil
}
