package luasrc

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// TestRenderEveryProgram renders every algorithm in every variant: each
// program starts with its shebang and its own name, holds no template
// residue, and requires the variant's KEYS and the algorithm's ARGV counts.
func TestRenderEveryProgram(t *testing.T) {
	files, err := Render()
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	// Every algorithm in every variant but the lease ones, but the dedup
	// program of a queue and of a concurrency limit; the lease variants
	// for the token bucket, GCRA and the sliding log.
	if want := len(Algorithms)*(len(Variants)-2) - 2 + 6; len(files) != want {
		t.Fatalf("%d programs rendered, want %d", len(files), want)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f.Name] {
			t.Errorf("%s rendered twice", f.Name)
		}
		seen[f.Name] = true
		if !bytes.HasPrefix(f.Source, []byte("#!lua\n--[[ "+f.Name+": ")) {
			t.Errorf("%s: header %q", f.Name, f.Source[:min(40, len(f.Source))])
		}
		for _, residue := range []string{"{{", "}}", "<no value>"} {
			if bytes.Contains(f.Source, []byte(residue)) {
				t.Errorf("%s: template residue %q", f.Name, residue)
			}
		}
		want := "#ARGV ~= " + strconv.Itoa(f.Algorithm.Args+f.Variant.ExtraArgs)
		keys := "#KEYS ~= " + strconv.Itoa(f.Variant.Keys) + " "
		if !strings.Contains(string(f.Source), want) || !strings.Contains(string(f.Source), keys) {
			t.Errorf("%s: argument counts (%s)", f.Name, want)
		}
	}
}

// TestRenderUnknown: a missing template file is an error naming the program.
func TestRenderUnknown(t *testing.T) {
	_, err := RenderOne(Algorithm{Slug: "no-such-algorithm", Args: 6}, Variants[0])
	if err == nil || !strings.Contains(err.Error(), "rate-no-such-algorithm-v1") {
		t.Fatalf("unknown algorithm: %v", err)
	}
	_, err = RenderOne(Algorithms[0], Variant{Name: "nothing", Suffix: "-nothing", Version: 1, Keys: 1})
	if err == nil || !strings.Contains(err.Error(), "rate-fixed-window-nothing-v1") {
		t.Fatalf("unknown variant: %v", err)
	}
}
