package ratelimit_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func allowed(ok bool) ratelimit.Evaluated {
	return ratelimit.Evaluated{Decision: ratelimit.Decision{
		Allowed: ok, Limit: 5, Remaining: 4, PolicyID: "api", PolicyRevision: 1,
		ResetAt: t0.Add(time.Second), Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain,
	}}
}

// foreignEmbedding is the one way another package can satisfy Outcome: by
// embedding a variant, which promotes the unexported marker. It is not one of
// the four values, so it must never admit.
type foreignEmbedding struct{ ratelimit.Evaluated }

// kindOf is an exhaustive type switch over the sealed sum, the shape every
// consumer (web adapter, metrics) uses. Its default fails the test, so a
// variant added to the package without updating consumers is caught here.
func kindOf(t *testing.T, o ratelimit.Outcome) string {
	t.Helper()
	switch v := o.(type) {
	case ratelimit.Evaluated:
		return "evaluated"
	case ratelimit.Unavailable:
		return "unavailable/" + string(v.Category)
	case ratelimit.Indeterminate:
		return "indeterminate/" + string(v.Category)
	case ratelimit.Incompatible:
		return "incompatible/" + string(v.Category)
	default:
		t.Fatalf("outcome %T is not a variant of the sealed sum", o)
		return ""
	}
}

func TestAdmitted(t *testing.T) {
	cause := errors.New("i/o timeout")
	tests := []struct {
		name string
		o    ratelimit.Outcome
		want bool
	}{
		{"allowed evaluated", allowed(true), true},
		{"denied evaluated", allowed(false), false},
		{"nil", nil, false},
		{"zero evaluated", ratelimit.Evaluated{}, false},
		{"unavailable", ratelimit.Unavailable{PolicyID: "api", Category: ratelimit.CategoryConnection, Cause: cause}, false},
		{"unavailable clock unsafe", ratelimit.Unavailable{PolicyID: "api", Category: ratelimit.CategoryClockUnsafe}, false},
		{"indeterminate", ratelimit.Indeterminate{PolicyID: "api", Category: ratelimit.CategoryTimeout, Cause: cause}, false},
		{"incompatible", ratelimit.Incompatible{PolicyID: "api", Category: ratelimit.CategoryMalformedReply}, false},
		{"pointer to allowed evaluated", func() ratelimit.Outcome { e := allowed(true); return &e }(), false},
		{"foreign type embedding an allowed evaluated", foreignEmbedding{allowed(true)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ratelimit.Admitted(tt.o))
		})
	}
}

// TestOutcomeSwitchIsExhaustive enumerates the sealed variants from the
// package source (every type with the sealedOutcome marker), so a variant
// added to the package fails here until kindOf and this table cover it.
func TestOutcomeSwitchIsExhaustive(t *testing.T) {
	cases := []struct {
		o    ratelimit.Outcome
		want string
		kind ratelimit.OutcomeKind
	}{
		{allowed(true), "evaluated", ratelimit.KindEvaluated},
		{ratelimit.Unavailable{Category: ratelimit.CategoryAdmission}, "unavailable/admission", ratelimit.KindUnavailable},
		{ratelimit.Indeterminate{Category: ratelimit.CategoryCancelled}, "indeterminate/cancelled", ratelimit.KindIndeterminate},
		{ratelimit.Incompatible{Category: ratelimit.CategoryServerVersion}, "incompatible/server_version", ratelimit.KindIncompatible},
	}
	var covered []string
	for _, tt := range cases {
		assert.Equal(t, tt.want, kindOf(t, tt.o))
		assert.Equal(t, tt.kind, tt.o.Kind())
		covered = append(covered, reflect.TypeOf(tt.o).Name())
	}
	assert.ElementsMatch(t, sealedVariants(t, "sealedOutcome"), covered, "every Outcome variant of the package is covered")
}

// TestParamsVariantsAreCovered: the same for Params, against the variants
// the policy tests construct.
func TestParamsVariantsAreCovered(t *testing.T) {
	var covered []string
	for _, p := range []ratelimit.Params{ratelimit.FixedWindow{}, ratelimit.SlidingWindowCounter{}, ratelimit.TokenBucket{}, ratelimit.GCRA{}, ratelimit.SlidingLog{}, ratelimit.LeakyBucket{}, ratelimit.Concurrency{}} {
		covered = append(covered, reflect.TypeOf(p).Name())
	}
	assert.ElementsMatch(t, sealedVariants(t, "sealedParams"), covered)
}

// sealedVariants parses the package's non-test source files and returns the
// receiver type names of every method called marker.
func sealedVariants(t *testing.T, marker string) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var names []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != marker || len(fn.Recv.List) != 1 {
				continue
			}
			if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok {
				names = append(names, id.Name)
			}
		}
	}
	require.NotEmpty(t, names, "no %s methods found: the test reads the wrong files", marker)
	return names
}

// TestOutcomeAndParamsAreSealed proves that no other package can declare a
// variant. The compile-time half: a type outside package ratelimit cannot
// declare the marker method, because an unexported method name is qualified
// by its package; writing
//
//	type fake struct{}
//	func (fake) Kind() ratelimit.OutcomeKind { return "x" }
//	func (fake) sealedOutcome() {}
//	var _ ratelimit.Outcome = fake{}
//
// here fails to compile ("missing method sealedOutcome"). The runtime half
// below checks that each interface carries exactly one unexported method and
// that a look-alike type does not implement it.
func TestOutcomeAndParamsAreSealed(t *testing.T) {
	for _, tt := range []struct {
		iface     reflect.Type
		lookalike any
		variants  []any
	}{
		{
			reflect.TypeOf((*ratelimit.Outcome)(nil)).Elem(), lookalikeOutcome{},
			[]any{ratelimit.Evaluated{}, ratelimit.Unavailable{}, ratelimit.Indeterminate{}, ratelimit.Incompatible{}},
		},
		{
			reflect.TypeOf((*ratelimit.Params)(nil)).Elem(), lookalikeParams{},
			[]any{ratelimit.FixedWindow{}, ratelimit.SlidingWindowCounter{}, ratelimit.TokenBucket{}},
		},
	} {
		t.Run(tt.iface.Name(), func(t *testing.T) {
			var unexported []string
			for i := 0; i < tt.iface.NumMethod(); i++ {
				if m := tt.iface.Method(i); !m.IsExported() {
					unexported = append(unexported, m.Name)
					assert.Equal(t, "github.com/tech-log/tech-log-backend/shared-contract/ratelimit", m.PkgPath)
				}
			}
			assert.Len(t, unexported, 1, "one unexported marker method")
			assert.False(t, reflect.TypeOf(tt.lookalike).Implements(tt.iface), "a look-alike from another package implements %v", tt.iface)
			for _, v := range tt.variants {
				assert.True(t, reflect.TypeOf(v).Implements(tt.iface), "%T", v)
			}
		})
	}
}

// lookalikeOutcome has every exported method of Outcome.
type lookalikeOutcome struct{}

func (lookalikeOutcome) Kind() ratelimit.OutcomeKind { return ratelimit.KindEvaluated }

// lookalikeParams has every exported method of Params.
type lookalikeParams struct{}

func (lookalikeParams) Algorithm() ratelimit.Algorithm { return ratelimit.AlgorithmFixedWindow }

func TestParamsAlgorithm(t *testing.T) {
	assert.Equal(t, ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{}.Algorithm())
	assert.Equal(t, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.SlidingWindowCounter{}.Algorithm())
	assert.Equal(t, ratelimit.AlgorithmTokenBucket, ratelimit.TokenBucket{}.Algorithm())
}

func TestCategoryOf(t *testing.T) {
	tests := []struct {
		o    ratelimit.Outcome
		want ratelimit.Category
	}{
		{nil, ""},
		{allowed(true), ""},
		{allowed(false), ""},
		{ratelimit.Unavailable{Category: ratelimit.CategoryDeadline}, ratelimit.CategoryDeadline},
		{ratelimit.Indeterminate{Category: ratelimit.CategoryConnectionLost}, ratelimit.CategoryConnectionLost},
		{ratelimit.Incompatible{Category: ratelimit.CategoryProgramFault}, ratelimit.CategoryProgramFault},
		{&ratelimit.Unavailable{Category: ratelimit.CategoryDeadline}, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%T/%s", tt.o, tt.want), func(t *testing.T) {
			assert.Equal(t, tt.want, ratelimit.CategoryOf(tt.o))
		})
	}
}

// TestStableNames pins the strings used in metrics, problem responses and
// stored state: changing one is a breaking change.
func TestStableNames(t *testing.T) {
	kinds := map[ratelimit.OutcomeKind]string{
		ratelimit.KindEvaluated: "evaluated", ratelimit.KindUnavailable: "unavailable",
		ratelimit.KindIndeterminate: "indeterminate", ratelimit.KindIncompatible: "incompatible",
	}
	for k, want := range kinds {
		assert.Equal(t, want, string(k))
	}
	categories := map[ratelimit.Category]string{
		ratelimit.CategoryInvalidRequest: "invalid_request", ratelimit.CategoryUnknownPolicy: "unknown_policy",
		ratelimit.CategoryDeadline: "deadline", ratelimit.CategoryAdmission: "admission",
		ratelimit.CategoryConnection: "connection", ratelimit.CategoryServerRejected: "server_rejected",
		ratelimit.CategoryClockUnsafe: "clock_unsafe", ratelimit.CategoryClosed: "closed",
		ratelimit.CategoryTimeout: "timeout", ratelimit.CategoryConnectionLost: "connection_lost",
		ratelimit.CategoryCancelled:         "cancelled",
		ratelimit.CategoryStateIncompatible: "state_incompatible", ratelimit.CategoryInvalidArguments: "invalid_arguments",
		ratelimit.CategoryMalformedReply: "malformed_reply", ratelimit.CategoryProgramFault: "program_fault",
		ratelimit.CategoryServerVersion: "server_version",
	}
	require.Len(t, categories, 16, "categories are distinct")
	for c, want := range categories {
		assert.Equal(t, want, string(c))
	}
	algs := map[ratelimit.Algorithm]string{
		ratelimit.AlgorithmFixedWindow: "fixed_window", ratelimit.AlgorithmSlidingWindowCounter: "sliding_window_counter",
		ratelimit.AlgorithmTokenBucket: "token_bucket", ratelimit.AlgorithmGCRA: "gcra",
		ratelimit.AlgorithmSlidingLog: "sliding_log",
	}
	for a, want := range algs {
		assert.Equal(t, want, a.String())
	}
}

// TestOutcomeStringsOmitCause: String of a failure shows kind, policy and
// category but not the cause's text (which may carry addresses).
func TestOutcomeStrings(t *testing.T) {
	cause := errors.New("dial tcp 10.0.0.7:6379: connection refused")
	tests := []struct {
		o    fmt.Stringer
		want string
	}{
		{ratelimit.Unavailable{PolicyID: "api", Category: ratelimit.CategoryConnection, RetryAfter: time.Second, Cause: cause}, "unavailable(api, connection, retry after 1s)"},
		{ratelimit.Indeterminate{PolicyID: "api", Category: ratelimit.CategoryTimeout, RetryAfter: 2 * time.Second, Cause: cause}, "indeterminate(api, timeout, retry after 2s)"},
		{ratelimit.Incompatible{PolicyID: "api", Category: ratelimit.CategoryMalformedReply, Cause: cause}, "incompatible(api, malformed_reply)"},
		{allowed(true), "evaluated(allowed api rev 1 remaining 4/5 retry 0s)"},
		{allowed(false), "evaluated(denied api rev 1 remaining 4/5 retry 0s)"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.o.String())
		assert.NotContains(t, fmt.Sprint(tt.o), "10.0.0.7")
	}
}

func TestDecisionResetAfter(t *testing.T) {
	server := time.UnixMilli(1_800_000_000_000)
	for _, c := range []struct {
		name      string
		d         ratelimit.Decision
		want      time.Duration
		wantKnown bool
	}{
		{"from the server's own clock", ratelimit.Decision{ServerNow: server, ResetAt: server.Add(1500 * time.Millisecond)}, 1500 * time.Millisecond, true},
		{"never negative", ratelimit.Decision{ServerNow: server, ResetAt: server.Add(-time.Second)}, 0, true},
		{"unknown server now", ratelimit.Decision{ResetAt: server}, 0, false},
	} {
		got, known := c.d.ResetAfter()
		if got != c.want || known != c.wantKnown {
			t.Errorf("%s: ResetAfter() = %v, %v; want %v, %v", c.name, got, known, c.want, c.wantKnown)
		}
	}
}
