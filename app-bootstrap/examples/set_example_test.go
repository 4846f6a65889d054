package examples_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Example_policySet asks the provider for a policy set (ADR 0027): 2
// searches per client per hour and 1,000 per day, and 3 per hour for all
// clients together (a global member). A client's third search is denied by
// its per-hour member and takes nothing of the others; a second client
// still gets the last global unit; a refund gives an admission back (ADR
// 0025).
func Example_policySet() {
	redisAddr, stopRedis := privateRedis()
	defer stopRedis()
	ctx := context.Background()
	// Token buckets: no window end can reset a count while the example runs.
	policy := func(id ratelimit.PolicyID, limit int64, window time.Duration, scope ratelimit.Scope) ratelimit.Policy {
		p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
			ID: id, Revision: 1, Algorithm: ratelimit.AlgorithmTokenBucket,
			Params: ratelimit.TokenBucket{Capacity: limit, RefillTokens: limit, RefillPeriod: window}, MaxCost: 1,
			CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.FailClosed,
			Scope: scope,
		})
		check(err)
		return p
	}
	policies := []ratelimit.Policy{
		policy("per-hour", 2, time.Hour, ratelimit.ScopeSubject),
		policy("per-day", 1000, 24*time.Hour, ratelimit.ScopeSubject),
		policy("backend", 3, time.Hour, ratelimit.ScopeGlobal),
	}
	client, err := redisrate.NewClient(redisrate.ClientConfig{
		Addr: redisAddr, Protocol: redisrate.ProtocolRESP2, CommandTimeout: 250 * time.Millisecond,
		DialTimeout: 250 * time.Millisecond, PoolTimeout: 250 * time.Millisecond, PoolSize: 4,
	})
	check(err)
	secret, err := keyspace.NewSecret([]byte("example-key-secret-0123456789abcdef"))
	check(err)
	keys, err := keyspace.NewBuilder("search", secret)
	check(err)
	provider, err := redisrate.New(client, keys, policies, redisrate.Options{CommandTimeout: 250 * time.Millisecond, MaxInFlight: 4})
	check(err)
	defer provider.Close()
	check(provider.Start(ctx))

	members := []ratelimit.PolicyID{"per-hour", "per-day", "backend"}
	search := func(who ratelimit.SubjectDigest) ratelimit.Evaluated {
		out := provider.EvaluateSet(ctx, ratelimit.SetRequest{Members: members, SubjectDigest: who, Cost: 1, Deadline: time.Now().Add(time.Second)})
		ev, ok := out.(ratelimit.Evaluated)
		if !ok {
			panic(fmt.Sprint(out))
		}
		return ev
	}
	alice, bob := ratelimit.SubjectDigest("alice-digest-0123456789"), ratelimit.SubjectDigest("bob-digest-0123456789ab")
	for i := 1; i <= 3; i++ {
		ev := search(alice)
		fmt.Printf("alice %d: allowed %t (%s: %d left)\n", i, ev.Decision.Allowed, ev.Decision.PolicyID, ev.Decision.Remaining)
	}
	ev := search(bob)
	fmt.Printf("bob 1: allowed %t (%s: %d left)\n", ev.Decision.Allowed, ev.Decision.PolicyID, ev.Decision.Remaining)
	ev = search(bob)
	fmt.Printf("bob 2: allowed %t (%s: %d left)\n", ev.Decision.Allowed, ev.Decision.PolicyID, ev.Decision.Remaining)

	// Any admission can be given back with its receipt, exactly once.
	first := provider.Evaluate(ctx, ratelimit.Request{PolicyID: "per-day", SubjectDigest: alice, Cost: 1, Deadline: time.Now().Add(time.Second)})
	receipt := first.(ratelimit.Evaluated).Decision.Receipt
	back := provider.Refund(ctx, ratelimit.Request{PolicyID: "per-day", SubjectDigest: alice, Cost: 1, Deadline: time.Now().Add(time.Second)}, receipt)
	fmt.Printf("refund: %d unit back\n", back.(ratelimit.Evaluated).Decision.Refunded)
	// Output:
	// alice 1: allowed true (per-hour: 1 left)
	// alice 2: allowed true (per-hour: 0 left)
	// alice 3: allowed false (per-hour: 0 left)
	// bob 1: allowed true (backend: 0 left)
	// bob 2: allowed false (backend: 0 left)
	// refund: 1 unit back
}
