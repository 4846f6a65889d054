package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// microSpec names module benchmarks that tools/bench runs with
// `go test -run '^$' -bench <Bench> -benchmem -json`: the owners'
// benchmarks, reused rather than duplicated here.
type microSpec struct {
	Module  string // directory under the repository root
	Package string // package pattern inside it
	Bench   string // -bench regexp
	CPU     string // -cpu value ("" for the default)
	// Want lists the benchmark names (without the -N suffix) the run must
	// produce.
	Want []string
}

// Micro benchmark names the targets read.
const (
	MicroKey            = "keyspace.BenchmarkKey"
	MicroParseReply     = "redisrate.BenchmarkParseReply"
	MicroLocalLimiter   = "localimit.BenchmarkLocalLimiter"
	MicroRawRate        = "localimit.BenchmarkRawRate"
	MicroRawRateMap     = "localimit.BenchmarkRawRateMutexMap"
	MicroEdgeMiddleware = "edge.BenchmarkMiddlewareAllowed"
	MicroEdgeBare       = "edge.BenchmarkBareHandler"
)

// microSpecs are the module benchmarks of issue 6. BenchmarkKey uses
// RunParallel; with -cpu 1 it measures one goroutine, i.e. the latency of
// one derivation rather than throughput over both cores.
func microSpecs() []microSpec {
	return []microSpec{
		{Module: "shared-contract", Package: "./keyspace", Bench: "^BenchmarkKey$", CPU: "1", Want: []string{MicroKey}},
		{Module: "adapter-outbound-cache-redis", Package: "./redisrate", Bench: "^BenchmarkParseReply$", Want: []string{MicroParseReply}},
		{Module: "adapter-inbound-web", Package: "./localimit", Bench: "^(BenchmarkLocalLimiter|BenchmarkRawRate|BenchmarkRawRateMutexMap)$",
			Want: []string{MicroLocalLimiter, MicroRawRate, MicroRawRateMap}},
		{Module: "adapter-inbound-web", Package: "./edge", Bench: "^(BenchmarkMiddlewareAllowed|BenchmarkBareHandler)$",
			Want: []string{MicroEdgeMiddleware, MicroEdgeBare}},
	}
}

// runMicro runs one spec count times with benchtime and returns the median
// result of each benchmark.
func runMicro(ctx context.Context, root string, spec microSpec, count int, benchtime string) ([]Micro, error) {
	dir := filepath.Join(root, spec.Module)
	args := []string{"test", "-run", "^$", "-bench", spec.Bench, "-benchmem", "-json",
		"-count", "1", "-benchtime", benchtime}
	if spec.CPU != "" {
		args = append(args, "-cpu", spec.CPU)
	}
	args = append(args, spec.Package)
	// count invocations of -count 1 rather than one of -count N: go test
	// runs a benchmark's repetitions back to back, so a benchmark and its
	// baseline (LocalLimiter and RawRate, Middleware and BareHandler) would
	// never share a burst of outside load; this way they alternate.
	var samples []benchLine
	for range count {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		// The benchmarks need no Redis; keep the suites' Redis lanes off.
		cmd.Env = append(os.Environ(), "REDIS_REQUIRED=0")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		runErr := cmd.Run()
		got, perr := parseTestJSON(stdout.Bytes())
		if runErr != nil || perr != nil {
			return nil, fmt.Errorf("bench: go %s (in %s): %v %v: %s%s", strings.Join(args, " "), spec.Module, runErr, perr,
				tail(stderr.String(), 600), tail(outputText(stdout.Bytes()), 600))
		}
		samples = append(samples, got...)
	}
	byName := map[string][]benchLine{}
	for _, s := range samples {
		byName[s.name] = append(byName[s.name], s)
	}
	var out []Micro
	for _, want := range spec.Want {
		ls := byName[want]
		if len(ls) == 0 {
			return nil, fmt.Errorf("bench: %s: benchmark %s produced no result (is it defined?)", spec.Module, want)
		}
		ns := make([]float64, len(ls))
		allocs := make([]float64, len(ls))
		bytesOp := make([]float64, len(ls))
		extra := map[string][]float64{}
		for i, l := range ls {
			ns[i], allocs[i], bytesOp[i] = l.metrics["ns/op"], l.metrics["allocs/op"], l.metrics["B/op"]
			for unit, v := range l.metrics {
				if unit != "ns/op" && unit != "allocs/op" && unit != "B/op" {
					extra[unit] = append(extra[unit], v)
				}
			}
		}
		m := Micro{
			Name: want, Module: spec.Module, Package: spec.Package, Count: len(ls), Samples: ns,
			NsPerOp: median(ns), NsPerOpMin: slices.Min(ns), NsPerOpMax: slices.Max(ns),
			AllocsPerOp: median(allocs), BytesPerOp: median(bytesOp),
		}
		if len(extra) > 0 {
			m.Extra = map[string]float64{}
			for unit, vs := range extra {
				m.Extra[unit] = median(vs)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// benchLine is one benchmark result line: "BenchmarkX-2  1000  12.5 ns/op ...".
type benchLine struct {
	name    string // "<package base>.BenchmarkX" without the -N suffix
	n       int64
	metrics map[string]float64
}

// testEvent is the subset of a test2json event tools/bench reads.
type testEvent struct {
	Action  string
	Package string
	Output  string
}

var benchLineRE = regexp.MustCompile(`^(Benchmark[^\s]*?)(?:-\d+)?\s+(\d+)\s+(.+)$`)

// parseTestJSON extracts benchmark results from `go test -json` output. A
// result line may be split over several output events, so the output of
// each package is joined before it is split into lines.
func parseTestJSON(data []byte) ([]benchLine, error) {
	outputs := map[string]*strings.Builder{}
	var pkgs []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev testEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("bench: go test -json line %q: %w", tail(string(line), 120), err)
		}
		if ev.Action != "output" {
			continue
		}
		b := outputs[ev.Package]
		if b == nil {
			b = &strings.Builder{}
			outputs[ev.Package] = b
			pkgs = append(pkgs, ev.Package)
		}
		b.WriteString(ev.Output)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: read go test output: %w", err)
	}
	var out []benchLine
	for _, pkg := range pkgs {
		base := pkg[strings.LastIndexByte(pkg, '/')+1:]
		for line := range strings.Lines(outputs[pkg].String()) {
			l, ok := parseBenchLine(strings.TrimSpace(line))
			if ok {
				l.name = base + "." + l.name
				out = append(out, l)
			}
		}
	}
	return out, nil
}

// parseBenchLine parses one result line of the testing package.
func parseBenchLine(line string) (benchLine, bool) {
	m := benchLineRE.FindStringSubmatch(line)
	if m == nil {
		return benchLine{}, false
	}
	n, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return benchLine{}, false
	}
	fields := strings.Fields(m[3])
	if len(fields)%2 != 0 {
		return benchLine{}, false
	}
	l := benchLine{name: m[1], n: n, metrics: map[string]float64{}}
	for i := 0; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return benchLine{}, false
		}
		l.metrics[fields[i+1]] = v
	}
	if _, ok := l.metrics["ns/op"]; !ok {
		return benchLine{}, false
	}
	return l, true
}

// outputText joins the Output fields of test2json events, for error messages.
func outputText(data []byte) string {
	var b strings.Builder
	for line := range bytes.Lines(data) {
		var ev testEvent
		if json.Unmarshal(line, &ev) == nil {
			b.WriteString(ev.Output)
		}
	}
	return b.String()
}
