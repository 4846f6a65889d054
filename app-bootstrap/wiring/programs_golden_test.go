package wiring

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

var updatePrograms = flag.Bool("update-programs", false, "rewrite testdata/programs from the example policy files (go generate)")

// examplePolicyFiles are the policy files whose programs are checked in:
// the embedded example (config.DefaultPoliciesJSON, the same as
// app-bootstrap/examples/policies.json) and the compose demo's.
var examplePolicyFiles = map[string]func(t *testing.T) string{
	"default": func(*testing.T) string { return config.DefaultPoliciesJSON() },
	"demo": func(t *testing.T) string {
		b, err := os.ReadFile("../../deploy/demo-policies.json")
		require.NoError(t, err)
		return string(b)
	},
}

// TestExamplePolicyPrograms: testdata/programs/<file>/<policy>/<program>.lua
// is, byte for byte, every program the service sends for each policy of
// the example policy files (programs.ForPolicy, rendered in one stage with
// the policy's parameters as constants, ADR 0035), and sha1.txt lists
// their digests, the SHA1s EVALSHA sends and `tlbctl check` loads. go
// generate (-update-programs) rewrites them; the test fails on drift, on a
// missing file and on a file no policy renders.
func TestExamplePolicyPrograms(t *testing.T) {
	want := map[string]string{}
	for name, read := range examplePolicyFiles {
		set, err := config.ParsePolicies(strings.NewReader(read(t)))
		require.NoError(t, err, name)
		var sums strings.Builder
		for _, p := range set.Policies {
			b, err := programs.ForPolicy(p)
			require.NoError(t, err, "%s: policy %s", name, p.ID())
			for _, prog := range b.Programs() {
				want[filepath.Join("testdata", "programs", name, string(p.ID()), prog.Name+".lua")] = prog.Source
				sums.WriteString(prog.SHA1 + "  " + string(p.ID()) + "/" + prog.Name + ".lua\n")
			}
		}
		want[filepath.Join("testdata", "programs", name, "sha1.txt")] = sums.String()
	}
	root := filepath.Join("testdata", "programs")
	if *updatePrograms {
		require.NoError(t, os.RemoveAll(root))
		for path, src := range want {
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
		}
	}
	got := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		got[path] = string(b)
		return err
	}))
	for path, src := range want {
		g, ok := got[path]
		require.True(t, ok, "%s is missing (go generate ./... in app-bootstrap/config)", path)
		require.Equal(t, src, g, "%s drifted from what the service sends (go generate ./... in app-bootstrap/config, then review the diff)", path)
	}
	for path := range got {
		_, ok := want[path]
		require.True(t, ok, "%s: no example policy renders it (go generate ./... in app-bootstrap/config)", path)
	}
}
