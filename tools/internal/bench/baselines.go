package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	ulule "github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// addBaselines adds the limiters the provider is measured against, each
// over its own client from newClient: a bare go-redis EvalSha of the
// programs the provider sends, the server-CPU baseline INCR + PEXPIRE,
// and the peers redis_rate and ulule/limiter.
func (s *limiterSet) addBaselines(ctx context.Context, newClient func() (*redis.Client, error), pols []ratelimit.Policy, subs subjects) error {
	// Bare go-redis EvalSha of the same programs, same client options,
	// precomputed keys of the same length (no derivation, no parsing).
	bareKeys, err := keyBuilder("bare")
	if err != nil {
		return err
	}
	for _, pol := range pols {
		alg := pol.Algorithm().String()
		// The program the provider sends: the policy's bound program
		// (ADR 0030).
		prog, err := programs.Bind(pol)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		keys, err := stateKeys(bareKeys, pol, subs)
		if err != nil {
			return err
		}
		c, err := newClient()
		if err != nil {
			return err
		}
		if err := c.ScriptLoad(ctx, prog.Source).Err(); err != nil {
			_ = c.Close()
			return fmt.Errorf("bench: SCRIPT LOAD %s: %w", prog.Name, err)
		}
		argv, sha := programs.BoundArgs(pol, 1), prog.SHA1
		s.add(&limiter{
			Name: bareName(alg), Family: FamilyBare, Algorithm: alg,
			op: func(ctx context.Context, i int) error {
				return c.EvalSha(ctx, sha, []string{keys[i]}, argv...).Err()
			},
			close: c.Close,
		})
	}

	// The server-CPU baseline: INCR + PEXPIRE, keys of the same length.
	trivKeys, err := keyBuilder("trivial")
	if err != nil {
		return err
	}
	tkeys, err := stateKeys(trivKeys, pols[0], subs)
	if err != nil {
		return err
	}
	tc, err := newClient()
	if err != nil {
		return err
	}
	tsha, err := tc.ScriptLoad(ctx, trivialSource).Result()
	if err != nil {
		_ = tc.Close()
		return fmt.Errorf("bench: SCRIPT LOAD trivial: %w", err)
	}
	ttl := time.Hour.Milliseconds()
	trivial := func(ctx context.Context, i int) error {
		return tc.EvalSha(ctx, tsha, []string{tkeys[i]}, ttl).Err()
	}
	s.add(&limiter{
		Name: FamilyTrivial, Family: FamilyTrivial, Algorithm: "incr_pexpire",
		op: trivial, memOp: trivial, close: tc.Close,
	})

	// github.com/go-redis/redis_rate/v10: GCRA, the peer of the provider's
	// GCRA (and the closest one of the token bucket). Key "rate:" + subject
	// digest.
	rc, err := newClient()
	if err != nil {
		return err
	}
	rl := redis_rate.NewLimiter(rc)
	allow := func(limit redis_rate.Limit) func(ctx context.Context, i int) error {
		return func(ctx context.Context, i int) error {
			res, err := rl.Allow(ctx, string(subs[i]), limit)
			if err != nil {
				return err
			}
			if res.Allowed != 1 {
				return fmt.Errorf("redis_rate: denied: %+v", *res)
			}
			return nil
		}
	}
	s.add(&limiter{
		Name: FamilyRedisRate, Family: FamilyRedisRate, Algorithm: "gcra",
		op:    allow(redis_rate.Limit{Rate: benchLimit, Burst: benchLimit, Period: time.Hour}),
		memOp: allow(redis_rate.PerHour(memLimit)),
		close: rc.Close,
	})

	// github.com/ulule/limiter/v3 with drivers/store/redis (go-redis v9 since
	// v3.11.0): a fixed window (INCRBY + PEXPIRE script). Key "limiter:" +
	// subject digest.
	uc, err := newClient()
	if err != nil {
		return err
	}
	store, err := ulredis.NewStoreWithOptions(uc, ulule.StoreOptions{Prefix: ulule.DefaultPrefix, MaxRetry: ulule.DefaultMaxRetry})
	if err != nil {
		_ = uc.Close()
		return fmt.Errorf("bench: ulule store: %w", err)
	}
	get := func(limit int64) func(ctx context.Context, i int) error {
		ul := ulule.New(store, ulule.Rate{Period: time.Hour, Limit: limit})
		return func(ctx context.Context, i int) error {
			res, err := ul.Get(ctx, string(subs[i]))
			if err != nil {
				return err
			}
			if res.Reached {
				return fmt.Errorf("ulule: limit reached: %+v", res)
			}
			return nil
		}
	}
	s.add(&limiter{
		Name: FamilyUlule, Family: FamilyUlule, Algorithm: "fixed_window",
		op: get(benchLimit), memOp: get(memLimit), close: uc.Close,
	})
	return nil
}
