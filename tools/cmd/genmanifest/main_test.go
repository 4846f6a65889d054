package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGenerateThenCheck: the written manifest passes -check; an edited one
// does not; the committed one is current.
func TestGenerateThenCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "manifest.json")
	if err := run(path, false); err != nil {
		t.Fatalf("generate: %v", err)
	}
	if err := run(path, true); err != nil {
		t.Fatalf("check of a fresh manifest: %v", err)
	}
	if err := os.WriteFile(path, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(path, true); err == nil {
		t.Fatal("check accepted a stale manifest")
	}
	if err := run(filepath.Join(t.TempDir(), "missing.json"), true); err == nil {
		t.Fatal("check accepted a missing manifest")
	}
	if err := run("../../../adapter-outbound-cache-redis/programs/manifest.json", true); err != nil {
		t.Fatalf("committed manifest: %v", err)
	}
}
