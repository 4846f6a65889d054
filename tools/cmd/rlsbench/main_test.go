package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseBounds: -smoke shortens the run; out-of-range flags are refused.
func TestParseBounds(t *testing.T) {
	o, err := parse([]string{"-smoke", "-root", "/r"})
	require.NoError(t, err)
	assert.Equal(t, 1, o.reps)
	assert.Equal(t, filepath.Join("/r", "docs", "performance.md"), o.doc)
	_, err = parse([]string{"-reps", "0"})
	require.Error(t, err)
	_, err = parse([]string{"-duration", "2m"})
	require.Error(t, err)
}

// TestRenderShape: every measure has a row, the ratio is taken within a
// repetition, and writeDoc replaces only what lies between the markers.
// It checks the table's shape, never a measured value.
func TestRenderShape(t *testing.T) {
	res := &results{version: "v0", redisVersion: "7", reps: 2, duration: time.Second, values: 10, samples: map[string][]float64{}}
	for _, shape := range shapes {
		for _, c := range concurrencies {
			res.samples[rpsKey(shape, c, nameOurs)] = []float64{200, 100}
			res.samples[rpsKey(shape, c, nameRef)] = []float64{100, 100}
		}
	}
	table := render(res, options{})
	assert.Equal(t, 2+6+6+4+6, strings.Count(table, "\n|"), table)
	assert.Contains(t, table, "| throughput, 1 descriptor, c=1 | 150/s | 100/s | 1.500x (1.00-2.00) | >= 0.95x | yes |")
	res.samples[floodKey(nameOurs)] = []float64{20, 10}
	res.samples[floodKey(nameRefLC)] = []float64{10, 10}
	flood := render(res, options{floodOnly: true})
	assert.Equal(t, 2+2, strings.Count(flood, "\n|"), "-flood-only: the flood rows with samples alone\n%s", flood)
	assert.NotContains(t, flood, "throughput")

	doc := filepath.Join(t.TempDir(), "p.md")
	require.NoError(t, os.WriteFile(doc, []byte("a\n"+beginMarker+"\nold\n"+endMarker+"\nb\n"), 0o600))
	require.NoError(t, writeDoc(doc, "new\n"))
	b, err := os.ReadFile(doc)
	require.NoError(t, err)
	assert.Equal(t, "a\n"+beginMarker+"\nnew\n"+endMarker+"\nb\n", string(b))
	require.NoError(t, os.WriteFile(doc, []byte("no markers\n"), 0o600))
	require.Error(t, writeDoc(doc, "x"))
}

// TestPublishedDocHasMarkers: docs/performance.md holds the section the
// bench writes.
func TestPublishedDocHasMarkers(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "performance.md"))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(b), beginMarker))
	assert.Equal(t, 1, strings.Count(string(b), endMarker))
}
