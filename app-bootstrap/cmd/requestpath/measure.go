package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/coverage"
	"strconv"
	"strings"
)

// window clears the coverage counters, calls get once, and returns the
// files any of whose statements ran meanwhile. dir receives the counter
// files and their text form.
func window(ctx context.Context, dir string, get func() error) (map[string]bool, error) {
	if err := coverage.ClearCounters(); err != nil {
		return nil, fmt.Errorf("%w: %w", errNoCoverage, err)
	}
	if err := get(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := coverage.WriteMetaDir(dir); err != nil {
		return nil, fmt.Errorf("%w: %w", errNoCoverage, err)
	}
	if err := coverage.WriteCountersDir(dir); err != nil {
		return nil, err
	}
	prof := filepath.Join(dir, "profile.txt")
	out, err := exec.CommandContext(ctx, "go", "tool", "covdata", "textfmt", "-i="+dir, "-o="+prof).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go tool covdata textfmt: %w: %s", err, out)
	}
	return ranFiles(prof)
}

// ranFiles reads a text coverage profile ("file:l.c,l.c statements count"
// per block) and returns the files with a block whose count is above 0.
func ranFiles(profile string) (map[string]bool, error) {
	f, err := os.Open(profile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ran := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(rest)
		if !ok || len(fields) != 3 {
			continue // the "mode:" line
		}
		n, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: count %q: %w", profile, fields[2], err)
		}
		if rel, counts := trim(name); counts && n > 0 {
			ran[rel] = true
		}
	}
	return ran, sc.Err()
}
