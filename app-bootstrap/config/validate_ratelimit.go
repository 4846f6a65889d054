package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// rateLimit validates the section; given, when not nil, is the policy set
// (LoadWith) and APP_RATE_LIMIT_POLICIES_FILE must be unset.
func (v *errs) rateLimit(r rawRateLimit, given *PolicySet) RateLimit {
	const g = envRateLimitGroup
	if !r.Enabled {
		return RateLimit{}
	}
	out := RateLimit{Enabled: true, AllowSharedRedis: r.AllowSharedRedis,
		AllowEviction: r.AllowEviction, SkipServerConfigCheck: r.SkipServerConfigCheck}
	switch r.Provider {
	case ProviderRedis:
	case "":
		v.add(g+"PROVIDER", ErrRequired, "set it to %q when %sENABLED=true", ProviderRedis, g)
	default:
		v.add(g+"PROVIDER", ErrUnsupported, "%q: the only provider is %q", bounded(r.Provider), ProviderRedis)
	}
	if r.Role != RoleCoordination {
		v.add(g+"ROLE", ErrUnsupported, "%q: the only role is %q", bounded(r.Role), RoleCoordination)
	}
	if r.FailurePolicy != FailClosedPolicy {
		v.add(g+"FAILURE_POLICY", ErrUnsupported, "%q: the limiter only fails closed (%q)", bounded(r.FailurePolicy), FailClosedPolicy)
	}
	out.Topology = v.topology(r.Topology, r.Redis.Addr)
	out.Redis = v.redisFor(g+"REDIS_", r.Redis, out.Topology)
	out.KeyPrefix = v.keyPrefix(g+"KEY_PREFIX", r.KeyPrefix)
	out.KeySecret = v.keySecret(g+"KEY_SECRET", r.KeySecret, r.KeySecretFile)
	out.CommandTimeout = v.duration(g+"COMMAND_TIMEOUT", r.CommandTimeout, MaxRateLimitTimeout)
	out.DialTimeout = v.duration(g+"DIAL_TIMEOUT", r.DialTimeout, MaxRateLimitTimeout)
	out.PoolTimeout = v.duration(g+"POOL_TIMEOUT", r.PoolTimeout, MaxRateLimitTimeout)
	out.PoolSize = v.bound(g+"POOL_SIZE", r.PoolSize, MaxRateLimitPool)
	if r.MaxInFlight == nil {
		// Derived: every pooled connection may carry one evaluation.
		out.MaxInFlight = out.PoolSize
	} else {
		out.MaxInFlight = v.bound(g+"MAX_IN_FLIGHT", *r.MaxInFlight, MaxRateLimitPool)
	}
	if out.PoolSize > 0 && out.MaxInFlight > out.PoolSize {
		v.add(g+"MAX_IN_FLIGHT", ErrInvalid, "%d exceeds %sPOOL_SIZE (%d): every admitted evaluation needs a connection", out.MaxInFlight, g, out.PoolSize)
	}
	out.PipelineMaxBatch = v.between(g+"PIPELINE_MAX_BATCH", r.PipelineMaxBatch, 1, MaxRateLimitPool)
	out.ReplicationAcks, out.ReplicationAckTimeout = v.replicationAcks(r.ReplicationAcks, r.ReplicationAckTimeout, out.CommandTimeout)
	v.notAbove(g+"DIAL_TIMEOUT", out.DialTimeout, g+"COMMAND_TIMEOUT", out.CommandTimeout)
	v.notAbove(g+"POOL_TIMEOUT", out.PoolTimeout, g+"COMMAND_TIMEOUT", out.CommandTimeout)
	out.BreakerThreshold = v.between(g+"BREAKER_THRESHOLD", r.BreakerThreshold, 0, MaxBreakerThreshold)
	if out.BreakerThreshold > 0 {
		if d := r.BreakerProbeInterval; d < MinProbeInterval || d > MaxProbeInterval {
			v.add(g+"BREAKER_PROBE_INTERVAL", ErrInvalid, "%v: want %v..%v", d, MinProbeInterval, MaxProbeInterval)
		} else {
			out.BreakerProbeInterval = d
		}
	}

	out.FallbackMaxSubjects = v.bound(g+"FALLBACK_MAX_SUBJECTS", r.FallbackMaxSubjects, MaxFallbackSubjects)
	if n := r.DenialCacheMaxEntries; n < 0 || n > ratelimit.MaxDenialCacheEntries {
		v.add(g+"DENIAL_CACHE_MAX_ENTRIES", ErrInvalid, "%d: want 0 (off) or 1..%d", n, ratelimit.MaxDenialCacheEntries)
	} else {
		out.DenialCacheMaxEntries = n
	}

	var set PolicySet
	var err error
	out.PoliciesSource = r.PoliciesFile
	switch {
	case given != nil && r.PoliciesFile != "":
		err = ErrConflict
		v.add(g+"POLICIES_FILE", ErrConflict, "policies are given; unset the policy file")
	case given != nil:
		set, out.PoliciesSource = *given, PoliciesGiven
	case r.PoliciesFile == "":
		// Enabling needs an exact policy definition (ADR 0004). The embedded
		// file (DefaultPoliciesJSON) is an example, never a silent default.
		err = ErrRequired
		v.add(g+"POLICIES_FILE", ErrRequired, "the Redis limiter needs a policy file (for example app-bootstrap/examples/policies.json) when %sENABLED=true", g)
	default:
		set, err = v.policyFile(r.PoliciesFile)
	}
	out.Policies = set
	v.policyRules(&out, r.BreakerThreshold == 0, r.DefaultPolicy, err)
	return out
}

// policyFile reads the policy file at path (APP_RATE_LIMIT_POLICIES_FILE),
// adding one error per problem, each naming the variable and the file.
func (v *errs) policyFile(path string) (PolicySet, error) {
	const name = envRateLimitGroup + "POLICIES_FILE"
	set, err := readPolicyFile(path)
	if err == nil {
		return set, nil
	}
	var pfe *PolicyFileError
	if errors.As(err, &pfe) {
		for _, e := range pfe.Problems {
			v.wrap(name, fmt.Errorf("%s: %w", path, e))
		}
	} else {
		v.wrap(name, fmt.Errorf("%s: %w", path, err))
	}
	return PolicySet{}, err
}

// policyRules checks what the rest of the section asks of out.Policies
// (read with error fileErr, already reported): a local-fallback policy
// needs the circuit breaker (breakerUnset: APP_RATE_LIMIT_BREAKER_THRESHOLD
// is 0 as given), and the default policy (APP_RATE_LIMIT_DEFAULT_POLICY,
// defaultPolicy) must be defined. Load and ReloadPolicies both run it.
func (v *errs) policyRules(out *RateLimit, breakerUnset bool, defaultPolicy string, fileErr error) {
	const g = envRateLimitGroup
	set := out.Policies
	if out.BreakerThreshold == 0 && breakerUnset {
		for _, p := range set.Policies {
			if p.FailurePolicy() == ratelimit.LocalFallback {
				// Without the breaker every request of a subject with
				// uncharged local admits would first wait out a charge
				// attempt against the unreachable server.
				v.add(g+"BREAKER_THRESHOLD", ErrInvalid, "0 turns the circuit breaker off, but policy %q is local-fallback, which needs it", p.ID())
				break
			}
		}
	}
	switch {
	case defaultPolicy == "":
		v.add(g+"DEFAULT_POLICY", ErrRequired, "name the policy for API routes no policy's routes match")
	case fileErr != nil:
		// The file is missing or already reported; the default cannot be
		// checked.
	default:
		id := ratelimit.PolicyID(defaultPolicy)
		switch p, ok := set.Policy(id); {
		case !ok:
			v.add(g+"DEFAULT_POLICY", ErrInvalid, "%q is not defined in %s (defined: %s)", bounded(defaultPolicy), out.PoliciesSource, strings.Join(set.IDs(), ", "))
		case p.Shadow():
			// A shadow default would leave every request no route matches
			// unlimited (ADR 0037).
			v.add(g+"DEFAULT_POLICY", ErrInvalid, "%q is a shadow policy (\"enforce\": \"shadow\"), which never refuses a request: requests no route matches would be unlimited; name an enforced policy", bounded(defaultPolicy))
		}
		out.DefaultPolicy = id
	}
}
