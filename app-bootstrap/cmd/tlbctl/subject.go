package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Subject kinds, as flags and messages name them.
const (
	kindAPIKey    = "api-key"
	kindPrincipal = "principal"
	kindIP        = "ip"
)

// principalHeader is the header tlbctl's TrustedHeader reads when the
// service has none configured (APP_WEB_IDENTITY is not trusted-header):
// the principal's identity does not depend on the header's name.
const principalHeader = "X-Authenticated-User"

// proxyPeer is the trusted proxy tlbctl's principal request comes from.
var proxyPeer = netip.MustParseAddr("127.0.0.1")

// target is one subject's state under one policy, as the operator named it.
type target struct {
	policy ratelimit.Policy
	kind   string // kindAPIKey, kindPrincipal or kindIP
	shown  string // the subject as printed on stdout: never the API key itself
	digest ratelimit.SubjectDigest
	key    string // the Redis key (holds no subject)
}

// subjectInput is what the operator named: one of the three.
type subjectInput struct {
	apiKeyFile string // "-": standard input
	principal  string
	ip         string
	kind       string
}

// runSubject runs inspect or reset. Every input is validated, and the
// audit log opened, before the first connection.
func runSubject(ctx context.Context, cmd string, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	policyID := fs.String("policy", "", "policy ID")
	var in subjectInput
	fs.StringVar(&in.apiKeyFile, "api-key-file", "", "file holding the client's API key (- for standard input)")
	fs.StringVar(&in.principal, "principal", "", "the trusted-header principal")
	fs.StringVar(&in.ip, "ip", "", "the client's IP address")
	useService := fs.Bool(flagUseServiceCredentials, false, "connect as the service's ACL user")
	yes, auditPath := false, ""
	if cmd == "reset" {
		fs.BoolVar(&yes, "yes", false, "really delete")
		fs.StringVar(&auditPath, "audit-log", "", "append the audit line to this file too")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var kinds []string
	for _, k := range []string{kindAPIKey + "-file", kindPrincipal, kindIP} {
		if set[k] {
			kinds = append(kinds, strings.TrimSuffix(k, "-file"))
		}
	}
	switch {
	case !set["policy"] || *policyID == "":
		return usagef("%s: --policy is required", cmd)
	case len(kinds) != 1:
		return usagef("%s: give exactly one of --api-key-file, --principal and --ip", cmd)
	case set["audit-log"] && auditPath == "":
		return usagef("%s: --audit-log: want a file name", cmd)
	}
	in.kind = kinds[0]
	cfg, err := loadConfig(environ)
	if err != nil {
		return err
	}
	tg, warnings, err := resolve(cfg, ratelimit.PolicyID(*policyID), in, stdin)
	if err != nil {
		return err
	}
	var audit io.Writer = stderr
	if yes && auditPath != "" {
		f, err := openAuditLog(auditPath)
		if err != nil {
			return err
		}
		defer f.Close()
		audit = io.MultiWriter(stderr, f)
	}
	client, user, err := connect(cfg, environ, *useService)
	if err != nil {
		return err
	}
	defer client.Close()
	for _, w := range warnings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", name, w)
	}
	where := endpoint(cfg.RateLimit)
	node, err := nodeFor(ctx, client, tg.key)
	if err != nil {
		return fmt.Errorf("%s as %s: %w", where, user, err)
	}
	st, err := read(ctx, node, tg)
	if err != nil {
		return fmt.Errorf("%s as %s: %w", where, user, err)
	}
	if cmd == "inspect" {
		printState(stdout, tg, st)
		return nil
	}
	if err := reset(ctx, node, auditInfo{user: user, endpoint: where}, tg, st, yes, stdout, audit); err != nil {
		return fmt.Errorf("%s as %s: %w", where, user, err)
	}
	return nil
}

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
		if known, err := subject.NewAPIKeys(cfg.Web.APIKeys); err == nil {
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

// nodeFor is the client that serves key: in cluster mode its slot's
// primary (so that TIME is that server's clock), otherwise c itself.
func nodeFor(ctx context.Context, c redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := c.(type) {
	case *redis.ClusterClient:
		n, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("primary of the key's slot: %w", err)
		}
		return n, nil
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("unexpected client %T", c)
}

// state is what Redis holds for a target.
type state struct {
	raw programs.State // the value GET returned; nil: no key
	ttl time.Duration  // < 0: no TTL (or no key)
	now time.Time      // server time
}

func read(ctx context.Context, c *redis.Client, tg target) (state, error) {
	var st state
	raw, err := c.Get(ctx, tg.key).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return st, fmt.Errorf("GET: %w", err)
	default:
		st.raw = programs.State(raw)
	}
	if st.ttl, err = c.PTTL(ctx, tg.key).Result(); err != nil {
		return st, fmt.Errorf("PTTL: %w", err)
	}
	if st.now, err = c.Time(ctx).Result(); err != nil {
		return st, fmt.Errorf("TIME: %w", err)
	}
	return st, nil
}

// printState prints the decoded state. Remaining and reset come from the
// reference model (programs.Evaluate) on the stored state at the server's
// time: what the program would answer now, without writing anything.
func printState(w io.Writer, tg target, st state) {
	p := tg.policy
	fmt.Fprintf(w, "policy      %s (revision %d, %s)\n", p.ID(), p.Revision(), p.Algorithm())
	fmt.Fprintf(w, "subject     %s %s\n", tg.kind, tg.shown)
	fmt.Fprintf(w, "key         %s\n", tg.key)
	if st.raw == nil {
		fmt.Fprintf(w, "state       absent (never limited, or expired): the full limit of %d is available\n", limitOf(p))
		return
	}
	fmt.Fprintf(w, "state       present\n")
	fields, err := st.raw.Decode()
	if err != nil {
		fmt.Fprintf(w, "stored      undecodable: %v\n", err)
	} else {
		fmt.Fprintf(w, "stored      algorithm=%s revision=%d schema=%d\n", algorithmName(fields[programs.FieldAlgorithm]), fields[programs.FieldRevision], fields[programs.FieldSchema])
	}
	// At the server's microsecond: GCRA decides on it (ADR 0021).
	r, _ := programs.EvaluateMicros(p, st.raw, st.now.UnixMicro(), 1)
	switch r.Status {
	case programs.StatusAllowed, programs.StatusDenied:
		remaining := r.Remaining
		if r.Status == programs.StatusAllowed {
			remaining++ // the probe took one unit
		}
		fmt.Fprintf(w, "remaining   %d of %d (consumed %d)\n", remaining, r.Limit, r.Limit-remaining)
		if r.Status == programs.StatusDenied {
			fmt.Fprintf(w, "retry after %v\n", time.Duration(r.RetryAfterMillis)*time.Millisecond)
		}
		reset := time.UnixMilli(r.ResetAtMillis).UTC()
		fmt.Fprintf(w, "reset at    %s (in %v)\n", reset.Format(time.RFC3339Nano), reset.Sub(st.now).Round(time.Millisecond))
	default:
		fmt.Fprintf(w, "decision    the program would answer status %d (%s): the stored state does not fit this policy revision\n", r.Status, statusName(r.Status))
	}
	if st.ttl >= 0 {
		fmt.Fprintf(w, "ttl         %v\n", st.ttl.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "ttl         none (every state key should have one)\n")
	}
	if err == nil {
		fmt.Fprintf(w, "fields      %s\n", formatFields(fields))
		if tat, ok := arrival(p, fields); ok {
			what := "GCRA theoretical arrival time"
			if p.Algorithm() == ratelimit.AlgorithmLeakyBucket {
				what = "the queue's last slot ends"
			}
			fmt.Fprintf(w, "arrival     %s (%s, to the µs)\n", tat.UTC().Format(time.RFC3339Nano), what)
		}
		printLog(w, st)
	}
	fmt.Fprintf(w, "value       %d bytes %s\n", len(st.raw), bounded(hex.EncodeToString(st.raw)))
}

// auditInfo is who changed what where, for the audit line.
type auditInfo struct{ user, endpoint string }

// reset deletes the target's state with --yes, and otherwise says what it
// would delete. The audit line of a deletion goes to audit (stderr, and
// the --audit-log file). After a deletion it publishes the key on the
// denial cache's channel (ratedenial.Publish).
func reset(ctx context.Context, c *redis.Client, who auditInfo, tg target, st state, yes bool, stdout, audit io.Writer) error {
	what := fmt.Sprintf("state of %s %s under policy %s: key %s", tg.kind, tg.shown, tg.policy.ID(), tg.key)
	if st.raw == nil {
		fmt.Fprintf(stdout, "nothing to reset: no %s\n", what)
		return nil
	}
	if !yes {
		fmt.Fprintf(stdout, "would delete the %s (ttl %v); run again with --yes to delete it\n", what, st.ttl.Round(time.Millisecond))
		return nil
	}
	n, err := c.Del(ctx, tg.key).Result()
	if err != nil {
		return fmt.Errorf("DEL: %w", err)
	}
	fmt.Fprintf(stdout, "deleted the %s\n", what)
	writeAudit(audit, who, tg, n)
	// Every instance's denial cache drops its entry for this state
	// (ADR 0022); without it, an instance that cached a denial of this
	// subject keeps denying until that denial's retry-after has passed.
	receivers, err := ratedenial.Publish(ctx, c, tg.key)
	if err != nil {
		return fmt.Errorf("the state is deleted, but the invalidation was not published (instances that cached a denial of this subject keep denying for at most its retry-after; the ACL user needs &%s +publish, docs/operations.md): %w", ratedenial.Channel, err)
	}
	fmt.Fprintf(stdout, "invalidation published on %s: %d subscribed instance connection(s) received it\n", ratedenial.Channel, receivers)
	return nil
}

// arrival is a GCRA or leaky-bucket state's theoretical arrival time,
// l*1000 + d/R µs (rounded down to the µs), when the state holds the
// fields of p's algorithm and p is a GCRA or leaky-bucket policy (its
// reduced rate R is the unit of d; for a queue, the last slot's end).
func arrival(p ratelimit.Policy, f map[string]int64) (time.Time, bool) {
	rate, _, _, ok := p.Emission()
	if !ok || f[programs.FieldAlgorithm] != int64(p.Algorithm()) {
		return time.Time{}, false
	}
	return time.UnixMicro(f[programs.FieldLastObserved]*1000 + f[programs.FieldArrival]/rate), true
}

// printLog prints a sliding log's entries (ADR 0024): how many, their
// sum, and the oldest and newest admission with when each leaves the
// window; nothing for another algorithm's state.
func printLog(w io.Writer, st state) {
	entries, err := st.raw.LogEntries()
	if err != nil || len(entries) == 0 {
		return
	}
	var sum int64
	for _, e := range entries {
		sum += e.Cost
	}
	fmt.Fprintf(w, "log         %d entries, cost %d (%d bytes each)\n", len(entries), sum, programs.LogEntryBytes)
	for _, e := range []struct {
		name  string
		entry programs.LogEntry
	}{{"oldest", entries[0]}, {"newest", entries[len(entries)-1]}} {
		at := time.UnixMilli(e.entry.AtMillis).UTC()
		fmt.Fprintf(w, "%-11s %s cost %d (%v ago)\n", e.name, at.Format(time.RFC3339Nano), e.entry.Cost, st.now.Sub(at).Round(time.Millisecond))
	}
}

func limitOf(p ratelimit.Policy) int64 {
	r, _ := programs.Evaluate(p, nil, 1, 1)
	return r.Limit
}

func algorithmName(a int64) string {
	if alg := ratelimit.Algorithm(a); int64(alg) == a && alg.Valid() {
		return alg.String()
	}
	return fmt.Sprintf("unknown(%d)", a)
}

func statusName(s programs.Status) string {
	switch s {
	case programs.StatusClockUnsafe:
		return "clock unsafe"
	case programs.StatusStateIncompatible:
		return "state incompatible"
	case programs.StatusInvalid:
		return "invalid"
	}
	return "unknown"
}

func formatFields(f map[string]int64) string {
	names := make([]string, 0, len(f))
	for k := range f {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, k+"="+strconv.FormatInt(f[k], 10))
	}
	return strings.Join(parts, " ")
}
