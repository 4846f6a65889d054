package programs

import (
	"errors"
	"fmt"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs/luasrc"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// A bound program (ADR 0030, rendered in one stage since ADR 0035) is one
// of a policy's programs with the policy's parameters written into its
// source as constants by the template itself: luasrc.RenderBound executes
// the algorithm's template with the policy's ARGV as data, and its "args"
// block emits `local rev, cost, reg, ... = 3, ARGV[2], 2000, ...` where
// the generic program reads ARGV[1..n]. Nothing rewrites rendered text.
// Every range check, the state checks, the arithmetic and the reply are
// the template's own lines, the same as the generic program's, so a bound
// program reads and writes exactly the state the generic one does and
// answers exactly what it answers to Args(p, cost) (the vectors run
// through both). What it no longer does per call is parse five or six
// decimal strings the policy build has already validated.

// ArgCountBound is the ARGV length of a bound decision or charge program:
// revision and cost. A bound dedup program appends DedupArgs.
const ArgCountBound = ArgCost + 1

// ErrBind is wrapped by every error of Bind and ForPolicy: the policy is
// zero, or has no program of a kind, or its parameters do not fit the
// template.
var ErrBind = errors.New("cannot bind the programs to the policy")

// Bundle is one policy's programs, rendered once by ForPolicy: a provider
// asks for it once per policy at construction and sends nothing else for
// the policy's single calls.
type Bundle struct {
	// Decide is the bound decision program; its ARGV is BoundArgs.
	Decide Program
	// Charge is the bound reconciliation program (the model is Charge);
	// its ARGV is BoundArgs, the cost the units to charge.
	Charge Program
	// Dedup is the bound dedup decision program, set when HasDedup: the
	// policy has a dedup window (ratelimit.Policy.DedupWindow). Its ARGV
	// is BoundArgs followed by DedupArgs, KEYS NumKeysDedup.
	Dedup Program
	// HasDedup reports whether Dedup is set.
	HasDedup bool
	// Refund is the bound refund program; its ARGV is BoundRefundArgs.
	Refund Program
	// Lease and GiveBack are the bound programs of a lease (ADR 0042),
	// set when HasLease: the policy leases (ratelimit.Policy.Lease) and
	// its algorithm's state records leases. Lease reserves: its ARGV is
	// BoundLeaseArgs. GiveBack returns a lease's unspent units: its ARGV
	// is BoundGiveBackArgs with the reservation's receipt.
	Lease, GiveBack Program
	// HasLease reports whether Lease and GiveBack are set.
	HasLease bool
}

// ForPolicy renders p's programs bound to p (Bundle): one lookup and one
// rendering per policy. Each bound program keeps the generic program's
// Name, Version, Algorithm and MinRedisVersion (metrics and
// CallError.Program name it so; label cardinality does not grow with
// policies); Source is the rendering, SHA1 its digest, ArgCount the bound
// count. Errors wrap ErrBind, or ErrManifest when Verify fails.
func ForPolicy(p ratelimit.Policy) (Bundle, error) {
	if p.IsZero() {
		return Bundle{}, fmt.Errorf("%w: zero policy", ErrBind)
	}
	c, err := loadCatalog()
	if err != nil {
		return Bundle{}, err
	}
	a := p.Algorithm()
	generic, ok := c.byAlgorithm[a]
	if !ok {
		return Bundle{}, fmt.Errorf("%w: policy %q: no decision program for %v", ErrBind, p.ID(), a)
	}
	alg, ok := templateOf(generic)
	if !ok {
		return Bundle{}, fmt.Errorf("%w: policy %q: no template renders %s", ErrBind, p.ID(), generic.Name)
	}
	bind := func(prog Program, variant string) (Program, error) {
		v, ok := variantNamed(variant)
		if !ok {
			return Program{}, fmt.Errorf("%w: no %s variant", ErrBind, variant)
		}
		f, err := luasrc.RenderBound(alg, v, bindingOf(p))
		if err != nil {
			return Program{}, fmt.Errorf("%w: policy %q: %w", ErrBind, p.ID(), err)
		}
		prog.Source, prog.SHA1 = string(f.Source), sha1Hex(string(f.Source))
		prog.ArgCount = ArgCountBound + v.ExtraArgs
		return prog, nil
	}
	var b Bundle
	if b.Decide, err = bind(generic, "decide"); err != nil {
		return Bundle{}, err
	}
	charge, ok := c.charges[a]
	if !ok {
		return Bundle{}, fmt.Errorf("%w: policy %q: no charge program for %v", ErrBind, p.ID(), a)
	}
	if b.Charge, err = bind(charge, "charge"); err != nil {
		return Bundle{}, err
	}
	if p.DedupWindow() != 0 {
		dedup, ok := c.dedups[a]
		if !ok {
			return Bundle{}, fmt.Errorf("%w: policy %q: no dedup program for %v", ErrBind, p.ID(), a)
		}
		if b.Dedup, err = bind(dedup, "dedup"); err != nil {
			return Bundle{}, err
		}
		b.HasDedup = true
	}
	refund, ok := c.refunds[a]
	if !ok {
		return Bundle{}, fmt.Errorf("%w: policy %q: no refund program for %v", ErrBind, p.ID(), a)
	}
	if b.Refund, err = bind(refund, "refund"); err != nil {
		return Bundle{}, err
	}
	if _, leases := p.Lease(); leases && alg.Leases {
		if b.Lease, err = bind(c.leases[a], "lease"); err != nil {
			return Bundle{}, err
		}
		if b.GiveBack, err = bind(c.giveBacks[a], "giveback"); err != nil {
			return Bundle{}, err
		}
		b.HasLease = true
	}
	return b, nil
}

// Programs returns the bundle's programs in the order decide, charge,
// dedup (when HasDedup), refund: every program a provider may send for the
// policy, what `tlbctl check` loads.
func (b Bundle) Programs() []Program {
	out := []Program{b.Decide, b.Charge}
	if b.HasDedup {
		out = append(out, b.Dedup)
	}
	out = append(out, b.Refund)
	if b.HasLease {
		out = append(out, b.Lease, b.GiveBack)
	}
	return out
}

// Bind returns p's bound decision program, ForPolicy(p).Decide.
func Bind(p ratelimit.Policy) (Program, error) {
	b, err := ForPolicy(p)
	return b.Decide, err
}

// BoundArgs returns the ARGV of p's bound decision and charge programs
// for one request of the given cost: the revision and the cost, the first
// two of Args.
func BoundArgs(p ratelimit.Policy, cost int64) []any {
	if p.IsZero() {
		return nil
	}
	return []any{p.Revision(), cost}
}

// BoundRefundArgs returns the ARGV of p's bound refund program for a
// receipt of the given cost taken at atMillis (server time): the revision,
// the cost and the receipt's instant.
func BoundRefundArgs(p ratelimit.Policy, cost, atMillis int64) []any {
	if p.IsZero() {
		return nil
	}
	return []any{p.Revision(), cost, atMillis}
}

// BoundLeaseArgs returns the ARGV of p's bound reservation program
// (Bundle.Lease) for a lease of cost units lasting p's lease TTL that
// replaces the lease reserved at replacesMillis (0: none): the revision,
// the cost, the length and that instant.
func BoundLeaseArgs(p ratelimit.Policy, cost, replacesMillis int64) []any {
	l, ok := p.Lease()
	if p.IsZero() || !ok {
		return nil
	}
	return []any{p.Revision(), cost, l.TTL.Milliseconds(), replacesMillis}
}

// BoundGiveBackArgs returns the ARGV of p's bound give-back program
// (Bundle.GiveBack) for cost unspent units of the lease reserved at
// atMillis (its receipt): the revision, the cost, the instant and p's
// lease TTL.
func BoundGiveBackArgs(p ratelimit.Policy, cost, atMillis int64) []any {
	l, ok := p.Lease()
	if p.IsZero() || !ok {
		return nil
	}
	return []any{p.Revision(), cost, atMillis, l.TTL.Milliseconds()}
}

// bindingOf is p's generic ARGV (Args(p, 1)) as the template's data.
func bindingOf(p ratelimit.Policy) luasrc.Binding {
	args := Args(p, 1)
	b := make(luasrc.Binding, len(args))
	for i, a := range args {
		b[i], _ = a.(int64) // Args builds int64s only
	}
	return b
}

// templateOf is the template algorithm whose decision program is prog: the
// catalog and luasrc meet at the program name, never at a switch.
func templateOf(prog Program) (luasrc.Algorithm, bool) {
	decide, _ := variantNamed("decide")
	for _, alg := range luasrc.Algorithms {
		if luasrc.ProgramName(alg, decide) == prog.Name {
			return alg, true
		}
	}
	return luasrc.Algorithm{}, false
}

// variantNamed is the luasrc variant called name.
func variantNamed(name string) (luasrc.Variant, bool) {
	for _, v := range luasrc.Variants {
		if v.Name == name {
			return v, true
		}
	}
	return luasrc.Variant{}, false
}
