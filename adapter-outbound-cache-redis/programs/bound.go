package programs

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// A bound program (ADR 0030) is a policy's decision program with the
// policy's parameters written into its source as constants: its ARGV is the
// revision and the cost (BoundArgs), nothing else. It is the embedded
// decision program with one block replaced, the block that reads and
// parses ARGV[1..n]; every range check that follows it, the state checks,
// the arithmetic and the reply are the embedded program's own text, so a
// bound program reads and writes exactly the state the embedded one does
// and answers exactly what it answers to Args(p, cost) (the vectors run
// through both). What it no longer does per call is parse five or six
// decimal strings the policy build has already validated.

// ArgCountBound is the ARGV length of a bound program: revision and cost.
const ArgCountBound = ArgCost + 1

// ErrBind is wrapped by every error of Bind: the policy has no decision
// program, or its program does not have the argument block Bind replaces.
var ErrBind = errors.New("cannot bind the decision program to the policy")

// boundBlock is the embedded decision program's argument block: the ARGV
// count check, its comment, the line that reads ARGV[1..n] (the revision,
// the cost, int(ARGV[3]), then the parameters) and the pattern checks of
// the values that must be >= 1. Group 1 is the ARGV count, group 2 the
// names after cost, group 3 the ARGV read after ARGV[4] on that line.
var boundBlock = regexp.MustCompile(`if #KEYS ~= 1 or #ARGV ~= (\d+) then return \{5, now, 0, 0, 0, 0, 0\} end\n` +
	`(?:--[^\n]*\n)*` +
	`local rev, cost, ([a-z]+(?:, [a-z]+)*) = ARGV\[1\], ARGV\[2\], int\(ARGV\[3\]\), ARGV\[4\]((?:, ARGV\[\d\])*)\n` +
	`if find\(rev, POS\) and find\(cost, POS\)[^\n]*\n` +
	`  rev, cost, [^\n]*\n` +
	`else\n` +
	`  rev = nil\n` +
	`end\n`)

// argRef matches any ARGV reference; after the block only ARGV[1] (the
// revision, as stored) and ARGV[2] (the cost) may remain.
var argRef = regexp.MustCompile(`ARGV\[(\d+)\]`)

// Bind returns p's decision program bound to p: Source is the embedded
// program with its argument block replaced by p's parameters as decimal
// constants, SHA1 its digest, ArgCount ArgCountBound. Name, Version,
// Algorithm and MinRedisVersion are the embedded program's. Its ARGV is
// BoundArgs(p, cost); it answers StatusInvalid when ARGV[1] is not p's
// revision, exactly as the embedded program answers an ARGV that is not
// canonical or out of range.
func Bind(p ratelimit.Policy) (Program, error) {
	if p.IsZero() {
		return Program{}, fmt.Errorf("%w: zero policy", ErrBind)
	}
	prog, ok := ForAlgorithm(p.Algorithm())
	if !ok {
		return Program{}, fmt.Errorf("%w: no decision program for %v", ErrBind, p.Algorithm())
	}
	src, err := bindSource(prog, Args(p, 1))
	if err != nil {
		return Program{}, fmt.Errorf("%w: policy %q: %w", ErrBind, p.ID(), err)
	}
	prog.Source, prog.SHA1, prog.ArgCount = src, sha1Hex(src), ArgCountBound
	return prog, nil
}

// BoundArgs returns the ARGV of p's bound program (Bind) for one request
// of the given cost: the revision and the cost, the first two of Args.
func BoundArgs(p ratelimit.Policy, cost int64) []any {
	if p.IsZero() {
		return nil
	}
	return []any{p.Revision(), cost}
}

// bindSource is prog's source with its argument block replaced by args
// (Args of the policy) as constants.
func bindSource(prog Program, args []any) (string, error) {
	nums := make([]string, len(args))
	for i, a := range args {
		n, ok := a.(int64)
		if !ok || n < 0 || n > ratelimit.MaxExactInt {
			return "", fmt.Errorf("%s: ARGV[%d] %v is not an integer in 0..%d", prog.Name, i+1, a, int64(ratelimit.MaxExactInt))
		}
		nums[i] = strconv.FormatInt(n, 10)
	}
	src := prog.Source
	loc := boundBlock.FindAllStringSubmatchIndex(src, -1)
	if len(loc) != 1 {
		return "", fmt.Errorf("%s: %d argument blocks, want 1", prog.Name, len(loc))
	}
	m := loc[0]
	if n, _ := strconv.Atoi(src[m[2]:m[3]]); n != len(args) {
		return "", fmt.Errorf("%s: checks %d ARGV, the policy gives %d", prog.Name, n, len(args))
	}
	names := strings.Split(src[m[4]:m[5]], ", ")
	inline := 2 + len(names) // ARGV read on the block's line
	if inline > len(args) {
		return "", fmt.Errorf("%s: reads %d ARGV, the policy gives %d", prog.Name, inline, len(args))
	}
	var refs strings.Builder
	for k := 5; k <= inline; k++ {
		refs.WriteString(", ARGV[" + strconv.Itoa(k) + "]")
	}
	if got := src[m[6]:m[7]]; got != refs.String() {
		return "", fmt.Errorf("%s: reads %q after ARGV[4] into %d names, want %q", prog.Name, got, len(names), refs.String())
	}
	var b strings.Builder
	b.WriteString("if #KEYS ~= 1 or #ARGV ~= " + strconv.Itoa(ArgCountBound) + " then return {5, now, 0, 0, 0, 0, 0} end\n")
	b.WriteString("-- Bound to one policy revision (ADR 0030): the parameters are constants,\n")
	b.WriteString("-- range-checked below as ARGV are; ARGV is the revision and the cost.\n")
	b.WriteString("local rev, cost, " + strings.Join(names, ", ") + " = " + nums[ArgRevision] + ", ARGV[2], " + strings.Join(nums[ArgMaxClockRegression:inline], ", ") + "\n")
	b.WriteString("if ARGV[1] == '" + nums[ArgRevision] + "' and find(cost, POS) then\n  cost = cost + 0\nelse\n  rev = nil\nend\n")
	rest := src[m[1]:]
	// The ARGV read after the block (int(ARGV[k]), k > inline) become
	// constants too; each must be read exactly once.
	for k := inline + 1; k <= len(args); k++ {
		ref := "int(ARGV[" + strconv.Itoa(k) + "])"
		if c := strings.Count(rest, ref); c != 1 {
			return "", fmt.Errorf("%s: reads ARGV[%d] %d times after the block, want 1", prog.Name, k, c)
		}
		rest = strings.Replace(rest, ref, nums[k-1], 1)
	}
	for _, r := range argRef.FindAllStringSubmatch(rest, -1) {
		if r[1] != "1" && r[1] != "2" {
			return "", fmt.Errorf("%s: reads ARGV[%s] after the block, a bound program has 2", prog.Name, r[1])
		}
	}
	header := "#!lua\n"
	if !strings.HasPrefix(src, header) {
		return "", fmt.Errorf("%s: no #!lua line", prog.Name)
	}
	return header + "-- " + prog.Name + " bound to revision " + nums[ArgRevision] + " of one policy (ADR 0030)\n" +
		src[len(header):m[0]] + b.String() + rest, nil
}
