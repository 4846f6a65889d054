package config

import (
	"math"
	"net"
	"net/netip"
	"strings"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func (v *errs) web(w rawWeb, rl RateLimit) Web {
	const g = envWebGroup
	out := Web{Addr: w.Addr}
	if _, _, err := net.SplitHostPort(w.Addr); err != nil {
		v.add(g+"ADDR", ErrInvalid, "%q: want [host]:port: %w", bounded(w.Addr), err)
	}
	if w.AdminAddr != "" {
		out.AdminAddr = w.AdminAddr
		if _, _, err := net.SplitHostPort(w.AdminAddr); err != nil {
			v.add(g+"ADMIN_ADDR", ErrInvalid, "%q: want [host]:port: %w", bounded(w.AdminAddr), err)
		} else if w.AdminAddr == w.Addr {
			v.add(g+"ADMIN_ADDR", ErrConflict, "%q is also %sADDR: the admin listener needs its own address", bounded(w.AdminAddr), g)
		}
	}
	out.IPv6Prefix = v.between(g+"IPV6_PREFIX", w.IPv6Prefix, MinIPv6Prefix, 128)
	if rl.Enabled || !w.SubjectSecret.IsZero() || w.SubjectSecretFile != "" {
		out.SubjectSecret = v.keySecret(g+"SUBJECT_SECRET", w.SubjectSecret, w.SubjectSecretFile)
	}
	for _, s := range w.TrustedProxies {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := parsePrefix(s)
		if err != nil {
			v.add(g+"TRUSTED_PROXIES", ErrInvalid, "%q: want an IP or CIDR: %w", bounded(s), err)
			continue
		}
		if p.Bits() == 0 {
			// Every address would be a proxy: X-Forwarded-For and the
			// identity header forgeable by anyone.
			v.add(g+"TRUSTED_PROXIES", ErrInvalid, "%q trusts every address: list your proxies' own networks", bounded(s))
			continue
		}
		out.TrustedProxies = append(out.TrustedProxies, p)
	}
	if len(out.TrustedProxies) > MaxTrustedProxies {
		v.add(g+"TRUSTED_PROXIES", ErrInvalid, "%d entries, at most %d", len(out.TrustedProxies), MaxTrustedProxies)
	}
	switch {
	case w.EvaluationTimeout != nil:
		out.EvaluationTimeout = v.duration(g+"EVALUATION_TIMEOUT", *w.EvaluationTimeout, maxWebTimeout)
		out.EvaluationTimeoutSet = true
	case rl.Enabled && rl.CommandTimeout > 0:
		// Derived: room for the command plus as long again for admission
		// and the response, and one command timeout more for the retry of
		// a lost reply when a policy has a dedup window
		// (<= 3 * MaxRateLimitTimeout < maxWebTimeout).
		out.EvaluationTimeout = derivedEvaluationTimeout(rl.CommandTimeout, anyDedupWindow(rl.Policies.Policies))
	default:
		out.EvaluationTimeout = DefaultEvaluationTimeout
	}
	if rl.Enabled && rl.CommandTimeout > 0 && out.EvaluationTimeout > 0 && out.EvaluationTimeout <= rl.CommandTimeout {
		v.add(g+"EVALUATION_TIMEOUT", ErrInvalid, "%v must exceed %sCOMMAND_TIMEOUT (%v), or every evaluation fails its deadline precheck", out.EvaluationTimeout, envRateLimitGroup, rl.CommandTimeout)
	}
	out.LegacyRateLimitHeaders = w.LegacyRateLimit
	v.identity(w, &out)
	out.LocalLimit.Enabled = w.LocalLimitEnabled
	if w.LocalLimitEnabled {
		if math.IsNaN(w.LocalLimitRate) || math.IsInf(w.LocalLimitRate, 0) || w.LocalLimitRate <= 0 || w.LocalLimitRate > maxLocalRate {
			v.add(g+"LOCAL_LIMIT_RATE", ErrInvalid, "%v: want a finite rate in (0, %g] per second", w.LocalLimitRate, maxLocalRate)
		} else {
			out.LocalLimit.Rate = w.LocalLimitRate
		}
		out.LocalLimit.Burst = v.bound(g+"LOCAL_LIMIT_BURST", w.LocalLimitBurst, MaxLocalBurst)
		out.LocalLimit.MaxClients = v.bound(g+"LOCAL_LIMIT_MAX_CLIENTS", w.LocalLimitMax, MaxLocalClients)
		out.LocalLimit.IdleTTL = v.duration(g+"LOCAL_LIMIT_IDLE_TTL", w.LocalLimitIdleTTL, maxIdleTTL)
		// Dropping an idle client must never grant more than waiting would:
		// the idle TTL covers a full refill (Burst/Rate seconds).
		if l := out.LocalLimit; l.Rate > 0 && l.Burst > 0 && l.IdleTTL > 0 && l.IdleTTL.Seconds() < float64(l.Burst)/l.Rate {
			v.add(g+"LOCAL_LIMIT_IDLE_TTL", ErrInvalid, "%v is shorter than the bucket refill time %sLOCAL_LIMIT_BURST/%sLOCAL_LIMIT_RATE = %.3fs", l.IdleTTL, g, g, float64(l.Burst)/l.Rate)
		}
	}
	return out
}

// anyDedupWindow reports whether a policy has a dedup window.
func anyDedupWindow(policies []ratelimit.Policy) bool {
	for _, p := range policies {
		if p.DedupWindow() != 0 {
			return true
		}
	}
	return false
}

// parsePrefix reads an IP or CIDR, masked, IPv4-mapped forms unmapped
// (::ffff:0:0/96 is 0.0.0.0/0), without a zone.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
