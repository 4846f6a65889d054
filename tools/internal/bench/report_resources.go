package bench

import (
	"fmt"
	"slices"
	"strings"
)

func renderMemory(b *strings.Builder, res *Results) {
	fmt.Fprintf(b, "INFO `used_memory` after one call for each of N distinct subjects minus `used_memory` after FLUSHALL, / N; both readings less `mem_clients_normal` (connection buffers), each taken once two readings 250 ms apart agree. Includes the key name, the value, the main and expires dictionary entries and their bucket arrays. Every limiter allows %d per hour here (realistic widths of the stored numbers; a GCRA state lives 36 s after one call).\n\n", res.Settings.MemoryLimitPerHour)
	fmt.Fprintf(b, "| limiter | N | B/subject | sample key length | MEMORY USAGE of a sample key | type / encoding |\n|---|---:|---:|---:|---:|---|\n")
	for _, m := range res.Memory {
		fmt.Fprintf(b, "| %s | %d | %.1f | %d | %d | %s / %s |\n", m.Limiter, m.Subjects, m.BytesPerSubject, m.SampleKeyLen, m.SampleUsage, m.SampleType, m.SampleEncoding)
	}
	if len(res.MemoryAbuse) == 0 {
		return
	}
	fmt.Fprintf(b, "\nUnder abuse (issue 22): N subjects at %d per hour, each sent exactly its limit, then (after FLUSHALL) each sent %dx its limit, interleaved over the subjects by 16 workers. MEMORY USAGE is the mean over all N keys (key name, value, dictionary entry: the keys' own bytes); used_memory is read as above (after it settles), / N, and moves by tens of KB with the server's bookkeeping, a lot over N = %d. Growth is against the first row, MEMORY USAGE (used_memory). A state bounded by the limit costs the same both times.\n\n", res.Settings.MemoryLimitPerHour, res.Settings.AbuseFactor, res.Settings.AbuseSubjects)
	fmt.Fprintf(b, "| limiter | N | calls per subject | admitted | denied | MEMORY USAGE B/subject | used_memory B/subject | encoding | growth |\n|---|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for _, m := range res.MemoryAbuse {
		if m.Skipped != "" {
			fmt.Fprintf(b, "| %s | - | - | - | - | - | - | - | skipped: %s |\n", m.Limiter, m.Skipped)
			continue
		}
		for k, r := range []AbuseRound{m.Exact, m.Abused} {
			growth := "-"
			if k == 1 {
				growth = fmt.Sprintf("%+.2f%% (%+.2f%%)", m.GrowthPercent, m.UsedGrowthPercent)
			}
			fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %.1f | %.1f | %s | %s |\n", m.Limiter, m.Subjects, r.CallsPerSubject, r.Admitted, r.Denied, r.UsageBytesPerSubject, r.BytesPerSubject, r.SampleEncoding, growth)
		}
	}
}

func renderServerCPU(b *strings.Builder, res *Results) {
	cs := res.Settings.Concurrency
	fmt.Fprintf(b, "INFO commandstats `usec_per_call` of evalsha (the script's execution inside the server), median per cell, %s subjects; and redis-server's whole CPU (used_cpu_user+sys: script, socket I/O, event loop) per call.\n\n| limiter |", SubjectsDistinct)
	for _, c := range cs {
		fmt.Fprintf(b, " evalsha µs c=%d | server CPU µs c=%d |", c, c)
	}
	fmt.Fprintf(b, "\n|---|%s\n", strings.Repeat("---:|", 2*len(cs)))
	for _, name := range limiterOrder(res) {
		fmt.Fprintf(b, "| %s |", name)
		for _, c := range cs {
			if x, ok := res.cell(name, c, SubjectsDistinct); ok {
				fmt.Fprintf(b, " %.2f | %.1f |", x.EvalshaUsecPerCall, x.ServerCPUMicrosPerOp)
			} else {
				b.WriteString(" - | - |")
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "\nWhere a script's time goes (commandstats of its hot-subject run at the lowest concurrency; Redis counts the commands a script calls): inner = the Redis commands it called, Lua = evalsha minus inner (the script call itself, the per-`redis.call` overhead around each command, and the interpreter: argument checks, parsing, arithmetic, reply building).\n\n")
	fmt.Fprintf(b, "| script | evalsha µs/call | inner commands µs/call | Lua and call overhead µs/call | commands per call |\n|---|---:|---:|---:|---|\n")
	for _, p := range res.Evidence.ScriptCommands {
		calls := float64(max(p.Commands["time"].Calls, 1))
		if ev, ok := commandCalls(res, p.Limiter); ok {
			calls = ev
		}
		var parts []string
		names := make([]string, 0, len(p.Commands))
		for n := range p.Commands {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			st := p.Commands[n]
			parts = append(parts, fmt.Sprintf("%s x%.1f (%.2f µs)", n, float64(st.Calls)/calls, float64(st.Usec)/calls))
		}
		fmt.Fprintf(b, "| %s | %.2f | %.2f | %.2f | %s |\n", p.Limiter, p.EvalshaUsecPerCall, p.InnerUsecPerCall, p.EvalshaUsecPerCall-p.InnerUsecPerCall, strings.Join(parts, ", "))
	}
}

// commandCalls is the evalsha call count of the run a ScriptProfile came from.
func commandCalls(res *Results, limiter string) (float64, bool) {
	best := -1
	for i, r := range res.Runs {
		if r.Limiter == limiter && r.Subjects == SubjectsHot && (best < 0 || r.Concurrency < res.Runs[best].Concurrency) {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	n := res.Runs[best].Commands["evalsha"].Calls
	return float64(n), n > 0
}

func renderMicro(b *strings.Builder, res *Results) {
	fmt.Fprintf(b, "Module benchmarks (`go test -run '^$' -bench ... -benchmem -json`), median of -count %d (min-max).\n\n", res.Settings.MicroCount)
	fmt.Fprintf(b, "| benchmark | module / package | ns/op | allocs/op | B/op |\n|---|---|---:|---:|---:|\n")
	for _, m := range res.Micro {
		fmt.Fprintf(b, "| %s | %s %s | %.1f (%.1f-%.1f) | %.1f | %.0f |\n", m.Name, m.Module, m.Package, m.NsPerOp, m.NsPerOpMin, m.NsPerOpMax, m.AllocsPerOp, m.BytesPerOp)
	}
	fmt.Fprintf(b, "\nOne `time.Now()` costs %.0f ns on this machine (clock source %s).\n", res.Evidence.ClockReadNanos, orDash(res.Machine.ClockSource))
}

func renderRedisBenchmark(b *strings.Builder, res *Results) {
	rb := res.RedisBenchmark
	if rb.Skipped != "" {
		fmt.Fprintf(b, "Skipped: %s.\n", rb.Skipped)
		return
	}
	fmt.Fprintf(b, "`%s` (C client, one request in flight per connection), median of %d.\n\n| concurrency | requests | ops/s | p50 µs | p99 µs |\n|---:|---:|---:|---:|---:|\n", rb.Command, len(rb.Runs)/max(len(rb.Cells), 1))
	for _, c := range rb.Cells {
		fmt.Fprintf(b, "| %d | %d | %.0f | %.0f | %.0f |\n", c.Concurrency, c.Requests, c.OpsPerSec, c.P50Micros, c.P99Micros)
	}
	if len(rb.PipelinedCells) > 0 {
		fmt.Fprintf(b, "\nThe pipelined server ceiling: the same command with `-P %d` (%d requests in flight per connection), median of %d.\n\n| concurrency | requests | ops/s | p50 µs | p99 µs |\n|---:|---:|---:|---:|---:|\n",
			RedisBenchPipeline, RedisBenchPipeline, len(rb.PipelinedRuns)/max(len(rb.PipelinedCells), 1))
		for _, c := range rb.PipelinedCells {
			fmt.Fprintf(b, "| %d | %d | %.0f | %.0f | %.0f |\n", c.Concurrency, c.Requests, c.OpsPerSec, c.P50Micros, c.P99Micros)
		}
	}
}

func renderProfile(b *strings.Builder, res *Results) {
	if res.Evidence.ClientProfile == "" {
		fmt.Fprintf(b, "No client CPU profile in %s mode.\n", res.Mode)
		return
	}
	fmt.Fprintf(b, "CPU profile of the bench process during a provider run (token bucket, c=16, distinct subjects): first everything, then only the provider's own frames (Evaluate minus the go-redis call; the header line gives their share of all samples).\n\n```text\n%s\n```\n", res.Evidence.ClientProfile)
}
