package bench

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Generated sections of docs/performance.md, each between
// "<!-- bench:begin NAME -->" and "<!-- bench:end NAME -->".
var docSections = []string{
	"machine", "targets", "chart", "throughput", "latency", "ratios",
	"client", "memory", "server-cpu", "micro", "redis-benchmark", "profile", "flood",
}

// ChartDocPath is how docs/performance.md links the chart.
const ChartDocPath = "../bench/throughput.png"

func beginMarker(name string) string { return "<!-- bench:begin " + name + " -->" }
func endMarker(name string) string   { return "<!-- bench:end " + name + " -->" }

// RenderDoc replaces every generated section of doc with the content
// derived from res. Text outside the markers is kept as written. A missing
// or misordered marker is an error, so the document cannot silently drift
// from the results.
func RenderDoc(doc []byte, res *Results) ([]byte, error) {
	out := doc
	for _, name := range docSections {
		begin, end := []byte(beginMarker(name)), []byte(endMarker(name))
		i := bytes.Index(out, begin)
		j := bytes.Index(out, end)
		if i < 0 || j < 0 || j < i || bytes.Count(out, begin) != 1 || bytes.Count(out, end) != 1 {
			return nil, fmt.Errorf("bench: docs/performance.md: section %q needs exactly one %q followed by one %q", name, begin, end)
		}
		body := "\n" + strings.TrimSpace(renderSection(name, res)) + "\n"
		var b bytes.Buffer
		b.Write(out[:i+len(begin)])
		b.WriteString(body)
		b.Write(out[j:])
		out = b.Bytes()
	}
	return out, nil
}

// SectionBody returns the generated text of a section of doc (between its
// markers), for validation.
func SectionBody(doc []byte, name string) (string, bool) {
	s := string(doc)
	_, rest, ok := strings.Cut(s, beginMarker(name))
	if !ok {
		return "", false
	}
	body, _, ok := strings.Cut(rest, endMarker(name))
	return strings.TrimSpace(body), ok
}

func renderSection(name string, res *Results) string {
	var b strings.Builder
	switch name {
	case "machine":
		renderMachine(&b, res)
	case "targets":
		renderTargets(&b, res)
	case "chart":
		fmt.Fprintf(&b, "![Throughput vs concurrency, %s subjects](%s)\n", SubjectsDistinct, ChartDocPath)
	case "throughput":
		renderThroughput(&b, res)
	case "latency":
		renderLatency(&b, res)
	case "ratios":
		renderRatios(&b, res)
	case "client":
		renderClient(&b, res)
	case "memory":
		renderMemory(&b, res)
	case "server-cpu":
		renderServerCPU(&b, res)
	case "micro":
		renderMicro(&b, res)
	case "redis-benchmark":
		renderRedisBenchmark(&b, res)
	case "profile":
		renderProfile(&b, res)
	case "flood":
		renderFlood(&b, res)
	}
	return b.String()
}

func renderMachine(b *strings.Builder, res *Results) {
	m, s := res.Machine, res.Settings
	fmt.Fprintf(b, "| | |\n|---|---|\n")
	fmt.Fprintf(b, "| mode | %s, %s UTC, commit %s |\n", res.Mode, res.Started.Format("2006-01-02 15:04"), orDash(m.GitCommit))
	fmt.Fprintf(b, "| CPU | %s, nproc %d, GOMAXPROCS %d, clock source %s |\n", orDash(m.CPUModel), m.NumCPU, m.GOMAXPROCS, orDash(m.ClockSource))
	fmt.Fprintf(b, "| OS | %s, kernel %s |\n", m.OS, orDash(m.Kernel))
	fmt.Fprintf(b, "| load average (1/5/15 min) | %s at the start, %s at the end (other work shares the machine) |\n", orDash(m.LoadAvgStart), orDash(m.LoadAvgEnd))
	fmt.Fprintf(b, "| Go | %s |\n", m.GoVersion)
	fmt.Fprintf(b, "| Redis | redis-server %s (private, loopback, `--save \"\" --appendonly no`); %s |\n", m.RedisVersion, orDash(m.RedisBenchmark))
	fmt.Fprintf(b, "| matrix | %d distinct subjects and 1 hot subject; concurrency %s; %d repetitions of %.1f s per cell%s, interleaved; medians |\n",
		s.DistinctSubjects, joinInts(s.Concurrency), s.Reps, s.RunSeconds, maxOpsNote(s.MaxOpsPerRun))
	fmt.Fprintf(b, "| clients | each limiter its own redisrate.NewClient (RESP2, retries off, pool %d); limits of %d so every call is admitted (the writing path) |\n", s.PoolSize, s.Limit)
	fmt.Fprintf(b, "| module benchmarks | go test -bench, -count %d, -benchtime %s |\n", s.MicroCount, s.MicroBenchtime)
	fmt.Fprintf(b, "| duration | %s |\n", res.Finished.Sub(res.Started).Round(1e9))
}

func renderTargets(b *strings.Builder, res *Results) {
	fmt.Fprintf(b, "| target | goal | measured | status | where / beside |\n|---|---|---|---|---|\n")
	for _, t := range res.Targets {
		where := t.Where
		if t.Note != "" {
			where += "; " + t.Note
		}
		fmt.Fprintf(b, "| %s | %s | %s | **%s** | %s |\n", t.Title, t.Goal, formatMeasured(t), t.Status, where)
	}
}

func formatMeasured(t Target) string {
	if t.Status == StatusNotMeasured {
		return "-"
	}
	switch t.Unit {
	case "x":
		return fmt.Sprintf("%.3fx", t.Measured)
	case "ns/op":
		return fmt.Sprintf("%.0f ns", t.Measured)
	case "B/subject":
		return fmt.Sprintf("%.1f B", t.Measured)
	case "%":
		return fmt.Sprintf("%.2f%%", t.Measured)
	default:
		return fmt.Sprintf("%.2f %s", t.Measured, t.Unit)
	}
}

// limiterOrder lists the limiters of res in display order.
func limiterOrder(res *Results) []string {
	var out []string
	for _, name := range matrixOrder {
		for _, c := range res.Cells {
			if c.Limiter == name {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

func (res *Results) cell(limiter string, c int, subjects string) (Cell, bool) {
	for _, x := range res.Cells {
		if x.Limiter == limiter && x.Concurrency == c && x.Subjects == subjects {
			return x, true
		}
	}
	return Cell{}, false
}

func renderThroughput(b *strings.Builder, res *Results) {
	cs := res.Settings.Concurrency
	fmt.Fprintf(b, "Median ops/s (min-max over %d repetitions).\n\n| limiter |", res.Settings.Reps)
	for _, subj := range []string{SubjectsDistinct, SubjectsHot} {
		for _, c := range cs {
			fmt.Fprintf(b, " %s c=%d |", subj, c)
		}
	}
	fmt.Fprintf(b, "\n|---|%s\n", strings.Repeat("---:|", 2*len(cs)))
	for _, name := range limiterOrder(res) {
		fmt.Fprintf(b, "| %s |", name)
		for _, subj := range []string{SubjectsDistinct, SubjectsHot} {
			for _, c := range cs {
				if x, ok := res.cell(name, c, subj); ok {
					fmt.Fprintf(b, " %.0f (%.0f-%.0f) |", x.OpsPerSec, x.OpsPerSecMin, x.OpsPerSecMax)
				} else {
					b.WriteString(" - |")
				}
			}
		}
		b.WriteString("\n")
	}
	if len(res.RedisBenchmark.Cells) > 0 {
		fmt.Fprintf(b, "| redis-benchmark trivial EVAL (C client) |")
		for _, c := range cs {
			fmt.Fprintf(b, " %s |", redisBenchOps(res.RedisBenchmark.Cells, c))
		}
		b.WriteString(strings.Repeat(" - |", len(cs)) + "\n")
	}
	if len(res.RedisBenchmark.PipelinedCells) > 0 {
		fmt.Fprintf(b, "| redis-benchmark -P %d trivial EVAL (pipelined ceiling) |", RedisBenchPipeline)
		for _, c := range cs {
			fmt.Fprintf(b, " %s |", redisBenchOps(res.RedisBenchmark.PipelinedCells, c))
		}
		b.WriteString(strings.Repeat(" - |", len(cs)) + "\n")
	}
}

func redisBenchOps(cells []RedisBenchRun, c int) string {
	for _, r := range cells {
		if r.Concurrency == c {
			return fmt.Sprintf("%.0f", r.OpsPerSec)
		}
	}
	return "-"
}

func renderLatency(b *strings.Builder, res *Results) {
	cs := res.Settings.Concurrency
	for _, subj := range []string{SubjectsDistinct, SubjectsHot} {
		fmt.Fprintf(b, "p50 / p99 / p999 in µs, %s subjects (medians over repetitions; log-linear histogram, <1%% bucket error).\n\n| limiter |", subj)
		for _, c := range cs {
			fmt.Fprintf(b, " c=%d |", c)
		}
		fmt.Fprintf(b, "\n|---|%s\n", strings.Repeat("---:|", len(cs)))
		for _, name := range limiterOrder(res) {
			fmt.Fprintf(b, "| %s |", name)
			for _, c := range cs {
				if x, ok := res.cell(name, c, subj); ok {
					fmt.Fprintf(b, " %.0f / %.0f / %.0f |", x.P50Micros, x.P99Micros, x.P999Micros)
				} else {
					b.WriteString(" - |")
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
}

func renderRatios(b *strings.Builder, res *Results) {
	cs := res.Settings.Concurrency
	fmt.Fprintf(b, "Paired by repetition (runs of one repetition ran back to back); median (min-max).\n\n| comparison | a | subjects |")
	for _, c := range cs {
		fmt.Fprintf(b, " c=%d |", c)
	}
	fmt.Fprintf(b, "\n|---|---|---|%s\n", strings.Repeat("---:|", len(cs)))
	type rk struct{ name, a, subjects string }
	var keys []rk
	seen := map[rk]bool{}
	for _, c := range res.Comparisons {
		k := rk{c.Name, c.A, c.Subjects}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		fmt.Fprintf(b, "| %s | %s | %s |", k.name, k.a, k.subjects)
		for _, c := range cs {
			i := slices.IndexFunc(res.Comparisons, func(x Comparison) bool {
				return x.Name == k.name && x.A == k.a && x.Subjects == k.subjects && x.Concurrency == c
			})
			if i < 0 {
				b.WriteString(" - |")
				continue
			}
			x := res.Comparisons[i]
			if x.Kind == KindRatio {
				fmt.Fprintf(b, " %.3f (%.3f-%.3f) |", x.Median, x.Min, x.Max)
			} else {
				fmt.Fprintf(b, " %+.2f (%+.2f..%+.2f) |", x.Median, x.Min, x.Max)
			}
		}
		b.WriteString("\n")
	}
}

func renderClient(b *strings.Builder, res *Results) {
	cs := res.Settings.Concurrency
	fmt.Fprintf(b, "Client cost per call, %s subjects: heap allocations and bytes (runtime.MemStats deltas over the run / calls) and this process's CPU (getrusage / calls, includes go-redis and the kernel's socket work).\n\n| limiter |", SubjectsDistinct)
	for _, c := range cs {
		fmt.Fprintf(b, " allocs c=%d | B c=%d | CPU µs c=%d |", c, c, c)
	}
	fmt.Fprintf(b, "\n|---|%s\n", strings.Repeat("---:|", 3*len(cs)))
	for _, name := range limiterOrder(res) {
		fmt.Fprintf(b, "| %s |", name)
		for _, c := range cs {
			if x, ok := res.cell(name, c, SubjectsDistinct); ok {
				fmt.Fprintf(b, " %.1f | %.0f | %.1f |", x.AllocsPerOp, x.BytesPerOp, x.ClientCPUMicrosPerOp)
			} else {
				b.WriteString(" - | - | - |")
			}
		}
		b.WriteString("\n")
	}
}

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

// PrintSummary writes the console table of `make bench`: the targets, then
// the throughput ratios.
func PrintSummary(w io.Writer, res *Results) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nTARGET\tGOAL\tMEASURED\tSTATUS\tWHERE\n")
	for _, t := range res.Targets {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Title, t.Goal, formatMeasured(t), t.Status, t.Where)
	}
	fmt.Fprintf(tw, "\nCOMPARISON\tA\tSUBJECTS")
	for _, c := range res.Settings.Concurrency {
		fmt.Fprintf(tw, "\tc=%d", c)
	}
	fmt.Fprintln(tw)
	type rk struct{ name, a, subjects string }
	seen := map[rk]bool{}
	for _, x := range res.Comparisons {
		k := rk{x.Name, x.A, x.Subjects}
		if seen[k] || x.Kind != KindRatio {
			continue
		}
		seen[k] = true
		fmt.Fprintf(tw, "%s\t%s\t%s", k.name, k.a, k.subjects)
		for _, c := range res.Settings.Concurrency {
			i := slices.IndexFunc(res.Comparisons, func(y Comparison) bool {
				return y.Name == k.name && y.A == k.a && y.Subjects == k.subjects && y.Concurrency == c
			})
			if i < 0 {
				fmt.Fprintf(tw, "\t-")
			} else {
				fmt.Fprintf(tw, "\t%.3f", res.Comparisons[i].Median)
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func maxOpsNote(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (at most %d calls)", n)
}
