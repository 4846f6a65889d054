package bench

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// SchemaVersion identifies the layout of results.json.
const SchemaVersion = "tlb-bench-results/v1"

// Modes of a run.
const (
	ModeFull  = "full"
	ModeSmoke = "smoke"
)

// Results is everything one `make bench` measured: the content of
// bench/results.json, from which the report, the chart and the generated
// sections of docs/performance.md are derived.
type Results struct {
	Schema   string    `json:"schema"`
	Mode     string    `json:"mode"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  Machine   `json:"machine"`
	Settings Settings  `json:"settings"`
	// Runs are the raw throughput measurements, in execution order.
	Runs []RunResult `json:"runs"`
	// Cells are the medians of Runs per limiter, concurrency and subject set.
	Cells []Cell `json:"cells"`
	// Comparisons are paired (same repetition) ratios and differences.
	Comparisons []Comparison `json:"comparisons"`
	Memory      []Memory     `json:"memory"`
	// MemoryAbuse is the memory-under-abuse phase (issue 22 item 5).
	MemoryAbuse    []MemoryAbuse  `json:"memoryAbuse,omitempty"`
	RedisBenchmark RedisBenchmark `json:"redisBenchmark"`
	Micro          []Micro        `json:"micro"`
	// Flood and FloodSummaries: the flood phase (issue 24 item 3), runs
	// and medians per limiter.
	Flood          []FloodRun     `json:"flood"`
	FloodSummaries []FloodSummary `json:"floodSummaries"`
	Evidence       Evidence       `json:"evidence"`
	Targets        []Target       `json:"targets"`
}

// Machine describes where the numbers come from; absolute numbers only mean
// something on it.
type Machine struct {
	NumCPU         int    `json:"numCpu"`
	GOMAXPROCS     int    `json:"gomaxprocs"`
	CPUModel       string `json:"cpuModel"`
	OS             string `json:"os"`
	Kernel         string `json:"kernel"`
	GoVersion      string `json:"goVersion"`
	RedisVersion   string `json:"redisVersion"`
	RedisBenchmark string `json:"redisBenchmark"`
	GitCommit      string `json:"gitCommit"`
	ClockSource    string `json:"clockSource"`
	// LoadAvgStart and LoadAvgEnd are /proc/loadavg's 1/5/15-minute load
	// averages when the run started and ended: other work on the machine.
	LoadAvgStart string `json:"loadAvgStart,omitempty"`
	LoadAvgEnd   string `json:"loadAvgEnd,omitempty"`
}

// Settings are the parameters of the run.
type Settings struct {
	DistinctSubjects int     `json:"distinctSubjects"`
	Concurrency      []int   `json:"concurrency"`
	Reps             int     `json:"reps"`
	RunSeconds       float64 `json:"runSeconds"`
	MaxOpsPerRun     int64   `json:"maxOpsPerRun"`
	MemorySubjects   int     `json:"memorySubjects"`
	MicroCount       int     `json:"microCount"`
	MicroBenchtime   string  `json:"microBenchtime"`
	PoolSize         int     `json:"poolSize"`
	Limit            int64   `json:"limit"`
	// MemoryLimitPerHour is the limit of every limiter in the memory phase.
	MemoryLimitPerHour int64 `json:"memoryLimitPerHour"`
	// AbuseSubjects and AbuseFactor size the memory-under-abuse phase:
	// subjects, and how many times its limit each one asks for.
	AbuseSubjects int `json:"abuseSubjects,omitempty"`
	AbuseFactor   int `json:"abuseFactor,omitempty"`
}

// Cell is the median over repetitions of one limiter at one concurrency
// over one subject set.
type Cell struct {
	Limiter              string  `json:"limiter"`
	Family               string  `json:"family"`
	Algorithm            string  `json:"algorithm"`
	Concurrency          int     `json:"concurrency"`
	Subjects             string  `json:"subjects"`
	Reps                 int     `json:"reps"`
	Ops                  int64   `json:"ops"`
	OpsPerSec            float64 `json:"opsPerSec"`
	OpsPerSecMin         float64 `json:"opsPerSecMin"`
	OpsPerSecMax         float64 `json:"opsPerSecMax"`
	P50Micros            float64 `json:"p50Micros"`
	P99Micros            float64 `json:"p99Micros"`
	P999Micros           float64 `json:"p999Micros"`
	AllocsPerOp          float64 `json:"allocsPerOp"`
	BytesPerOp           float64 `json:"bytesPerOp"`
	ClientCPUMicrosPerOp float64 `json:"clientCpuMicrosPerOp"`
	ServerCPUMicrosPerOp float64 `json:"serverCpuMicrosPerOp"`
	EvalshaUsecPerCall   float64 `json:"evalshaUsecPerCall"`
}

// Comparison kinds.
const (
	KindRatio      = "ratio"      // A / B
	KindDifference = "difference" // A - B
)

// Comparison is A against B on one metric, paired by repetition (runs of
// the same repetition ran back to back), summarized by the median.
type Comparison struct {
	Name        string    `json:"name"`
	Kind        string    `json:"kind"`
	Metric      string    `json:"metric"`
	A           string    `json:"a"`
	B           string    `json:"b"`
	Concurrency int       `json:"concurrency"`
	Subjects    string    `json:"subjects"`
	Median      float64   `json:"median"`
	Min         float64   `json:"min"`
	Max         float64   `json:"max"`
	Values      []float64 `json:"values"`
}

// Memory is Redis memory per subject for one limiter: INFO used_memory
// after calling it once for each of Subjects distinct subjects, minus
// used_memory after FLUSHALL, divided by Subjects. Both readings exclude
// mem_clients_normal (connection buffers, which are not state).
type Memory struct {
	Limiter         string  `json:"limiter"`
	Subjects        int     `json:"subjects"`
	Keys            int64   `json:"keys"`
	UsedBefore      int64   `json:"usedMemoryBefore"`
	UsedAfter       int64   `json:"usedMemoryAfter"`
	BytesPerSubject float64 `json:"bytesPerSubject"`
	// A sample key: its name length, MEMORY USAGE (SAMPLES 0), OBJECT
	// ENCODING and type.
	SampleKeyLen   int    `json:"sampleKeyLen"`
	SampleUsage    int64  `json:"sampleMemoryUsage"`
	SampleEncoding string `json:"sampleEncoding"`
	SampleType     string `json:"sampleType"`
}

// MemoryAbuse is one limiter's Redis memory per subject when every subject
// is sent exactly its limit (Exact) and when every subject is sent
// Settings.AbuseFactor times its limit (Abused), each after a FLUSHALL.
type MemoryAbuse struct {
	Limiter  string `json:"limiter"`
	Subjects int    `json:"subjects"`
	// Limit is the limit per hour of every subject.
	Limit  int64      `json:"limit"`
	Exact  AbuseRound `json:"exact"`
	Abused AbuseRound `json:"abused"`
	// GrowthPercent is 100 * (Abused - Exact) / Exact of the keys' mean
	// MEMORY USAGE (UsageBytesPerSubject); UsedGrowthPercent the same of
	// used_memory per subject (BytesPerSubject).
	GrowthPercent     float64 `json:"growthPercent"`
	UsedGrowthPercent float64 `json:"usedGrowthPercent"`
	// Skipped says why the limiter was not measured.
	Skipped string `json:"skipped,omitempty"`
}

// AbuseRound is one round of the memory-under-abuse phase: CallsPerSubject
// calls for each subject, how many were admitted and denied in all,
// used_memory growth (less mem_clients_normal) per subject, the mean
// MEMORY USAGE (SAMPLES 0) of the subjects' keys (their name, value and
// dictionary entry) and one key's MEMORY USAGE and encoding.
type AbuseRound struct {
	CallsPerSubject int64   `json:"callsPerSubject"`
	Admitted        int64   `json:"admitted"`
	Denied          int64   `json:"denied"`
	Keys            int64   `json:"keys"`
	UsedBefore      int64   `json:"usedMemoryBefore"`
	UsedAfter       int64   `json:"usedMemoryAfter"`
	BytesPerSubject float64 `json:"bytesPerSubject"`
	// UsageBytesPerSubject is the sum of MEMORY USAGE over every key / N.
	UsageBytesPerSubject float64 `json:"usageBytesPerSubject"`
	SampleUsage          int64   `json:"sampleMemoryUsage"`
	SampleEncoding       string  `json:"sampleEncoding"`
}

// RedisBenchmark is redis-benchmark running a trivial EVAL: the server's
// ceiling on this machine, from a C client, one request in flight per
// connection (Runs, Cells) and with -P RedisBenchPipeline requests in flight
// per connection (PipelinedRuns, PipelinedCells: the pipelined ceiling).
type RedisBenchmark struct {
	Command        string          `json:"command"`
	Skipped        string          `json:"skipped,omitempty"`
	Runs           []RedisBenchRun `json:"runs,omitempty"`
	Cells          []RedisBenchRun `json:"cells,omitempty"`
	PipelinedRuns  []RedisBenchRun `json:"pipelinedRuns,omitempty"`
	PipelinedCells []RedisBenchRun `json:"pipelinedCells,omitempty"`
}

// RedisBenchPipeline is the -P of the pipelined redis-benchmark runs.
const RedisBenchPipeline = 16

// RedisBenchRun is one redis-benchmark invocation (or, in Cells, the
// median of the repetitions).
type RedisBenchRun struct {
	Concurrency int     `json:"concurrency"`
	Pipeline    int     `json:"pipeline,omitempty"` // -P; 0: none
	Requests    int     `json:"requests"`
	Rep         int     `json:"rep"`
	OpsPerSec   float64 `json:"opsPerSec"`
	P50Micros   float64 `json:"p50Micros"`
	P99Micros   float64 `json:"p99Micros"`
}

// Micro is one `go test -bench` benchmark of a module, median over the
// repetitions.
type Micro struct {
	Name        string             `json:"name"`
	Module      string             `json:"module"`
	Package     string             `json:"package"`
	Count       int                `json:"count"`
	NsPerOp     float64            `json:"nsPerOp"`
	NsPerOpMin  float64            `json:"nsPerOpMin"`
	NsPerOpMax  float64            `json:"nsPerOpMax"`
	AllocsPerOp float64            `json:"allocsPerOp"`
	BytesPerOp  float64            `json:"bytesPerOp"`
	Extra       map[string]float64 `json:"extra,omitempty"`
	// Samples are the ns/op of each repetition, in order; repetition k of
	// benchmarks from one spec ran in the same go test invocation.
	Samples []float64 `json:"samples,omitempty"`
}

// Evidence is what explains the numbers: where the server spends a call and
// what the client spends outside go-redis.
type Evidence struct {
	// ScriptCommands are, per program, the commands the script ran and
	// their share of its time (commandstats of a provider run, hot subject,
	// concurrency 1).
	ScriptCommands []ScriptProfile `json:"scriptCommands"`
	// ClockReadNanos is the cost of one time.Now on this machine.
	ClockReadNanos float64 `json:"clockReadNanos"`
	// ClientProfile is `go tool pprof -top` of the provider loop (full mode).
	ClientProfile string `json:"clientProfile,omitempty"`
}

// ScriptProfile splits one program's server time.
type ScriptProfile struct {
	Limiter            string                 `json:"limiter"`
	EvalshaUsecPerCall float64                `json:"evalshaUsecPerCall"`
	InnerUsecPerCall   float64                `json:"innerUsecPerCall"`
	Commands           map[string]CommandStat `json:"commands"`
}

// Target statuses.
const (
	StatusMet         = "met"
	StatusMissed      = "missed"
	StatusNotMeasured = "not measured"
)

// Target is one target of issue 6 with its measured (worst) value.
type Target struct {
	ID        string  `json:"id"`
	Title     string  `json:"title"`
	Goal      string  `json:"goal"`
	Op        string  `json:"op"` // ">=", "<=" or "<"
	Threshold float64 `json:"threshold"`
	Unit      string  `json:"unit"`
	Measured  float64 `json:"measured"`
	Where     string  `json:"where"`
	Status    string  `json:"status"`
	Note      string  `json:"note,omitempty"`
}

func (t *Target) judge() {
	if t.Status == StatusNotMeasured {
		return
	}
	ok := false
	switch t.Op {
	case ">=":
		ok = t.Measured >= t.Threshold
	case "<=":
		ok = t.Measured <= t.Threshold
	case "<":
		ok = t.Measured < t.Threshold
	}
	t.Status = StatusMissed
	if ok {
		t.Status = StatusMet
	}
}

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
	res.Targets = evaluateTargets(res)
}
