// Package bench is the engine of tools/cmd/bench (`make bench`): it starts
// one private redis-server, measures this project's rate-limit provider
// side by side with a bare go-redis EvalSha of the same programs, with the
// peers github.com/go-redis/redis_rate/v10 and github.com/ulule/limiter/v3,
// with a trivial INCR+PEXPIRE script and with redis-benchmark, runs the
// modules' own `go test -bench` benchmarks, and turns the numbers into
// bench/results.json, a throughput chart and the generated sections of
// docs/performance.md, judged against the targets of issue 6 (and of
// issues 13 and 24: the flood of one denied subject, with the provider's
// local denial cache, ratedenial; and of issue 22: GCRA beside redis_rate,
// and the sliding log's memory per subject under a client sending ten
// times its limit; and of issue 37: a hot subject answered from leases,
// ratelease, beside the unleased provider and redis_rate, and a nearly
// spent budget leased and unleased).
//
// It owns the measurement harness (latency histogram, paired repetitions,
// medians), the results schema, the report and its validation (the smoke
// mode proves the shape so the tool cannot rot). It imports the Redis
// adapter's public API (redisrate, programs, ratedenial, ratelease), shared-contract, go-redis,
// the peers and gonum/plot; it must never be imported by a product module,
// and it never talks to a Redis it did not start (loopback only).
//
// Files: suite.go (Config, Run: the phases, the matrix), profile.go (the
// script profiles and the provider's CPU profile), memory.go (Redis
// memory per subject, and under abuse), machine.go (the machine and its
// clock), runner.go (one measured run, paired repetitions), limiters.go
// (the limiters under test: the provider's), baselines.go (what it is
// measured against: bare EvalSha, INCR+PEXPIRE, redis_rate, ulule),
// workload.go (subjects, client options, policies and keys), flood.go (the
// flood phase: its runs), flood_limiters.go (its limiters),
// flood_report.go (its medians, targets, section and chart
// bench/flood.png), lease.go (the lease phase: its runs; Lease, run
// alone by `make bench-lease`), lease_limiters.go (its limiters),
// lease_report.go (its medians, targets, validation and section),
// targets.go (the targets, judged), micro.go
// (the Go micro-benchmarks), redisbench.go (redis-benchmark), server.go
// (the private redis-server over redisserver, INFO through redisinfo),
// hist.go (the latency histogram), results.go (the results schema),
// aggregate.go (medians, cells, comparisons, Recompute), output.go
// (writing and reading the outputs), report.go (the document's sections:
// machine, targets, throughput, latency, ratios, client),
// report_resources.go (its sections on resources: memory, server CPU,
// micro-benchmarks, redis-benchmark, the script profile), summary.go (the
// console summary), chart.go (the chart), validate.go (the shape checks).
package bench
