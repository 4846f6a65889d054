package redisrate

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
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
	o := clientOptions(cfg)
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:       s.MasterName,
		SentinelAddrs:    append([]string(nil), s.Addrs...),
		SentinelUsername: s.Username,
		SentinelPassword: s.Password,

		ClientName: o.ClientName,
		Dialer:     newDialer(cfg.Dialer, cfg.DialTimeout, topologyTLS(cfg)),
		OnConnect:  o.OnConnect,
		Protocol:   o.Protocol,
		Username:   o.Username,
		Password:   o.Password,

		MaxRetries:      o.MaxRetries,
		MinRetryBackoff: o.MinRetryBackoff,
		MaxRetryBackoff: o.MaxRetryBackoff,

		DialTimeout:   o.DialTimeout,
		DialerRetries: o.DialerRetries,

		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,

		PoolSize:         o.PoolSize,
		PoolTimeout:      o.PoolTimeout,
		PipelinePoolSize: o.PipelinePoolSize,

		DisableIdentity: true,
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
	errs = append(errs, validateAddrs("Addrs", addrs)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	tlsConfig := topologyTLS(cfg)
	o := clientOptions(cfg)
	newNode := func(no *redis.Options) *redis.Client {
		node := clientOptions(cfg)
		node.Addr = no.Addr
		node.Dialer = newDialer(cfg.Dialer, cfg.DialTimeout, tlsConfig)
		return redis.NewClient(node)
	}
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:     append([]string(nil), addrs...),
		NewClient: newNode,

		ClientName: o.ClientName,
		Dialer:     newDialer(cfg.Dialer, cfg.DialTimeout, tlsConfig),
		OnConnect:  o.OnConnect,
		Protocol:   o.Protocol,
		Username:   o.Username,
		Password:   o.Password,

		MaxRedirects:    -1,
		MaxRetries:      o.MaxRetries,
		MinRetryBackoff: o.MinRetryBackoff,
		MaxRetryBackoff: o.MaxRetryBackoff,

		DialTimeout:   o.DialTimeout,
		DialerRetries: o.DialerRetries,

		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,

		PoolSize:         o.PoolSize,
		PoolTimeout:      o.PoolTimeout,
		PipelinePoolSize: o.PipelinePoolSize,

		DisableIdentity:          true,
		DisableRoutingPolicies:   true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}), nil
}
