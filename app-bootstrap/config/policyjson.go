package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// policyFile is the wire form of the policy file (README.md, "Policy file").
type policyFile struct {
	Policies []policyJSON `json:"policies"`
	// Plans and DefaultPlan are optional, together (issue 36): the tiers
	// and, per tier, the policy that decides each base policy's routes.
	Plans       []planJSON `json:"plans"`
	DefaultPlan *string    `json:"defaultPlan"`
}

// planJSON is one plan: its ID and, per base policy, the policy that
// decides the base policy's routes for a subject on it.
type planJSON struct {
	ID       *string           `json:"id"`
	Policies map[string]string `json:"policies"`
}

// policyJSON is one policy: the fields every policy has, and the
// parameter fields of the algorithms (the registry's field table,
// ratelimit.AlgorithmSpec.Fields; ADR 0034), present or absent by name.
// Pointers tell an absent field from a zero one, so that a field of another
// algorithm and a missing field are both errors.
type policyJSON struct {
	policyFields
	// ints and durs are the parameter fields present (not null), by name.
	ints map[string]int64
	durs map[string]duration
}

// policyFields are the fields every policy has, whatever its algorithm.
type policyFields struct {
	ID                 *string    `json:"id"`
	Revision           *int64     `json:"revision"`
	Algorithm          *string    `json:"algorithm"`
	MaxCost            *int64     `json:"maxCost"`
	CleanupGrace       *duration  `json:"cleanupGrace"`
	MaxClockRegression *duration  `json:"maxClockRegression"`
	FailurePolicy      *string    `json:"failurePolicy"`
	FallbackInstances  *int64     `json:"fallbackInstances"`
	DedupWindow        *duration  `json:"dedupWindow"`
	DedupMaxReplays    *int64     `json:"dedupMaxReplays"`
	DenialCache        *bool      `json:"denialCache"`
	Scope              *string    `json:"scope"`
	Enforce            *string    `json:"enforce"`
	Lease              *leaseJSON `json:"lease"`
	Routes             []string   `json:"routes"`
}

// leaseJSON is a policy's "lease" (ADR 0042): both fields required.
type leaseJSON struct {
	MaxShare *float64  `json:"maxShare"`
	TTL      *duration `json:"ttl"`
}

// duration is a Go duration string ("1s", "250ms") that must be whole
// milliseconds; it is parsed by spec so that errors name the field.
type duration = string

// parseDuration parses the duration field name, recording a problem.
func parseDuration(name string, s *string, problems *[]error) time.Duration {
	d, err := time.ParseDuration(*s)
	switch {
	case err != nil:
		*problems = append(*problems, fmt.Errorf("%s: %q is not a Go duration such as \"1s\" or \"250ms\"", name, bounded(*s)))
	case d%time.Millisecond != 0:
		*problems = append(*problems, fmt.Errorf("%s: %q is not a whole number of milliseconds", name, *s))
	}
	return d
}

// MaxQueueDelay is the longest maxDelay a leaky_bucket policy may have:
// the edge holds an admitted request up to maxDelay before its handler
// runs, and the service's HTTP write timeout (30 s) must leave the handler
// time to answer (ADR 0028).
const MaxQueueDelay = 20 * time.Second

// MaxHold is the longest maxHold a concurrency policy may have: the
// service's HTTP write timeout (30 s, ratelimit.DefaultMaxHold). A slot is
// reclaimed at maxHold even when its request still runs; the edge ends the
// handler's context then, and the server has stopped writing its answer
// (ADR 0041).
const MaxHold = ratelimit.DefaultMaxHold

// paramFields is the union of the algorithms' parameter fields, by name,
// in registry order: the keys a policy may have besides policyFields.
var paramFields, paramOrder = func() (map[string]ratelimit.FieldKind, []string) {
	kinds := map[string]ratelimit.FieldKind{}
	var order []string
	for _, a := range ratelimit.Algorithms() {
		for _, f := range a.Fields() {
			if _, seen := kinds[f.Name]; !seen {
				kinds[f.Name] = f.Kind
				order = append(order, f.Name)
			}
		}
	}
	return kinds, order
}()

// UnmarshalJSON decodes the policy's own fields strictly (an unknown key is
// an error) and each parameter field by its kind: an integer, or a Go
// duration string.
func (p *policyJSON) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return err
	}
	p.ints, p.durs = map[string]int64{}, map[string]duration{}
	for _, name := range paramOrder {
		v, ok := raw[name]
		if !ok {
			continue
		}
		delete(raw, name)
		if string(v) == "null" {
			continue // absent, as a null pointer field is
		}
		var err error
		if paramFields[name] == ratelimit.FieldDuration {
			var d duration
			err = json.Unmarshal(v, &d)
			p.durs[name] = d
		} else {
			var n int64
			err = json.Unmarshal(v, &n)
			p.ints[name] = n
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	rest, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	return dec.Decode(&p.policyFields)
}

// has reports whether the parameter field name is present.
func (p policyJSON) has(name string) bool {
	_, i := p.ints[name]
	_, d := p.durs[name]
	return i || d
}

// spec maps the wire policy to a PolicySpec, listing every missing field
// and every field that belongs to another algorithm.
func (p policyJSON) spec() (ratelimit.PolicySpec, []error) {
	var problems []error
	missing := func(name string) { problems = append(problems, fmt.Errorf("%q is required", name)) }
	var spec ratelimit.PolicySpec
	if p.ID == nil {
		missing("id")
	} else {
		spec.ID = ratelimit.PolicyID(*p.ID)
	}
	if p.Revision == nil {
		missing("revision")
	} else {
		spec.Revision = *p.Revision
	}
	if p.MaxCost == nil {
		missing("maxCost")
	} else {
		spec.MaxCost = *p.MaxCost
	}
	if p.CleanupGrace == nil {
		missing("cleanupGrace")
	} else {
		spec.CleanupGrace = parseDuration("cleanupGrace", p.CleanupGrace, &problems)
	}
	if p.MaxClockRegression == nil {
		missing("maxClockRegression")
	} else {
		spec.MaxClockRegression = parseDuration("maxClockRegression", p.MaxClockRegression, &problems)
	}
	if p.FailurePolicy == nil {
		missing("failurePolicy")
	} else if fp, err := ratelimit.ParseFailurePolicy(*p.FailurePolicy); err != nil {
		problems = append(problems, fmt.Errorf("failurePolicy: %w", err))
	} else {
		spec.FailurePolicy = fp
		// "fallbackInstances" belongs to "local-fallback" only; NewPolicy
		// names a missing or a stray one.
		if p.FallbackInstances != nil {
			spec.FallbackInstances = *p.FallbackInstances
		}
	}
	if p.DedupWindow != nil {
		// Optional: absent means no dedup; "0s" is refused, so that a
		// window is either meant or absent.
		spec.DedupWindow = parseDuration("dedupWindow", p.DedupWindow, &problems)
		if spec.DedupWindow == 0 {
			problems = append(problems, fmt.Errorf("dedupWindow: %q must be positive (omit the field for no dedup)", *p.DedupWindow))
		}
	}
	if p.DedupMaxReplays != nil {
		// Optional: absent means ratelimit.DefaultDedupMaxReplays. Without
		// a dedup window it would mean nothing, so it is refused rather
		// than ignored: the contract's replay rule, in the policy file's
		// words.
		n := *p.DedupMaxReplays
		switch err := ratelimit.CheckDedupMaxReplays(p.DedupWindow != nil, n); {
		case errors.Is(err, ratelimit.ErrReplaysWithoutWindow):
			problems = append(problems, fmt.Errorf("dedupMaxReplays: %d is set without \"dedupWindow\" (replays exist only with a dedup window; add one or remove the field)", n))
		case err != nil:
			problems = append(problems, fmt.Errorf("dedupMaxReplays: %d is not an integer 0..%d", n, ratelimit.MaxDedupMaxReplays))
		default:
			spec.DedupMaxReplays = &n
		}
	}
	if p.Scope != nil {
		// Optional: absent means "subject" (ADR 0027).
		if sc, err := ratelimit.ParseScope(*p.Scope); err != nil {
			problems = append(problems, fmt.Errorf("scope: %w", err))
		} else {
			spec.Scope = sc
		}
	}
	if p.Enforce != nil {
		// Optional: absent means "enforce" (ADR 0037).
		if e, err := ratelimit.ParseEnforcement(*p.Enforce); err != nil {
			problems = append(problems, fmt.Errorf("enforce: %w", err))
		} else {
			spec.Enforcement = e
		}
	}
	if l := p.Lease; l != nil {
		// Optional: absent means no lease (ADR 0042); NewPolicy checks the
		// values against the algorithm and its window.
		var lease ratelimit.Lease
		if l.MaxShare == nil {
			missing("lease.maxShare")
		} else {
			lease.MaxShare = *l.MaxShare
		}
		if l.TTL == nil {
			missing("lease.ttl")
		} else {
			lease.TTL = parseDuration("lease.ttl", l.TTL, &problems)
		}
		spec.Lease = &lease
	}
	if p.Algorithm == nil {
		missing("algorithm")
		return spec, problems
	}
	alg, err := ratelimit.ParseAlgorithm(*p.Algorithm)
	if err != nil {
		problems = append(problems, fmt.Errorf("algorithm: %w", err))
		return spec, problems
	}
	spec.Algorithm = alg
	a, _ := alg.Spec()
	mine := map[string]bool{}
	for _, f := range a.Fields() {
		mine[f.Name] = true
		if !f.Optional && !p.has(f.Name) {
			missing(f.Name)
		}
	}
	for _, name := range paramOrder {
		if p.has(name) && !mine[name] {
			problems = append(problems, fmt.Errorf("%q is not a parameter of %s", name, alg))
		}
	}
	if len(problems) > 0 {
		return spec, problems
	}
	values := ratelimit.FieldValues{Ints: map[string]int64{}, Durations: map[string]time.Duration{}}
	for _, f := range a.Fields() {
		if n, ok := p.ints[f.Name]; ok {
			values.Ints[f.Name] = n
		}
		if d, ok := p.durs[f.Name]; ok {
			values.Durations[f.Name] = parseDuration(f.Name, &d, &problems)
		}
	}
	spec.Params = a.Build(values)
	return spec, problems
}
