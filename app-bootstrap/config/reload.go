package config

import "errors"

// ErrNoPolicyFile: ReloadPolicies was asked to reload a configuration
// whose policies do not come from APP_RATE_LIMIT_POLICIES_FILE (the
// limiter is off, or the policies were given to LoadWith).
var ErrNoPolicyFile = errors.New("no policy file to reload")

// ReloadPolicies reads cfg's policy file (APP_RATE_LIMIT_POLICIES_FILE,
// RateLimit.PoliciesSource) again and checks it with Load's own checks:
// the file strictly (ParsePolicies: every policy, its routes and the route
// table), a local-fallback policy against the circuit breaker, the default
// policy (APP_RATE_LIMIT_DEFAULT_POLICY) defined, and the derived
// evaluation timeout (when APP_WEB_EVALUATION_TIMEOUT is unset) against the
// command timeout. It returns cfg with RateLimit.Policies and
// Web.EvaluationTimeout replaced; every other value is cfg's (the
// environment is not read again). The error lists every problem as Load's
// does (VarErrors), each naming the variable, the file and the policy or
// field at fault; it does not compare the new policies with cfg's (the
// caller refuses a changed policy without a new revision).
func ReloadPolicies(cfg Config) (Config, error) {
	rl := cfg.RateLimit
	if !rl.Enabled || rl.PoliciesSource == "" || rl.PoliciesSource == PoliciesGiven {
		return Config{}, ErrNoPolicyFile
	}
	v := &errs{}
	set, err := v.policyFile(rl.PoliciesSource)
	if err != nil {
		return Config{}, v.err()
	}
	out := rl
	out.Policies = set
	v.policyRules(&out, rl.BreakerThreshold == 0, string(rl.DefaultPolicy), nil)
	web := cfg.Web
	if !web.EvaluationTimeoutSet && rl.CommandTimeout > 0 {
		web.EvaluationTimeout = derivedEvaluationTimeout(rl.CommandTimeout, anyDedupWindow(set.Policies))
	}
	if err := v.err(); err != nil {
		return Config{}, err
	}
	next := cfg
	next.RateLimit, next.Web = out, web
	return next, nil
}
