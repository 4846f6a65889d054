package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMarkedFiles(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "a.md")
	require.NoError(t, os.WriteFile(doc, []byte("1. `a/b.go` **[1]** and `c/d.go`\n"+
		"   **[2]**, again `a/b.go` **[3]**; `e.go` unmarked, `f.go` [4] unmarked\n"), 0o600))
	got, err := markedFiles(doc)
	require.NoError(t, err)
	assert.Equal(t, []string{"a/b.go", "c/d.go"}, got)

	require.NoError(t, os.WriteFile(doc, []byte("no markers"), 0o600))
	_, err = markedFiles(doc)
	assert.ErrorContains(t, err, "no path marked")
}

func TestRanFiles(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "p.txt")
	require.NoError(t, os.WriteFile(prof, []byte("mode: atomic\n"+
		modulePrefix+"x/a.go:1.1,2.2 1 3\n"+
		modulePrefix+"x/a.go:3.1,4.2 1 0\n"+
		modulePrefix+"x/b.go:1.1,2.2 2 0\n"+
		modulePrefix+self+"main.go:1.1,2.2 1 5\n"+
		"example.org/other/c.go:1.1,2.2 1 5\n"), 0o600))
	got, err := ranFiles(prof)
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"x/a.go": true}, got, "b.go never ran; this command and other modules never count")

	require.NoError(t, os.WriteFile(prof, []byte(modulePrefix+"x/a.go:1.1,2.2 1 many\n"), 0o600))
	_, err = ranFiles(prof)
	assert.ErrorContains(t, err, `count "many"`)
}

func TestDiff(t *testing.T) {
	missing, extra := diff([]string{"a", "b", "c"}, []string{"b", "c", "d"})
	assert.Equal(t, []string{"a"}, missing)
	assert.Equal(t, []string{"d"}, extra)
	missing, extra = diff([]string{"a"}, []string{"a"})
	assert.Empty(t, missing)
	assert.Empty(t, extra)
}

func TestWindowNeedsCoverage(t *testing.T) {
	// A test binary does not support clearing counters: the error names
	// the build the command needs.
	_, err := window(t.Context(), t.TempDir(), func() error { return nil })
	require.ErrorIs(t, err, errNoCoverage)
}
