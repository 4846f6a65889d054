package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Markers of the generated part of docs/performance.md.
const (
	beginMarker = "<!-- rls-bench:begin -->"
	endMarker   = "<!-- rls-bench:end -->"
)

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ratios is ours[i]/ref[i] per repetition (the same repetition's pair).
func ratios(ours, ref []float64) []float64 {
	var out []float64
	for i := range min(len(ours), len(ref)) {
		if ref[i] > 0 {
			out = append(out, ours[i]/ref[i])
		}
	}
	return out
}

// row is one line of the table; atLeast says whether the target is a
// lower bound on the ratio (else an upper bound).
type row struct {
	measure, unit string
	ours, ref     []float64
	target        float64
	atLeast       bool
	// context rows have no target: they show the reference's other setting.
	context bool
}

func (r row) format(res *results) string {
	mo, mr := median(r.ours), median(r.ref)
	if res.refOnly {
		return fmt.Sprintf("| %s | n/a | %s | n/a | %s | n/a |\n", r.measure, num(mr, r.unit), r.targetText())
	}
	rs := ratios(r.ours, r.ref)
	mrat := median(rs)
	met := "no"
	if r.context {
		met = "-"
	} else if (r.atLeast && mrat >= r.target) || (!r.atLeast && mrat <= r.target) {
		met = "yes"
	}
	lo, hi := mrat, mrat
	if len(rs) > 0 {
		lo, hi = slices.Min(rs), slices.Max(rs)
	}
	return fmt.Sprintf("| %s | %s | %s | %.3fx (%.2f-%.2f) | %s | %s |\n", r.measure, num(mo, r.unit), num(mr, r.unit), mrat, lo, hi, r.targetText(), met)
}

func (r row) targetText() string {
	if r.context {
		return "-"
	}
	if r.atLeast {
		return fmt.Sprintf(">= %.2gx", r.target)
	}
	return fmt.Sprintf("<= %.2gx", r.target)
}

func num(v float64, unit string) string {
	switch unit {
	case "/s":
		return fmt.Sprintf("%.0f/s", v)
	case "ms":
		return fmt.Sprintf("%.3f ms", v)
	default:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
}

func render(res *results, o options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run of %s at %s: envoyproxy/ratelimit %s, redis-server %s, %s/%s, %d CPUs (%s), Go %s; "+
		"%d interleaved repetitions of %v per load run; closed-loop gRPC workers (%d per connection); medians, "+
		"the ratio is the median of ours/reference within each repetition (its range in parentheses).\n\n",
		time.Now().UTC().Format("2006-01-02"), gitDescribe(o.root), res.version, res.redisVersion, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(), runtime.Version(),
		res.reps, res.duration, 16)
	b.WriteString("| measure | ours | reference | ours / reference | target | met |\n|---|---|---|---|---|---|\n")
	rows := mainRows(res)
	if o.floodOnly {
		rows = nil
	}
	rows = append(rows, floodRows(res)...)
	rows = append(rows, memoryRows(res)...)
	for _, r := range rows {
		if o.floodOnly && len(r.ours)+len(r.ref) == 0 {
			continue
		}
		b.WriteString(r.format(res))
	}
	if !o.floodOnly {
		fmt.Fprintf(&b, "\nKeys per descriptor value: ours %.2f, reference %.2f.\n",
			median(res.samples[memKey("keys", nameOurs)]), median(res.samples[memKey("keys", nameRef)]))
	}
	return b.String()
}

// mainRows are the throughput, latency and CPU rows.
func mainRows(res *results) []row {
	var rows []row
	for _, shape := range shapes {
		for _, c := range concurrencies {
			t := 1.3
			if c == 1 {
				t = 0.95
			}
			rows = append(rows, row{measure: fmt.Sprintf("throughput, %s, c=%d", shape, c), unit: "/s",
				ours: res.samples[rpsKey(shape, c, nameOurs)], ref: res.samples[rpsKey(shape, c, nameRef)], target: t, atLeast: true})
		}
	}
	for _, shape := range shapes {
		for _, c := range concurrencies {
			rows = append(rows, row{measure: fmt.Sprintf("p99 latency, %s, c=%d", shape, c), unit: "ms",
				ours: res.samples[p99Key(shape, c, nameOurs)], ref: res.samples[p99Key(shape, c, nameRef)], target: 1.0})
		}
	}
	for _, shape := range shapes {
		for _, kind := range []string{"svc", "redis"} {
			label := "service process CPU per call"
			if kind == "redis" {
				label = "redis-server CPU per call"
			}
			rows = append(rows, row{measure: fmt.Sprintf("%s, %s, c=16 (less sensitive to other load than the rates)", label, shape), unit: "µs",
				ours: res.samples[cpuKey(kind, shape, 16, nameOurs)], ref: res.samples[cpuKey(kind, shape, 16, nameRef)], context: true})
		}
	}
	return rows
}

// floodRows are the flood phase's rows.
func floodRows(res *results) []row {
	return []row{
		{measure: fmt.Sprintf("flood: one over-limit descriptor, c=%d, denials/s (reference with LOCAL_CACHE_SIZE_IN_BYTES=%d)", floodConc, localCacheBytes), unit: "/s",
			ours: res.samples[floodKey(nameOurs)], ref: res.samples[floodKey(nameRefLC)], target: 10, atLeast: true},
		{measure: fmt.Sprintf("flood, reference without local cache (context), c=%d, denials/s", floodConc), unit: "/s",
			ours: res.samples[floodKey(nameOurs)], ref: res.samples[floodKey(nameRef)], context: true},
		{measure: fmt.Sprintf("flood: service process CPU per denial, c=%d (reference with its local cache)", floodConc), unit: "µs",
			ours: res.samples[cpuKey("svc", "flood", floodConc, nameOurs)], ref: res.samples[cpuKey("svc", "flood", floodConc, nameRefLC)], context: true},
		{measure: fmt.Sprintf("flood: redis-server CPU per denial, c=%d (reference with its local cache)", floodConc), unit: "µs",
			ours: res.samples[cpuKey("redis", "flood", floodConc, nameOurs)], ref: res.samples[cpuKey("redis", "flood", floodConc, nameRefLC)], context: true},
	}
}

// memoryRows are the memory phase's rows.
func memoryRows(res *results) []row {
	return []row{
		{measure: fmt.Sprintf("Redis memory per descriptor value, used_memory growth over %d values", res.values), unit: "B",
			ours: res.samples[memKey("used", nameOurs)], ref: res.samples[memKey("used", nameRef)], target: 1.0},
		{measure: "Redis memory per descriptor value, MEMORY USAGE of its keys", unit: "B",
			ours: res.samples[memKey("usage", nameOurs)], ref: res.samples[memKey("usage", nameRef)], target: 1.0},
	}
}

// gitDescribe names the measured tree: its commit, "-dirty" when the work
// tree differs from it.
func gitDescribe(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty", "--abbrev=12").Output()
	if err != nil {
		return "an unknown commit"
	}
	return strings.TrimSpace(string(out))
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// writeDoc replaces what lies between the markers in path with table.
func writeDoc(path, table string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	i := bytes.Index(doc, []byte(beginMarker))
	j := bytes.Index(doc, []byte(endMarker))
	if i < 0 || j < i || bytes.Count(doc, []byte(beginMarker)) != 1 || bytes.Count(doc, []byte(endMarker)) != 1 {
		return fmt.Errorf("%s: needs exactly one %q followed by one %q", path, beginMarker, endMarker)
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(beginMarker)])
	out.WriteString("\n" + table)
	out.Write(doc[j:])
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
