package bench

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// subjects are the pseudonymized subject digests of a run: index n (the
// last) is the hot subject, 0..n-1 the distinct ones.
type subjects []ratelimit.SubjectDigest

func newSubjects(n int) subjects {
	s := make(subjects, n+1)
	var buf [8]byte
	for i := range s {
		binary.BigEndian.PutUint64(buf[:], uint64(i))
		sum := sha256.Sum256(buf[:])
		s[i] = ratelimit.SubjectDigest(base64.RawURLEncoding.EncodeToString(sum[:])) // 43 characters
	}
	return s
}

// clientConfig is the coordination client configuration every limiter uses.
func clientConfig(addr string) redisrate.ClientConfig {
	return redisrate.ClientConfig{
		Addr:           addr,
		Protocol:       redisrate.ProtocolRESP2,
		CommandTimeout: benchCommandTimeout,
		DialTimeout:    benchDialTimeout,
		PoolSize:       benchPoolSize,
		PoolTimeout:    benchPoolTimeout,
	}
}

// policies returns one policy per algorithm (in the order of algorithms)
// allowing limit per hour; GCRA's is redis_rate's Limit{Rate: limit,
// Burst: limit, Period: time.Hour}. The ids are two characters each, so
// that every state key has the same length.
func policies(ids [4]ratelimit.PolicyID, limit int64) ([]ratelimit.Policy, error) {
	return newPolicies([]ratelimit.PolicySpec{
		{ID: ids[0], Algorithm: ratelimit.AlgorithmFixedWindow, Params: ratelimit.FixedWindow{Limit: limit, Window: time.Hour}},
		{ID: ids[1], Algorithm: ratelimit.AlgorithmSlidingWindowCounter, Params: ratelimit.SlidingWindowCounter{Limit: limit, Window: time.Hour}},
		{ID: ids[2], Algorithm: ratelimit.AlgorithmTokenBucket, Params: ratelimit.TokenBucket{Capacity: limit, RefillTokens: limit, RefillPeriod: time.Hour}},
		{ID: ids[3], Algorithm: ratelimit.AlgorithmGCRA, Params: ratelimit.GCRA{Rate: limit, Period: time.Hour, Burst: limit}},
	})
}

// newPolicies builds specs with the bench's common fields: revision 1,
// cost 1, fail closed.
func newPolicies(specs []ratelimit.PolicySpec) ([]ratelimit.Policy, error) {
	out := make([]ratelimit.Policy, 0, len(specs))
	for _, spec := range specs {
		spec.Revision, spec.MaxCost = 1, 1
		spec.CleanupGrace, spec.MaxClockRegression = time.Minute, 2*time.Second
		spec.FailurePolicy = ratelimit.FailClosed
		p, err := ratelimit.NewPolicy(spec)
		if err != nil {
			return nil, fmt.Errorf("bench: policy %s: %w", spec.ID, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// slidingLogPolicy is the sliding log of the memory-under-abuse phase:
// memLimit per hour, id "lh" (two characters, like the others). ok is
// false while ratelimit.NewPolicy does not accept the algorithm (its stack
// landed in steps, issue 22): the phase then records why it was skipped.
func slidingLogPolicy() (p ratelimit.Policy, ok bool, err error) {
	pols, err := newPolicies([]ratelimit.PolicySpec{{ID: "lh", Algorithm: ratelimit.AlgorithmSlidingLog, Params: ratelimit.SlidingLog{Limit: memLimit, Window: time.Hour}}})
	if errors.Is(err, ratelimit.ErrUnsupported) {
		return ratelimit.Policy{}, false, nil
	}
	if err != nil {
		return ratelimit.Policy{}, false, err
	}
	return pols[0], true, nil
}

// keyBuilder returns a keyspace builder; distinct seeds give the provider,
// the bare calls and the trivial script disjoint keys of identical length.
func keyBuilder(seed string) (*keyspace.Builder, error) {
	secret, err := keyspace.NewSecret([]byte("tech-log-backend bench secret, not a real one: " + seed))
	if err != nil {
		return nil, err
	}
	return keyspace.NewBuilder(keyspace.DefaultPrefix, secret)
}

// stateKeys precomputes the state key of every subject under p.
func stateKeys(keys *keyspace.Builder, p ratelimit.Policy, subs subjects) ([]string, error) {
	out := make([]string, len(subs))
	for i, s := range subs {
		k, err := redisrate.StateKey(keys, p, s)
		if err != nil {
			return nil, fmt.Errorf("bench: state key: %w", err)
		}
		out[i] = k
	}
	return out, nil
}
