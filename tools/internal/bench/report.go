package bench

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// Generated sections of docs/performance.md, each between
// "<!-- bench:begin NAME -->" and "<!-- bench:end NAME -->".
var docSections = []string{
	"machine", "targets", "chart", "throughput", "latency", "ratios",
	"client", "memory", "server-cpu", "micro", "redis-benchmark", "profile", "flood", "lease",
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
	return renderDocSections(doc, res, docSections)
}

// renderDocSections is RenderDoc for the sections names only.
func renderDocSections(doc []byte, res *Results, names []string) ([]byte, error) {
	out := doc
	for _, name := range names {
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
	case "lease":
		renderLease(&b, res)
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
	case unitCommandsPerAdmitted:
		return fmt.Sprintf("%.5f commands", t.Measured)
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
