package bench

import (
	"time"
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
	// Lease is the lease phase (issue 37 item 5), with its own settings,
	// date and commit: `make bench-lease` replaces it alone.
	Lease    *LeasePhase `json:"lease,omitempty"`
	Evidence Evidence    `json:"evidence"`
	Targets  []Target    `json:"targets"`
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
