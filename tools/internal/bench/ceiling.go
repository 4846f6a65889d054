package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// FamilyFloor is the decision floor of `make bench-ceiling`: a bare EvalSha
// of floorSource.
const FamilyFloor = "floor"

// floorSource is the least any decision program of this design can do: the
// three commands a read-modify-write decision on the server clock needs
// (TIME, GET, SET with PX) and the contract's seven-integer reply, with no
// argument check, no state check and no arithmetic. The written value has
// the length of a token-bucket state of revision 1.
const floorSource = "#!lua\n" +
	"local t = redis.call('TIME')\n" +
	"local g = redis.pcall('GET', KEYS[1])\n" +
	"redis.call('SET', KEYS[1], '012345678901234567890', 'PX', 3600000)\n" +
	"return {1, 1733500000000, 1733500000000, 1000000000, 999999999, 0, 1733500000000}\n"

// ceilingNames are the limiters of the ceiling, from the floor to the
// provider as it ships, and redis_rate, the peer every ratio is taken
// against.
var ceilingNames = []string{
	FamilyFloor,
	bareName(ratelimit.AlgorithmTokenBucket.String()), providerName(ratelimit.AlgorithmTokenBucket.String()), pipelinedName,
	bareName(ratelimit.AlgorithmGCRA.String()), gcraName, pipelinedGCRAName,
	FamilyRedisRate,
}

// CeilingRow is one limiter of the ceiling at one caller over one subject
// set: its median throughput and the quartiles of its throughput over
// redis_rate's in the same repetition.
type CeilingRow struct {
	Subjects  string
	Limiter   string
	MedianOps float64
	// Q1, Median and Q3 of the paired ratios to redis_rate.
	Q1, Median, Q3 float64
}

// Ceiling measures, at one caller and over both subject sets, how far each
// layer of a single decision is from redis_rate: the floor (floorSource),
// the bound program by bare EvalSha (the program's own work on top of the
// floor), and the provider unbatched and pipelined (the client's work on
// top of the program). reps repetitions, each running every limiter once
// in an order rotated by the repetition, so each ratio is paired within a
// repetition.
func Ceiling(ctx context.Context, cfg Config, reps int) (rows []CeilingRow, err error) {
	if reps < 1 {
		return nil, fmt.Errorf("bench: ceiling: reps %d, want >= 1", reps)
	}
	srv, err := StartServer(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := srv.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	subs := newSubjects(cfg.DistinctSubjects)
	set, err := newLimiters(ctx, srv.Addr, subs)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := set.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := addFloor(ctx, srv.Addr, subs, set); err != nil {
		return nil, err
	}
	cfg.logf("== ceiling: populating %d subjects for each of %d limiters", cfg.DistinctSubjects, len(ceilingNames))
	for _, name := range ceilingNames {
		lim := set.byName[name]
		var next atomic.Int64
		next.Store(-1)
		if err := parallel(benchPoolSize, int64(cfg.DistinctSubjects), func(int) error { return lim.op(ctx, int(next.Add(1))) }); err != nil {
			return nil, fmt.Errorf("bench: ceiling: populate %s: %w", name, err)
		}
	}
	for _, subjects := range []string{SubjectsDistinct, SubjectsHot} {
		ops := map[string][]float64{}
		next := map[string]*atomic.Uint64{}
		for _, name := range ceilingNames {
			next[name] = new(atomic.Uint64)
		}
		for rep := range reps {
			n := len(ceilingNames)
			for k := range n {
				name := ceilingNames[(k+rep)%n]
				r, err := measure(ctx, srv, runSpec{
					lim: set.byName[name], concurrency: 1, subjects: subjects, rep: rep,
					duration: cfg.RunDuration, maxOps: cfg.MaxOpsPerRun, warmup: cfg.Warmup,
					nDistinct: cfg.DistinctSubjects, next: next[name],
				})
				if err != nil {
					return nil, err
				}
				if r.Errors > 0 {
					return nil, fmt.Errorf("bench: ceiling: %s %s: %d of %d calls failed, e.g. %q", name, subjects, r.Errors, r.Ops, r.ErrorSamples)
				}
				ops[name] = append(ops[name], r.OpsPerSec)
			}
			cfg.logf("   ceiling %-8s rep %d of %d", subjects, rep+1, reps)
		}
		peer := ops[FamilyRedisRate]
		for _, name := range ceilingNames {
			ratios := make([]float64, len(peer))
			for i := range peer {
				ratios[i] = ops[name][i] / peer[i]
			}
			rows = append(rows, CeilingRow{
				Subjects: subjects, Limiter: name, MedianOps: median(ops[name]),
				Q1: quantile(ratios, 0.25), Median: median(ratios), Q3: quantile(ratios, 0.75),
			})
		}
	}
	return rows, nil
}

// addFloor adds the floor limiter to set: a client of its own, floorSource
// loaded, keys of the token bucket's length.
func addFloor(ctx context.Context, addr string, subs subjects, set *limiterSet) error {
	kb, err := keyBuilder("floor")
	if err != nil {
		return err
	}
	pols, err := policies([4]ratelimit.PolicyID{"fl", "fl", "fl", "fl"}, benchLimit)
	if err != nil {
		return err
	}
	keys, err := stateKeys(kb, pols[2], subs)
	if err != nil {
		return err
	}
	c, err := redisrate.NewClient(clientConfig(addr))
	if err != nil {
		return err
	}
	sha, err := c.ScriptLoad(ctx, floorSource).Result()
	if err != nil {
		_ = c.Close()
		return fmt.Errorf("bench: SCRIPT LOAD floor: %w", err)
	}
	set.add(&limiter{
		Name: FamilyFloor, Family: FamilyFloor, Algorithm: "time_get_set",
		op: func(ctx context.Context, i int) error {
			return c.EvalSha(ctx, sha, []string{keys[i]}, 1, 1).Err()
		},
		close: c.Close,
	})
	return nil
}

// quantile is the q-quantile (0..1) of v by the nearest rank; v is not
// changed.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}

// WriteCeiling writes rows as a markdown table.
func WriteCeiling(w io.Writer, rows []CeilingRow, reps int) error {
	if _, err := fmt.Fprintf(w, "One caller (c=1), %d repetitions, every limiter once per repetition in a rotated order; ratio = ops/s over redis_rate's in the same repetition.\n\n"+
		"| subjects | limiter | median ops/s | vs redis_rate: median (q1-q3) |\n|---|---|---:|---:|\n", reps); err != nil {
		return err
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "| %s | %s | %.0f | %.3f (%.3f-%.3f) |\n", r.Subjects, r.Limiter, r.MedianOps, r.Median, r.Q1, r.Q3); err != nil {
			return err
		}
	}
	return nil
}
