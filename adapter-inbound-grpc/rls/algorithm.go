package rls

import (
	"fmt"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// algorithmSpec is the algorithm part of a rule's policy with an
// `algorithm:` extension: rlsconfig has already made its Params (one home
// for what varies by algorithm), so only MaxCost is decided here: the
// policy's limit (window limit, capacity or burst), so that any cost a
// full budget could take is accepted. An algorithm that delays (the leaky
// bucket, AlgorithmSpec.Delays) is refused: it admits with a delay the
// caller must wait, and Envoy's filter cannot wait.
func algorithmSpec(a *rlsconfig.Algorithm) (ratelimit.PolicySpec, error) {
	if a.Params == nil {
		return ratelimit.PolicySpec{}, fmt.Errorf("algorithm %q: %w: no parameters", a.Name, ErrUnsupportedRule)
	}
	alg := a.Params.Algorithm()
	if spec, _ := alg.Spec(); spec.Delays {
		return ratelimit.PolicySpec{}, fmt.Errorf("algorithm %v: %w: it delays requests, which Envoy cannot do", alg, ErrUnsupportedRule)
	}
	// The limit is the policy's; a probe with MaxCost 1 reads it.
	probe, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: "probe", Revision: 1, Algorithm: alg, Params: a.Params, MaxCost: 1,
		CleanupGrace: RuleCleanupGrace, MaxClockRegression: RuleMaxClockRegression, FailurePolicy: ratelimit.FailClosed})
	if err != nil {
		return ratelimit.PolicySpec{}, fmt.Errorf("algorithm %v: %w", alg, err)
	}
	return ratelimit.PolicySpec{Algorithm: alg, Params: a.Params, MaxCost: probe.Limit()}, nil
}
