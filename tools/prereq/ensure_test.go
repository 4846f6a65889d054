package prereq

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stubs is a PATH of its own: the script sees only the programs a case puts
// there, so the test never touches the machine's packages.
type stubs struct {
	t   *testing.T
	dir string
}

func newStubs(t *testing.T) stubs {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "later"), 0o755))
	return stubs{t: t, dir: dir}
}

// put writes an executable shell script named name into the stub PATH.
func (s stubs) put(name, body string) {
	s.t.Helper()
	require.NoError(s.t, os.WriteFile(filepath.Join(s.dir, "bin", name), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
}

// uid makes the stub id print n for `id -u`.
func (s stubs) uid(n string) { s.put("id", "echo "+n) }

// installable makes an apt-get stub that records its arguments and, on
// install, moves the named programs onto the stub PATH (exit code rc).
func (s stubs) installable(rc int, programs ...string) {
	for _, p := range programs {
		require.NoError(s.t, os.WriteFile(filepath.Join(s.dir, "later", p), []byte("#!/bin/sh\n"), 0o755))
	}
	body := `echo "$@" >> ` + filepath.Join(s.dir, "apt-args") + "\n" +
		`[ "$1" = install ] || exit 0` + "\n"
	if rc == 0 {
		body += "/bin/mv " + filepath.Join(s.dir, "later") + "/* " + filepath.Join(s.dir, "bin") + "/\n"
	}
	body += "exit " + string(rune('0'+rc))
	s.put("apt-get", body)
}

func (s stubs) aptArgs() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "apt-args"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	require.NoError(s.t, err)
	return string(b)
}

type result struct {
	code           int
	stdout, stderr string
}

func (s stubs) run(programs ...string) result {
	s.t.Helper()
	script, err := filepath.Abs("ensure.sh")
	require.NoError(s.t, err)
	bash, err := exec.LookPath("bash")
	require.NoError(s.t, err)
	cmd := exec.Command(bash, append([]string{script, "make test"}, programs...)...)
	cmd.Env = []string{"PATH=" + filepath.Join(s.dir, "bin"), "TLB_PREREQ_APT_LOG=" + filepath.Join(s.dir, "apt.log")}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(s.t, err)
	}
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func lines(s string) int { return strings.Count(s, "\n") }

func TestEnsureAllPresentIsSilent(t *testing.T) {
	s := newStubs(t)
	s.uid("0")
	s.installable(0)
	s.put("redis-server", "")
	s.put("redis-sentinel", "")
	r := s.run("redis-server", "redis-sentinel")
	assert.Equal(t, result{}, r)
	assert.Empty(t, s.aptArgs(), "nothing missing: apt-get is not called")
}

func TestEnsureNotRootStopsWithOneLine(t *testing.T) {
	s := newStubs(t)
	s.uid("1000")
	s.installable(0, "redis-server", "redis-sentinel")
	r := s.run("redis-server", "redis-sentinel", "redis-cli")
	assert.Equal(t, 1, r.code)
	assert.Empty(t, r.stdout)
	assert.Equal(t, 1, lines(r.stderr), r.stderr)
	assert.Contains(t, r.stderr, "make test: needs redis-server redis-sentinel redis-cli on PATH")
	assert.Contains(t, r.stderr, "apt-get install -y redis-server redis-sentinel redis-tools")
	assert.Empty(t, s.aptArgs(), "not root: nothing installed")
}

func TestEnsureRootWithoutAptStopsWithOneLine(t *testing.T) {
	s := newStubs(t)
	s.uid("0")
	r := s.run("redis-server")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, 1, lines(r.stderr), r.stderr)
	assert.Contains(t, r.stderr, "apt-get install -y redis-server")
}

func TestEnsureRootInstallsAndSaysSo(t *testing.T) {
	s := newStubs(t)
	s.uid("0")
	s.put("redis-cli", "")
	s.installable(0, "redis-server", "redis-sentinel")
	r := s.run("redis-server", "redis-cli", "redis-sentinel")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	assert.Equal(t, 1, lines(r.stdout), r.stdout)
	assert.Contains(t, r.stdout, "make test: redis-server redis-sentinel not on PATH; installing Debian packages redis-server redis-sentinel")
	assert.Equal(t, "update -qq\ninstall -y -qq redis-server redis-sentinel\n", s.aptArgs())
}

func TestEnsureFailedInstallStopsWithOneLine(t *testing.T) {
	s := newStubs(t)
	s.uid("0")
	s.installable(3, "redis-server")
	r := s.run("redis-server")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, 1, lines(r.stdout), "the installing line comes first")
	assert.Equal(t, 1, lines(r.stderr), r.stderr)
	assert.Contains(t, r.stderr, "apt-get install redis-server failed")
}

func TestEnsureInstallThatProvidesNothingStops(t *testing.T) {
	s := newStubs(t)
	s.uid("0")
	s.installable(0) // succeeds, installs nothing
	r := s.run("redis-server")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, 1, lines(r.stderr), r.stderr)
	assert.Contains(t, r.stderr, "redis-server still not on PATH")
}
