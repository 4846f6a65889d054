package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs/luasrc"
)

func main() {
	out := flag.String("o", "manifest.json", "manifest path to write; the program files go beside it")
	check := flag.Bool("check", false, "only compare the program files and the manifest with what would be written")
	flag.Parse()
	if err := run(*out, *check); err != nil {
		fmt.Fprintln(os.Stderr, "genmanifest:", err)
		os.Exit(1)
	}
}

// output is one file genmanifest writes.
type output struct {
	path string
	data []byte
}

// render returns every file for the manifest at path: the programs in
// manifest order, the policy-set program (rate-set-v1.lua, ADR 0026: not
// in the manifest, which lists the per-algorithm programs), then the
// manifest.
func render(path string) ([]output, error) {
	files, err := luasrc.Render()
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	sources := make(map[string]string, len(files))
	outs := make([]output, 0, len(files)+1)
	for _, f := range files {
		sources[f.Name] = string(f.Source)
		outs = append(outs, output{filepath.Join(dir, f.Name+".lua"), f.Source})
	}
	set, err := luasrc.RenderSet()
	if err != nil {
		return nil, err
	}
	outs = append(outs, output{filepath.Join(dir, set.Name+".lua"), set.Source})
	manifest, err := programs.ManifestFor(sources)
	if err != nil {
		return nil, err
	}
	return append(outs, output{path, manifest}), nil
}

func run(path string, check bool) error {
	outs, err := render(path)
	if err != nil {
		return err
	}
	if check {
		var stale []error
		for _, o := range outs {
			got, err := os.ReadFile(o.path)
			if err != nil {
				stale = append(stale, fmt.Errorf("read %s: %w", o.path, err))
				continue
			}
			if !bytes.Equal(got, o.data) {
				stale = append(stale, fmt.Errorf("%s is stale: run go generate ./... in adapter-outbound-cache-redis/programs", o.path))
			}
		}
		return errors.Join(stale...)
	}
	for _, o := range outs {
		if err := os.WriteFile(o.path, o.data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", o.path, err)
		}
	}
	return nil
}
