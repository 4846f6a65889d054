package redisrate

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/redisclient"
)

// MaxAddrs bounds the seed or sentinel addresses of a topology client.
const MaxAddrs = redisclient.MaxAddrs

// SentinelConfig names the primary and the sentinels that watch it.
type SentinelConfig struct {
	// MasterName is the name the sentinels monitor the primary under.
	MasterName string
	// Addrs are the sentinels' host:port addresses (1..MaxAddrs, distinct).
	Addrs []string
	// Username and Password authenticate to the sentinels (optional; never
	// printed).
	Username string
	Password string
}

// String implements fmt.Stringer with the password redacted.
func (s SentinelConfig) String() string {
	pw := ""
	if s.Password != "" {
		pw = redacted
	}
	return fmt.Sprintf("redisrate.SentinelConfig{MasterName:%q Addrs:%q Username:%q Password:%q}", s.MasterName, s.Addrs, s.Username, pw)
}

// GoString implements fmt.GoStringer with the password redacted.
func (s SentinelConfig) GoString() string { return s.String() }

// validateTopology checks cfg for a topology client: Addr must be empty
// (the addresses come from the topology), the rest as ClientConfig.Validate.
func validateTopology(cfg ClientConfig) error {
	if cfg.Addr != "" {
		return fmt.Errorf("%w: Addr %q must be empty with a topology (give the addresses as Addrs)", ErrInvalidConfig, cfg.Addr)
	}
	cfg.Addr = "topology:1" // validated separately
	return cfg.Validate()
}

// NewFailoverClient validates cfg and s and builds the Sentinel-mode
// coordination client: go-redis's FailoverClient, which asks the sentinels
// for the primary and drops its connections on +switch-master. Every option
// is fixed as NewClient fixes it (cfg.Addr must be empty); the sentinel
// connections share the dialer, timeouts and retry policy. It does no I/O.
// New accepts it: it is a *redis.Client.
func NewFailoverClient(cfg ClientConfig, s SentinelConfig) (*redis.Client, error) {
	errs := []error{validateTopology(cfg)}
	errs = append(errs, profile.CheckAddrs("Sentinel.Addrs", s.Addrs)...)
	errs = append(errs, profile.CheckMasterName("Sentinel.MasterName", s.MasterName))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return clientOptions(cfg).NewFailoverClient(redisclient.Sentinel{
		MasterName: s.MasterName, Addrs: s.Addrs, Username: s.Username, Password: s.Password,
	}), nil
}

// NewClusterClient validates cfg and addrs (seed nodes) and builds the
// Cluster-mode coordination client: a go-redis ClusterClient that never
// redirects or retries by itself (MaxRedirects -1) and whose every node
// client is built with NewClient's fixed options (cfg.Addr must be empty).
// The Provider routes program calls itself over those node clients
// (docs/failure-certainty.md, "Cluster"); the ClusterClient's own routing
// serves nothing of the provider. It does no I/O.
func NewClusterClient(cfg ClientConfig, addrs []string) (*redis.ClusterClient, error) {
	errs := []error{validateTopology(cfg)}
	errs = append(errs, profile.CheckAddrs("Addrs", addrs)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return clientOptions(cfg).NewClusterClient(addrs), nil
}

// checkClusterOptions verifies a ClusterClient's options: no redirects or
// retries of its own, a NewClient hook, and node clients (probed through
// the hook, without I/O) that pass checkClientOptions.
func checkClusterOptions(o *redis.ClusterOptions, opts Options) error {
	return profile.CheckCluster(o, limits(opts))
}
