package redisclient

import (
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

// invalid is the error the profile's checks wrap.
func (p Profile) invalid() error {
	if p.Invalid == nil {
		return ErrInvalid
	}
	return p.Invalid
}
