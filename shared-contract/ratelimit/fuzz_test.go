package ratelimit_test

import (
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

var (
	digestRe    = regexp.MustCompile(`^[A-Za-z0-9_-]{16,128}$`)
	evalIDRe    = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	digestErrRe = regexp.MustCompile(`^request SubjectDigest: invalid subject digest: (length \d+ outside \d+\.\.\d+|byte \d+ is not in \[A-Za-z0-9_-\])$`)
)

// FuzzRequestValidate: Validate never panics, and accepts exactly the
// requests whose every field is within its bound (checked against an
// independent regexp/interval predicate); the error never carries the digest:
// its SubjectDigest part has a fixed shape and its other parts do not depend
// on the digest.
func FuzzRequestValidate(f *testing.F) {
	f.Add("api", string(digestOf(16)), int64(1), "", int64(time.Second))
	f.Add("a", string(digestOf(128)), ratelimit.MaxExactInt, "", int64(1))
	f.Add(strings.Repeat("a", 64), string(digestOf(129)), ratelimit.MaxExactInt+1, "", int64(0))
	f.Add(".api", string(digestOf(15)), int64(0), "e", int64(-1))
	f.Add("Api", "Zq9_Zq9_Zq9_Zq9+", int64(math.MinInt64), "", int64(math.MaxInt64))
	f.Add("", "", int64(-1), "x", int64(math.MinInt64))
	f.Add("a\x00", "\xff\xfe"+string(digestOf(20)), int64(5), "", int64(1))
	// The quoted id "\x80" followed by zeros contains a run of zeros one
	// longer than the raw id does (found by CI's fuzz run).
	f.Add("\x80"+strings.Repeat("0", 16), strings.Repeat("0", 17), ratelimit.MaxExactInt+1, "e", int64(1))
	f.Fuzz(func(t *testing.T, id, digest string, cost int64, evalID string, deadlineOffset int64) {
		r := ratelimit.Request{
			PolicyID: ratelimit.PolicyID(id), SubjectDigest: ratelimit.SubjectDigest(digest),
			Cost: cost, EvaluationID: ratelimit.EvaluationID(evalID),
		}
		if deadlineOffset != math.MinInt64 { // MinInt64 stands for "no deadline"
			r.Deadline = t0.Add(time.Duration(deadlineOffset))
		}
		err := r.Validate()
		valid := policyIDRe.MatchString(id) && digestRe.MatchString(digest) &&
			cost >= 1 && cost <= ratelimit.MaxExactInt && (evalID == "" || evalIDRe.MatchString(evalID)) && !r.Deadline.IsZero()
		if valid {
			require.NoError(t, err)
			// Valid implies every field is within its bound.
			require.True(t, len(id) >= 1 && len(id) <= ratelimit.MaxPolicyIDLen)
			require.True(t, len(digest) >= ratelimit.MinSubjectDigestLen && len(digest) <= ratelimit.MaxSubjectDigestLen)
			return
		}
		require.Error(t, err)
		require.ErrorIs(t, err, ratelimit.ErrInvalidRequest)
		// No digest leak, by structure rather than by substring: the
		// SubjectDigest error has a fixed shape that holds no digest byte,
		// and every other field's error is the same as for another digest.
		other := r
		other.SubjectDigest = digestOf(ratelimit.MinSubjectDigestLen)
		var want []string
		for _, e := range requestErrors(other.Validate()) {
			want = append(want, e.Error())
		}
		var got, all []string
		for _, e := range requestErrors(err) {
			all = append(all, e.Error())
			if e.Field == "SubjectDigest" {
				require.Regexp(t, digestErrRe, e.Error())
				continue
			}
			got = append(got, e.Error())
		}
		require.Equal(t, want, got)
		require.Equal(t, strings.Join(all, "\n"), err.Error(), "every part of the error is a RequestError")
		// No evaluation-ID leak, by the same structure: the error is the same
		// for another ID of the same length and validity class.
		if len(evalID) > 0 {
			same := []byte(evalID)
			for i := range same {
				if evalIDRe.MatchString(string(same[i])) {
					same[i] = 'A'
				}
			}
			other := r
			other.EvaluationID = ratelimit.EvaluationID(same)
			require.Equal(t, errorsWithoutDigest(other.Validate()), errorsWithoutDigest(err))
		}
	})
}

// FuzzNewPolicy: NewPolicy never panics; it accepts exactly what the math/big
// oracle of docs/arithmetic.md accepts, and every accepted policy has every
// worst-case intermediate within its bound.
func FuzzNewPolicy(f *testing.F) {
	type seed struct {
		alg                                    uint8
		a, b                                   int64
		d                                      int64 // window or refill period
		maxCost, grace, regression, revision   int64
		failOpen, dedup, pointer, mismatchAlgo bool
	}
	seeds := []seed{
		{alg: 1, a: 5, d: int64(time.Second), maxCost: 5, grace: int64(time.Minute), revision: 1},
		// The queue (ADR 0028): 10/s, 20 waiting, maxDelay 2 s.
		{alg: 6, a: 21, b: 10, d: int64(time.Second), maxCost: 1, grace: int64(2 * time.Millisecond), revision: 1},
		// A queue of MaxExactInt (a-1): refused, its burst would exceed M.
		{alg: 6, a: ratelimit.MaxExactInt + 1, b: 3, d: int64(time.Second), maxCost: 1, grace: int64(time.Hour), revision: 1},
		{alg: 2, a: 10_000, d: int64(time.Minute), maxCost: 10, grace: int64(time.Minute), regression: int64(time.Second), revision: 3},
		{alg: 3, a: 100, b: 10, d: int64(time.Second), maxCost: 10, grace: int64(time.Minute), regression: int64(2 * time.Second), revision: 1},
		{alg: 1, a: fwLimitMax, d: int64(time.Second), maxCost: fwLimitMax, grace: 1e6, revision: ratelimit.MaxExactInt},
		{alg: 1, a: fwLimitMax + 1, d: int64(time.Second), maxCost: 1, grace: 1e6, revision: 1},
		{alg: 1, a: 10, d: int64(dms(maxM / 2)), maxCost: 1, grace: int64(dms(maxM - maxM/2)), revision: 1},
		{alg: 2, a: swcLimitMax, d: int64(dms(swcWindowMax)), maxCost: 1, grace: int64(dms(maxM - 2*swcWindowMax)), revision: 1},
		{alg: 2, a: swcLimitMax + 1, d: int64(dms(swcWindowMax + 1)), maxCost: 1, grace: 1e6, revision: 1},
		{alg: 3, a: 69431 * 20394401, b: 1 << 20, d: int64(6361 * ms), maxCost: 1, grace: 1e6, revision: 1},
		{alg: 3, a: maxM, b: 1, d: int64(ms), maxCost: 1, grace: 1e6, revision: 1},
		{alg: 3, a: 3, b: 2, d: int64(ms), maxCost: 3, grace: int64(dms(maxM - 1)), revision: 1},
		{alg: 3, a: math.MaxInt64, b: math.MaxInt64, d: math.MaxInt64, maxCost: math.MaxInt64, grace: math.MaxInt64, regression: math.MaxInt64, revision: math.MaxInt64},
		{alg: 0, a: -1, b: -1, d: -1, maxCost: -1, grace: -1, regression: -1, revision: -1, failOpen: true, dedup: true},
		{alg: 1, a: 5, d: 999_999, maxCost: 5, grace: 1_000_001, regression: 1, revision: 1, pointer: true},
		{alg: 2, a: 5, d: int64(time.Second), maxCost: 6, grace: int64(time.Second), revision: 1, mismatchAlgo: true},
		{alg: 4, a: 20, b: 10, d: int64(time.Second), maxCost: 20, grace: int64(time.Minute), revision: 1},
		{alg: 4, a: 9007199254732, b: 9, d: int64(ms), maxCost: 1, grace: int64(time.Minute), revision: 1},
		{alg: 4, a: 9007199254733, b: 9, d: int64(ms), maxCost: 1, grace: int64(time.Minute), revision: 1},
		{alg: 4, a: 1, b: 1, d: int64(dms(1e12)), maxCost: 1, grace: int64(dms(maxM - 1e12 - 1)), revision: 1},
		{alg: 4, a: 1, b: ratelimit.MaxExactInt/999 + 1, d: int64(ms), maxCost: 1, grace: 1e6, revision: 1},
	}
	for _, s := range seeds {
		// The seeds are written in ns; add each as given and, where exact, in ms.
		f.Add(s.alg, s.a, s.b, s.d, s.maxCost, s.grace, s.regression, s.revision, s.failOpen, s.dedup, s.pointer, s.mismatchAlgo, true)
		f.Add(s.alg, s.a, s.b, s.d/1e6, s.maxCost, s.grace/1e6, s.regression/1e6, s.revision, s.failOpen, s.dedup, s.pointer, s.mismatchAlgo, false)
	}
	f.Fuzz(func(t *testing.T, alg uint8, a, b, d, maxCost, grace, regression, revision int64, failOpen, dedup, pointer, mismatchAlgo, nanos bool) {
		// Random nanoseconds are almost never whole milliseconds, so the
		// fuzzer also reads durations as milliseconds (reduced into the
		// Duration range, sign kept) to reach the accepting side often.
		dur := func(x int64) time.Duration {
			if nanos {
				return time.Duration(x)
			}
			return time.Duration(x%(maxM+1)) * ms
		}
		d, grace, regression = int64(dur(d)), int64(dur(grace)), int64(dur(regression))
		spec := ratelimit.PolicySpec{
			ID: "fuzz", Revision: revision, Algorithm: ratelimit.Algorithm(alg % 7), MaxCost: maxCost,
			CleanupGrace: time.Duration(grace), MaxClockRegression: time.Duration(regression),
			FailurePolicy: ratelimit.FailClosed,
		}
		if failOpen {
			spec.FailurePolicy = ratelimit.FailOpen
		}
		if dedup {
			// Any duration: the oracle accepts 1ms..MaxDedupWindow, whole ms.
			spec.DedupWindow = time.Duration(regression) + time.Duration(revision%3)*ms
		}
		if maxCost%4 == 3 {
			// Any count, with or without a window: the oracle accepts
			// 0..16 with a window only.
			n := b%20 - 2
			spec.DedupMaxReplays = &n
		}
		switch alg % 7 {
		case 1:
			spec.Params = ratelimit.FixedWindow{Limit: a, Window: time.Duration(d)}
		case 2:
			spec.Params = ratelimit.SlidingWindowCounter{Limit: a, Window: time.Duration(d)}
		case 3:
			spec.Params = ratelimit.TokenBucket{Capacity: a, RefillTokens: b, RefillPeriod: time.Duration(d)}
			if pointer {
				spec.Params = &ratelimit.TokenBucket{Capacity: a, RefillTokens: b, RefillPeriod: time.Duration(d)}
			}
		case 4:
			spec.Params = ratelimit.GCRA{Rate: b, Period: time.Duration(d), Burst: a}
		case 5:
			spec.Params = ratelimit.SlidingLog{Limit: a, Window: time.Duration(d)}
		case 6:
			// A queue: its size and delay-free count from a and b, its
			// MaxDelay from the grace (any duration, whole ms or not).
			spec.Params = ratelimit.LeakyBucket{Rate: b, Period: time.Duration(d), QueueSize: a - 1, DelayAfter: b % 4, MaxDelay: time.Duration(grace) * 1000}
		}
		if mismatchAlgo {
			spec.Algorithm = ratelimit.Algorithm(alg%3 + 1)
		}
		p, err := ratelimit.NewPolicy(spec)
		want := oracleAccepts(spec)
		if !want {
			require.Error(t, err, "accepted a spec the oracle rejects: %+v", spec)
			require.ErrorIs(t, err, ratelimit.ErrInvalidPolicy)
			require.True(t, p.IsZero())
			return
		}
		require.NoError(t, err, "rejected a spec the oracle accepts: %+v", spec)
		requireWorstCaseFits(t, p)
		require.LessOrEqual(t, p.MaxCost(), p.Limit())
	})
}

// errorsWithoutDigest lists the texts of err's RequestErrors other than the
// SubjectDigest one (which fuzzers vary separately).
func errorsWithoutDigest(err error) []string {
	var out []string
	for _, e := range requestErrors(err) {
		if e.Field != "SubjectDigest" {
			out = append(out, e.Error())
		}
	}
	return out
}
