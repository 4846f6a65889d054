package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"
)

// Config sets the size of a run. FullConfig is what `make bench` uses;
// SmokeConfig runs every phase with a few hundred operations.
type Config struct {
	// Root is the repository root (holding go.work).
	Root string
	// Mode is ModeFull or ModeSmoke.
	Mode string
	// DistinctSubjects is the size of the distinct subject set.
	DistinctSubjects int
	// Concurrency lists the worker counts; at most the client pool size.
	Concurrency []int
	// Reps is the number of repetitions of each run (medians are taken).
	Reps int
	// RunDuration bounds one run; MaxOpsPerRun (0: none) bounds its calls.
	RunDuration  time.Duration
	MaxOpsPerRun int64
	// Warmup is the number of untimed calls before each run.
	Warmup int64
	// MemorySubjects is the number of subjects of the memory phase.
	MemorySubjects int
	// AbuseSubjects is the number of subjects of the memory-under-abuse
	// phase (each gets memLimit, then abuseFactor*memLimit calls).
	AbuseSubjects int
	// MicroCount and MicroBenchtime are go test's -count and -benchtime.
	MicroCount     int
	MicroBenchtime string
	// RedisBenchRequests is redis-benchmark's -n per concurrency;
	// RedisBenchReps its repetitions.
	RedisBenchRequests map[int]int
	RedisBenchReps     int
	// ProfileDuration, when > 0, takes a CPU profile of the provider loop
	// for that long and stores `go tool pprof -top` in the evidence.
	ProfileDuration time.Duration
	// Log receives progress lines (nil: discarded).
	Log io.Writer
}

// FullConfig is the configuration of `make bench`, sized to finish in well
// under ten minutes on two cores.
func FullConfig(root string) Config {
	return Config{
		Root: root, Mode: ModeFull,
		DistinctSubjects: 100_000,
		Concurrency:      []int{1, 16, 64},
		// Many short repetitions rather than a few long ones: a burst of
		// load from outside hits few pairs, and the median discards them.
		Reps:           9,
		RunDuration:    400 * time.Millisecond,
		Warmup:         256,
		MemorySubjects: 100_000,
		// 1,000 subjects x 1,000 calls: the state grows by about 1 MB,
		// far above used_memory's noise of a few hundred bytes.
		AbuseSubjects:  1_000,
		MicroCount:     7,
		MicroBenchtime: "300ms",
		RedisBenchRequests: map[int]int{
			1: 20_000, 16: 100_000, 64: 100_000,
		},
		RedisBenchReps:  3,
		ProfileDuration: 5 * time.Second,
	}
}

// SmokeConfig runs every phase with a few hundred operations, to prove the
// tool and the shape of its output, not to measure anything.
func SmokeConfig(root string) Config {
	return Config{
		Root: root, Mode: ModeSmoke,
		DistinctSubjects: 500,
		Concurrency:      []int{1, 16, 64},
		Reps:             2,
		RunDuration:      250 * time.Millisecond,
		MaxOpsPerRun:     200,
		Warmup:           64,
		MemorySubjects:   300,
		AbuseSubjects:    20,
		MicroCount:       1,
		MicroBenchtime:   "100x",
		RedisBenchRequests: map[int]int{
			1: 200, 16: 300, 64: 300,
		},
		RedisBenchReps:  1,
		ProfileDuration: 0,
	}
}

func (c Config) validate() error {
	var errs []error
	if c.Mode != ModeFull && c.Mode != ModeSmoke {
		errs = append(errs, fmt.Errorf("bench: Mode %q must be %q or %q", c.Mode, ModeFull, ModeSmoke))
	}
	if c.DistinctSubjects < 1 || c.MemorySubjects < 1 || c.MemorySubjects > c.DistinctSubjects {
		errs = append(errs, fmt.Errorf("bench: DistinctSubjects %d and MemorySubjects %d must be >= 1, memory <= distinct", c.DistinctSubjects, c.MemorySubjects))
	}
	if c.AbuseSubjects < 1 || c.AbuseSubjects > c.DistinctSubjects {
		errs = append(errs, fmt.Errorf("bench: AbuseSubjects %d must be in 1..DistinctSubjects (%d)", c.AbuseSubjects, c.DistinctSubjects))
	}
	if len(c.Concurrency) == 0 {
		errs = append(errs, errors.New("bench: Concurrency is empty"))
	}
	for _, n := range c.Concurrency {
		if n < 1 || n > benchPoolSize {
			errs = append(errs, fmt.Errorf("bench: Concurrency %d must be in 1..%d", n, benchPoolSize))
		}
	}
	if c.Reps < 1 || c.RunDuration <= 0 || c.MicroCount < 1 || c.MicroBenchtime == "" || c.RedisBenchReps < 1 {
		errs = append(errs, errors.New("bench: Reps, RunDuration, MicroCount, MicroBenchtime and RedisBenchReps must be positive"))
	}
	if _, err := os.Stat(filepath.Join(c.Root, "go.work")); err != nil {
		errs = append(errs, fmt.Errorf("bench: Root %q is not the repository root (no go.work): %w", c.Root, err))
	}
	return errors.Join(errs...)
}

func (c Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

// Run performs every phase against one private redis-server and returns
// the results with cells, comparisons and targets computed.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	res := &Results{
		Schema: SchemaVersion, Mode: cfg.Mode, Started: time.Now().UTC(),
		Settings: Settings{
			DistinctSubjects: cfg.DistinctSubjects, Concurrency: cfg.Concurrency, Reps: cfg.Reps,
			RunSeconds: cfg.RunDuration.Seconds(), MaxOpsPerRun: cfg.MaxOpsPerRun, MemorySubjects: cfg.MemorySubjects,
			MicroCount: cfg.MicroCount, MicroBenchtime: cfg.MicroBenchtime, PoolSize: benchPoolSize, Limit: benchLimit,
			MemoryLimitPerHour: memLimit, AbuseSubjects: cfg.AbuseSubjects, AbuseFactor: abuseFactor,
		},
	}
	res.Machine = machineInfo(ctx, cfg.Root)

	if err := redisPhases(ctx, cfg, res); err != nil {
		return nil, err
	}

	cfg.logf("== go test -bench (module benchmarks)")
	for _, spec := range microSpecs() {
		ms, err := runMicro(ctx, cfg.Root, spec, cfg.MicroCount, cfg.MicroBenchtime)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			cfg.logf("   %-36s %10.1f ns/op %6.1f allocs/op %7.1f B/op", m.Name, m.NsPerOp, m.AllocsPerOp, m.BytesPerOp)
		}
		res.Micro = append(res.Micro, ms...)
	}
	res.Evidence.ClockReadNanos = clockReadNanos()

	res.Recompute()
	res.Machine.LoadAvgEnd = loadAvg()
	res.Finished = time.Now().UTC()
	return res, nil
}

// redisPhases runs everything that needs the server: the throughput matrix,
// the client profile, memory per subject and redis-benchmark. The server
// and every client are stopped before it returns.
func redisPhases(ctx context.Context, cfg Config, res *Results) (err error) {
	srv, err := StartServer(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := srv.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	res.Machine.RedisVersion = srv.Version
	cfg.logf("== redis-server %s on %s (private, no persistence)", srv.Version, srv.Addr)

	subs := newSubjects(cfg.DistinctSubjects)
	set, err := newLimiters(ctx, srv.Addr, subs)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := set.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()

	if err := matrix(ctx, cfg, srv, set, res); err != nil {
		return err
	}
	res.Evidence.ScriptCommands = scriptProfiles(res.Runs)
	if cfg.ProfileDuration > 0 {
		top, err := profileProvider(ctx, cfg, srv, set)
		if err != nil {
			return err
		}
		res.Evidence.ClientProfile = top
	}
	if res.Memory, err = memoryPhase(ctx, cfg, srv, set); err != nil {
		return err
	}
	if res.MemoryAbuse, err = memoryAbusePhase(ctx, cfg, srv, set); err != nil {
		return err
	}
	if err := srv.Flush(ctx); err != nil {
		return err
	}
	if res.Flood, res.FloodSummaries, err = floodPhase(ctx, cfg, srv); err != nil {
		return err
	}
	if res.Lease, err = leasePhase(ctx, cfg, srv); err != nil {
		return err
	}
	res.RedisBenchmark, err = redisBenchmarkPhase(ctx, cfg, srv)
	return err
}

// matrixOrder is the order of limiters inside one repetition; see repOrder.
var matrixOrder = []string{
	providerName("fixed_window"), bareName("fixed_window"),
	providerName("sliding_window_counter"), bareName("sliding_window_counter"),
	providerName("token_bucket"), bareName("token_bucket"), pipelinedName, pipelinedFixedName, pipelinedSlidingName,
	gcraName, bareName("gcra"), pipelinedGCRAName,
	setName, twoCallsName,
	FamilyRedisRate, FamilyUlule, FamilyTrivial,
}

// matrixUnits are the groups of limiters that run back to back: each
// provider with its bare baseline, then the peers and the trivial script.
var matrixUnits = [][]string{
	{providerName("fixed_window"), bareName("fixed_window")},
	{providerName("sliding_window_counter"), bareName("sliding_window_counter")},
	{providerName("token_bucket"), bareName("token_bucket")},
	{gcraName, bareName("gcra")},
	{setName, twoCallsName},
	{pipelinedName}, {pipelinedFixedName}, {pipelinedSlidingName}, {pipelinedGCRAName}, {FamilyRedisRate}, {FamilyUlule}, {FamilyTrivial},
}

// repOrder is the order of repetition rep: the units rotated by rep, so no
// limiter always runs first; inside a pair the provider runs first on even
// and second on odd repetitions (A B, B A, ...), so neither always profits
// from, or suffers, its position.
func repOrder(rep int) []string {
	n := len(matrixUnits)
	var out []string
	for k := range n {
		unit := slices.Clone(matrixUnits[(k+rep)%n])
		if rep%2 == 1 {
			slices.Reverse(unit)
		}
		out = append(out, unit...)
	}
	return out
}

// matrix measures every limiter at every concurrency over both subject
// sets, Reps times, interleaved. The distinct-subject runs start from a
// server where every limiter already holds state for every subject, so a
// call updates an existing key of a large working set (the steady state),
// not a first touch.
func matrix(ctx context.Context, cfg Config, srv *Server, set *limiterSet, res *Results) error {
	if err := srv.Flush(ctx); err != nil {
		return err
	}
	cfg.logf("== populating %d subjects for each of %d limiters", cfg.DistinctSubjects, len(matrixOrder))
	for _, name := range matrixOrder {
		lim := set.byName[name]
		if lim == nil {
			return fmt.Errorf("bench: no limiter %q", name)
		}
		var next atomic.Int64
		next.Store(-1)
		if err := parallel(benchPoolSize, int64(cfg.DistinctSubjects), func(int) error { return lim.op(ctx, int(next.Add(1))) }); err != nil {
			return fmt.Errorf("bench: populate %s: %w", name, err)
		}
	}
	total := 2 * len(cfg.Concurrency) * cfg.Reps * len(matrixOrder)
	done := 0
	for _, subjects := range []string{SubjectsDistinct, SubjectsHot} {
		for _, c := range cfg.Concurrency {
			// Each limiter walks its own subject sequence from the start.
			next := map[string]*atomic.Uint64{}
			for _, name := range matrixOrder {
				next[name] = new(atomic.Uint64)
			}
			for rep := range cfg.Reps {
				for _, name := range repOrder(rep) {
					r, err := measure(ctx, srv, runSpec{
						lim: set.byName[name], concurrency: c, subjects: subjects, rep: rep,
						duration: cfg.RunDuration, maxOps: cfg.MaxOpsPerRun, warmup: cfg.Warmup,
						nDistinct: cfg.DistinctSubjects, next: next[name],
					})
					if err != nil {
						return err
					}
					if r.Errors > 0 {
						return fmt.Errorf("bench: %s c=%d %s: %d of %d calls failed, e.g. %q", name, c, subjects, r.Errors, r.Ops, r.ErrorSamples)
					}
					res.Runs = append(res.Runs, r)
					done++
					cfg.logf("   [%3d/%d] %-8s c=%-2d rep %d %-32s %9.0f ops/s  p50 %7.1fµs  p99 %8.1fµs  %5.1f allocs/op  evalsha %5.2fµs",
						done, total, subjects, c, rep, name, r.OpsPerSec, r.P50Micros, r.P99Micros, r.AllocsPerOp, r.EvalshaUsecPerCall)
				}
			}
		}
	}
	return nil
}
