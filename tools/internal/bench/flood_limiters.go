package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	ulule "github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// floodLimiter is one limiter of the flood: hot answers the flooding
// subject (nil only for a denial), well a well-behaved subject i (nil only
// for an admission).
type floodLimiter struct {
	name  string
	hot   func(ctx context.Context) error
	well  func(ctx context.Context, i int) error
	close func() error
}

// newFloodLimiters builds the flood's limiters against addr, each over its
// own client, and spends the flooding subject's limit on each.
func newFloodLimiters(ctx context.Context, addr string) (out []*floodLimiter, err error) {
	defer func() {
		if err != nil {
			for _, l := range out {
				_ = l.close()
			}
			out = nil
		}
	}()
	cfg := clientConfig(addr)
	// A connection for every worker, for every limiter alike; the
	// provider's in-flight bound is the pool size.
	cfg.PoolSize = floodConcurrency + floodWellWorkers
	subs := newSubjects(floodWellBehaved) // index floodWellBehaved: the flooding subject
	hotSubject := subs[floodWellBehaved]
	deadline := time.Now().Add(30 * 24 * time.Hour)
	spec := func(id ratelimit.PolicyID, limit int64) (ratelimit.Policy, error) {
		return ratelimit.NewPolicy(ratelimit.PolicySpec{ID: id, Revision: 1, Algorithm: ratelimit.AlgorithmTokenBucket,
			Params:  ratelimit.TokenBucket{Capacity: limit, RefillTokens: limit, RefillPeriod: time.Hour},
			MaxCost: 1, CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.FailClosed})
	}
	hotPol, err := spec("fh", floodLimit)
	if err != nil {
		return nil, err
	}
	wellPol, err := spec("fw", benchLimit)
	if err != nil {
		return nil, err
	}
	for _, cached := range []bool{true, false} {
		keys, err := keyBuilder(fmt.Sprintf("flood-%t", cached))
		if err != nil {
			return out, err
		}
		c, err := redisrate.NewClient(cfg)
		if err != nil {
			return out, err
		}
		pols := []ratelimit.Policy{hotPol, wellPol}
		prov, err := redisrate.New(c, keys, pols, redisrate.Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
		if err != nil {
			_ = c.Close()
			return out, fmt.Errorf("bench: flood provider: %w", err)
		}
		if err := prov.Start(ctx); err != nil {
			_ = prov.Close()
			return out, fmt.Errorf("bench: flood provider start: %w", err)
		}
		var port ratelimit.EdgePort = prov
		name, closeAll := FloodUncached, prov.Close
		if cached {
			// As the service composes it, without the subscription (no
			// reset happens here; its heartbeat would add one PUBLISH a
			// second).
			dc, err := ratedenial.New(prov, ratedenial.Options{Policies: pols, Keys: keys})
			if err != nil {
				_ = prov.Close()
				return out, fmt.Errorf("bench: denial cache: %w", err)
			}
			port, name = dc, FloodCached
			closeAll = func() error { dc.Close(); return prov.Close() }
		}
		out = append(out, &floodLimiter{name: name, close: closeAll,
			hot: func(ctx context.Context) error {
				o := port.Evaluate(ctx, ratelimit.Request{PolicyID: "fh", SubjectDigest: hotSubject, Cost: 1, Deadline: deadline})
				if e, ok := o.(ratelimit.Evaluated); !ok || e.Decision.Allowed {
					return fmt.Errorf("%s: flooding call not denied: %v", name, o)
				}
				return nil
			},
			well: func(ctx context.Context, i int) error {
				o := port.Evaluate(ctx, ratelimit.Request{PolicyID: "fw", SubjectDigest: subs[i], Cost: 1, Deadline: deadline})
				if !ratelimit.Admitted(o) {
					return fmt.Errorf("%s: well-behaved call not admitted: %v", name, o)
				}
				return nil
			}})
	}

	rc, err := redisrate.NewClient(cfg)
	if err != nil {
		return out, err
	}
	rl := redis_rate.NewLimiter(rc)
	hotLimit, wellLimit := redis_rate.PerHour(floodLimit), redis_rate.Limit{Rate: benchLimit, Burst: benchLimit, Period: time.Hour}
	out = append(out, &floodLimiter{name: FamilyRedisRate, close: rc.Close,
		hot: func(ctx context.Context) error {
			res, err := rl.Allow(ctx, "flood:"+string(hotSubject), hotLimit)
			if err != nil {
				return err
			}
			if res.Allowed != 0 {
				return fmt.Errorf("redis_rate: flooding call allowed: %+v", *res)
			}
			return nil
		},
		well: func(ctx context.Context, i int) error {
			res, err := rl.Allow(ctx, "flood:"+string(subs[i]), wellLimit)
			if err != nil {
				return err
			}
			if res.Allowed != 1 {
				return fmt.Errorf("redis_rate: well-behaved call denied: %+v", *res)
			}
			return nil
		}})

	uc, err := redisrate.NewClient(cfg)
	if err != nil {
		return out, err
	}
	store, err := ulredis.NewStoreWithOptions(uc, ulule.StoreOptions{Prefix: "flood", MaxRetry: ulule.DefaultMaxRetry})
	if err != nil {
		_ = uc.Close()
		return out, fmt.Errorf("bench: ulule store: %w", err)
	}
	ulHot := ulule.New(store, ulule.Rate{Period: time.Hour, Limit: floodLimit})
	ulWell := ulule.New(store, ulule.Rate{Period: time.Hour, Limit: benchLimit})
	out = append(out, &floodLimiter{name: FamilyUlule, close: uc.Close,
		hot: func(ctx context.Context) error {
			res, err := ulHot.Get(ctx, string(hotSubject))
			if err != nil {
				return err
			}
			if !res.Reached {
				return fmt.Errorf("ulule: flooding call not limited: %+v", res)
			}
			return nil
		},
		well: func(ctx context.Context, i int) error {
			res, err := ulWell.Get(ctx, string(subs[i]))
			if err != nil {
				return err
			}
			if res.Reached {
				return fmt.Errorf("ulule: well-behaved call limited: %+v", res)
			}
			return nil
		}})

	// Spend the flooding subject's limit on each (the calls that admit).
	for _, l := range out {
		denied := false
		for range floodLimit + 2 {
			if l.hot(ctx) == nil {
				denied = true
				break
			}
		}
		if !denied {
			return out, fmt.Errorf("bench: flood %s: the flooding subject is never denied", l.name)
		}
	}
	return out, nil
}
