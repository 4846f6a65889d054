package bench

import (
	"cmp"
	"math"
	"slices"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// median of xs (0 when empty); xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

type cellKey struct {
	limiter     string
	concurrency int
	subjects    string
}

// aggregate computes Cells from Runs.
func aggregate(runs []RunResult) []Cell {
	groups := map[cellKey][]RunResult{}
	var order []cellKey
	for _, r := range runs {
		k := cellKey{r.Limiter, r.Concurrency, r.Subjects}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	cells := make([]Cell, 0, len(order))
	for _, k := range order {
		rs := groups[k]
		col := func(f func(RunResult) float64) []float64 {
			out := make([]float64, len(rs))
			for i, r := range rs {
				out[i] = f(r)
			}
			return out
		}
		ops := col(func(r RunResult) float64 { return r.OpsPerSec })
		c := Cell{
			Limiter: k.limiter, Family: rs[0].Family, Algorithm: rs[0].Algorithm,
			Concurrency: k.concurrency, Subjects: k.subjects, Reps: len(rs),
			OpsPerSec:            median(ops),
			OpsPerSecMin:         slices.Min(ops),
			OpsPerSecMax:         slices.Max(ops),
			P50Micros:            median(col(func(r RunResult) float64 { return r.P50Micros })),
			P99Micros:            median(col(func(r RunResult) float64 { return r.P99Micros })),
			P999Micros:           median(col(func(r RunResult) float64 { return r.P999Micros })),
			AllocsPerOp:          median(col(func(r RunResult) float64 { return r.AllocsPerOp })),
			BytesPerOp:           median(col(func(r RunResult) float64 { return r.BytesPerOp })),
			ClientCPUMicrosPerOp: median(col(func(r RunResult) float64 { return r.ClientCPUMicrosPerOp })),
			ServerCPUMicrosPerOp: median(col(func(r RunResult) float64 { return r.ServerCPUMicrosPerOp })),
			EvalshaUsecPerCall:   median(col(func(r RunResult) float64 { return r.EvalshaUsecPerCall })),
		}
		for _, r := range rs {
			c.Ops += r.Ops
		}
		cells = append(cells, c)
	}
	return cells
}

// metricOf reads a named metric of a run.
func metricOf(r RunResult, metric string) float64 {
	switch metric {
	case "opsPerSec":
		return r.OpsPerSec
	case "p50Micros":
		return r.P50Micros
	case "p99Micros":
		return r.P99Micros
	case "allocsPerOp":
		return r.AllocsPerOp
	case "bytesPerOp":
		return r.BytesPerOp
	case "evalshaUsecPerCall":
		return r.EvalshaUsecPerCall
	case "serverCpuMicrosPerOp":
		return r.ServerCPUMicrosPerOp
	}
	return math.NaN()
}

// compare pairs the runs of a and b by repetition for every concurrency and
// subject set both were measured at.
func compare(runs []RunResult, name, kind, metric, a, b string) []Comparison {
	type pk struct {
		concurrency int
		subjects    string
		rep         int
	}
	av, bv := map[pk]float64{}, map[pk]float64{}
	for _, r := range runs {
		k := pk{r.Concurrency, r.Subjects, r.Rep}
		switch r.Limiter {
		case a:
			av[k] = metricOf(r, metric)
		case b:
			bv[k] = metricOf(r, metric)
		}
	}
	type gk struct {
		concurrency int
		subjects    string
	}
	vals := map[gk][]float64{}
	for k, x := range av {
		y, ok := bv[k]
		if !ok {
			continue
		}
		v := x - y
		if kind == KindRatio {
			if y == 0 {
				continue
			}
			v = x / y
		}
		g := gk{k.concurrency, k.subjects}
		vals[g] = append(vals[g], v)
	}
	out := make([]Comparison, 0, len(vals))
	for g, vs := range vals {
		slices.Sort(vs)
		out = append(out, Comparison{
			Name: name, Kind: kind, Metric: metric, A: a, B: b,
			Concurrency: g.concurrency, Subjects: g.subjects,
			Median: median(vs), Min: vs[0], Max: vs[len(vs)-1], Values: vs,
		})
	}
	slices.SortFunc(out, func(x, y Comparison) int {
		return cmp.Or(cmp.Compare(x.Subjects, y.Subjects), cmp.Compare(x.Concurrency, y.Concurrency))
	})
	return out
}

// Comparison names.
const (
	CmpProviderVsBareOps     = "provider/bare throughput"
	CmpProviderVsBareP99     = "provider/bare p99"
	CmpProviderVsBareAllocs  = "provider-bare allocs/op"
	CmpProviderVsBareBytes   = "provider-bare bytes/op"
	CmpTokenVsRedisRateOps   = "provider token bucket/redis_rate throughput"
	CmpPipelinedVsRedisRate  = "provider (pipelined) token bucket/redis_rate throughput"
	CmpFixedVsUluleOps       = "provider fixed window/ulule throughput"
	CmpPipelinedFixedVsUlule = "provider (pipelined) fixed window/ulule throughput"
	CmpScriptVsTrivialUsec   = "program/trivial evalsha usec_per_call"
	CmpServerVsTrivialCPU    = "program/trivial server CPU per call"
	CmpRedisRateVsTrivialCPU = "redis_rate/trivial evalsha usec_per_call"
	// Issue 13.
	CmpProviderVsBareP50      = "provider/bare p50"
	CmpTokenVsRedisRateP99    = "provider token bucket/redis_rate p99"
	CmpPipelinedVsRedisRateP9 = "provider (pipelined) token bucket/redis_rate p99"
	CmpServerVsRedisRateCPU   = "program/redis_rate server CPU per call"
	// CmpPipelinedServerVsRedisRateCPU is CmpServerVsRedisRateCPU for the
	// pipelined provider (the shipped default), one per algorithm.
	CmpPipelinedServerVsRedisRateCPU = "provider (pipelined)/redis_rate server CPU per call"
	// Issue 22.
	CmpGCRAVsRedisRateOps          = "provider gcra/redis_rate throughput"
	CmpPipelinedGCRAVsRedisRateOps = "provider (pipelined) gcra/redis_rate throughput"
	// Issue 23.
	CmpSetVsTwoCallsOps = "policy set of 2/two single calls throughput"
	CmpSetVsTwoCallsP50 = "policy set of 2/two single calls p50"
	CmpSetVsOneCallP50  = "policy set of 2/one call (token bucket) p50"
)

// comparisons derives every paired comparison the targets and the report use.
func comparisons(runs []RunResult) []Comparison {
	var out []Comparison
	for _, alg := range algorithms {
		p, b := providerName(alg.String()), bareName(alg.String())
		out = append(out, compare(runs, CmpProviderVsBareOps, KindRatio, "opsPerSec", p, b)...)
		out = append(out, compare(runs, CmpProviderVsBareP99, KindRatio, "p99Micros", p, b)...)
		out = append(out, compare(runs, CmpProviderVsBareAllocs, KindDifference, "allocsPerOp", p, b)...)
		out = append(out, compare(runs, CmpProviderVsBareBytes, KindDifference, "bytesPerOp", p, b)...)
		out = append(out, compare(runs, CmpScriptVsTrivialUsec, KindRatio, "evalshaUsecPerCall", p, FamilyTrivial)...)
		out = append(out, compare(runs, CmpServerVsTrivialCPU, KindRatio, "serverCpuMicrosPerOp", p, FamilyTrivial)...)
		out = append(out, compare(runs, CmpProviderVsBareP50, KindRatio, "p50Micros", p, b)...)
		out = append(out, compare(runs, CmpServerVsRedisRateCPU, KindRatio, "serverCpuMicrosPerOp", p, FamilyRedisRate)...)
	}
	tb := providerName(ratelimit.AlgorithmTokenBucket.String())
	fw := providerName(ratelimit.AlgorithmFixedWindow.String())
	out = append(out, compare(runs, CmpTokenVsRedisRateOps, KindRatio, "opsPerSec", tb, FamilyRedisRate)...)
	out = append(out, compare(runs, CmpPipelinedVsRedisRate, KindRatio, "opsPerSec", pipelinedName, FamilyRedisRate)...)
	out = append(out, compare(runs, CmpTokenVsRedisRateP99, KindRatio, "p99Micros", tb, FamilyRedisRate)...)
	out = append(out, compare(runs, CmpPipelinedVsRedisRateP9, KindRatio, "p99Micros", pipelinedName, FamilyRedisRate)...)
	out = append(out, compare(runs, CmpFixedVsUluleOps, KindRatio, "opsPerSec", fw, FamilyUlule)...)
	out = append(out, compare(runs, CmpPipelinedFixedVsUlule, KindRatio, "opsPerSec", pipelinedFixedName, FamilyUlule)...)
	out = append(out, compare(runs, CmpRedisRateVsTrivialCPU, KindRatio, "evalshaUsecPerCall", FamilyRedisRate, FamilyTrivial)...)
	out = append(out, compare(runs, CmpGCRAVsRedisRateOps, KindRatio, "opsPerSec", gcraName, FamilyRedisRate)...)
	out = append(out, compare(runs, CmpPipelinedGCRAVsRedisRateOps, KindRatio, "opsPerSec", pipelinedGCRAName, FamilyRedisRate)...)
	for _, name := range pipelinedNames {
		out = append(out, compare(runs, CmpPipelinedServerVsRedisRateCPU, KindRatio, "serverCpuMicrosPerOp", name, FamilyRedisRate)...)
	}
	out = append(out, compare(runs, CmpSetVsTwoCallsOps, KindRatio, "opsPerSec", setName, twoCallsName)...)
	out = append(out, compare(runs, CmpSetVsTwoCallsP50, KindRatio, "p50Micros", setName, twoCallsName)...)
	out = append(out, compare(runs, CmpSetVsOneCallP50, KindRatio, "p50Micros", setName, tb)...)
	return out
}

// Recompute derives Cells, Comparisons and Targets from the raw
// measurements again, so that a results.json re-rendered with -from follows
// the current aggregation and target rules.
func (res *Results) Recompute() {
	res.Cells = aggregate(res.Runs)
	res.Comparisons = comparisons(res.Runs)
	res.FloodSummaries = summarizeFlood(res.Flood)
	if res.Lease != nil {
		res.Lease.Summaries = summarizeLease(res.Lease.Runs)
	}
	res.Targets = evaluateTargets(res)
}
