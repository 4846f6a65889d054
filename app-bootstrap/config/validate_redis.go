package config

import (
	"net"
	"net/netip"
	"strings"
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

// sameEndpoint reports whether two host:port addresses name the same server
// as far as configuration can tell: equal ports and equal hosts, with
// "localhost" standing for the loopback address.
func sameEndpoint(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return strings.EqualFold(a, b)
	}
	return pa == pb && canonicalHost(ha) == canonicalHost(hb)
}

func canonicalHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	switch h {
	case "", "localhost":
		return "127.0.0.1"
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().String()
	}
	return h
}
