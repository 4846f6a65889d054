package standalone

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../../.."

// TestRepositoryStandsAlone: no tracked file cites a document or path that
// exists only outside the repository. A finding names the file, the line
// and what to cite instead.
func TestRepositoryStandsAlone(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: the tracked files cannot be listed")
	}
	files, err := TrackedFiles(repoRoot)
	if err != nil {
		t.Skipf("not a git checkout (%v): the tracked files cannot be listed", err)
	}
	require.NotEmpty(t, files)
	assert.Contains(t, files, "docs/contract.md", "the scan must see the repository's own docs")
	findings, err := Scan(repoRoot, files)
	require.NoError(t, err)
	fix := map[string]string{}
	for _, r := range Rules() {
		fix[r.Name] = r.Fix
	}
	for _, f := range findings {
		t.Errorf("%s (%s)", f, fix[f.Rule])
	}
}

// Parts are joined so that this file does not match the rules itself.
var (
	contractFile = "CONTRACT" + ".md"
	dotdot       = ".."
	machine      = "/" + "work/"
)

// TestRules: each rule catches what it is for and lets this repository's
// own names through.
func TestRules(t *testing.T) {
	bad := map[string]string{
		"see " + contractFile + " section 4a":                   "outside-contract",
		"(" + contractFile + " §5)":                             "outside-contract",
		"GO-REDIS-" + "FACTS.md says so":                        "outside-design-notes",
		"row 7 of FAULT-" + "MATRIX.md":                         "outside-design-notes",
		"LESSONS" + ".md's rule":                                "outside-design-notes",
		"STYLE" + ".md: time is a parameter":                    "outside-design-notes",
		"spec/redis-distributed-rate-limit-" + "design.md":      "outside-design-notes",
		"`" + dotdot + "/shared/testdata/rate-vectors-v1.json`": "outside-path",
		"The source design is " + dotdot + "/spec/x.md":         "outside-path",
		dotdot + "/" + dotdot + "/shared":                       "outside-path",
		"open " + machine + "shared/design":                     "machine-path",
	}
	for line, rule := range bad {
		var got []string
		for _, r := range Rules() {
			if r.Re.MatchString(line) {
				got = append(got, r.Name)
			}
		}
		assert.Contains(t, got, rule, "%q", line)
	}
	good := []string{
		"docs/contract.md section 5",
		"replace github.com/tech-log/tech-log-backend/shared-contract => " + dotdot + "/shared-contract",
		"shared-contract/keyspace/testdata/keys-v1.json",
		"testdata/rate-vectors-v1.json",
		"docs/failure-certainty.md and docs/reliability.md",
		"go-redis/redis_rate, github.com/redis/go-redis/v9",
		"the fault matrix (docs/reliability.md)",
		"WORKDIR /src",
	}
	for _, line := range good {
		for _, r := range Rules() {
			assert.False(t, r.Re.MatchString(line), "rule %s matches %q", r.Name, line)
		}
	}
}

// TestScanNamesFileAndLine: a planted reference is reported at its file and
// line; a binary file and a clean file are not.
func TestScanNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write("docs/a.md", "# A\n\nsemantics: "+contractFile+" 4a\n")
	write("clean.go", "// see docs/contract.md\npackage clean\n")
	write("bin/blob", "\x00"+contractFile)
	write("long.md", strings.Repeat("x", 500)+" "+machine+"y "+strings.Repeat("z", 500)+"\n")

	got, err := Scan(dir, []string{"docs/a.md", "clean.go", "bin/blob", "long.md"})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, Finding{File: "docs/a.md", Line: 3, Rule: "outside-contract", Text: "semantics: " + contractFile + " 4a"}, got[0])
	assert.Equal(t, "long.md", got[1].File)
	assert.Contains(t, got[1].Text, machine)
	assert.LessOrEqual(t, len(got[1].Text), maxText+6)
}
