package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/tools/internal/bench"
)

// TestSmoke runs the whole suite in smoke mode (a few hundred operations
// per phase against a private redis-server, every module benchmark once)
// and checks the shape of everything it writes, so that `make bench`
// cannot rot. It needs redis-server on PATH: skipped under -short and when
// the server is missing, unless REDIS_REQUIRED=1 (then missing is a failure).
func TestSmoke(t *testing.T) {
	needRedisServer(t)
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	out := t.TempDir()
	committedDoc := filepath.Join(root, "docs", "performance.md")
	before, err := os.ReadFile(committedDoc)
	require.NoError(t, err)

	require.NoError(t, run([]string{"-smoke", "-root", root, "-out", out}))

	res, err := bench.ReadResults(filepath.Join(out, bench.ResultsFile))
	require.NoError(t, err)
	assert.Equal(t, bench.ModeSmoke, res.Mode)
	require.NoError(t, bench.Validate(res))
	chart, err := os.ReadFile(filepath.Join(out, bench.ChartFile))
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(out, "performance.md"))
	require.NoError(t, err)
	require.NoError(t, bench.ValidateOutputs(res, mustRead(t, filepath.Join(out, bench.ResultsFile)), chart, doc))

	after, err := os.ReadFile(committedDoc)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "smoke mode must not touch the published docs/performance.md")
}

// TestCeilingSmoke runs the one-caller ceiling (make bench-ceiling) in
// smoke mode and checks its shape: every limiter over both subject sets,
// redis_rate's own ratio exactly 1, every other ratio positive and its
// quartiles in order, and the table a row per measurement.
func TestCeilingSmoke(t *testing.T) {
	needRedisServer(t)
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	const reps = 2
	rows, err := bench.Ceiling(t.Context(), bench.SmokeConfig(root), reps)
	require.NoError(t, err)
	require.Len(t, rows, 2*8, "8 limiters over 2 subject sets")
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.Limiter]++
		assert.Positive(t, r.MedianOps, r.Limiter)
		if r.Limiter == bench.FamilyRedisRate {
			assert.Equal(t, [3]float64{1, 1, 1}, [3]float64{r.Q1, r.Median, r.Q3})
			continue
		}
		assert.Positive(t, r.Q1, r.Limiter)
		assert.LessOrEqual(t, r.Q1, r.Median, r.Limiter)
		assert.LessOrEqual(t, r.Median, r.Q3, r.Limiter)
	}
	assert.Equal(t, 2, seen[bench.FamilyFloor])
	var table strings.Builder
	require.NoError(t, bench.WriteCeiling(&table, rows, reps))
	assert.Equal(t, len(rows)+4, strings.Count(table.String(), "\n"), "intro, blank, header, rule, a row per measurement")
	assert.Contains(t, table.String(), "| hot | floor |")
}

// TestLeaseSmoke runs the lease phase alone (make bench-lease) in smoke
// mode: it validates its shape and writes nothing, neither the committed
// results.json nor the document.
func TestLeaseSmoke(t *testing.T) {
	needRedisServer(t)
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	committed := []string{filepath.Join(root, "docs", "performance.md"), filepath.Join(root, "bench", bench.ResultsFile)}
	var before []string
	for _, path := range committed {
		before = append(before, string(mustRead(t, path)))
	}
	require.NoError(t, run([]string{"-lease", "2", "-smoke", "-root", root}))
	for i, path := range committed {
		assert.Equal(t, before[i], string(mustRead(t, path)), "smoke mode must not touch %s", path)
	}
}

// needRedisServer skips t under -short and when redis-server is missing,
// unless REDIS_REQUIRED=1 (then missing is a failure).
func needRedisServer(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("the benchmark needs redis-server: skipped under -short")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("REDIS_REQUIRED") == "1" {
			t.Fatalf("REDIS_REQUIRED=1 but redis-server is not on PATH: %v", err)
		}
		t.Skip("redis-server not on PATH")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
