package luasrc

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// binding is a valid-looking binding for alg: revision 3, then 2000, 60000,
// and small parameters (the templates range-check them in Lua, not here).
func binding(alg Algorithm) Binding {
	b := Binding{3, 1, 2000, 60000}
	for len(b) < alg.Args {
		b = append(b, int64(len(b)+5))
	}
	return b
}

// TestRenderBoundEveryProgram: every algorithm's decide, charge and dedup
// (refund too) render bound: the revision and parameters appear as
// constants on the argument line, ARGV is the revision, the cost and the
// variant's extra entries, and no ARGV beyond the cost is read by index
// (the dedup and refund entries are read relative to #ARGV).
func TestRenderBoundEveryProgram(t *testing.T) {
	argRef := regexp.MustCompile(`ARGV\[(\d+)\]`)
	for _, v := range Variants {
		for _, alg := range Algorithms {
			if !alg.Renders(v) {
				continue
			}
			b := binding(alg)
			f, err := RenderBound(alg, v, b)
			if err != nil {
				t.Fatalf("%s %s: %v", alg.Slug, v.Name, err)
			}
			src := string(f.Source)
			if !strings.HasPrefix(src, "#!lua\n-- "+f.Name+" bound to revision 3 of one policy") {
				t.Errorf("%s: header %q", f.Name, src[:min(80, len(src))])
			}
			for _, residue := range []string{"{{", "}}", "<no value>"} {
				if strings.Contains(src, residue) {
					t.Errorf("%s: template residue %q", f.Name, residue)
				}
			}
			if want := "#ARGV ~= " + strconv.Itoa(2+v.ExtraArgs) + " "; !strings.Contains(src, want) {
				t.Errorf("%s: no %q", f.Name, want)
			}
			if !strings.Contains(src, "local rev, cost, reg, grace, ") || !strings.Contains(src, " = 3, ARGV[2], 2000, 60000, ") {
				t.Errorf("%s: no bound argument line", f.Name)
			}
			if !strings.Contains(src, "if ARGV[1] == '3' and find(cost, POS) then") {
				t.Errorf("%s: the revision is not checked", f.Name)
			}
			body := src[strings.Index(src, "]]\n"):] // after the header's ARGV table
			for _, m := range argRef.FindAllStringSubmatch(body, -1) {
				if m[1] != "1" && m[1] != "2" {
					t.Errorf("%s: reads %s by index", f.Name, m[0])
				}
			}
		}
	}
}

// TestRenderBoundRefuses: a binding of another length, or with an entry
// outside 0..MaxExactInt, is an error wrapping ErrBinding naming the
// program, never a program.
func TestRenderBoundRefuses(t *testing.T) {
	alg, v := Algorithms[2], Variants[0]
	good := binding(alg)
	for name, b := range map[string]Binding{
		"one short":   good[:len(good)-1],
		"one more":    append(append(Binding{}, good...), 1),
		"negative":    append(append(Binding{}, good[:4]...), -1, 1, 1),
		"above M":     append(append(Binding{}, good[:4]...), MaxExactInt+1, 1, 1),
		"no revision": nil,
	} {
		_, err := RenderBound(alg, v, b)
		if !errors.Is(err, ErrBinding) || !strings.Contains(err.Error(), "rate-token-bucket-v1") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRenderBoundKeepsTheGenericSteps: after the argument block, a bound
// program is the generic program's text (the range checks, the state, the
// step and the reply), but for the leaky bucket's delayAfter constant and
// the dedup replay's limit constant, which replace int(ARGV[8]) and
// int(ARGV[5]) with the same number.
func TestRenderBoundKeepsTheGenericSteps(t *testing.T) {
	for _, v := range Variants {
		for _, alg := range Algorithms {
			if !alg.Renders(v) {
				continue
			}
			b := binding(alg)
			gen, err := RenderOne(alg, v)
			if err != nil {
				t.Fatal(err)
			}
			bnd, err := RenderBound(alg, v, b)
			if err != nil {
				t.Fatal(err)
			}
			g := string(gen.Source)
			g = strings.Replace(g, "int(ARGV[8])", strconv.FormatInt(b[len(b)-1], 10), 1)
			g = strings.Replace(g, "int(ARGV[5])", strconv.FormatInt(b[4], 10), 1)
			tail := func(s string) string { return s[strings.Index(s, "if not (rev and rev <= M"):] }
			if tail(g) != tail(string(bnd.Source)) {
				t.Errorf("%s: the bound program's steps differ from the generic program's", gen.Name)
			}
		}
	}
}
