// Command bench runs the side-by-side performance suite of issue 6
// (`make bench`): one private redis-server, this project's provider against
// a bare EvalSha of the same programs, github.com/go-redis/redis_rate/v10,
// github.com/ulule/limiter/v3, a trivial INCR+PEXPIRE script and
// redis-benchmark, plus the modules' `go test -bench` benchmarks. It prints
// the targets and ratios, writes bench/results.json and bench/throughput.png
// and regenerates the marked sections of docs/performance.md.
//
// With -smoke every phase runs with a few hundred operations and the
// outputs go to a temporary directory (the committed results stay as they
// are); the shape of everything is validated. With -from it only
// re-renders the chart and the document from an existing results.json.
// With -ceiling N it runs only the one-caller ceiling and prints it; with
// -lease N only the lease phase (issue 37), which it puts into the
// results.json of an earlier full run and the document's targets and
// lease sections (with -smoke it writes nothing).
//
// Like everything under tools/, it may import any module of the workspace
// and any benchmark peer; no product module may import it.
//
// Files: main.go (flags, the run over tools/internal/bench, -from).
package main
