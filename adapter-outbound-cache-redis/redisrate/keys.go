package redisrate

import (
	"strconv"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Key segments of rate-limit state (key version 2, docs/adr/0003-key-format-v2.md):
// <prefix>:rate:<policyID>:state:v2:{<slot tag>}<digest>.
const (
	KeyCapability = "rate"
	KeyKind       = "state"
)

// StateKey returns the physical key of subject's state under policy p:
// capability "rate", region = the policy ID, kind "state", digest over
// (policy ID, revision, algorithm wire name, subject digest). A new revision
// therefore rolls to a new key. The key never contains the subject digest
// itself; its slot tag carries 14 bits derived from it (the slot) and
// nothing more.
func StateKey(keys *keyspace.Builder, p ratelimit.Policy, subject ratelimit.SubjectDigest) (string, error) {
	id := string(p.ID())
	return stateKey(keys, id, strconv.FormatInt(p.Revision(), 10), p.Algorithm().String(), subject)
}

// stateKey is the one key derivation; the Provider calls it with the
// per-policy strings precomputed. The slot tag is derived from the subject
// digest alone, so every key of one subject (other policies, future
// per-subject keys) shares one Redis Cluster slot.
func stateKey(keys *keyspace.Builder, id, revision, algorithm string, subject ratelimit.SubjectDigest) (string, error) {
	return keys.TaggedKey(KeyCapability, id, KeyKind, string(subject), id, revision, algorithm, string(subject))
}
