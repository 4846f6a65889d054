package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// offlineEnv is the environment every fixture run uses: no proxy (a network
// lookup fails instead of happening), no toolchain download, an empty module
// cache (the fixture must not depend on downloaded modules), and GOWORK=off
// (archcheck must pin GOWORK itself). GOFLAGS is cleared so a developer's
// -mod=mod cannot hide a go.mod problem.
func offlineEnv(t *testing.T) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "GOPROXY", "GOFLAGS", "GOWORK", "GOTOOLCHAIN", "GOMODCACHE", "GONOSUMDB", "GOSUMDB", "GOPRIVATE":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"GOPROXY=off", "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local", "GOSUMDB=off",
		"GOMODCACHE="+t.TempDir())
}

// fixture copies the clean fixture workspace, then the files of the named
// violation variant over it ("" is the clean workspace), and returns its root.
func fixture(t *testing.T, variant string) string {
	t.Helper()
	root := t.TempDir()
	copyTree(t, filepath.Join("testdata", "workspace"), root)
	if variant != "" {
		copyTree(t, filepath.Join("testdata", "violations", variant), root)
	}
	return root
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	require.DirExists(t, src)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	require.NoError(t, err)
}

type result struct {
	code           int
	stdout, stderr string
}

func runFixture(t *testing.T, root string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run([]string{"-root", root}, offlineEnv(t), &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

var violationLine = regexp.MustCompile(`^(\S+) (imports|requires|declares module) (\S+): rule (\S+)$`)

// rules returns the rule names of the violation lines, sorted and unique, and
// fails on any unindented stdout line that is neither a violation nor the ok
// summary.
func rules(t *testing.T, stdout string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if line == "" || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "archcheck: ") {
			continue
		}
		m := violationLine.FindStringSubmatch(line)
		require.NotNil(t, m, "malformed output line %q", line)
		out = append(out, m[4])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestCleanFixturePasses(t *testing.T) {
	t.Parallel()
	r := runFixture(t, fixture(t, ""))
	require.Equal(t, exitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Empty(t, rules(t, r.stdout))
	// 7 packages: tools has none, which must be fine.
	assert.Contains(t, r.stdout, "archcheck: ok: 5 modules, 7 packages")
	assert.Empty(t, r.stderr)
}

func TestViolationFixturesFail(t *testing.T) {
	t.Parallel()
	const p = "github.com/tech-log/tech-log-backend/"
	tests := []struct {
		variant string
		rules   []string
		line    string // one expected violation line, verbatim
	}{
		{"adapter-imports-adapter", []string{"adapters-isolated"},
			"adapter-inbound-web/edge imports " + p + "adapter-outbound-cache-redis/redisrate: rule adapters-isolated"},
		{"shared-contract-third-party", []string{"shared-contract", "shared-contract-go-mod"},
			"shared-contract/ratelimit imports github.com/acme/leftpad: rule shared-contract"},
		{"shared-contract-go-mod", []string{"shared-contract-go-mod"},
			"shared-contract/go.mod requires github.com/acme/leftpad: rule shared-contract-go-mod"},
		{"testify-in-contract-code", []string{"shared-contract"},
			"shared-contract/keyspace imports github.com/stretchr/testify/require: rule shared-contract"},
		{"fx-in-adapter", []string{"fx-only-in-app-bootstrap"},
			"adapter-outbound-cache-redis/redisrate imports go.uber.org/fx: rule fx-only-in-app-bootstrap"},
		{"go-redis-in-web", []string{"go-redis-only-in-redis-adapter-and-bootstrap"},
			"adapter-inbound-web/edge imports github.com/redis/go-redis/v9: rule go-redis-only-in-redis-adapter-and-bootstrap"},
		{"imports-app-bootstrap", []string{"no-import-app-bootstrap"},
			"tools/load imports " + p + "app-bootstrap/config: rule no-import-app-bootstrap"},
		{"missing-replace", []string{"sibling-replace"},
			"app-bootstrap/go.mod requires " + p + "shared-contract: rule sibling-replace"},
		{"testcontainers-outside-redistest", []string{"testcontainers-only-in-redistest"},
			"adapter-outbound-cache-redis/redisrate imports github.com/testcontainers/testcontainers-go: rule testcontainers-only-in-redistest"},
	}
	for _, tt := range tests {
		t.Run(tt.variant, func(t *testing.T) {
			t.Parallel()
			r := runFixture(t, fixture(t, tt.variant))
			require.Equal(t, exitViolations, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			assert.Equal(t, tt.rules, rules(t, r.stdout))
			assert.Contains(t, strings.Split(r.stdout, "\n"), tt.line)
			assert.NotContains(t, r.stdout, "archcheck: ok")
			assert.Contains(t, r.stderr, "archcheck: FAIL")
		})
	}
}

// TestEveryVariantIsTested fails when a fixture variant directory exists
// without a case above (or the load-error tests below).
func TestEveryVariantIsTested(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(filepath.Join("testdata", "violations"))
	require.NoError(t, err)
	src, err := os.ReadFile("main_test.go")
	require.NoError(t, err)
	for _, e := range entries {
		assert.Contains(t, string(src), `"`+e.Name()+`"`, "variant %s has no test case", e.Name())
	}
}

func TestLoadErrorsFailClearly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		root    func(t *testing.T) string
		stderrs []string
	}{
		{"go list fails for a module", func(t *testing.T) string { return fixture(t, "go-list-fails") },
			[]string{"list packages: go list", "requires go >= 1.99"}},
		{"package go list cannot read", func(t *testing.T) string { return fixture(t, "package-error") },
			[]string{"module shared-contract: package github.com/tech-log/tech-log-backend/shared-contract/ratelimit:", "found packages", "check is incomplete"}},
		{"ignored file that does not parse", func(t *testing.T) string {
			root := fixture(t, "")
			// Written here rather than kept in testdata: gofmt -l in make lint would reject it.
			bad := "//go:build integration\n\npackage edge\n\nimport (\n"
			require.NoError(t, os.WriteFile(filepath.Join(root, "adapter-inbound-web", "edge", "bad_test.go"), []byte(bad), 0o644))
			return root
			// go list either reports the file itself (its header does not
			// parse) or lists it as ignored and archcheck's parser fails.
		}, []string{"bad_test.go", "expected ')'", "check is incomplete"}},
		{"no go.work", func(t *testing.T) string { return t.TempDir() },
			[]string{"no go.work"}},
		{"go.work with a module outside the root", func(t *testing.T) string {
			root := fixture(t, "")
			work := "go 1.26\n\nuse (\n\t./shared-contract\n\t../elsewhere\n)\n"
			require.NoError(t, os.WriteFile(filepath.Join(root, "go.work"), []byte(work), 0o644))
			return root
		}, []string{"must be below the root"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runFixture(t, tt.root(t))
			require.Equal(t, exitLoad, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			for _, s := range tt.stderrs {
				assert.Contains(t, r.stderr, s)
			}
			assert.NotContains(t, r.stdout, "archcheck: ok")
		})
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitLoad, run([]string{"-nosuchflag"}, offlineEnv(t), &stdout, &stderr))
	assert.Equal(t, exitLoad, run([]string{"extra"}, offlineEnv(t), &stdout, &stderr))
	assert.Contains(t, stderr.String(), "unexpected arguments")
}
