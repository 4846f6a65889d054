package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// t0 is the fixed "now" of every request test.
var t0 = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

// digestOf returns an n-byte subject digest made of a pattern that occurs in
// no error text, so a leak of the digest into an error is detectable.
func digestOf(n int) ratelimit.SubjectDigest {
	return ratelimit.SubjectDigest(strings.Repeat("Zq9_", n/4+1)[:n])
}

func validRequest() ratelimit.Request {
	return ratelimit.Request{
		PolicyID:      "api",
		SubjectDigest: digestOf(32),
		Cost:          1,
		Deadline:      t0.Add(time.Second),
	}
}

func TestRequestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*ratelimit.Request)
		field   string // "" when valid
		wantErr error
	}{
		{"valid baseline", func(*ratelimit.Request) {}, "", nil},

		{"policy id 1 char", func(r *ratelimit.Request) { r.PolicyID = "a" }, "", nil},
		{"policy id single digit", func(r *ratelimit.Request) { r.PolicyID = "0" }, "", nil},
		{"policy id 64 chars", func(r *ratelimit.Request) { r.PolicyID = ratelimit.PolicyID(strings.Repeat("a", 64)) }, "", nil},
		{"policy id all allowed punctuation", func(r *ratelimit.Request) { r.PolicyID = "a.b_c-d9" }, "", nil},
		{"policy id 65 chars", func(r *ratelimit.Request) { r.PolicyID = ratelimit.PolicyID(strings.Repeat("a", 65)) }, "PolicyID", ratelimit.ErrInvalidPolicyID},
		{"policy id empty", func(r *ratelimit.Request) { r.PolicyID = "" }, "PolicyID", ratelimit.ErrInvalidPolicyID},
		{"policy id leading dot", func(r *ratelimit.Request) { r.PolicyID = ".api" }, "PolicyID", ratelimit.ErrInvalidPolicyID},
		{"policy id leading underscore", func(r *ratelimit.Request) { r.PolicyID = "_api" }, "PolicyID", ratelimit.ErrInvalidPolicyID},
		{"policy id leading dash", func(r *ratelimit.Request) { r.PolicyID = "-api" }, "PolicyID", ratelimit.ErrInvalidPolicyID},
		{"policy id uppercase", func(r *ratelimit.Request) { r.PolicyID = "Api" }, "PolicyID", ratelimit.ErrInvalidPolicyID},
		{"policy id colon", func(r *ratelimit.Request) { r.PolicyID = "a:b" }, "PolicyID", ratelimit.ErrInvalidPolicyID},
		{"policy id space", func(r *ratelimit.Request) { r.PolicyID = "a b" }, "PolicyID", ratelimit.ErrInvalidPolicyID},
		{"policy id slash", func(r *ratelimit.Request) { r.PolicyID = "a/b" }, "PolicyID", ratelimit.ErrInvalidPolicyID},
		{"policy id non-ascii", func(r *ratelimit.Request) { r.PolicyID = "apé" }, "PolicyID", ratelimit.ErrInvalidPolicyID},
		{"policy id NUL", func(r *ratelimit.Request) { r.PolicyID = "a\x00" }, "PolicyID", ratelimit.ErrInvalidPolicyID},

		{"digest 16 bytes", func(r *ratelimit.Request) { r.SubjectDigest = digestOf(16) }, "", nil},
		{"digest 128 bytes", func(r *ratelimit.Request) { r.SubjectDigest = digestOf(128) }, "", nil},
		{"digest whole alphabet", func(r *ratelimit.Request) {
			r.SubjectDigest = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		}, "", nil},
		{"digest 15 bytes", func(r *ratelimit.Request) { r.SubjectDigest = digestOf(15) }, "SubjectDigest", ratelimit.ErrInvalidSubjectDigest},
		{"digest 129 bytes", func(r *ratelimit.Request) { r.SubjectDigest = digestOf(129) }, "SubjectDigest", ratelimit.ErrInvalidSubjectDigest},
		{"digest empty", func(r *ratelimit.Request) { r.SubjectDigest = "" }, "SubjectDigest", ratelimit.ErrInvalidSubjectDigest},
		{"digest plus (std base64)", func(r *ratelimit.Request) { r.SubjectDigest = digestOf(31) + "+" }, "SubjectDigest", ratelimit.ErrInvalidSubjectDigest},
		{"digest slash (std base64)", func(r *ratelimit.Request) { r.SubjectDigest = "/" + digestOf(31) }, "SubjectDigest", ratelimit.ErrInvalidSubjectDigest},
		{"digest padding", func(r *ratelimit.Request) { r.SubjectDigest = digestOf(30) + "==" }, "SubjectDigest", ratelimit.ErrInvalidSubjectDigest},
		{"digest dot", func(r *ratelimit.Request) { r.SubjectDigest = digestOf(16) + "." + digestOf(15) }, "SubjectDigest", ratelimit.ErrInvalidSubjectDigest},
		{"digest colon", func(r *ratelimit.Request) { r.SubjectDigest = digestOf(16) + ":" + digestOf(15) }, "SubjectDigest", ratelimit.ErrInvalidSubjectDigest},
		{"digest space", func(r *ratelimit.Request) { r.SubjectDigest = digestOf(16) + " " + digestOf(15) }, "SubjectDigest", ratelimit.ErrInvalidSubjectDigest},
		{"digest NUL", func(r *ratelimit.Request) { r.SubjectDigest = digestOf(16) + "\x00" + digestOf(15) }, "SubjectDigest", ratelimit.ErrInvalidSubjectDigest},
		{"digest 0xff", func(r *ratelimit.Request) { r.SubjectDigest = digestOf(16) + "\xff" + digestOf(15) }, "SubjectDigest", ratelimit.ErrInvalidSubjectDigest},
		{"digest non-ascii", func(r *ratelimit.Request) { r.SubjectDigest = digestOf(16) + "é" + digestOf(14) }, "SubjectDigest", ratelimit.ErrInvalidSubjectDigest},

		{"cost 1", func(r *ratelimit.Request) { r.Cost = 1 }, "", nil},
		{"cost MaxExactInt", func(r *ratelimit.Request) { r.Cost = ratelimit.MaxExactInt }, "", nil},
		{"cost 0", func(r *ratelimit.Request) { r.Cost = 0 }, "Cost", ratelimit.ErrCostOutOfRange},
		{"cost -1", func(r *ratelimit.Request) { r.Cost = -1 }, "Cost", ratelimit.ErrCostOutOfRange},
		{"cost MinInt64", func(r *ratelimit.Request) { r.Cost = math.MinInt64 }, "Cost", ratelimit.ErrCostOutOfRange},
		{"cost MaxExactInt+1", func(r *ratelimit.Request) { r.Cost = ratelimit.MaxExactInt + 1 }, "Cost", ratelimit.ErrCostOutOfRange},
		{"cost MaxInt64", func(r *ratelimit.Request) { r.Cost = math.MaxInt64 }, "Cost", ratelimit.ErrCostOutOfRange},

		{"evaluation id set", func(r *ratelimit.Request) { r.EvaluationID = "e-1" }, "", nil},
		{"evaluation id 64", func(r *ratelimit.Request) { r.EvaluationID = ratelimit.EvaluationID(strings.Repeat("a.", 32)) }, "", nil},
		{"evaluation id 65", func(r *ratelimit.Request) { r.EvaluationID = ratelimit.EvaluationID(strings.Repeat("a", 65)) }, "EvaluationID", ratelimit.ErrInvalidEvaluationID},
		{"evaluation id whitespace", func(r *ratelimit.Request) { r.EvaluationID = " " }, "EvaluationID", ratelimit.ErrInvalidEvaluationID},
		{"evaluation id colon", func(r *ratelimit.Request) { r.EvaluationID = "a:b" }, "EvaluationID", ratelimit.ErrInvalidEvaluationID},
		{"evaluation id non-ascii", func(r *ratelimit.Request) { r.EvaluationID = "é" }, "EvaluationID", ratelimit.ErrInvalidEvaluationID},

		{"deadline 1ns ahead", func(r *ratelimit.Request) { r.Deadline = t0.Add(time.Nanosecond) }, "", nil},
		{"deadline far ahead", func(r *ratelimit.Request) { r.Deadline = t0.AddDate(100, 0, 0) }, "", nil},
		{"deadline zero", func(r *ratelimit.Request) { r.Deadline = time.Time{} }, "Deadline", ratelimit.ErrDeadlineMissing},
		// A passed deadline is the provider precheck's to decide
		// (Unavailable{deadline}), not a validation error.
		{"deadline equals now", func(r *ratelimit.Request) { r.Deadline = t0 }, "", nil},
		{"deadline long past", func(r *ratelimit.Request) { r.Deadline = t0.Add(-time.Hour) }, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validRequest()
			tt.mutate(&r)
			err := r.Validate()
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ratelimit.ErrInvalidRequest)
			assert.ErrorIs(t, err, tt.wantErr)
			var re *ratelimit.RequestError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tt.field, re.Field)
			assert.Len(t, requestErrors(err), 1, "exactly one violation: %v", err)
			if len(r.SubjectDigest) >= 4 {
				assert.NotContains(t, err.Error(), string(r.SubjectDigest), "error leaks the subject digest")
			}
		})
	}
}

// TestRequestValidateJoinsEveryViolation: the zero Request is invalid and
// every violated field is reported, not only the first.
func TestRequestValidateJoinsEveryViolation(t *testing.T) {
	r := ratelimit.Request{EvaluationID: "x y"}
	err := r.Validate()
	require.Error(t, err)
	var fields []string
	for _, re := range requestErrors(err) {
		fields = append(fields, re.Field)
	}
	assert.ElementsMatch(t, []string{"PolicyID", "SubjectDigest", "Cost", "EvaluationID", "Deadline"}, fields)
	for _, s := range []error{ratelimit.ErrInvalidPolicyID, ratelimit.ErrInvalidSubjectDigest, ratelimit.ErrCostOutOfRange, ratelimit.ErrInvalidEvaluationID, ratelimit.ErrDeadlineMissing} {
		assert.ErrorIs(t, err, s)
	}
}

func TestRequestValidateFor(t *testing.T) {
	p := mustPolicy(t, fixedSpec(10, time.Second, 5))
	dedupSpec := fixedSpec(10, time.Second, 5)
	dedupSpec.DedupWindow = 10 * time.Minute
	dedupPolicy := mustPolicy(t, dedupSpec)
	tests := []struct {
		name    string
		mutate  func(*ratelimit.Request)
		policy  ratelimit.Policy
		field   string
		wantErr error
	}{
		{"cost 1", func(r *ratelimit.Request) { r.Cost = 1 }, p, "", nil},
		{"cost equal to max cost", func(r *ratelimit.Request) { r.Cost = 5 }, p, "", nil},
		{"cost max cost + 1", func(r *ratelimit.Request) { r.Cost = 6 }, p, "Cost", ratelimit.ErrCostAboveMaxCost},
		{"cost far above", func(r *ratelimit.Request) { r.Cost = ratelimit.MaxExactInt }, p, "Cost", ratelimit.ErrCostAboveMaxCost},
		{"other policy id", func(r *ratelimit.Request) { r.PolicyID = "login" }, p, "PolicyID", ratelimit.ErrPolicyMismatch},
		{"zero policy", func(*ratelimit.Request) {}, ratelimit.Policy{}, "Policy", ratelimit.ErrPolicyMismatch},
		{"evaluation id without dedup window", func(r *ratelimit.Request) { r.EvaluationID = "e-1" }, p, "EvaluationID", ratelimit.ErrDedupNotSupported},
		{"evaluation id with dedup window", func(r *ratelimit.Request) { r.EvaluationID = "e-1" }, dedupPolicy, "", nil},
		{"no evaluation id with dedup window", func(*ratelimit.Request) {}, dedupPolicy, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validRequest()
			tt.mutate(&r)
			err := r.ValidateFor(tt.policy)
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, ratelimit.ErrInvalidRequest)
			assert.ErrorIs(t, err, tt.wantErr)
			var re *ratelimit.RequestError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tt.field, re.Field)
			assert.NotContains(t, err.Error(), string(r.SubjectDigest))
		})
	}
}

// TestRequestPrintingHidesDigest: a Request or a SubjectDigest that reaches
// fmt or slog (text or JSON) shows the digest's length, never the digest.
func TestRequestPrintingHidesDigest(t *testing.T) {
	r := validRequest()
	secret := string(r.SubjectDigest)
	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		outputs = append(outputs, fmt.Sprintf(verb, r), fmt.Sprintf(verb, r.SubjectDigest))
	}
	outputs = append(outputs, fmt.Sprint(r), fmt.Sprintln(r.SubjectDigest), r.SubjectDigest.String(), r.SubjectDigest.GoString())
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		slog.New(h).Info("evaluate", "req", r, "digest", r.SubjectDigest, slog.Any("any", r))
	}
	outputs = append(outputs, buf.String())
	for _, out := range outputs {
		assert.NotContains(t, out, secret)
	}
	assert.Contains(t, buf.String(), "subject_digest_len")
	assert.Equal(t, "[subject digest, 32 bytes]", r.SubjectDigest.String())
	// An evaluation ID prints as its length only, too.
	r.EvaluationID = "idempotency-secret-1"
	buf.Reset()
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("evaluate", "req", r, "id", r.EvaluationID)
	for _, out := range []string{buf.String(), fmt.Sprintf("%v %+v %#v %s %q", r, r, r, r.EvaluationID, r.EvaluationID), r.EvaluationID.GoString()} {
		assert.NotContains(t, out, "idempotency-secret-1")
	}
	assert.Equal(t, "[evaluation id, 20 bytes]", r.EvaluationID.String())
	// The digest itself is still reachable as a string where it is needed.
	assert.Equal(t, secret, string(r.SubjectDigest))
}

// requestErrors flattens a joined Validate error into its *RequestErrors.
func requestErrors(err error) []*ratelimit.RequestError {
	var out []*ratelimit.RequestError
	var walk func(error)
	walk = func(e error) {
		var re *ratelimit.RequestError
		if errors.As(e, &re) && e == error(re) {
			out = append(out, re)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c)
			}
		}
	}
	walk(err)
	return out
}

// TestRequestEffectiveDeadline: the earlier of Request.Deadline and the
// context's deadline; the request's when the context has none (or is nil).
func TestRequestEffectiveDeadline(t *testing.T) {
	r := validRequest()
	r.Deadline = t0.Add(time.Second)
	assert.Equal(t, r.Deadline, r.EffectiveDeadline(context.Background()), "no context deadline")
	assert.Equal(t, r.Deadline, r.EffectiveDeadline(nil), "nil context") //nolint:staticcheck // nil is a case the method handles

	earlier, cancel := context.WithDeadline(context.Background(), t0.Add(time.Millisecond))
	defer cancel()
	assert.Equal(t, t0.Add(time.Millisecond), r.EffectiveDeadline(earlier), "the context's is earlier")

	later, cancel2 := context.WithDeadline(context.Background(), t0.Add(time.Hour))
	defer cancel2()
	assert.Equal(t, r.Deadline, r.EffectiveDeadline(later), "the request's is earlier")

	same, cancel3 := context.WithDeadline(context.Background(), r.Deadline)
	defer cancel3()
	assert.Equal(t, r.Deadline, r.EffectiveDeadline(same), "equal deadlines")
}
