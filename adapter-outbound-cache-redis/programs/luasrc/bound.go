package luasrc

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"text/template"
)

// MaxExactInt is the largest integer a program's number holds exactly,
// 2^53-1 (ratelimit.MaxExactInt; this package imports the standard library
// only): the bound of every constant RenderBound writes.
const MaxExactInt = 1<<53 - 1

// ErrBinding is wrapped by every error of RenderBound that is about the
// binding it was given: the wrong argument count, or an argument that is
// not an integer in 0..MaxExactInt.
var ErrBinding = errors.New("binding does not fit the program")

// Binding is one policy revision's parameters, the ARGV a generic program
// of the algorithm receives (programs.Args(policy, cost) as decimal
// integers: the revision, a cost, then the parameters). RenderBound writes
// them into the program as constants; the cost is not used.
type Binding []int64

// bound is what the templates see of a Binding: its entries as decimal
// text, by ARGV index.
type bound struct {
	argv []string
}

// Revision is the bound revision, ARGV[1] of the generic program.
func (b *bound) Revision() string { return b.argv[0] }

// Arg is ARGV[k] of the generic program (k >= 3): a parameter.
func (b *bound) Arg(k int) (string, error) {
	if k < 3 || k > len(b.argv) {
		return "", fmt.Errorf("ARGV[%d] is not a parameter of a %d-argument binding", k, len(b.argv))
	}
	return b.argv[k-1], nil
}

// Args is ARGV[from..to] of the generic program (parameters), comma
// separated: the constants of a bound argument line.
func (b *bound) Args(from, to int) (string, error) {
	if from < 3 || to > len(b.argv) || from > to {
		return "", fmt.Errorf("ARGV[%d..%d] are not parameters of a %d-argument binding", from, to, len(b.argv))
	}
	return strings.Join(b.argv[from-1:to], ", "), nil
}

// RenderBound renders alg's program of variant v bound to b (ADR 0035):
// the template's "args" block emits the revision and the parameters as
// constants (`local rev, cost, reg, ... = 3, ARGV[2], 2000, ...`), so the
// program's ARGV is the revision, the cost and v's extra ARGV, and it
// answers INVALID (5) unless ARGV[1] is b's revision. Everything after
// that block is the same text as RenderOne's: the range checks (now on
// constants), the state, the step and the reply. No text is rewritten
// after rendering. The File's Name is RenderOne's.
func RenderBound(alg Algorithm, v Variant, b Binding) (File, error) {
	name := ProgramName(alg, v)
	if len(b) != alg.Args {
		return File{}, fmt.Errorf("%w: %s takes %d arguments, the binding has %d", ErrBinding, name, alg.Args, len(b))
	}
	argv := make([]string, len(b))
	for i, n := range b {
		if n < 0 || n > MaxExactInt {
			return File{}, fmt.Errorf("%w: %s ARGV[%d] %d is not in 0..%d", ErrBinding, name, i+1, n, int64(MaxExactInt))
		}
		argv[i] = strconv.FormatInt(n, 10)
	}
	t, err := parsed(alg, v.Name)
	if err != nil {
		return File{}, fmt.Errorf("parse templates of %s: %w", name, err)
	}
	var out bytes.Buffer
	d := data{Name: name, Variant: v.Name, Keys: v.Keys, Args: boundArgs + v.ExtraArgs, Bound: &bound{argv: argv}}
	if err := t.ExecuteTemplate(&out, "program", d); err != nil {
		return File{}, fmt.Errorf("render %s: %w", name, err)
	}
	return File{Name: name, Algorithm: alg, Variant: v, Source: out.Bytes()}, nil
}

// boundArgs is the ARGV count of a bound program before its variant's
// extra ARGV: the revision and the cost.
const boundArgs = 2

// templateKey names one parsed template set: an algorithm in a variant.
type templateKey struct {
	alg     Algorithm
	variant string
}

var (
	parsedMu sync.Mutex
	parsedBy = map[templateKey]*template.Template{}
)

// parsed returns the parsed templates of alg in variant, parsing them once
// per process: a provider renders every policy's programs at start-up
// from the same few sets. Executing a parsed template is safe for
// concurrent use.
func parsed(alg Algorithm, variant string) (*template.Template, error) {
	parsedMu.Lock()
	defer parsedMu.Unlock()
	k := templateKey{alg, variant}
	if t := parsedBy[k]; t != nil {
		return t, nil
	}
	t, err := template.New(alg.Slug).Option("missingkey=error").ParseFS(templates, alg.files(variant)...)
	if err != nil {
		return nil, err
	}
	parsedBy[k] = t
	return t, nil
}
