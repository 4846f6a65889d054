package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
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

// profiledScripts are the limiters whose script time scriptProfiles splits.
var profiledScripts = []string{
	providerName("fixed_window"), providerName("sliding_window_counter"), providerName("token_bucket"), gcraName,
	FamilyRedisRate, FamilyUlule, FamilyTrivial,
}

// scriptProfiles takes, for each program and the trivial script, the
// commandstats of its first run over the hot subject at the lowest
// concurrency: which commands the script ran and how much of evalsha's
// time they account for.
func scriptProfiles(runs []RunResult) []ScriptProfile {
	var out []ScriptProfile
	for _, name := range profiledScripts {
		best := -1
		for i, r := range runs {
			if r.Limiter == name && r.Subjects == SubjectsHot && (best < 0 || r.Concurrency < runs[best].Concurrency) {
				best = i
			}
		}
		if best < 0 {
			continue
		}
		r := runs[best]
		ev := r.Commands["evalsha"]
		p := ScriptProfile{Limiter: name, EvalshaUsecPerCall: ev.UsecPerCall, Commands: map[string]CommandStat{}}
		var inner int64
		for cmd, st := range r.Commands {
			if cmd == "evalsha" || cmd == "eval" {
				continue
			}
			p.Commands[cmd] = st
			inner += st.Usec
		}
		if ev.Calls > 0 {
			p.InnerUsecPerCall = float64(inner) / float64(ev.Calls)
		}
		out = append(out, p)
	}
	return out
}

// profileProvider takes a CPU profile of the token-bucket provider loop
// (distinct subjects, concurrency 16) and returns `go tool pprof -top`.
func profileProvider(ctx context.Context, cfg Config, srv *Server, set *limiterSet) (string, error) {
	cfg.logf("== CPU profile of the provider loop (%v)", cfg.ProfileDuration)
	dir, err := os.MkdirTemp("", "tlb-bench-pprof-")
	if err != nil {
		return "", fmt.Errorf("bench: profile dir: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "provider.pprof")
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("bench: profile file: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("bench: start CPU profile: %w", err)
	}
	_, merr := measure(ctx, srv, runSpec{
		lim: set.byName[providerName("token_bucket")], concurrency: 16, subjects: SubjectsDistinct,
		duration: cfg.ProfileDuration, warmup: cfg.Warmup, nDistinct: cfg.DistinctSubjects, next: new(atomic.Uint64),
	})
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("bench: close profile: %w", err)
	}
	if merr != nil {
		return "", merr
	}
	// Two views: where the whole loop spends its CPU, and the provider's
	// own code (Evaluate with the go-redis call and the scheduler cut out).
	var views []string
	for _, args := range [][]string{
		{"-top", "-nodecount=20"},
		{"-top", "-cum", "-nodecount=25", "-focus=redisrate.*Provider.*Evaluate", "-ignore=go-redis|runtime\\.(mcall|park_m|goexit)"},
	} {
		out, err := exec.CommandContext(ctx, "go", append(append([]string{"tool", "pprof"}, args...), path)...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("bench: go tool pprof %v: %w: %s", args, err, tail(string(out), 300))
		}
		views = append(views, "$ go tool pprof "+strings.Join(args, " ")+"\n"+trimPprof(string(out)))
	}
	return strings.Join(views, "\n\n"), nil
}

// trimPprof drops pprof's header lines that name local files.
func trimPprof(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, "File:") || strings.HasPrefix(line, "Build ID:") || strings.HasPrefix(line, "Time:") {
			continue
		}
		b.WriteString(line)
	}
	return strings.TrimRight(b.String(), "\n")
}

// memoryLimiters are measured for Redis memory per subject. The bare calls
// store exactly what the provider stores, so they are not repeated; the
// trivial script's INCR key with a TTL is the cost of a key name alone.
var memoryLimiters = []string{
	providerName("fixed_window"), providerName("sliding_window_counter"), providerName("token_bucket"), gcraName,
	FamilyRedisRate, FamilyUlule, FamilyTrivial,
}

// abuseLimiters are measured by the memory-under-abuse phase: algorithms
// whose state could grow with the requests a subject sends (a log).
var abuseLimiters = []string{slidingLogName}

// memoryPhase measures used_memory growth over MemorySubjects subjects,
// each limiter after a FLUSHALL of the private server.
func memoryPhase(ctx context.Context, cfg Config, srv *Server, set *limiterSet) ([]Memory, error) {
	cfg.logf("== Redis memory per subject (%d subjects each, after FLUSHALL)", cfg.MemorySubjects)
	var out []Memory
	for _, name := range memoryLimiters {
		lim := set.byName[name]
		if lim == nil || lim.memOp == nil {
			return nil, fmt.Errorf("bench: no memory-phase limiter %q", name)
		}
		if err := srv.Flush(ctx); err != nil {
			return nil, err
		}
		before, err := usedMemorySettled(ctx, srv)
		if err != nil {
			return nil, err
		}
		var next atomic.Int64
		next.Store(-1)
		err = parallel(16, int64(cfg.MemorySubjects), func(int) error {
			return lim.memOp(ctx, int(next.Add(1)))
		})
		if err != nil {
			return nil, fmt.Errorf("bench: memory %s: %w", name, err)
		}
		after, err := usedMemorySettled(ctx, srv)
		if err != nil {
			return nil, err
		}
		m := Memory{Limiter: name, Subjects: cfg.MemorySubjects, UsedBefore: before, UsedAfter: after,
			BytesPerSubject: float64(after-before) / float64(cfg.MemorySubjects)}
		if m.Keys, err = srv.Admin.DBSize(ctx).Result(); err != nil {
			return nil, fmt.Errorf("bench: DBSIZE: %w", err)
		}
		if m.Keys != int64(cfg.MemorySubjects) {
			return nil, fmt.Errorf("bench: memory %s: %d keys for %d subjects: a limiter must keep one key per subject", name, m.Keys, cfg.MemorySubjects)
		}
		key, err := srv.Admin.RandomKey(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("bench: RANDOMKEY: %w", err)
		}
		m.SampleKeyLen = len(key)
		if m.SampleUsage, err = srv.Admin.MemoryUsage(ctx, key, 0).Result(); err != nil {
			return nil, fmt.Errorf("bench: MEMORY USAGE: %w", err)
		}
		if m.SampleEncoding, err = srv.Admin.ObjectEncoding(ctx, key).Result(); err != nil {
			return nil, fmt.Errorf("bench: OBJECT ENCODING: %w", err)
		}
		if m.SampleType, err = srv.Admin.Type(ctx, key).Result(); err != nil {
			return nil, fmt.Errorf("bench: TYPE: %w", err)
		}
		cfg.logf("   %-32s %7.1f B/subject  (key %d B, MEMORY USAGE %d B, %s %s)", name, m.BytesPerSubject, m.SampleKeyLen, m.SampleUsage, m.SampleType, m.SampleEncoding)
		out = append(out, m)
	}
	return out, srv.Flush(ctx)
}

// memoryAbusePhase measures, for each of abuseLimiters, used_memory growth
// per subject over AbuseSubjects subjects twice, each after a FLUSHALL:
// first every subject is sent exactly its limit (memLimit calls, every one
// admitted), then every subject is sent abuseFactor times its limit (the
// first memLimit admitted, the rest denied). A state bounded by the limit
// costs the same per subject both times. A limiter absent from the set
// (its algorithm not yet accepted by ratelimit.NewPolicy) is recorded as
// skipped.
func memoryAbusePhase(ctx context.Context, cfg Config, srv *Server, set *limiterSet) ([]MemoryAbuse, error) {
	cfg.logf("== Redis memory per subject under abuse (%d subjects, limit %d per hour, %dx the limit)", cfg.AbuseSubjects, memLimit, abuseFactor)
	var out []MemoryAbuse
	for _, name := range abuseLimiters {
		lim := set.byName[name]
		if lim == nil || lim.abuseOp == nil {
			out = append(out, MemoryAbuse{Limiter: name, Skipped: "ratelimit.NewPolicy does not accept the algorithm yet"})
			cfg.logf("   %-32s skipped: not accepted by ratelimit.NewPolicy", name)
			continue
		}
		m := MemoryAbuse{Limiter: name, Subjects: cfg.AbuseSubjects, Limit: memLimit}
		var err error
		if m.Exact, err = abuseRound(ctx, srv, lim, cfg.AbuseSubjects, memLimit); err != nil {
			return nil, err
		}
		if m.Abused, err = abuseRound(ctx, srv, lim, cfg.AbuseSubjects, abuseFactor*memLimit); err != nil {
			return nil, err
		}
		m.GrowthPercent = growthPercent(m.Exact.UsageBytesPerSubject, m.Abused.UsageBytesPerSubject)
		m.UsedGrowthPercent = growthPercent(m.Exact.BytesPerSubject, m.Abused.BytesPerSubject)
		cfg.logf("   %-32s %dx%d calls: %7.1f B/subject MEMORY USAGE, %7.1f used_memory; %dx%d calls: %7.1f, %7.1f (%+.2f%%, %+.2f%%)",
			name, m.Subjects, m.Exact.CallsPerSubject, m.Exact.UsageBytesPerSubject, m.Exact.BytesPerSubject,
			m.Subjects, m.Abused.CallsPerSubject, m.Abused.UsageBytesPerSubject, m.Abused.BytesPerSubject, m.GrowthPercent, m.UsedGrowthPercent)
		out = append(out, m)
	}
	return out, srv.Flush(ctx)
}

// growthPercent is 100 * (b - a) / a, 0 when a is not positive.
func growthPercent(a, b float64) float64 {
	if a <= 0 {
		return 0
	}
	return 100 * (b - a) / a
}

// abuseRound flushes the server, sends calls calls for each of n subjects
// (interleaved over the subjects, 16 workers) and measures used_memory
// growth per subject and the mean MEMORY USAGE of the n keys. Every subject must end with exactly memLimit
// admitted calls: a limiter that admits more or fewer is not the exact
// limiter the phase is for.
func abuseRound(ctx context.Context, srv *Server, lim *limiter, n int, calls int64) (AbuseRound, error) {
	if err := srv.Flush(ctx); err != nil {
		return AbuseRound{}, err
	}
	before, err := usedMemorySettled(ctx, srv)
	if err != nil {
		return AbuseRound{}, err
	}
	admitted := make([]atomic.Int64, n)
	var next atomic.Int64
	next.Store(-1)
	err = parallel(16, int64(n)*calls, func(int) error {
		i := int(next.Add(1) % int64(n))
		ok, err := lim.abuseOp(ctx, i)
		if ok {
			admitted[i].Add(1)
		}
		return err
	})
	if err != nil {
		return AbuseRound{}, fmt.Errorf("bench: memory under abuse %s: %w", lim.Name, err)
	}
	after, err := usedMemorySettled(ctx, srv)
	if err != nil {
		return AbuseRound{}, err
	}
	r := AbuseRound{CallsPerSubject: calls, UsedBefore: before, UsedAfter: after, BytesPerSubject: float64(after-before) / float64(n)}
	for i := range admitted {
		a := admitted[i].Load()
		if a != memLimit {
			return AbuseRound{}, fmt.Errorf("bench: memory under abuse %s: subject %d admitted %d of %d calls, want %d", lim.Name, i, a, calls, memLimit)
		}
		r.Admitted += a
	}
	r.Denied = int64(n)*calls - r.Admitted
	if r.Keys, err = srv.Admin.DBSize(ctx).Result(); err != nil {
		return AbuseRound{}, fmt.Errorf("bench: DBSIZE: %w", err)
	}
	if r.Keys != int64(n) {
		return AbuseRound{}, fmt.Errorf("bench: memory under abuse %s: %d keys for %d subjects", lim.Name, r.Keys, n)
	}
	// The keys' own bytes: MEMORY USAGE (SAMPLES 0) of every key, which
	// does not depend on anything but the keys (used_memory moves by tens
	// of KB with the server's own bookkeeping, a lot over 1,000 subjects).
	var usage int64
	var cursor uint64
	for range n + 1 { // SCAN returns at least one key per call until done
		keys, next, err := srv.Admin.Scan(ctx, cursor, "", 1000).Result()
		if err != nil {
			return AbuseRound{}, fmt.Errorf("bench: SCAN: %w", err)
		}
		for _, key := range keys {
			u, err := srv.Admin.MemoryUsage(ctx, key, 0).Result()
			if err != nil {
				return AbuseRound{}, fmt.Errorf("bench: MEMORY USAGE: %w", err)
			}
			usage += u
			r.SampleUsage = u
			if r.SampleEncoding == "" {
				if r.SampleEncoding, err = srv.Admin.ObjectEncoding(ctx, key).Result(); err != nil {
					return AbuseRound{}, fmt.Errorf("bench: OBJECT ENCODING: %w", err)
				}
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if cursor != 0 {
		return AbuseRound{}, fmt.Errorf("bench: memory under abuse %s: SCAN did not finish over %d keys", lim.Name, n)
	}
	r.UsageBytesPerSubject = float64(usage) / float64(n)
	return r, nil
}

// Settling of used_memory readings: INFO's mem_clients_normal follows the
// connections' buffers with a delay (a reading right after a burst of
// calls was seen off by 300 KB, 3 B per subject over 100,000 subjects), so
// a reading is taken once two consecutive ones, settleEvery apart, agree.
const (
	settleEvery = 250 * time.Millisecond
	settleReads = 24 // at most 6 s
)

// usedMemorySettled is usedMemory once two consecutive readings agree, or
// an error after settleReads readings that never did.
func usedMemorySettled(ctx context.Context, srv *Server) (int64, error) {
	prev, err := usedMemory(ctx, srv)
	if err != nil {
		return 0, err
	}
	for range settleReads {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("bench: used_memory: %w", ctx.Err())
		case <-time.After(settleEvery):
		}
		cur, err := usedMemory(ctx, srv)
		if err != nil {
			return 0, err
		}
		if cur == prev {
			return cur, nil
		}
		prev = cur
	}
	return 0, fmt.Errorf("bench: used_memory did not settle: %d readings %v apart all differed", settleReads+1, settleEvery)
}

// usedMemory is INFO used_memory minus mem_clients_normal: the connections'
// query and output buffers grow and shrink with traffic and are not state.
func usedMemory(ctx context.Context, srv *Server) (int64, error) {
	info, err := srv.Info(ctx, "memory")
	if err != nil {
		return 0, err
	}
	used, err := infoFloat(info, "used_memory")
	if err != nil {
		return 0, err
	}
	clients, err := infoFloat(info, "mem_clients_normal")
	if err != nil {
		return 0, err
	}
	return int64(used - clients), nil
}

// redisBenchmarkPhase runs redis-benchmark's trivial EVAL at each
// concurrency, or records why it was skipped.
func redisBenchmarkPhase(ctx context.Context, cfg Config, srv *Server) (RedisBenchmark, error) {
	rb := RedisBenchmark{Command: "redis-benchmark " + strings.Join(quoteArgs(redisBenchmarkArgs), " ")}
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		rb.Skipped = "redis-benchmark not on PATH (apt-get install redis-tools)"
		cfg.logf("== redis-benchmark: skipped: %s", rb.Skipped)
		return rb, nil
	}
	cfg.logf("== %s", rb.Command)
	for rep := range cfg.RedisBenchReps {
		for _, c := range cfg.Concurrency {
			r, err := runRedisBenchmark(ctx, bin, srv.Addr, c, 1, cfg.RedisBenchRequests[c])
			if err != nil {
				return rb, err
			}
			r.Rep = rep
			cfg.logf("   c=%-2d rep %d %9.0f ops/s  p50 %7.1fµs  p99 %8.1fµs", c, rep, r.OpsPerSec, r.P50Micros, r.P99Micros)
			rb.Runs = append(rb.Runs, r)
			// The pipelined ceiling: -P 16 answers about ten times as many
			// requests per second, so ten times the requests keep the run
			// about as long.
			r, err = runRedisBenchmark(ctx, bin, srv.Addr, c, RedisBenchPipeline, 10*cfg.RedisBenchRequests[c])
			if err != nil {
				return rb, err
			}
			r.Rep = rep
			cfg.logf("   c=%-2d -P %d rep %d %9.0f ops/s  p50 %7.1fµs  p99 %8.1fµs", c, RedisBenchPipeline, rep, r.OpsPerSec, r.P50Micros, r.P99Micros)
			rb.PipelinedRuns = append(rb.PipelinedRuns, r)
		}
	}
	rb.Cells = redisBenchmarkCells(rb.Runs)
	rb.PipelinedCells = redisBenchmarkCells(rb.PipelinedRuns)
	return rb, nil
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if strings.ContainsAny(a, " '") {
			out[i] = `"` + a + `"`
		}
	}
	return out
}

// clockReadNanos measures one time.Now on this machine: the provider reads
// the clock on every call, and on some virtual machines that is a system
// call rather than a vDSO read.
func clockReadNanos() float64 {
	var sink time.Time
	r := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			sink = time.Now()
		}
	})
	_ = sink
	return float64(r.T.Nanoseconds()) / float64(max(r.N, 1))
}

// machineInfo describes the host.
func machineInfo(ctx context.Context, root string) Machine {
	m := Machine{
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS: runtime.GOOS + "/" + runtime.GOARCH, GoVersion: runtime.Version(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if name, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	m.LoadAvgStart = loadAvg()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource"); err == nil {
		m.ClockSource = strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, "redis-benchmark", "--version").Output(); err == nil {
		m.RedisBenchmark = strings.TrimSpace(string(out))
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.GitCommit = strings.TrimSpace(string(out))
	}
	return m
}

// loadAvg is the first three fields of /proc/loadavg, or "".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
