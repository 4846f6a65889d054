package rls

import (
	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Decider is the decision port of one configuration generation: it
// evaluates and refunds every policy the generation was built with. Close
// releases what the generation holds (the Redis provider and its client);
// the Service calls it once, after the last request using the generation
// has finished. Implementations are safe for concurrent use.
type Decider interface {
	ratelimit.EdgePort
	Close() error
}

// Ports is what the composition root gives the Service: the policy file's
// policies (for rules naming one with `policy:`) and a Decider per
// configuration generation. The Redis provider takes its policies at
// construction, so a new rule set needs a new provider; For is called once
// per generation, before it serves, with every policy its rules use.
type Ports interface {
	// Policy returns the policy file's policy id; ok is false when there
	// is none.
	Policy(id ratelimit.PolicyID) (p ratelimit.Policy, ok bool)
	// For builds the decision port for policies (distinct IDs, at least
	// one).
	For(policies []ratelimit.Policy) (Decider, error)
}

// Pseudonymizer turns a descriptor's subject into a SubjectDigest. The
// composition root passes the HTTP edge's principal pseudonymization
// (subject.NewPrincipal, then Pseudonymizer.Digest), so that a descriptor
// `user=alice` and the trusted-header principal `alice` are one subject.
// The value is never logged, never an error's text, never a label.
type Pseudonymizer interface {
	Pseudonymize(subject string) (ratelimit.SubjectDigest, error)
}

// PseudonymizerFunc adapts a function to Pseudonymizer.
type PseudonymizerFunc func(subject string) (ratelimit.SubjectDigest, error)

// Pseudonymize calls f(subject).
func (f PseudonymizerFunc) Pseudonymize(subject string) (ratelimit.SubjectDigest, error) {
	return f(subject)
}

// Rules is the configuration a generation serves: *rlsconfig.Config
// implements it.
type Rules interface {
	HasDomain(domain string) bool
	Lookup(domain string, entries []rlsconfig.Entry) rlsconfig.Matched
	Limits() []*rlsconfig.RateLimit
}

var _ Rules = (*rlsconfig.Config)(nil)

// Result is a decision's label in Metrics.Decision.
type Result string

// The decision results.
const (
	ResultOK         Result = "ok"
	ResultOverLimit  Result = "over_limit"
	ResultWouldDeny  Result = "would_deny"
	ResultUndecided  Result = "undecided"
	ResultNoRule     Result = "no_rule"
	ResultUnlimited  Result = "unlimited"
	ResultCheckOnly  Result = "check_only"
	ResultNegative   Result = "negative_hits"
	ResultRolledBack Result = "rolled_back"
)

// Metrics receives the service's counts. Labels are bounded: the domain
// (configured domains only), the rule's key (its FullKey, from the
// configuration, never a descriptor value) and fixed reasons. The
// composition root implements it with Prometheus; NopMetrics does nothing.
type Metrics interface {
	// Decision counts one descriptor's result under domain and key (the
	// rule's FullKey, or the detailed key when the rule has
	// detailed_metric and the cardinality cap has room, else the FullKey
	// again with Folded counting it).
	Decision(domain, key string, r Result)
	// Refused counts a request refused before any decision, by reason.
	Refused(reason string)
	// Folded counts a detailed_metric key folded into its rule's FullKey
	// because the cardinality cap was reached.
	Folded(domain string)
	// RefundFailed counts, under the rule's FullKey, a refund that did not run (the charge stays:
	// under-admission only).
	RefundFailed(key string)
}

// NopMetrics is a Metrics that counts nothing.
type NopMetrics struct{}

// Decision implements Metrics.
func (NopMetrics) Decision(string, string, Result) {}

// Refused implements Metrics.
func (NopMetrics) Refused(string) {}

// Folded implements Metrics.
func (NopMetrics) Folded(string) {}

// RefundFailed implements Metrics.
func (NopMetrics) RefundFailed(string) {}
