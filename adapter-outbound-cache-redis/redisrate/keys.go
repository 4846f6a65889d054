package redisrate

import (
	"strconv"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Key segments of rate-limit state (key version 2, docs/adr/0003-key-format-v2.md):
// <prefix>:rate:<policyID>:s:v2:{<slot tag>}<digest>, 42 + len(policyID)
// bytes: kind "s" (state) keeps the key within 44 bytes, jemalloc's 48-byte
// class, for policy IDs of up to 2 characters (docs/adr/0010).
const (
	KeyCapability = "rate"
	KeyKind       = "s"
	// KeyRegionDedup and KeyKindDedup name a subject's dedup hash:
	// <prefix>:rate:dedup:dedup:v2:{<slot tag>}<digest>, one per subject
	// across all policies (docs/adr/0011-evaluation-dedup.md). No policy
	// state key has kind "dedup", so the two never collide.
	KeyRegionDedup = "dedup"
	KeyKindDedup   = "dedup"
)

// StateKey returns the physical key of subject's state under policy p:
// capability "rate", region = the policy ID, kind "s" (state), digest over
// (policy ID, revision, algorithm wire name, subject digest). A new revision
// therefore rolls to a new key. The key never contains the subject digest
// itself; its slot tag carries 14 bits derived from it (the slot) and
// nothing more. A global policy's key is its ratelimit.GlobalSubject's,
// whatever subject is given (Policy.Subject, ADR 0027).
func StateKey(keys *keyspace.Builder, p ratelimit.Policy, subject ratelimit.SubjectDigest) (string, error) {
	id := string(p.ID())
	return stateKey(keys, id, strconv.FormatInt(p.Revision(), 10), p.Algorithm().String(), p.Subject(subject))
}

// DedupKey returns the physical key of subject's dedup hash: capability
// "rate", region and kind "dedup", digest over ("dedup", subject digest),
// and the same slot tag as every state key of the subject, so that a dedup
// program's two keys share a Redis Cluster slot.
func DedupKey(keys *keyspace.Builder, subject ratelimit.SubjectDigest) (string, error) {
	return keys.TaggedKey(KeyCapability, KeyRegionDedup, KeyKindDedup, string(subject), KeyKindDedup, string(subject))
}

// policyState is everything per policy that does not depend on the request.
type policyState struct {
	policy ratelimit.Policy
	// script is the policy's bound decision program (programs.ForPolicy,
	// ADR 0030, ADR 0035), boundArgv its ARGV (programs.BoundArgs(policy, 1)).
	script    *send.Script
	boundArgv []any
	argv      []any // programs.BoundArgs(policy, 1), the bound charge program's; the executor sends the cost at programs.ArgCost
	id        string
	revision  string
	algorithm string
	certainty ratelimit.Certainty
	// dedup and dedupArgv are set for a policy with a dedup window: the
	// policy's bound rate-<algorithm>-dedup-v2 program and its ARGV (BoundArgs followed by
	// programs.DedupArgs with an empty ID, which the executor replaces).
	// A request with an EvaluationID uses them, one without uses script.
	dedup     *send.Script
	dedupArgv []any
	// dedupIDArg is the index of the evaluation ID in dedupArgv.
	dedupIDArg int
	// charge is the policy's bound charge program (programs.ForPolicy), for
	// EvaluateAfterCharge.
	charge *send.Script
	// refund is the policy's bound refund program (programs.ForPolicy, ADR
	// 0025, ADR 0035): Refund, and a set giving back its members admitted
	// before a denial.
	refund *send.Script
	// lease and giveBack are the policy's bound lease programs (ADR 0042),
	// set when it leases and its algorithm's state records leases: a
	// reservation (Request.Lease) is sent to lease (programs.BoundLeaseArgs),
	// its unspent units (a Refund of a Lease request) to giveBack. Without
	// them a reservation is a decision of its cost (the aligned windows).
	lease, giveBack *send.Script
	// setMember is the policy's part of the set program's ARGV, prepared
	// once (the zero SetMember for a queue, which is never a set member).
	setMember programs.SetMember
}
