package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync/atomic"
)

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
