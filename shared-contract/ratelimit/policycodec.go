package ratelimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// ErrPolicyEncoding is wrapped by UnmarshalPolicy's errors about the
// encoding itself (not JSON, an unknown algorithm).
var ErrPolicyEncoding = errors.New("invalid policy encoding")

// policyWire is a Policy's spec as JSON: every PolicySpec field, the
// parameters as their algorithm's type.
type policyWire struct {
	ID                 PolicyID        `json:"id"`
	Revision           int64           `json:"revision"`
	Algorithm          string          `json:"algorithm"`
	Params             json.RawMessage `json:"params"`
	MaxCost            int64           `json:"maxCost"`
	CleanupGrace       time.Duration   `json:"cleanupGrace"`
	MaxClockRegression time.Duration   `json:"maxClockRegression"`
	FailurePolicy      FailurePolicy   `json:"failurePolicy"`
	FallbackInstances  int64           `json:"fallbackInstances"`
	DedupWindow        time.Duration   `json:"dedupWindow"`
	DedupMaxReplays    int64           `json:"dedupMaxReplays"`
	Scope              Scope           `json:"scope"`
	Enforcement        Enforcement     `json:"enforcement"`
	Lease              *Lease          `json:"lease,omitempty"`
}

// MarshalPolicy encodes p, so that a process that never read p's policy
// file can rebuild it (UnmarshalPolicy): the revisions a coordination
// server has seen (ADR 0039). The encoding is this package's, not the
// policy file's.
func MarshalPolicy(p Policy) ([]byte, error) {
	if p.IsZero() {
		return nil, fmt.Errorf("%w: the zero policy", ErrPolicyEncoding)
	}
	params, err := json.Marshal(p.Params())
	if err != nil {
		return nil, fmt.Errorf("%w: parameters of %q: %w", ErrPolicyEncoding, p.ID(), err)
	}
	return json.Marshal(policyWire{
		ID: p.ID(), Revision: p.Revision(), Algorithm: p.Algorithm().String(), Params: params,
		MaxCost: p.MaxCost(), CleanupGrace: p.CleanupGrace(), MaxClockRegression: p.MaxClockRegression(),
		FailurePolicy: p.FailurePolicy(), FallbackInstances: p.FallbackInstances(), DedupWindow: p.DedupWindow(),
		DedupMaxReplays: p.DedupMaxReplays(), Scope: p.Scope(), Enforcement: p.Enforcement(), Lease: p.lease,
	})
}

// UnmarshalPolicy decodes what MarshalPolicy encoded and validates it as
// NewPolicy does.
func UnmarshalPolicy(data []byte) (Policy, error) {
	var w policyWire
	if err := json.Unmarshal(data, &w); err != nil {
		return Policy{}, fmt.Errorf("%w: %w", ErrPolicyEncoding, err)
	}
	var spec AlgorithmSpec
	for _, s := range Algorithms() {
		if s.Name == w.Algorithm {
			spec = s
		}
	}
	if spec.Build == nil {
		return Policy{}, fmt.Errorf("%w: unknown algorithm %q", ErrPolicyEncoding, bounded(w.Algorithm))
	}
	zero := spec.Build(FieldValues{Ints: map[string]int64{}, Durations: map[string]time.Duration{}})
	ptr := reflect.New(reflect.TypeOf(zero))
	if err := json.Unmarshal(w.Params, ptr.Interface()); err != nil {
		return Policy{}, fmt.Errorf("%w: parameters: %w", ErrPolicyEncoding, err)
	}
	params, ok := ptr.Elem().Interface().(Params)
	if !ok {
		return Policy{}, fmt.Errorf("%w: parameters of %s", ErrPolicyEncoding, w.Algorithm)
	}
	var replays *int64
	if w.DedupWindow > 0 {
		replays = &w.DedupMaxReplays
	}
	return NewPolicy(PolicySpec{
		ID: w.ID, Revision: w.Revision, Algorithm: spec.Algorithm, Params: params, MaxCost: w.MaxCost,
		CleanupGrace: w.CleanupGrace, MaxClockRegression: w.MaxClockRegression, FailurePolicy: w.FailurePolicy,
		FallbackInstances: w.FallbackInstances, DedupWindow: w.DedupWindow, DedupMaxReplays: replays,
		Scope: w.Scope, Enforcement: w.Enforcement, Lease: w.Lease,
	})
}
