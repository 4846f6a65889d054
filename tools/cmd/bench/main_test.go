package main

import (
	"os"
	"os/exec"
	"path/filepath"
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
	if testing.Short() {
		t.Skip("smoke benchmark needs redis-server: skipped under -short")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("REDIS_REQUIRED") == "1" {
			t.Fatalf("REDIS_REQUIRED=1 but redis-server is not on PATH: %v", err)
		}
		t.Skip("redis-server not on PATH")
	}
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

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
