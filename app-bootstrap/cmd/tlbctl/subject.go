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
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// target is one subject's state under one policy, as the operator named it.
type target struct {
	policy ratelimit.Policy
	kind   string // "api-key" or "ip"
	typed  string // what the operator typed; the only form of the subject printed
	key    string // the Redis key (holds no subject)
}

// runSubject runs inspect or reset.
func runSubject(ctx context.Context, cmd string, args, environ []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	policyID := fs.String("policy", "", "policy ID")
	apiKey := fs.String("api-key", "", "the client's API key")
	ip := fs.String("ip", "", "the client's IP address")
	yes := false
	if cmd == "reset" {
		fs.BoolVar(&yes, "yes", false, "really delete")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case !set["policy"] || *policyID == "":
		return usagef("%s: --policy is required", cmd)
	case set["api-key"] == set["ip"]:
		return usagef("%s: give exactly one of --api-key and --ip", cmd)
	}
	cfg, err := loadConfig(environ)
	if err != nil {
		return err
	}
	tg, err := resolve(cfg, ratelimit.PolicyID(*policyID), *apiKey, set["api-key"], *ip)
	if err != nil {
		return err
	}
	client, user, err := connect(cfg, environ)
	if err != nil {
		return err
	}
	defer client.Close()
	st, err := read(ctx, client, tg)
	if err != nil {
		return fmt.Errorf("%s as %s: %w", cfg.RateLimit.Redis.Addr, user, err)
	}
	if cmd == "inspect" {
		printState(stdout, tg, st)
		return nil
	}
	return reset(ctx, client, user, tg, st, yes, stdout, stderr)
}

// resolve validates the input and derives the key exactly as the service
// does: the identity through the service's identifiers (subject.APIKeys,
// subject.Resolver), its digest under APP_WEB_SUBJECT_SECRET
// (subject.Pseudonymizer), the key under APP_RATE_LIMIT_KEY_SECRET
// (redisrate.StateKey).
func resolve(cfg config.Config, id ratelimit.PolicyID, apiKey string, byKey bool, ip string) (target, error) {
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
		return target{}, usagef("--policy %q: unknown policy (the policy file %s defines: %s)", bounded(string(id)), cfg.RateLimit.PoliciesSource, strings.Join(ids, ", "))
	}
	req := &http.Request{Header: http.Header{}}
	var (
		ident subject.Identifier
		tg    = target{policy: pol}
	)
	if byKey {
		if strings.TrimSpace(apiKey) == "" || len(apiKey) > subject.MaxAPIKeyLen {
			return target{}, usagef("--api-key: want 1..%d bytes", subject.MaxAPIKeyLen)
		}
		keys, err := subject.NewAPIKeys([]subject.APIKeyDigest{subject.DigestAPIKey(strings.TrimSpace(apiKey))})
		if err != nil {
			return target{}, err
		}
		req.Header.Set(subject.APIKeyHeader, apiKey)
		ident, tg.kind, tg.typed = keys, "api-key", apiKey
	} else {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return target{}, usagef("--ip %q: not an IP address", bounded(ip))
		}
		// Masked as the service masks it (APP_WEB_IPV6_PREFIX): any address of
		// the client's network finds its key.
		res, err := subject.NewResolver(subject.Config{IPv6PrefixLen: cfg.Web.IPv6Prefix})
		if err != nil {
			return target{}, err
		}
		req.RemoteAddr = a.String()
		ident, tg.kind, tg.typed = res, "ip", ip
	}
	identity, err := ident.Identify(req)
	if err != nil {
		return target{}, usagef("--%s: %v", tg.kind, err)
	}
	pseudo, err := subject.NewPseudonymizer(cfg.Web.SubjectSecret)
	if err != nil {
		return target{}, usagef("%sWEB_SUBJECT_SECRET: %v", config.Prefix, err)
	}
	digest, err := pseudo.Digest(identity)
	if err != nil {
		return target{}, err
	}
	keys, err := keyspace.NewBuilder(cfg.RateLimit.KeyPrefix, cfg.RateLimit.KeySecret)
	if err != nil {
		return target{}, usagef("%sRATE_LIMIT_KEY_SECRET: %v", config.Prefix, err)
	}
	if tg.key, err = redisrate.StateKey(keys, pol, digest); err != nil {
		return target{}, err
	}
	return tg, nil
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
	fmt.Fprintf(w, "subject     %s %s\n", tg.kind, tg.typed)
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
	nowMs := st.now.UnixMilli()
	r, _ := programs.Evaluate(p, st.raw, nowMs, 1)
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
	}
	fmt.Fprintf(w, "value       %d bytes %s\n", len(st.raw), bounded(hex.EncodeToString(st.raw)))
}

// reset deletes the target's state with --yes, and otherwise says what it
// would delete.
func reset(ctx context.Context, c *redis.Client, user string, tg target, st state, yes bool, stdout, stderr io.Writer) error {
	what := fmt.Sprintf("state of %s %s under policy %s: key %s", tg.kind, tg.typed, tg.policy.ID(), tg.key)
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
	// The audit line names the policy and the key, never the subject.
	newLogger(stderr).Info("tlbctl reset", "policy", string(tg.policy.ID()), "subject_kind", tg.kind, "key", tg.key, "deleted", n, "redis_user", user)
	return nil
}

func limitOf(p ratelimit.Policy) int64 {
	r, _ := programs.Evaluate(p, nil, 1, 1)
	return r.Limit
}

func algorithmName(a int64) string {
	for _, alg := range []ratelimit.Algorithm{ratelimit.AlgorithmFixedWindow, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.AlgorithmTokenBucket} {
		if int64(alg) == a {
			return alg.String()
		}
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
