package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// redisBenchmarkArgs is the trivial EVAL redis-benchmark runs: no key, no
// write, the cheapest script call, so its rate is the server's ceiling for
// one script call per request from a C client.
var redisBenchmarkArgs = []string{"EVAL", "return 1", "0"}

// runRedisBenchmark runs redis-benchmark against addr at the given
// concurrency, with -P pipeline when pipeline > 1, and returns its
// throughput and latency.
func runRedisBenchmark(ctx context.Context, bin, addr string, concurrency, pipeline, requests int) (RedisBenchRun, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return RedisBenchRun{}, fmt.Errorf("bench: redis-benchmark addr %q: %w", addr, err)
	}
	args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(concurrency), "-n", strconv.Itoa(requests), "--csv"}
	if pipeline > 1 {
		args = append(args, "-P", strconv.Itoa(pipeline))
	}
	args = append(args, redisBenchmarkArgs...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return RedisBenchRun{}, fmt.Errorf("bench: redis-benchmark: %w: %s", err, tail(stderr.String(), 300))
	}
	r, err := parseRedisBenchmarkCSV(stdout.Bytes())
	if err != nil {
		return RedisBenchRun{}, err
	}
	r.Concurrency, r.Requests = concurrency, requests
	if pipeline > 1 {
		r.Pipeline = pipeline
	}
	return r, nil
}

// parseRedisBenchmarkCSV reads the --csv output of redis-benchmark 7
// ("test","rps","avg_latency_ms",...,"p50_latency_ms",...,"p99_latency_ms",...).
func parseRedisBenchmarkCSV(data []byte) (RedisBenchRun, error) {
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return RedisBenchRun{}, fmt.Errorf("bench: redis-benchmark csv: %w", err)
	}
	if len(recs) != 2 {
		return RedisBenchRun{}, fmt.Errorf("bench: redis-benchmark csv: want a header and one row, got %d rows: %q", len(recs), tail(string(data), 200))
	}
	col := func(name string) (float64, error) {
		i := slices.Index(recs[0], name)
		if i < 0 || i >= len(recs[1]) {
			return 0, fmt.Errorf("bench: redis-benchmark csv: no column %q in %q", name, strings.Join(recs[0], ","))
		}
		v, err := strconv.ParseFloat(recs[1][i], 64)
		if err != nil {
			return 0, fmt.Errorf("bench: redis-benchmark csv %s=%q: %w", name, recs[1][i], err)
		}
		return v, nil
	}
	var r RedisBenchRun
	if r.OpsPerSec, err = col("rps"); err != nil {
		return r, err
	}
	p50, err := col("p50_latency_ms")
	if err != nil {
		return r, err
	}
	p99, err := col("p99_latency_ms")
	if err != nil {
		return r, err
	}
	r.P50Micros, r.P99Micros = p50*1000, p99*1000
	return r, nil
}

// redisBenchmarkCells takes the median of the repetitions per concurrency.
func redisBenchmarkCells(runs []RedisBenchRun) []RedisBenchRun {
	byC := map[int][]RedisBenchRun{}
	var cs []int
	for _, r := range runs {
		if _, ok := byC[r.Concurrency]; !ok {
			cs = append(cs, r.Concurrency)
		}
		byC[r.Concurrency] = append(byC[r.Concurrency], r)
	}
	var out []RedisBenchRun
	for _, c := range cs {
		rs := byC[c]
		pick := func(f func(RedisBenchRun) float64) float64 {
			vs := make([]float64, len(rs))
			for i, r := range rs {
				vs[i] = f(r)
			}
			return median(vs)
		}
		out = append(out, RedisBenchRun{
			Concurrency: c, Pipeline: rs[0].Pipeline, Requests: rs[0].Requests, Rep: len(rs),
			OpsPerSec: pick(func(r RedisBenchRun) float64 { return r.OpsPerSec }),
			P50Micros: pick(func(r RedisBenchRun) float64 { return r.P50Micros }),
			P99Micros: pick(func(r RedisBenchRun) float64 { return r.P99Micros }),
		})
	}
	return out
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
