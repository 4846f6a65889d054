package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
)

func main() {
	out := flag.String("o", "manifest.json", "manifest path to write")
	check := flag.Bool("check", false, "only compare the file with the generated manifest")
	flag.Parse()
	if err := run(*out, *check); err != nil {
		fmt.Fprintln(os.Stderr, "genmanifest:", err)
		os.Exit(1)
	}
}

func run(path string, check bool) error {
	want, err := programs.GenerateManifest()
	if err != nil {
		return err
	}
	if check {
		got, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read manifest %s: %w", path, err)
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("manifest %s is stale: run go generate ./... in adapter-outbound-cache-redis/programs", path)
		}
		return nil
	}
	if err := os.WriteFile(path, want, 0o644); err != nil {
		return fmt.Errorf("write manifest %s: %w", path, err)
	}
	return nil
}
