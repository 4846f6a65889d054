package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// policy builds one policy object from its fields (JSON fragments).
func policyJSONText(fields ...string) string {
	return `{"policies": [{` + strings.Join(fields, ",") + `}]}`
}

var (
	fwBase = []string{`"id":"login"`, `"revision":3`, `"algorithm":"fixed_window"`, `"limit":5`, `"window":"1m"`,
		`"maxCost":1`, `"cleanupGrace":"1m"`, `"maxClockRegression":"2s"`, `"failurePolicy":"fail-closed"`}
	tbBase = []string{`"id":"api"`, `"revision":1`, `"algorithm":"token_bucket"`, `"capacity":100`, `"refillTokens":10`,
		`"refillPeriod":"1s"`, `"maxCost":10`, `"cleanupGrace":"1m"`, `"maxClockRegression":"2s"`, `"failurePolicy":"fail-closed"`}
	// redis_rate.PerSecond(10) with a burst of 20.
	gcBase = []string{`"id":"rr"`, `"revision":1`, `"algorithm":"gcra"`, `"rate":10`, `"period":"1s"`, `"burst":20`,
		`"maxCost":20`, `"cleanupGrace":"1m"`, `"maxClockRegression":"2s"`, `"failurePolicy":"fail-closed"`}
)

// replace returns base with the field named by the fragment's key replaced
// (or appended); a fragment `"-name"` removes the field.
func replace(base []string, frags ...string) []string {
	out := append([]string(nil), base...)
	for _, f := range frags {
		if strings.HasPrefix(f, `"-`) {
			name := `"` + strings.TrimPrefix(f, `"-`)
			for i, b := range out {
				if strings.HasPrefix(b, name+":") {
					out = append(out[:i], out[i+1:]...)
					break
				}
			}
			continue
		}
		key := f[:strings.Index(f, ":")]
		found := false
		for i, b := range out {
			if strings.HasPrefix(b, key+":") {
				out[i], found = f, true
			}
		}
		if !found {
			out = append(out, f)
		}
	}
	return out
}

func TestParsePoliciesContractExample(t *testing.T) {
	set, err := ParsePolicies(strings.NewReader(DefaultPoliciesJSON()))
	require.NoError(t, err)
	require.Len(t, set.Policies, 2)
	api, login := set.Policies[0], set.Policies[1]
	assert.Equal(t, ratelimit.PolicyID("api"), api.ID())
	assert.Equal(t, int64(1), api.Revision())
	assert.Equal(t, ratelimit.TokenBucket{Capacity: 100, RefillTokens: 10, RefillPeriod: time.Second}, api.Params())
	assert.Equal(t, int64(10), api.MaxCost())
	assert.Equal(t, time.Minute, api.CleanupGrace())
	assert.Equal(t, 2*time.Second, api.MaxClockRegression())
	assert.Equal(t, ratelimit.FailClosed, api.FailurePolicy())
	assert.Equal(t, ratelimit.PolicyID("login"), login.ID())
	assert.Equal(t, int64(3), login.Revision())
	assert.Equal(t, ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, login.Params())
	assert.Equal(t, []Route{{"GET /api/", "api"}, {"POST /api/v1/login", "login"}}, set.Routes)
}

// TestParsePoliciesGCRA: "rate", "period" and "burst" are
// redis_rate.Limit{Rate, Burst, Period} (ADR 0021).
func TestParsePoliciesGCRA(t *testing.T) {
	set, err := ParsePolicies(strings.NewReader(policyJSONText(gcBase...)))
	require.NoError(t, err)
	require.Len(t, set.Policies, 1)
	p := set.Policies[0]
	assert.Equal(t, ratelimit.AlgorithmGCRA, p.Algorithm())
	assert.Equal(t, ratelimit.GCRA{Rate: 10, Period: time.Second, Burst: 20}, p.Params())
	assert.Equal(t, int64(20), p.Limit())
	assert.Equal(t, ratelimit.Certain, p.Certainty())
}

// TestParsePoliciesSlidingLog: "algorithm": "sliding_log" takes "limit"
// and "window" (ADR 0024), exact.
func TestParsePoliciesSlidingLog(t *testing.T) {
	set, err := ParsePolicies(strings.NewReader(policyJSONText(replace(fwBase, `"algorithm":"sliding_log"`, `"limit":100`, `"window":"1h"`)...)))
	require.NoError(t, err)
	require.Len(t, set.Policies, 1)
	p := set.Policies[0]
	assert.Equal(t, ratelimit.AlgorithmSlidingLog, p.Algorithm())
	assert.Equal(t, ratelimit.SlidingLog{Limit: 100, Window: time.Hour}, p.Params())
	assert.Equal(t, ratelimit.Certain, p.Certainty())
}

// TestExamplePolicyFilesParse keeps the shipped examples valid.
func TestExamplePolicyFilesParse(t *testing.T) {
	for _, path := range []string{"testdata/policies.json", "../examples/policies.json"} {
		t.Run(path, func(t *testing.T) {
			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			set, err := ParsePolicies(f)
			require.NoError(t, err)
			assert.NotEmpty(t, set.Policies)
		})
	}
}

// setFile is a policy file of n fixed-window policies p0..p(n-1) that all
// name GET /api/v1/search, p1 of them global.
func setFile(n int) string {
	var ps []string
	for i := range n {
		f := replace(fwBase, fmt.Sprintf(`"id":"p%d"`, i), `"routes":["GET /api/v1/search"]`)
		if i == 1 {
			f = replace(f, `"scope":"global"`)
		}
		ps = append(ps, "{"+strings.Join(f, ",")+"}")
	}
	return `{"policies": [` + strings.Join(ps, ",") + `]}`
}

// TestParsePoliciesPolicySet: policies naming one pattern form a policy
// set; its routes list the subject members first, then the global ones,
// file order otherwise (ADR 0027).
func TestParsePoliciesPolicySet(t *testing.T) {
	set, err := ParsePolicies(strings.NewReader(setFile(3)))
	require.NoError(t, err)
	assert.Equal(t, []Route{
		{Pattern: "GET /api/v1/search", Policy: "p0"},
		{Pattern: "GET /api/v1/search", Policy: "p2"},
		{Pattern: "GET /api/v1/search", Policy: "p1"},
	}, set.Routes)
	p1, ok := set.Policy("p1")
	require.True(t, ok)
	assert.Equal(t, ratelimit.ScopeGlobal, p1.Scope())
	p0, _ := set.Policy("p0")
	assert.Equal(t, ratelimit.ScopeSubject, p0.Scope())
	_, err = ParsePolicies(strings.NewReader(setFile(ratelimit.MaxSetMembers)))
	require.NoError(t, err, "a set of MaxSetMembers is accepted")
}

func TestParsePoliciesRejections(t *testing.T) {
	tests := []struct {
		name     string
		doc      string
		contains string
		sentinel error
	}{
		{"unknown top-level field", `{"policies": [], "version": 2}`, `unknown field "version"`, nil},
		{"unknown policy field", policyJSONText(replace(fwBase, `"bucketSize":2`)...), `unknown field "bucketSize"`, nil},
		{"dedup is not a field", policyJSONText(replace(fwBase, `"dedup":false`)...), `unknown field "dedup"`, nil},
		{"trailing data", policyJSONText(fwBase...) + ` {}`, "trailing data", nil},
		{"not json", `policies: []`, "invalid character", nil},
		{"empty list", `{"policies": []}`, `"policies" is missing or empty`, nil},
		{"no list", `{}`, `"policies" is missing or empty`, nil},
		{"field of another algorithm", policyJSONText(replace(fwBase, `"capacity":5`)...), `"capacity" is not a parameter of fixed_window`, nil},
		{"token bucket with window", policyJSONText(replace(tbBase, `"window":"1s"`)...), `"window" is not a parameter of token_bucket`, nil},
		{"missing window", policyJSONText(replace(fwBase, `"-window"`)...), `"window" is required`, nil},
		{"missing refill period", policyJSONText(replace(tbBase, `"-refillPeriod"`)...), `"refillPeriod" is required`, nil},
		{"missing id", policyJSONText(replace(fwBase, `"-id"`)...), `policies[0]: "id" is required`, nil},
		{"missing revision", policyJSONText(replace(fwBase, `"-revision"`)...), `"revision" is required`, nil},
		{"missing max cost", policyJSONText(replace(fwBase, `"-maxCost"`)...), `"maxCost" is required`, nil},
		{"missing failure policy", policyJSONText(replace(fwBase, `"-failurePolicy"`)...), `"failurePolicy" is required`, nil},
		{"fail open", policyJSONText(replace(fwBase, `"failurePolicy":"fail-open"`)...), "fail-open is not supported", ratelimit.ErrUnsupported},
		{"failure policy unknown", policyJSONText(replace(fwBase, `"failurePolicy":"sometimes"`)...), `"sometimes" is not fail-closed`, ratelimit.ErrUnsupported},
		{"unknown algorithm", policyJSONText(replace(fwBase, `"algorithm":"token_bucket_v2"`)...), `"token_bucket_v2" is not fixed_window`, ratelimit.ErrUnsupported},
		{"sliding_log with a burst", policyJSONText(append(replace(fwBase, `"algorithm":"sliding_log"`), `"burst":3`)...), `"burst" is not a parameter of sliding_log`, nil},
		{"sliding_log without a window", policyJSONText(replace(fwBase, `"algorithm":"sliding_log"`, `"-window"`)...), `"window" is required`, nil},
		{"sliding_log limit above the cap", policyJSONText(replace(fwBase, `"algorithm":"sliding_log"`, `"limit":10001`)...), `Params.Limit`, ratelimit.ErrLimitAboveCap},
		{"gcra with a window", policyJSONText(replace(gcBase, `"window":"1s"`)...), `"window" is not a parameter of gcra`, nil},
		{"fixed window with a burst", policyJSONText(replace(fwBase, `"burst":2`)...), `"burst" is not a parameter of fixed_window`, nil},
		{"token bucket with a rate", policyJSONText(replace(tbBase, `"rate":2`)...), `"rate" is not a parameter of token_bucket`, nil},
		{"gcra missing rate", policyJSONText(replace(gcBase, `"-rate"`)...), `"rate" is required`, nil},
		{"gcra missing period", policyJSONText(replace(gcBase, `"-period"`)...), `"period" is required`, nil},
		{"gcra missing burst", policyJSONText(replace(gcBase, `"-burst"`)...), `"burst" is required`, nil},
		{"gcra sub-millisecond period", policyJSONText(replace(gcBase, `"period":"1500us"`)...), `period: "1500us" is not a whole number of milliseconds`, nil},
		{"gcra rate 0", policyJSONText(replace(gcBase, `"rate":0`)...), `Params.Rate`, ratelimit.ErrNonPositive},
		{"gcra rate as float", policyJSONText(replace(gcBase, `"rate":1.5`)...), "cannot unmarshal number 1.5", nil},
		{"gcra max cost above burst", policyJSONText(replace(gcBase, `"maxCost":21`)...), `MaxCost`, ratelimit.ErrMaxCostAboveLimit},
		{"gcra burst offset beyond 2^53", policyJSONText(replace(gcBase, `"rate":9`, `"period":"1ms"`, `"burst":9007199254733`, `"maxCost":1`)...), `Params.Burst`, ratelimit.ErrArithmeticRange},
		{"sub-millisecond window", policyJSONText(replace(fwBase, `"window":"1500us"`)...), `window: "1500us" is not a whole number of milliseconds`, nil},
		{"sub-millisecond grace", policyJSONText(replace(fwBase, `"cleanupGrace":"1.5ms"`)...), `cleanupGrace: "1.5ms" is not a whole number`, nil},
		{"duration not a string", policyJSONText(replace(fwBase, `"window":60000`)...), "cannot unmarshal number", nil},
		{"duration garbage", policyJSONText(replace(fwBase, `"window":"a minute"`)...), `window: "a minute" is not a Go duration`, nil},
		{"limit not an integer", policyJSONText(replace(fwBase, `"limit":5.5`)...), "cannot unmarshal number 5.5", nil},
		{"limit as string", policyJSONText(replace(fwBase, `"limit":"5"`)...), "cannot unmarshal string", nil},
		{"zero limit", policyJSONText(replace(fwBase, `"limit":0`)...), "policy Params.Limit", ratelimit.ErrNonPositive},
		{"negative window", policyJSONText(replace(fwBase, `"window":"-1s"`)...), "policy Params.Window", ratelimit.ErrNonPositive},
		{"max cost above limit", policyJSONText(replace(fwBase, `"maxCost":6`)...), "6 > 5", ratelimit.ErrMaxCostAboveLimit},
		{"limit beyond 2^53", policyJSONText(replace(fwBase, `"limit":9007199254740993`, `"maxCost":1`)...), "9007199254740993 >", ratelimit.ErrArithmeticRange},
		{"bad id", policyJSONText(replace(fwBase, `"id":"Login!"`)...), "policy ID", ratelimit.ErrInvalidPolicyID},
		{"duplicate id", `{"policies": [{` + strings.Join(fwBase, ",") + `},{` + strings.Join(replace(fwBase, `"limit":9`, `"maxCost":1`), ",") + `}]}`,
			`policies[1] (login): id "login" is already used by policies[0]`, nil},
		{"set member with a dedup window", `{"policies": [{` + strings.Join(replace(fwBase, `"routes":["POST /api/v1/login"]`), ",") + `},{` +
			strings.Join(replace(tbBase, `"routes":["POST /api/v1/login"]`, `"dedupWindow":"1m"`), ",") + `}]}`,
			`policies[1] (api): route "POST /api/v1/login" is named by several policies (a policy set) and policy "api" has a dedupWindow`, nil},
		{"set with too many members", setFile(ratelimit.MaxSetMembers + 1),
			`policies[8] (p8): route "GET /api/v1/search" is already named by 8 policies, at most 8 in one policy set`, nil},
		{"bad scope", policyJSONText(replace(fwBase, `"scope":"everyone"`)...), `scope: invalid scope: "everyone" is not "subject" or "global"`, nil},
		{"global with dedup", policyJSONText(replace(fwBase, `"scope":"global"`, `"dedupWindow":"1m"`)...), `a global policy cannot have a dedup window`, nil},
		{"duplicate route in one policy", policyJSONText(replace(fwBase, `"routes":["GET /a","GET /a"]`)...), `route "GET /a" is already mapped`, nil},
		{"conflicting routes", `{"policies": [{` + strings.Join(replace(fwBase, `"routes":["GET /api/{id}"]`), ",") + `},{` +
			strings.Join(replace(tbBase, `"routes":["GET /api/{name}"]`), ",") + `}]}`,
			"not a valid ServeMux pattern", nil},
		{"invalid route", policyJSONText(replace(fwBase, `"routes":["GET api"]`)...), `route "GET api": not a valid ServeMux pattern`, nil},
		{"bad method pattern", policyJSONText(replace(fwBase, `"routes":["GET /{x"]`)...), "not a valid ServeMux pattern", nil},
		{"empty route", policyJSONText(replace(fwBase, `"routes":[""]`)...), "empty pattern", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePolicies(strings.NewReader(tt.doc))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrPolicyFile)
			var pfe *PolicyFileError
			require.True(t, errors.As(err, &pfe))
			assert.Contains(t, err.Error(), tt.contains)
			if tt.sentinel != nil {
				assert.ErrorIs(t, err, tt.sentinel)
			}
		})
	}
}

func TestParsePoliciesAllProblemsListed(t *testing.T) {
	doc := policyJSONText(replace(fwBase, `"limit":0`, `"window":"0s"`, `"revision":0`)...)
	_, err := ParsePolicies(strings.NewReader(doc))
	require.Error(t, err)
	var pfe *PolicyFileError
	require.True(t, errors.As(err, &pfe))
	assert.Len(t, pfe.Problems, 3, "%v", err)
	for _, line := range strings.Split(err.Error(), "\n") {
		assert.Contains(t, line, "policies[0] (login)")
	}
}

func TestParsePoliciesTooLarge(t *testing.T) {
	doc := `{"policies": [` + strings.Repeat(" ", maxPolicyFileLen) + `]}`
	_, err := ParsePolicies(strings.NewReader(doc))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "larger than")
}

// TestParsePoliciesStrictKeys: a duplicate key is an error (encoding/json
// would keep the last one, so a second "limit" would change the limit), and
// so is a key that is a field name in another case ("Limit", "MAXCOST",
// "Policies"), which encoding/json would take as the field. Each problem
// names the policy (by index and id, wherever in the object the id is) and
// the key.
func TestParsePoliciesStrictKeys(t *testing.T) {
	twoPolicies := func(second ...string) string {
		return `{"policies": [{` + strings.Join(tbBase, ",") + `}, {` + strings.Join(second, ",") + `}]}`
	}
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"duplicate limit", twoPolicies(append(fwBase, `"limit":500`)...),
			[]string{`policies[1] (login): duplicate key "limit"`}},
		{"duplicate before the id", twoPolicies(append([]string{`"limit":500`}, replace(fwBase, `"-id"`, `"id":"login"`)...)...),
			[]string{`policies[1] (login): duplicate key "limit"`}},
		{"duplicate id", policyJSONText(append(fwBase, `"id":"other"`)...),
			[]string{`policies[0] (other): duplicate key "id"`}},
		{"duplicate route list", policyJSONText(append(fwBase, `"routes":["GET /a/"]`, `"routes":["GET /b/"]`)...),
			[]string{`policies[0] (login): duplicate key "routes"`}},
		{"capitalised limit", policyJSONText(replace(fwBase, `"-limit"`, `"Limit":5`)...),
			[]string{`policies[0] (login): key "Limit" is not "limit" (keys are case-sensitive)`}},
		{"upper-case maxCost", policyJSONText(replace(fwBase, `"-maxCost"`, `"MAXCOST":1`)...),
			[]string{`policies[0] (login): key "MAXCOST" is not "maxCost" (keys are case-sensitive)`}},
		{"both cases", policyJSONText(append(fwBase, `"Limit":500`)...),
			[]string{`policies[0] (login): key "Limit" is not "limit" (keys are case-sensitive)`}},
		{"top-level case", `{"Policies": [{` + strings.Join(fwBase, ",") + `}]}`,
			[]string{`key "Policies" is not "policies" (keys are case-sensitive)`}},
		{"top-level duplicate", `{"policies": [], "policies": [{` + strings.Join(fwBase, ",") + `}]}`,
			[]string{`duplicate key "policies"`}},
		{"policy without an id", `{"policies": [{"limit":1,"limit":2}]}`,
			[]string{`policies[0]: duplicate key "limit"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := ParsePolicies(strings.NewReader(tt.file))
			require.Error(t, err)
			assert.Empty(t, set.Policies)
			var pfe *PolicyFileError
			require.ErrorAs(t, err, &pfe)
			var got []string
			for _, p := range pfe.Problems {
				require.ErrorIs(t, p, ErrPolicyFile)
				got = append(got, strings.TrimPrefix(p.Error(), ErrPolicyFile.Error()+": "))
			}
			assert.Equal(t, tt.want, got)
		})
	}
	// The same files without the duplicate or with the right case parse.
	_, err := ParsePolicies(strings.NewReader(twoPolicies(fwBase...)))
	require.NoError(t, err)
}

// TestCheckKeysLeavesSyntaxToTheDecoder: malformed or deeply nested input
// gets no key problem of its own; the decoder's error is the one reported.
func TestCheckKeysLeavesSyntaxToTheDecoder(t *testing.T) {
	for _, in := range []string{``, `{`, `{"policies": [{"id": "a", "id"`, `{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`} {
		assert.Empty(t, checkKeys([]byte(in)), in)
		_, err := ParsePolicies(strings.NewReader(in))
		require.ErrorIs(t, err, ErrPolicyFile, in)
	}
}

func TestParsePoliciesLocalFallback(t *testing.T) {
	set, err := ParsePolicies(strings.NewReader(`{"policies":[
		{"id":"api","revision":1,"algorithm":"fixed_window","limit":10,"window":"1m","maxCost":1,"cleanupGrace":"1m",
		 "maxClockRegression":"2s","failurePolicy":"local-fallback","fallbackInstances":3},
		{"id":"login","revision":1,"algorithm":"fixed_window","limit":10,"window":"1m","maxCost":1,"cleanupGrace":"1m",
		 "maxClockRegression":"2s","failurePolicy":"fail-closed"}]}`))
	require.NoError(t, err)
	api, _ := set.Policy("api")
	assert.Equal(t, ratelimit.LocalFallback, api.FailurePolicy())
	assert.Equal(t, int64(3), api.FallbackInstances())
	assert.Equal(t, int64(3), api.FallbackShare())
	login, _ := set.Policy("login")
	assert.Equal(t, ratelimit.FailClosed, login.FailurePolicy(), "a policy without the fields keeps failing closed")

	for _, tt := range []struct{ name, extra, want string }{
		{"instances missing", `"failurePolicy":"local-fallback"`, "FallbackInstances"},
		{"instances zero", `"failurePolicy":"local-fallback","fallbackInstances":0`, "FallbackInstances"},
		{"instances on fail-closed", `"failurePolicy":"fail-closed","fallbackInstances":2`, "FallbackInstances"},
		{"instances not a number", `"failurePolicy":"local-fallback","fallbackInstances":"2"`, "fallbackInstances"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePolicies(strings.NewReader(`{"policies":[{"id":"api","revision":1,"algorithm":"fixed_window","limit":10,"window":"1m","maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s",` + tt.extra + `}]}`))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrPolicyFile)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParsePoliciesDedupWindow(t *testing.T) {
	const head = `{"policies":[{"id":"api","revision":1,"algorithm":"fixed_window","limit":10,"window":"1m","maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"fail-closed"`
	set, err := ParsePolicies(strings.NewReader(head + `,"dedupWindow":"10m"}]}`))
	require.NoError(t, err)
	api, _ := set.Policy("api")
	assert.Equal(t, 10*time.Minute, api.DedupWindow())
	assert.Equal(t, int64(ratelimit.DefaultDedupMaxReplays), api.DedupMaxReplays(), "the default")
	for _, n := range []int64{0, 3, ratelimit.MaxDedupMaxReplays} {
		set, err = ParsePolicies(strings.NewReader(head + `,"dedupWindow":"10m","dedupMaxReplays":` + strconv.FormatInt(n, 10) + `}]}`))
		require.NoError(t, err)
		api, _ = set.Policy("api")
		assert.Equal(t, n, api.DedupMaxReplays())
	}

	set, err = ParsePolicies(strings.NewReader(head + `}]}`))
	require.NoError(t, err)
	api, _ = set.Policy("api")
	assert.Zero(t, api.DedupWindow(), "a policy without the field has no dedup")

	for _, tt := range []struct{ name, extra, want string }{
		{"zero", `"dedupWindow":"0s"`, "dedupWindow"},
		{"negative", `"dedupWindow":"-1m"`, "DedupWindow"},
		{"not a duration", `"dedupWindow":"10 minutes"`, "dedupWindow"},
		{"sub-millisecond", `"dedupWindow":"1.5ms"`, "dedupWindow"},
		{"above the maximum", `"dedupWindow":"25h"`, "DedupWindow"},
		{"a number", `"dedupWindow":600`, "dedupWindow"},
		{"wrong case", `"DedupWindow":"10m"`, "DedupWindow"},
		{"max replays without a window", `"dedupMaxReplays":1`, "dedupMaxReplays: 1 is set without \"dedupWindow\""},
		{"max replays 0 without a window", `"dedupMaxReplays":0`, "dedupMaxReplays: 0 is set without"},
		{"max replays negative", `"dedupWindow":"10m","dedupMaxReplays":-1`, "dedupMaxReplays: -1 is not an integer 0..16"},
		{"max replays above the maximum", `"dedupWindow":"10m","dedupMaxReplays":17`, "dedupMaxReplays: 17 is not an integer 0..16"},
		{"max replays not an integer", `"dedupWindow":"10m","dedupMaxReplays":1.5`, "dedupMaxReplays"},
		{"max replays a string", `"dedupWindow":"10m","dedupMaxReplays":"1"`, "dedupMaxReplays"},
		{"max replays wrong case", `"dedupWindow":"10m","DedupMaxReplays":1`, "DedupMaxReplays"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePolicies(strings.NewReader(head + `,` + tt.extra + `}]}`))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrPolicyFile)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
