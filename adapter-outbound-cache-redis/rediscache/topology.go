package rediscache

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// validateTopology checks cfg for a client of several servers: Addr must be
// empty (the addresses come from addrs, distinct host:port), the rest as
// Config.Validate.
func validateTopology(cfg Config, field string, addrs []string) error {
	var errs []error
	if cfg.Addr != "" {
		errs = append(errs, fmt.Errorf("%w: addr %q must be empty with a topology (give the addresses as %s)", ErrInvalidConfig, cfg.Addr, field))
	}
	cfg.Addr = "topology:1" // checked below
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(addrs) == 0 {
		errs = append(errs, fmt.Errorf("%w: %s: no address", ErrInvalidConfig, field))
	}
	seen := map[string]bool{}
	for i, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		p, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("%w: %s[%d] %q must be host:port", ErrInvalidConfig, field, i, a))
		} else if seen[strings.ToLower(a)] {
			errs = append(errs, fmt.Errorf("%w: %s[%d] %q is a duplicate", ErrInvalidConfig, field, i, a))
		}
		seen[strings.ToLower(a)] = true
	}
	return errors.Join(errs...)
}

// NewFailoverClient builds the cache client in Sentinel mode: go-redis's
// failover client for masterName, found through the sentinels at addrs
// (sentinelUsername and sentinelPassword authenticate to them), with every
// option NewClient fixes (no retries, one dial, the caller's deadline
// honoured). cfg.Addr must be empty. The caller owns the client.
func NewFailoverClient(cfg Config, masterName string, addrs []string, sentinelUsername, sentinelPassword string) (*redis.Client, error) {
	err := validateTopology(cfg, "sentinel addrs", addrs)
	if masterName == "" || strings.ContainsAny(masterName, " \t\r\n") {
		err = errors.Join(err, fmt.Errorf("%w: master name must be one non-empty word", ErrInvalidConfig))
	}
	if err != nil {
		return nil, err
	}
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            masterName,
		SentinelAddrs:         append([]string(nil), addrs...),
		SentinelUsername:      sentinelUsername,
		SentinelPassword:      sentinelPassword,
		ClientName:            ClientName,
		Protocol:              3,
		Username:              cfg.Username,
		Password:              cfg.Password,
		DB:                    cfg.DB,
		MaxRetries:            -1,
		DialTimeout:           cfg.DialTimeout,
		DialerRetries:         1,
		ReadTimeout:           cfg.CommandTimeout,
		WriteTimeout:          cfg.CommandTimeout,
		ContextTimeoutEnabled: true,
		PoolSize:              cfg.PoolSize,
		MaxActiveConns:        cfg.PoolSize,
		PoolTimeout:           cfg.PoolTimeout,
		PipelinePoolSize:      -1,
		TLSConfig:             cfg.TLSConfig.Clone(),
		DisableIdentity:       true,
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
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                  append([]string(nil), addrs...),
		ClientName:             ClientName,
		Protocol:               3,
		Username:               cfg.Username,
		Password:               cfg.Password,
		MaxRedirects:           -1,
		MaxRetries:             -1,
		DialTimeout:            cfg.DialTimeout,
		DialerRetries:          1,
		ReadTimeout:            cfg.CommandTimeout,
		WriteTimeout:           cfg.CommandTimeout,
		ContextTimeoutEnabled:  true,
		PoolSize:               cfg.PoolSize,
		MaxActiveConns:         cfg.PoolSize,
		PoolTimeout:            cfg.PoolTimeout,
		PipelinePoolSize:       -1,
		TLSConfig:              cfg.TLSConfig.Clone(),
		DisableIdentity:        true,
		DisableRoutingPolicies: true,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	}), nil
}
