package main

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sort"
	"strings"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/wiring"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// resolve validates the input and derives the key exactly as the service
// does: the identity through the service's identifiers (subject.APIKeys,
// subject.TrustedHeader, subject.Resolver with APP_WEB_IPV6_PREFIX), its
// digest under APP_WEB_SUBJECT_SECRET (subject.Pseudonymizer), the key
// under APP_RATE_LIMIT_KEY_SECRET (redisrate.StateKey). The warnings say
// where the service, as configured, keeps no state for this subject.
func resolve(cfg config.Config, id ratelimit.PolicyID, in subjectInput, stdin io.Reader) (target, []string, error) {
	var pol ratelimit.Policy
	var ids []string
	for _, p := range cfg.RateLimit.Policies.Policies {
		ids = append(ids, string(p.ID()))
		if p.ID() == id {
			pol = p
		}
	}
	if pol.IsZero() {
		sort.Strings(ids)
		return target{}, nil, usagef("--policy %q: unknown policy (the policy file %s defines: %s)", bounded(string(id)), cfg.RateLimit.PoliciesSource, strings.Join(ids, ", "))
	}
	tg := target{policy: pol, kind: in.kind}
	var (
		identity subject.Identity
		warnings []string
		err      error
	)
	switch in.kind {
	case kindAPIKey:
		identity, tg.shown, warnings, err = apiKeyIdentity(cfg, in.apiKeyFile, stdin)
	case kindPrincipal:
		identity, err = principalIdentity(cfg, in.principal)
		tg.shown = in.principal
	default:
		identity, err = ipIdentity(cfg, in.ip)
		tg.shown = in.ip
	}
	if err != nil {
		return target{}, nil, err
	}
	if w := modeMismatch(cfg.Web.Identity, in.kind); w != "" {
		warnings = append([]string{w}, warnings...)
	}
	pseudo, err := subject.NewPseudonymizer(cfg.Web.SubjectSecret)
	if err != nil {
		return target{}, nil, usagef("%sWEB_SUBJECT_SECRET: %v", config.Prefix, err)
	}
	if tg.digest, err = pseudo.Digest(identity); err != nil {
		return target{}, nil, err
	}
	keys, err := keyspace.NewBuilder(cfg.RateLimit.KeyPrefix, cfg.RateLimit.KeySecret)
	if err != nil {
		return target{}, nil, usagef("%sRATE_LIMIT_KEY_SECRET: %v", config.Prefix, err)
	}
	if tg.key, err = redisrate.StateKey(keys, pol, tg.digest); err != nil {
		return target{}, nil, err
	}
	return tg, warnings, nil
}

// apiKeyIdentity reads the API key from path ("-": stdin) with the
// service's secret reader and identifies it with subject.APIKeys, as the
// edge identifies an X-API-Key. It returns how to show the key: its
// SHA-256, the line of APP_WEB_API_KEYS_FILE, never the key.
func apiKeyIdentity(cfg config.Config, path string, stdin io.Reader) (subject.Identity, string, []string, error) {
	var (
		key config.Secret
		err error
	)
	if path == "-" {
		key, err = config.ReadSecret(stdin, "standard input")
	} else {
		key, err = config.ReadSecretFile(path)
	}
	if err != nil {
		return subject.Identity{}, "", nil, usagef("--api-key-file: %v", err)
	}
	raw := strings.TrimSpace(key.Reveal()) // the edge trims the header value
	if raw == "" || len(raw) > subject.MaxAPIKeyLen {
		return subject.Identity{}, "", nil, usagef("--api-key-file: the key is %d bytes after trimming spaces, want 1..%d", len(raw), subject.MaxAPIKeyLen)
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c < 0x20 || c == 0x7f {
			return subject.Identity{}, "", nil, usagef("--api-key-file: byte %d of the key is a control character, which no X-API-Key header carries", i)
		}
	}
	digest := subject.DigestAPIKey(raw)
	req := &http.Request{Header: http.Header{}}
	req.Header.Set(subject.APIKeyHeader, raw)
	keys, err := subject.NewAPIKeys([]subject.APIKeyDigest{digest})
	if err != nil {
		return subject.Identity{}, "", nil, err
	}
	identity, err := keys.Identify(req)
	if err != nil {
		return subject.Identity{}, "", nil, usagef("--api-key-file: %v", err)
	}
	var warnings []string
	if cfg.Web.Identity == config.IdentityAPIKey {
		digests, err := wiring.CheckIdentity(cfg.Web)
		if err != nil {
			return subject.Identity{}, "", nil, err
		}
		if known, err := subject.NewAPIKeys(digests); err == nil {
			if _, err := known.Identify(req); err != nil {
				warnings = append(warnings, fmt.Sprintf("the key (SHA-256 %s) is not in %sWEB_API_KEYS_FILE: the service answers it 401 and keeps no state for it", digest, config.Prefix))
			}
		}
	}
	return identity, "sha256 " + digest.String(), warnings, nil
}

// principalIdentity identifies name as the edge identifies the principal
// an authenticating proxy sets: through subject.TrustedHeader, on a
// request from a trusted proxy carrying the header. A blank name, which
// the edge would take as "no principal" (the client IP), is refused.
func principalIdentity(cfg config.Config, name string) (subject.Identity, error) {
	if strings.TrimSpace(name) == "" {
		return subject.Identity{}, usagef("--principal: empty (the service identifies a request without a principal by its IP: use --ip)")
	}
	header := cfg.Web.IdentityHeader
	if header == "" {
		header = principalHeader
	}
	ips, err := subject.NewResolver(subject.Config{TrustedProxies: []netip.Prefix{netip.PrefixFrom(proxyPeer, proxyPeer.BitLen())}})
	if err != nil {
		return subject.Identity{}, err
	}
	th, err := subject.NewTrustedHeader(header, ips)
	if err != nil {
		return subject.Identity{}, err
	}
	req := &http.Request{Header: http.Header{}, RemoteAddr: netip.AddrPortFrom(proxyPeer, 1).String()}
	req.Header.Set(th.Header(), name)
	identity, err := th.Identify(req)
	if err != nil {
		return subject.Identity{}, usagef("--principal: %v", err)
	}
	if identity.Kind() != subject.KindPrincipal {
		return subject.Identity{}, usagef("--principal: not identified as a principal")
	}
	return identity, nil
}

// ipIdentity identifies a client address with the service's Resolver,
// masked as the service masks it (APP_WEB_IPV6_PREFIX): any address of the
// client's network finds its key.
func ipIdentity(cfg config.Config, ip string) (subject.Identity, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return subject.Identity{}, usagef("--ip %q: not an IP address", bounded(ip))
	}
	res, err := subject.NewResolver(subject.Config{IPv6PrefixLen: cfg.Web.IPv6Prefix})
	if err != nil {
		return subject.Identity{}, err
	}
	identity, err := res.Identify(&http.Request{Header: http.Header{}, RemoteAddr: a.String()})
	if err != nil {
		return subject.Identity{}, usagef("--ip: %v", err)
	}
	return identity, nil
}

// modeMismatch is the warning when the service's identity mode
// (APP_WEB_IDENTITY) never identifies a client as kind, "" otherwise. In
// trusted-header mode a request without the header is its client IP, so
// --ip matches that mode too.
func modeMismatch(mode config.IdentityMode, kind string) string {
	var ok bool
	switch kind {
	case kindAPIKey:
		ok = mode == config.IdentityAPIKey
	case kindPrincipal:
		ok = mode == config.IdentityTrustedHeader
	default:
		ok = mode == config.IdentityIP || mode == config.IdentityTrustedHeader
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("%sWEB_IDENTITY is %s: the service never identifies a client by its %s, so it keeps no state under this key", config.Prefix, mode, map[string]string{kindAPIKey: "API key", kindPrincipal: "trusted-header principal", kindIP: "IP address"}[kind])
}
