package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Values of APP_RATE_LIMIT_REDIS_MODE.
const (
	ModeStandalone = "standalone"
	ModeSentinel   = "sentinel"
	ModeCluster    = "cluster"
	// maxTopologyAddrs bounds APP_RATE_LIMIT_REDIS_ADDRS.
	maxTopologyAddrs = 64
)

// Topology is the coordination Redis topology.
type Topology struct {
	// Mode is ModeStandalone (Redis.Addr), ModeSentinel or ModeCluster.
	Mode string
	// Addrs are the sentinels (sentinel) or the seed nodes (cluster).
	Addrs []string
	// MasterName is the name the sentinels monitor (sentinel only).
	MasterName string
	// SentinelUsername and SentinelPassword authenticate to the sentinels.
	SentinelUsername string
	SentinelPassword Secret
}

// String renders the topology without the sentinel password.
func (t Topology) String() string {
	switch t.Mode {
	case ModeSentinel:
		s := fmt.Sprintf("sentinel(%s@%s)", t.MasterName, strings.Join(t.Addrs, ","))
		if t.SentinelUsername != "" {
			s += " sentinel_user=" + t.SentinelUsername
		}
		if !t.SentinelPassword.IsZero() {
			s += " sentinel_password=" + Redacted
		}
		return s
	case ModeCluster:
		return "cluster(" + strings.Join(t.Addrs, ",") + ")"
	}
	return ModeStandalone
}

// topology validates the APP_RATE_LIMIT_REDIS_MODE family; addr is
// APP_RATE_LIMIT_REDIS_ADDR. The cache has the same family under APP_CACHE_. Each invalid combination is one error naming
// the variable at fault.
func (v *errs) topology(r rawTopology, addr string) Topology {
	return v.topologyIn(envRateLimitGroup, r, addr)
}

// topologyIn is topology for the variable group g (APP_RATE_LIMIT_ or
// APP_CACHE_).
func (v *errs) topologyIn(g string, r rawTopology, addr string) Topology {
	out := Topology{Mode: strings.TrimSpace(r.Mode), MasterName: r.MasterName, SentinelUsername: r.SentinelUsername}
	if out.Mode == "" {
		out.Mode = ModeStandalone
	}
	switch out.Mode {
	case ModeStandalone, ModeSentinel, ModeCluster:
	default:
		v.add(g+"REDIS_MODE", ErrInvalid, "%q: want %s, %s or %s", bounded(r.Mode), ModeStandalone, ModeSentinel, ModeCluster)
		return out
	}
	out.SentinelPassword, _ = v.secret(g+"SENTINEL_PASSWORD", r.SentinelPassword, r.SentinelPasswordFile)
	if out.Mode != ModeSentinel {
		if r.MasterName != "" {
			v.add(g+"REDIS_MASTER_NAME", ErrConflict, "set but %sREDIS_MODE is %s (only sentinel mode names a master)", g, out.Mode)
		}
		if r.SentinelUsername != "" {
			v.add(g+"SENTINEL_USERNAME", ErrConflict, "set but %sREDIS_MODE is %s", g, out.Mode)
		}
		if !out.SentinelPassword.IsZero() {
			v.add(g+"SENTINEL_PASSWORD", ErrConflict, "set but %sREDIS_MODE is %s", g, out.Mode)
		}
	}
	if out.Mode == ModeStandalone {
		if r.Addrs != "" {
			v.add(g+"REDIS_ADDRS", ErrConflict, "set but %sREDIS_MODE is standalone (use %sREDIS_ADDR, or set the mode to sentinel or cluster)", g, g)
		}
		return out
	}
	if addr != "" {
		v.add(g+"REDIS_ADDR", ErrConflict, "set but %sREDIS_MODE is %s (give the addresses as %sREDIS_ADDRS)", g, out.Mode, g)
	}
	if out.Mode == ModeSentinel {
		switch {
		case r.MasterName == "":
			v.add(g+"REDIS_MASTER_NAME", ErrRequired, "sentinel mode needs the name the sentinels monitor")
		case strings.ContainsAny(r.MasterName, " \t\r\n"):
			v.add(g+"REDIS_MASTER_NAME", ErrInvalid, "%q: one word, no spaces", bounded(r.MasterName))
		}
	}
	out.Addrs = v.addrList(g+"REDIS_ADDRS", r.Addrs, out.Mode)
	return out
}

// addrList parses a comma-separated list of distinct host:port addresses.
func (v *errs) addrList(name, list, mode string) []string {
	if strings.TrimSpace(list) == "" {
		v.add(name, ErrRequired, "%s mode needs the %s (comma-separated host:port)", mode, map[string]string{ModeSentinel: "sentinel addresses", ModeCluster: "seed node addresses"}[mode])
		return nil
	}
	parts := strings.Split(list, ",")
	if len(parts) > maxTopologyAddrs {
		v.add(name, ErrInvalid, "%d addresses, at most %d", len(parts), maxTopologyAddrs)
		return nil
	}
	seen := map[string]int{}
	var out []string
	for i, p := range parts {
		a := strings.TrimSpace(p)
		host, port, err := net.SplitHostPort(a)
		n, perr := strconv.Atoi(port)
		switch {
		case a == "":
			v.add(name, ErrInvalid, "element %d is empty", i+1)
			continue
		case err != nil || host == "" || perr != nil || n < 1 || n > 65535:
			v.add(name, ErrInvalid, "element %d %q: want host:port with port 1..65535", i+1, bounded(a))
			continue
		}
		if j, dup := seen[strings.ToLower(a)]; dup {
			v.add(name, ErrInvalid, "element %d %q duplicates element %d", i+1, bounded(a), j+1)
			continue
		}
		seen[strings.ToLower(a)] = i
		out = append(out, a)
	}
	return out
}

// redisFor validates the endpoint section for the topology: standalone as
// redis does; in sentinel and cluster mode the address comes from the
// topology, so only credentials and TLS are read (TLS checks each node's
// certificate against its own host name unless SERVER_NAME is set).
func (v *errs) redisFor(name string, r rawRedis, t Topology) Redis {
	if t.Mode == ModeStandalone || t.Mode == "" {
		return v.redis(name, r)
	}
	out := Redis{Username: r.Username}
	out.Password, _ = v.secret(name+"PASSWORD", r.Password, r.PasswordFile)
	out.TLS, out.tlsConfig = v.tls(name+"TLS_", r.TLS, "")
	return out
}

// replicationAcks validates APP_RATE_LIMIT_REPLICATION_ACKS (0..16, 0 off)
// and APP_RATE_LIMIT_REPLICATION_ACK_TIMEOUT (1ms..COMMAND_TIMEOUT/2, only
// with acks; COMMAND_TIMEOUT/2 when unset): the program and its WAIT share
// one read timeout.
func (v *errs) replicationAcks(acks int, timeout *time.Duration, command time.Duration) (int, time.Duration) {
	const g = envRateLimitGroup
	if acks < 0 || acks > MaxReplicationAcks {
		v.add(g+"REPLICATION_ACKS", ErrInvalid, "%d: want 0 (off) to %d", acks, MaxReplicationAcks)
		return 0, 0
	}
	if acks == 0 {
		if timeout != nil {
			v.add(g+"REPLICATION_ACK_TIMEOUT", ErrConflict, "set but %sREPLICATION_ACKS is 0", g)
		}
		return 0, 0
	}
	if timeout == nil {
		return acks, command / 2
	}
	if *timeout < time.Millisecond || *timeout > command/2 {
		v.add(g+"REPLICATION_ACK_TIMEOUT", ErrInvalid, "%v: want 1ms..%v (half of %sCOMMAND_TIMEOUT: the program and its WAIT share one read timeout)", *timeout, command/2, g)
		return acks, 0
	}
	return acks, *timeout
}
