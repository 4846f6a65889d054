package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGenerateThenCheck: the written files pass -check; an edited manifest or
// program does not, nor a missing one; the committed files are current.
func TestGenerateThenCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "manifest.json")
	if err := run(path, false); err != nil {
		t.Fatalf("generate: %v", err)
	}
	if err := run(path, true); err != nil {
		t.Fatalf("check of fresh files: %v", err)
	}
	if err := os.WriteFile(path, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(path, true); err == nil {
		t.Fatal("check accepted a stale manifest")
	}
	if err := run(path, false); err != nil {
		t.Fatalf("regenerate: %v", err)
	}
	prog := filepath.Join(dir, "rate-token-bucket-charge-v1.lua")
	src, err := os.ReadFile(prog)
	if err != nil {
		t.Fatalf("rendered program: %v", err)
	}
	if err := os.WriteFile(prog, append(src, "-- an edit\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(path, true); err == nil {
		t.Fatal("check accepted an edited program file")
	}
	if err := run(filepath.Join(t.TempDir(), "missing.json"), true); err == nil {
		t.Fatal("check accepted missing files")
	}
	if err := run("../../../adapter-outbound-cache-redis/programs/manifest.json", true); err != nil {
		t.Fatalf("committed files: %v", err)
	}
}
