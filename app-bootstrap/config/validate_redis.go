package config

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// redis validates one endpoint section; name is its prefix, e.g.
// "APP_RATE_LIMIT_REDIS_".
func (v *errs) redis(name string, r rawRedis) Redis {
	out := Redis{Addr: r.Addr, Username: r.Username}
	if r.Addr == "" {
		v.add(name+"ADDR", ErrRequired, "no redis address (host:port)")
	} else if _, port, err := net.SplitHostPort(r.Addr); err != nil || port == "" {
		v.add(name+"ADDR", ErrInvalid, "%q: want host:port", bounded(r.Addr))
	}
	out.Password, _ = v.secret(name+"PASSWORD", r.Password, r.PasswordFile)
	out.TLS, out.tlsConfig = v.tls(name+"TLS_", r.TLS, r.Addr)
	return out
}

// lookupFunc resolves a host name to addresses (net.Resolver.LookupHost).
type lookupFunc func(ctx context.Context, host string) ([]string, error)

// lookupTimeout bounds the name resolution of the dedicated-endpoint check.
const lookupTimeout = 2 * time.Second

// sameEndpoint reports whether two host:port addresses reach the same
// server: equal ports and hosts that resolve to a common address. IP
// literals are compared as addresses (IPv4-mapped IPv6 unmapped, zones
// dropped) and every loopback or unspecified address, and "localhost" or an
// empty host, count as the one local host (127.0.0.1:6390 and [::1]:6390
// are the same endpoint). Only other names are looked up, with lookup; a
// name that does not resolve is compared as a name.
func sameEndpoint(a, b string, lookup lookupFunc) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return strings.EqualFold(a, b)
	}
	if canonicalPort(pa) != canonicalPort(pb) {
		return false
	}
	ha, hb = strings.ToLower(strings.TrimSuffix(ha, ".")), strings.ToLower(strings.TrimSuffix(hb, "."))
	if ha == hb {
		return true
	}
	ea, eb := hostAddrs(ha, lookup), hostAddrs(hb, lookup)
	for _, x := range ea {
		for _, y := range eb {
			if x == y {
				return true
			}
		}
	}
	return false
}

// canonicalPort is a numeric port without leading zeros, or p itself.
func canonicalPort(p string) string {
	if n, err := strconv.ParseUint(p, 10, 16); err == nil {
		return strconv.FormatUint(n, 10)
	}
	return p
}

// localHost stands for every address that reaches this machine.
var localHost = netip.MustParseAddr("127.0.0.1")

// hostAddrs resolves a lower-case host to comparable addresses.
func hostAddrs(h string, lookup lookupFunc) []netip.Addr {
	if h == "" || h == "localhost" {
		return []netip.Addr{localHost}
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return []netip.Addr{canonicalAddr(a)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	names, err := lookup(ctx, h)
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(names))
	for _, n := range names {
		if a, err := netip.ParseAddr(n); err == nil {
			out = append(out, canonicalAddr(a))
		}
	}
	return out
}

func canonicalAddr(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.IsLoopback() || a.IsUnspecified() {
		return localHost
	}
	return a
}
