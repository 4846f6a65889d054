// Package luasrc is the one source of every rate-limit program: per algorithm
// one template file (fixed-window.lua.tmpl, sliding-counter.lua.tmpl,
// token-bucket.lua.tmpl, gcra.lua.tmpl, sliding-log.lua.tmpl,
// leaky-bucket.lua.tmpl, concurrency.lua.tmpl) holding its arguments, state checks and one step
// per variant (or, with Algorithm.Base, what differs from its base's), the
// parts all algorithms share (common.lua.tmpl), and per variant one layout
// (variant-<name>.lua.tmpl) that composes them. Render produces the program
// files byte for byte; the checked-in rate-*.lua files and manifest.json
// beside the programs package are its output, written by
// tools/cmd/genmanifest (go generate in the programs package) and compared
// with it by the programs package's tests. RenderBound (bound.go, ADR
// 0035) renders the same templates bound to one policy: the template data
// carries the policy's parameters and each algorithm's "args" block emits
// them as constants, so the program's ARGV is the revision and the cost;
// programs.ForPolicy calls it at start-up, and nothing rewrites its text. RenderSet (set.go) renders the
// policy-set program rate-set-v1 (ADR 0026): each algorithm's decision
// program (but a queue's, Algorithm.Delays) as a member function
// (variant-member.lua.tmpl) inside one all-or-nothing frame (set.lua.tmpl),
// so a member is decided by the very text of its decision program.
//
// Adding a variant: write variant-<name>.lua.tmpl (defining "program",
// which starts `#!lua` then {{template "bound-line" .}}, "cost-arg",
// "before" and "exit"; see common.lua.tmpl; read extra ARGV relative to
// #ARGV, so the bound rendering needs no change), define the step it
// calls in each algorithm file unless it reuses "decide" or "charge", add it
// to Variants (its KEYS count and extra ARGV), register the new files in
// programs.definitions (embed, name, argument count) and run go generate in
// the programs package.
//
// StructShim (structshim.go) is the pure-Lua struct library the tests and
// tools prepend to a program on miniredis, whose Lua has none.
//
// It depends on the standard library only. The programs package imports
// it to render each policy's bound programs (the templates are embedded
// in the product); the generic programs are embedded as rendered files.
package luasrc

import (
	"bytes"
	"embed"
	"fmt"
	"strconv"
)

//go:embed *.lua.tmpl
var templates embed.FS

// Algorithm is one algorithm's template source.
type Algorithm struct {
	// Slug names the template file <Slug>.lua.tmpl and the programs
	// rate-<Slug><Suffix>-v<Version>.
	Slug string
	// Args is the ARGV count of its decision program.
	Args int
	// Base, when set, is the slug of the algorithm whose template is
	// parsed before this one's: the algorithm runs on Base's steps and its
	// own file redefines what differs (the leaky bucket on GCRA, ADR 0028).
	Base string
	// Delays marks an algorithm whose admissions may carry a delay (the
	// leaky bucket, ADR 0028): a held request can neither be replayed nor
	// hold a set's other members, so it has no dedup program and no set
	// member function (Renders).
	Delays bool
	// NoDedup marks an algorithm without a dedup program whose admissions
	// are still set members (a concurrency limit, ADR 0041: a replay
	// would hold no slot of its own).
	NoDedup bool
	// Leases marks an algorithm whose state records leases (ADR 0042):
	// it has the Variant.Lease programs, a reservation and a give-back.
	Leases bool
}

// Renders reports whether alg has a program of variant v.
func (alg Algorithm) Renders(v Variant) bool {
	if v.Lease {
		return alg.Leases
	}
	return !(alg.Delays || alg.NoDedup) || v.Name != "dedup"
}

// files lists the template files of alg's program in variant file v, in
// parse order (a later definition replaces an earlier one).
func (alg Algorithm) files(variant string) []string {
	files := []string{"common.lua.tmpl"}
	if alg.Base != "" {
		files = append(files, alg.Base+".lua.tmpl")
	}
	return append(files, alg.Slug+".lua.tmpl", "variant-"+variant+".lua.tmpl")
}

// Algorithms lists the algorithms in manifest order.
var Algorithms = []Algorithm{
	{Slug: "fixed-window", Args: 6},
	{Slug: "sliding-counter", Args: 6},
	{Slug: "token-bucket", Args: 7, Leases: true},
	{Slug: "gcra", Args: 7, Leases: true},
	{Slug: "sliding-log", Args: 6, Leases: true},
	{Slug: "leaky-bucket", Args: 8, Base: "gcra", Delays: true},
	{Slug: "concurrency", Args: 6, Base: "sliding-log", NoDedup: true},
}

// Variant is one kind of program rendered for every algorithm.
type Variant struct {
	// Name selects the layout file variant-<Name>.lua.tmpl.
	Name string
	// Suffix is inserted into the program name before the version ("" or
	// "-charge", "-dedup" or "-refund").
	Suffix string
	// Version is the program version of the variant's programs, the "v2"
	// of rate-<algorithm>-dedup-v2.
	Version int
	// Keys is the KEYS count the variant's programs require.
	Keys int
	// ExtraArgs is the number of ARGV entries the variant appends after the
	// algorithm's.
	ExtraArgs int
	// Lease marks a lease variant, rendered only for Algorithm.Leases.
	Lease bool
}

// Variants lists the program variants in manifest order.
var Variants = []Variant{
	{Name: "decide", Suffix: "", Version: 1, Keys: 1},
	{Name: "charge", Suffix: "-charge", Version: 1, Keys: 1},
	// v2 (ADR 0013): a record counts its replays, bounded by ARGV maxReplays.
	{Name: "dedup", Suffix: "-dedup", Version: 2, Keys: 2, ExtraArgs: 5},
	// ADR 0025: give back one admission; the extra ARGV is its receipt's instant.
	{Name: "refund", Suffix: "-refund", Version: 1, Keys: 1, ExtraArgs: 1},
	// ADR 0042: reserve a lease (the extra ARGV are its length and the
	// instant of the lease it replaces) and give its unspent units back
	// (the extra ARGV are its reservation's instant and its length); only
	// for an algorithm whose state records leases (Algorithm.Leases).
	{Name: "lease", Suffix: "-lease", Version: 1, Keys: 1, ExtraArgs: 2, Lease: true},
	{Name: "giveback", Suffix: "-giveback", Version: 1, Keys: 1, ExtraArgs: 2, Lease: true},
}

// File is one rendered program.
type File struct {
	// Name is the program name; the file is Name + ".lua".
	Name string
	// Algorithm is the algorithm the program was rendered from.
	Algorithm Algorithm
	// Variant is the variant the program was rendered for.
	Variant Variant
	// Source is the program text, byte for byte.
	Source []byte
}

// data is what the templates see.
type data struct {
	Name    string // the program name
	Variant string // the variant name
	Keys    int    // the KEYS count the program requires
	Args    int    // the ARGV count the program requires
	// Bound, when set, holds the policy's parameters: the "args" block
	// emits them as constants (RenderBound); nil renders the generic
	// program, whose ARGV carries them.
	Bound *bound
}

// ProgramName is the program name of algorithm alg in variant v.
func ProgramName(alg Algorithm, v Variant) string {
	return "rate-" + alg.Slug + v.Suffix + "-v" + strconv.Itoa(v.Version)
}

// Render renders every program: for each variant in order, every algorithm
// in order that has it (Algorithm.Renders; the manifest order).
func Render() ([]File, error) {
	var out []File
	for _, v := range Variants {
		for _, alg := range Algorithms {
			if !alg.Renders(v) {
				continue
			}
			f, err := RenderOne(alg, v)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
	}
	return out, nil
}

// RenderOne renders the program of algorithm alg in variant v.
func RenderOne(alg Algorithm, v Variant) (File, error) {
	name := ProgramName(alg, v)
	t, err := parsed(alg, v.Name)
	if err != nil {
		return File{}, fmt.Errorf("parse templates of %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "program", data{Name: name, Variant: v.Name, Keys: v.Keys, Args: alg.Args + v.ExtraArgs}); err != nil {
		return File{}, fmt.Errorf("render %s: %w", name, err)
	}
	return File{Name: name, Algorithm: alg, Variant: v, Source: b.Bytes()}, nil
}
