package redisrate

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// MaxAddrs bounds the seed or sentinel addresses of a topology client.
const MaxAddrs = 64

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

// validateAddrs reports malformed and duplicate host:port addresses, each
// error naming field[i].
func validateAddrs(field string, addrs []string) []error {
	var errs []error
	if len(addrs) == 0 || len(addrs) > MaxAddrs {
		return []error{fmt.Errorf("%w: %s: %d addresses, want 1..%d", ErrInvalidConfig, field, len(addrs), MaxAddrs)}
	}
	seen := map[string]int{}
	for i, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("%w: %s[%d] %q must be host:port with port 1..65535", ErrInvalidConfig, field, i, a))
			continue
		}
		if j, dup := seen[strings.ToLower(a)]; dup {
			errs = append(errs, fmt.Errorf("%w: %s[%d] %q duplicates %s[%d]", ErrInvalidConfig, field, i, a, field, j))
		}
		seen[strings.ToLower(a)] = i
	}
	return errs
}

// validateTopology checks cfg for a topology client: Addr must be empty
// (the addresses come from the topology), the rest as ClientConfig.Validate.
func validateTopology(cfg ClientConfig) error {
	if cfg.Addr != "" {
		return fmt.Errorf("%w: Addr %q must be empty with a topology (give the addresses as Addrs)", ErrInvalidConfig, cfg.Addr)
	}
	cfg.Addr = "topology:1" // validated separately
	return cfg.Validate()
}

// topologyTLS returns the dialer's TLS configuration for a client that
// dials several hosts: as tlsFor, but ServerName stays empty unless set, so
// that the dialer checks each host's certificate against its own name.
func topologyTLS(cfg ClientConfig) *tls.Config {
	if cfg.TLSConfig == nil {
		return nil
	}
	c := cfg.TLSConfig.Clone()
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	return c
}

// NewFailoverClient validates cfg and s and builds the Sentinel-mode
// coordination client: go-redis's FailoverClient, which asks the sentinels
// for the primary and drops its connections on +switch-master. Every option
// is fixed as NewClient fixes it (cfg.Addr must be empty); the sentinel
// connections share the dialer, timeouts and retry policy. It does no I/O.
// New accepts it: it is a *redis.Client.
func NewFailoverClient(cfg ClientConfig, s SentinelConfig) (*redis.Client, error) {
	errs := []error{validateTopology(cfg)}
	errs = append(errs, validateAddrs("Sentinel.Addrs", s.Addrs)...)
	if s.MasterName == "" || strings.ContainsAny(s.MasterName, " \t\r\n") {
		errs = append(errs, fmt.Errorf("%w: Sentinel.MasterName must be one non-empty word", ErrInvalidConfig))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	u := universalOptions(cfg, s.Addrs, topologyTLS(cfg))
	u.MasterName = s.MasterName
	u.SentinelUsername, u.SentinelPassword = s.Username, s.Password
	return redis.NewFailoverClient(u.Failover()), nil
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
	errs = append(errs, validateAddrs("Addrs", addrs)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	u := universalOptions(cfg, addrs, topologyTLS(cfg))
	o := u.Cluster()
	// Every node client is derived from the same options, at the node's
	// address (the dialer checks each host's certificate against its own
	// name).
	o.NewClient = func(no *redis.Options) *redis.Client {
		node := u.Simple()
		node.Addr = no.Addr
		return redis.NewClient(node)
	}
	o.DisableRoutingPolicies = true
	return redis.NewClusterClient(o), nil
}

// checkClusterOptions verifies a ClusterClient's options: no redirects or
// retries of its own, a NewClient hook, and node clients (probed through
// the hook, without I/O) that pass checkClientOptions.
func checkClusterOptions(o *redis.ClusterOptions, opts Options) error {
	var errs []error
	if o.MaxRedirects != 0 { // go-redis normalizes -1 to 0 and 0 to 3
		errs = append(errs, fmt.Errorf("%w: cluster client MaxRedirects allows %d redirects or retries: set -1 (a retry after a write could apply the program twice)", ErrInvalidConfig, o.MaxRedirects))
	}
	if o.ReadOnly || o.RouteByLatency || o.RouteRandomly {
		errs = append(errs, fmt.Errorf("%w: cluster client must route to primaries only (ReadOnly, RouteByLatency and RouteRandomly off)", ErrInvalidConfig))
	}
	if len(o.Addrs) == 0 {
		errs = append(errs, fmt.Errorf("%w: cluster client has no seed Addrs", ErrInvalidConfig))
	}
	if o.NewClient == nil {
		errs = append(errs, fmt.Errorf("%w: cluster client has no NewClient hook (build it with NewClusterClient)", ErrInvalidConfig))
	} else if len(o.Addrs) > 0 {
		probe := o.NewClient(&redis.Options{Addr: o.Addrs[0]})
		if err := checkClientOptions(probe.Options(), opts); err != nil {
			errs = append(errs, fmt.Errorf("cluster node client: %w", err))
		}
		_ = probe.Close()
	}
	return errors.Join(errs...)
}
