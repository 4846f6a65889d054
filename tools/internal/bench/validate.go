package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"math"
	"slices"
	"strings"
)

// Validate checks the shape of res: every cell, comparison, memory row,
// module benchmark and target the report needs is present and plausible.
// It does not judge the numbers (targets may be missed).
func Validate(res *Results) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("bench: results: "+format, args...)) }
	if res.Schema != SchemaVersion {
		bad("schema %q, want %q", res.Schema, SchemaVersion)
	}
	if res.Mode != ModeFull && res.Mode != ModeSmoke {
		bad("mode %q", res.Mode)
	}
	m := res.Machine
	if m.NumCPU < 1 || m.GoVersion == "" || m.RedisVersion == "" || m.OS == "" {
		bad("machine incomplete: %+v", m)
	}
	if !res.Finished.After(res.Started) {
		bad("finished %v not after started %v", res.Finished, res.Started)
	}
	s := res.Settings
	if want := 2 * len(s.Concurrency) * s.Reps * len(matrixOrder); len(res.Runs) != want {
		bad("%d runs, want %d", len(res.Runs), want)
	}
	for _, r := range res.Runs {
		if r.Ops < 1 || r.Errors != 0 || r.OpsPerSec <= 0 || r.Seconds <= 0 {
			bad("run %s c=%d %s rep %d: ops %d errors %d ops/s %.1f", r.Limiter, r.Concurrency, r.Subjects, r.Rep, r.Ops, r.Errors, r.OpsPerSec)
		}
		if r.P50Micros <= 0 || r.P50Micros > r.P99Micros || r.P99Micros > r.P999Micros || r.P999Micros > r.MaxMicros {
			bad("run %s c=%d %s rep %d: latency quantiles not ordered: %.1f %.1f %.1f max %.1f", r.Limiter, r.Concurrency, r.Subjects, r.Rep, r.P50Micros, r.P99Micros, r.P999Micros, r.MaxMicros)
		}
		if r.Commands["evalsha"].Calls < r.Ops {
			bad("run %s c=%d %s rep %d: %d evalsha calls for %d operations", r.Limiter, r.Concurrency, r.Subjects, r.Rep, r.Commands["evalsha"].Calls, r.Ops)
		}
		if r.EvalshaUsecPerCall <= 0 || r.AllocsPerOp <= 0 {
			bad("run %s c=%d %s rep %d: evalsha usec_per_call %.2f, allocs/op %.1f", r.Limiter, r.Concurrency, r.Subjects, r.Rep, r.EvalshaUsecPerCall, r.AllocsPerOp)
		}
	}
	for _, name := range matrixOrder {
		for _, subj := range []string{SubjectsDistinct, SubjectsHot} {
			for _, c := range s.Concurrency {
				x, ok := res.cell(name, c, subj)
				if !ok || x.Reps != s.Reps || x.OpsPerSec <= 0 {
					bad("cell %s c=%d %s missing or incomplete (%+v)", name, c, subj, x)
				}
			}
		}
	}
	algs := len(algorithms)
	wantCmp := map[string]int{
		CmpProviderVsBareOps: algs, CmpProviderVsBareP99: algs, CmpProviderVsBareAllocs: algs, CmpProviderVsBareBytes: algs,
		CmpScriptVsTrivialUsec: algs, CmpServerVsTrivialCPU: algs,
		CmpTokenVsRedisRateOps: 1, CmpPipelinedVsRedisRate: 1, CmpFixedVsUluleOps: 1, CmpPipelinedFixedVsUlule: 1, CmpRedisRateVsTrivialCPU: 1,
		CmpGCRAVsRedisRateOps: 1, CmpPipelinedGCRAVsRedisRateOps: 1,
		CmpServerVsRedisRateCPU: algs, CmpPipelinedServerVsRedisRateCPU: len(pipelinedNames),
	}
	for name, perCell := range wantCmp {
		n := 0
		for _, c := range res.Comparisons {
			if c.Name == name {
				n++
				if len(c.Values) != s.Reps {
					bad("comparison %s %s c=%d %s: %d values, want %d", name, c.A, c.Concurrency, c.Subjects, len(c.Values), s.Reps)
				}
			}
		}
		if want := perCell * 2 * len(s.Concurrency); n != want {
			bad("comparison %s: %d cells, want %d", name, n, want)
		}
	}
	for _, name := range memoryLimiters {
		i := slices.IndexFunc(res.Memory, func(x Memory) bool { return x.Limiter == name })
		if i < 0 {
			bad("memory of %s missing", name)
			continue
		}
		x := res.Memory[i]
		// A few hundred subjects (smoke) are within the noise of used_memory
		// (slowlog, allocator bookkeeping): only a full run must grow.
		grew := x.BytesPerSubject > 0 || res.Mode == ModeSmoke
		if x.Subjects != s.MemorySubjects || x.Keys != int64(x.Subjects) || !grew || math.IsNaN(x.BytesPerSubject) || x.SampleKeyLen < 1 || x.SampleUsage < 1 {
			bad("memory of %s implausible: %+v", name, x)
		}
	}
	errs = append(errs, validateMemoryAbuse(res)...)
	rb := res.RedisBenchmark
	if rb.Skipped == "" {
		for _, c := range s.Concurrency {
			if !slices.ContainsFunc(rb.Cells, func(x RedisBenchRun) bool { return x.Concurrency == c && x.OpsPerSec > 0 }) {
				bad("redis-benchmark c=%d missing", c)
			}
			if !slices.ContainsFunc(rb.PipelinedCells, func(x RedisBenchRun) bool {
				return x.Concurrency == c && x.Pipeline == RedisBenchPipeline && x.OpsPerSec > 0
			}) {
				bad("redis-benchmark -P %d c=%d missing", RedisBenchPipeline, c)
			}
		}
	}
	for _, spec := range microSpecs() {
		for _, want := range spec.Want {
			i := slices.IndexFunc(res.Micro, func(x Micro) bool { return x.Name == want })
			if i < 0 || res.Micro[i].NsPerOp <= 0 || res.Micro[i].Count != s.MicroCount {
				bad("module benchmark %s missing or incomplete", want)
			}
		}
	}
	if len(res.Evidence.ScriptCommands) != len(profiledScripts) {
		bad("%d script profiles, want %d", len(res.Evidence.ScriptCommands), len(profiledScripts))
	}
	for _, p := range res.Evidence.ScriptCommands {
		// The TTL write each script must have made: PEXPIRE in the trivial
		// script, SET ... PX in the provider's programs (ADR 0010).
		want := ""
		switch {
		case p.Limiter == FamilyTrivial:
			want = "pexpire"
		case strings.HasPrefix(p.Limiter, FamilyProvider+"/"):
			want = "set"
		}
		if want != "" && p.Commands[want].Calls == 0 {
			bad("script profile %s: no %s calls recorded (%v)", p.Limiter, want, p.Commands)
		}
	}
	errs = append(errs, validateFlood(res)...)
	errs = append(errs, validateLease(res)...)
	if res.Evidence.ClockReadNanos <= 0 {
		bad("clock read cost not measured")
	}
	if res.Mode == ModeFull && res.Evidence.ClientProfile == "" {
		bad("full mode without a client CPU profile")
	}
	wantTargets := []string{
		TargetThroughputVsBare, TargetP99VsBare, TargetThroughputVsPeer, TargetAllocsVsBare,
		TargetKeyAllocs, TargetKeyNanos, TargetParseAllocs, TargetMemoryPerSubject, TargetServerCPU, TargetServerCPUProcess,
		TargetLocalLimiterNanos, TargetLocalLimiterAllocs, TargetMiddlewareOverhead,
		TargetTokenVsRedisRateHigh, TargetTokenVsRedisRateC1, TargetTokenP99VsRedisRate, TargetFixedVsUlule,
		TargetServerCPUVsRedisRate, TargetMemory190, TargetP50VsBareC1,
		TargetFloodCommands, TargetFloodVsRedisRate, TargetFloodVsUlule, TargetFloodWellP99, TargetTokenVsRedisRateC1I24,
		TargetGCRAVsRedisRateC1, TargetGCRAVsRedisRateHigh, TargetGCRAMemory, TargetSlidingLogAbuseFlat,
		TargetSetVsOneCallP50,
	}
	wantTargets = append(wantTargets, leaseTargetIDs...)
	if len(res.Targets) != len(wantTargets) {
		bad("%d targets, want %d", len(res.Targets), len(wantTargets))
	}
	for _, id := range wantTargets {
		i := slices.IndexFunc(res.Targets, func(t Target) bool { return t.ID == id })
		if i < 0 {
			bad("target %s missing", id)
			continue
		}
		if id == TargetSlidingLogAbuseFlat && abuseSkipped(res) {
			continue // not measured, and the phase says why
		}
		if st := res.Targets[i].Status; st != StatusMet && st != StatusMissed {
			bad("target %s: status %q", id, st)
		}
	}
	return errors.Join(errs...)
}

// validateMemoryAbuse checks the memory-under-abuse phase: a row for each
// of abuseLimiters, skipped with a reason or with both rounds complete:
// every subject admitted exactly its limit, the rest of the abusive
// round's calls denied, one key per subject.
func validateMemoryAbuse(res *Results) []error {
	var errs []error
	s := res.Settings
	for _, name := range abuseLimiters {
		i := slices.IndexFunc(res.MemoryAbuse, func(x MemoryAbuse) bool { return x.Limiter == name })
		if i < 0 {
			errs = append(errs, fmt.Errorf("bench: results: memory under abuse of %s missing", name))
			continue
		}
		x := res.MemoryAbuse[i]
		if x.Skipped != "" {
			continue
		}
		n := int64(x.Subjects)
		ok := x.Subjects == s.AbuseSubjects && x.Limit == s.MemoryLimitPerHour && s.AbuseFactor > 1 &&
			x.Exact.CallsPerSubject == x.Limit && x.Exact.Admitted == n*x.Limit && x.Exact.Denied == 0 && x.Exact.Keys == n &&
			x.Abused.CallsPerSubject == int64(s.AbuseFactor)*x.Limit && x.Abused.Admitted == n*x.Limit &&
			x.Abused.Denied == n*x.Limit*int64(s.AbuseFactor-1) && x.Abused.Keys == n &&
			x.Exact.SampleUsage > 0 && x.Abused.SampleUsage > 0 && x.Exact.UsageBytesPerSubject > 0 && x.Abused.UsageBytesPerSubject > 0 &&
			!math.IsNaN(x.GrowthPercent) && !math.IsNaN(x.UsedGrowthPercent)
		// As in the memory phase, a smoke run's growth is within noise.
		if res.Mode != ModeSmoke && (x.Exact.BytesPerSubject <= 0 || x.Abused.BytesPerSubject <= 0) {
			ok = false
		}
		if !ok {
			errs = append(errs, fmt.Errorf("bench: results: memory under abuse of %s implausible: %+v", name, x))
		}
	}
	return errs
}

// abuseSkipped reports whether the sliding log's memory-under-abuse row
// was skipped (its algorithm not yet accepted by ratelimit.NewPolicy).
func abuseSkipped(res *Results) bool {
	i := slices.IndexFunc(res.MemoryAbuse, func(x MemoryAbuse) bool { return x.Limiter == slidingLogName })
	return i >= 0 && res.MemoryAbuse[i].Skipped != ""
}

// validatePNG checks that b, the chart named name, is a PNG of a
// readable size.
func validatePNG(name string, b []byte) error {
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("bench: %s is not a PNG: %w", name, err)
	}
	if cfg.Width < 200 || cfg.Height < 200 {
		return fmt.Errorf("bench: %s is %dx%d", name, cfg.Width, cfg.Height)
	}
	return nil
}

// ValidateOutputs checks the written files: results.json decodes to what
// was measured, the chart is a PNG, the document has every generated
// section filled.
func ValidateOutputs(res *Results, resultsJSON, chartPNG, doc []byte) error {
	var errs []error
	var back Results
	if err := json.Unmarshal(resultsJSON, &back); err != nil {
		errs = append(errs, fmt.Errorf("bench: results.json does not decode: %w", err))
	} else if len(back.Runs) != len(res.Runs) || len(back.Targets) != len(res.Targets) || back.Schema != res.Schema {
		errs = append(errs, errors.New("bench: results.json differs from the measured results"))
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(chartPNG))
	if err != nil {
		errs = append(errs, fmt.Errorf("bench: chart is not a PNG: %w", err))
	} else if cfg.Width < 200 || cfg.Height < 200 {
		errs = append(errs, fmt.Errorf("bench: chart is %dx%d", cfg.Width, cfg.Height))
	}
	for _, name := range docSections {
		body, ok := SectionBody(doc, name)
		if !ok || body == "" {
			errs = append(errs, fmt.Errorf("bench: docs/performance.md section %q is empty or missing", name))
		}
	}
	if !bytes.Contains(doc, []byte(ChartDocPath)) {
		errs = append(errs, fmt.Errorf("bench: docs/performance.md does not embed %s", ChartDocPath))
	}
	return errors.Join(errs...)
}
