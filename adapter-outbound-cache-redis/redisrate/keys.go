package redisrate

import (
	"strconv"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Key segments of rate-limit state: <prefix>:rate:<policyID>:state:v1:<digest>.
const (
	KeyCapability = "rate"
	KeyKind       = "state"
)

// StateKey returns the physical key of subject's state under policy p:
// capability "rate", region = the policy ID, kind "state", digest over
// (policy ID, revision, algorithm wire name, subject digest). A new revision
// therefore rolls to a new key. The key never contains the subject digest
// itself.
func StateKey(keys *keyspace.Builder, p ratelimit.Policy, subject ratelimit.SubjectDigest) (string, error) {
	id := string(p.ID())
	return stateKey(keys, id, strconv.FormatInt(p.Revision(), 10), p.Algorithm().String(), subject)
}

// stateKey is the one key derivation; the Provider calls it with the
// per-policy strings precomputed.
func stateKey(keys *keyspace.Builder, id, revision, algorithm string, subject ratelimit.SubjectDigest) (string, error) {
	return keys.Key(KeyCapability, id, KeyKind, id, revision, algorithm, string(subject))
}
