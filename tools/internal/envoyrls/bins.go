package envoyrls

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Environment variables the harness reads.
const (
	// EnvBinDir names the directory holding service_cmd and client_cmd;
	// the Makefile exports it (ENVOY_RLS_BIN, default bin/envoy-rls).
	EnvBinDir = "ENVOY_RLS_BIN"
	// EnvRequired set to 1 makes missing reference binaries a failure
	// instead of a skip; the make targets set it.
	EnvRequired = "ENVOY_RLS_REQUIRED"
)

// ErrNoBinaries is returned by FindBinaries when service_cmd or client_cmd
// is not installed (run `make envoy-rls-bin`).
var ErrNoBinaries = errors.New("envoyrls: the reference binaries are not installed (make envoy-rls-bin)")

// Binaries are the reference's two programs and the version recorded next
// to them by `make envoy-rls-bin`.
type Binaries struct {
	Service string
	Client  string
	Version string
}

// Required reports whether EnvRequired asks for the reference binaries.
func Required() bool { return os.Getenv(EnvRequired) == "1" }

// FindBinaries looks for service_cmd and client_cmd in $ENVOY_RLS_BIN, else
// in <root>/bin/envoy-rls; it wraps ErrNoBinaries when either is missing.
func FindBinaries(root string) (Binaries, error) {
	dir := os.Getenv(EnvBinDir)
	if dir == "" {
		dir = filepath.Join(root, "bin", "envoy-rls")
	}
	b := Binaries{Service: filepath.Join(dir, "service_cmd"), Client: filepath.Join(dir, "client_cmd")}
	for _, p := range []string{b.Service, b.Client} {
		st, err := os.Stat(p)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return Binaries{}, fmt.Errorf("%w: no executable %s", ErrNoBinaries, p)
		}
	}
	if v, err := os.ReadFile(filepath.Join(dir, "VERSION")); err == nil {
		b.Version = strings.TrimSpace(string(v))
	}
	return b, nil
}

// RepoRoot is the nearest directory at or above the working directory
// that holds go.work.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("envoyrls: working directory: %w", err)
	}
	for range 64 {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", errors.New("envoyrls: no go.work at or above the working directory")
}
