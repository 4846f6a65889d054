package redisclient

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// MaxAddrs bounds the seed or sentinel addresses of a topology client.
const MaxAddrs = 64

// Sentinel names the primary and the sentinels that watch it.
type Sentinel struct {
	// MasterName is the name the sentinels monitor the primary under.
	MasterName string
	// Addrs are the sentinels' host:port addresses.
	Addrs []string
	// Username and Password authenticate to the sentinels (optional).
	Username string
	Password string
}

// NewClient builds the standalone client at addr. It does no I/O.
func (o Options) NewClient(addr string) *redis.Client {
	return redis.NewClient(o.Simple(addr))
}

// NewFailoverClient builds the Sentinel-mode client: go-redis's
// FailoverClient, which asks the sentinels for the primary and drops its
// connections on +switch-master. The sentinel connections share the dialer,
// timeouts and retry policy. It does no I/O.
func (o Options) NewFailoverClient(s Sentinel) *redis.Client {
	u := o.Universal(s.Addrs)
	u.MasterName = s.MasterName
	u.SentinelUsername, u.SentinelPassword = s.Username, s.Password
	return redis.NewFailoverClient(u.Failover())
}

// NewClusterClient builds the Cluster-mode client over the seed nodes:
// no redirects or retries of its own (MaxRedirects -1), no routing
// policies, and a NewClient hook that builds every node client from the
// same options at the node's address (Simple), so a node client — the
// ClusterClient's own or one a router makes through the hook — never has
// options of go-redis's choosing. It does no I/O.
func (o Options) NewClusterClient(seeds []string) *redis.ClusterClient {
	u := o.Universal(seeds)
	c := u.Cluster()
	c.NewClient = func(node *redis.Options) *redis.Client {
		return redis.NewClient(o.Simple(node.Addr))
	}
	c.DisableRoutingPolicies = true
	return redis.NewClusterClient(c)
}

// CheckAddrs reports malformed and duplicate host:port addresses of a
// topology (1..MaxAddrs), each error wrapping the profile's Invalid error and
// naming field[i].
func (p Profile) CheckAddrs(field string, addrs []string) []error {
	if len(addrs) == 0 || len(addrs) > MaxAddrs {
		return []error{fmt.Errorf("%w: %s: %d addresses, want 1..%d", p.invalid(), field, len(addrs), MaxAddrs)}
	}
	var errs []error
	seen := map[string]int{}
	for i, a := range addrs {
		if !ValidAddr(a) {
			errs = append(errs, fmt.Errorf("%w: %s[%d] %q must be host:port with port 1..65535", p.invalid(), field, i, a))
			continue
		}
		if j, dup := seen[strings.ToLower(a)]; dup {
			errs = append(errs, fmt.Errorf("%w: %s[%d] %q duplicates %s[%d]", p.invalid(), field, i, a, field, j))
		}
		seen[strings.ToLower(a)] = i
	}
	return errs
}

// CheckMasterName reports a Sentinel master name that is not one
// non-empty word, naming field.
func (p Profile) CheckMasterName(field, name string) error {
	if name == "" || strings.ContainsAny(name, " \t\r\n") {
		return fmt.Errorf("%w: %s must be one non-empty word", p.invalid(), field)
	}
	return nil
}

// ValidAddr reports whether a is host:port with a non-empty host and a port
// in 1..65535.
func ValidAddr(a string) bool {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

// invalid is the error the profile's checks wrap.
func (p Profile) invalid() error {
	if p.Invalid == nil {
		return ErrInvalid
	}
	return p.Invalid
}
