package programs

import (
	"crypto/sha1" //nolint:gosec // SHA1 is what EVALSHA names a script by, not a security boundary.
	_ "embed"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The policy-set program (ADR 0026): every member of a set whose keys share
// a slot, decided in one call, all or nothing.

//go:embed rate-set-v1.lua
var setSource string

// SetMaxMembers is the most members one set program call decides
// (ratelimit.MaxSetMembers).
const SetMaxMembers = ratelimit.MaxSetMembers

// SetCode is a's code in the set program's ARGV framing; ok is false for
// an algorithm the set program does not decide (the leaky bucket, whose
// delayed admissions no set can hold; ADR 0028).
func SetCode(a ratelimit.Algorithm) (code int64, ok bool) {
	if m := modelOf(a); m != nil && m.setCode > 0 {
		return m.setCode, true
	}
	return 0, false
}

// SetProgram is the policy-set program rate-set-v1: the embedded source
// and its SHA1. It is not in the manifest (which lists one program per
// algorithm and variant); NumKeys and ArgCount depend on the call.
func SetProgram() Program {
	sum := sha1.Sum([]byte(setSource)) //nolint:gosec // EVALSHA's digest.
	return Program{Name: "rate-set-v1", Version: 1, Source: setSource, SHA1: hex.EncodeToString(sum[:]), MinRedisVersion: MinRedisVersion}
}

// SetArgs is the set program's ARGV for members (1..SetMaxMembers, in
// KEYS order) each taking cost: the member count, then per member its
// algorithm code and its decision program's ARGV (Args). nil when a member
// is the zero Policy or of an algorithm the set program does not decide,
// or the count is out of range.
func SetArgs(members []ratelimit.Policy, cost int64) []any {
	if len(members) < 1 || len(members) > SetMaxMembers {
		return nil
	}
	argv := make([]any, 0, 1+len(members)*(1+maxArgCount))
	argv = append(argv, int64(len(members)))
	for _, p := range members {
		code, ok := SetCode(p.Algorithm())
		if !ok || p.IsZero() {
			return nil
		}
		argv = appendArgs(append(argv, code), p, cost)
	}
	return argv
}

// SetMember is one member's part of SetArgs (its algorithm code and its
// decision program's ARGV), prepared once per policy so that a call only
// puts the parts and the cost together (AppendSetArgs): the policy's
// numbers are boxed once, not on every call. The zero value is invalid.
type SetMember struct {
	args []any // SetArgs of the policy alone with cost 1, less the count
}

// NewSetMember prepares p's part of SetArgs; false when SetArgs refuses p
// (the zero Policy, an algorithm the set program does not decide).
func NewSetMember(p ratelimit.Policy) (SetMember, bool) {
	argv := SetArgs([]ratelimit.Policy{p}, 1)
	if argv == nil {
		return SetMember{}, false
	}
	return SetMember{args: argv[1:]}, true
}

// AppendSetArgs appends SetArgs(the members' policies, cost) to dst and
// returns the extended slice; nil when the count is out of range or a
// member is the zero SetMember. The prepared parts are shared, never
// written: concurrent calls may use the same members.
func AppendSetArgs(dst []any, members []SetMember, cost int64) []any {
	return appendSetArgs(dst, members, cost, nil)
}

// AppendSetArgsCosts is AppendSetArgs with a cost per member (costs[i]
// for members[i], in KEYS order): each member's ARGV carries its own
// cost, so the set program's text is the same. nil also when costs does
// not have one cost per member.
func AppendSetArgsCosts(dst []any, members []SetMember, costs []int64) []any {
	if len(costs) != len(members) {
		return nil
	}
	return appendSetArgs(dst, members, 0, costs)
}

// appendSetArgs is AppendSetArgs with costs[i] for member i when costs
// is not nil, else cost for every member.
func appendSetArgs(dst []any, members []SetMember, cost int64, costs []int64) []any {
	if len(members) < 1 || len(members) > SetMaxMembers {
		return nil
	}
	need := 1
	for _, m := range members {
		if len(m.args) <= 1+ArgCost {
			return nil
		}
		need += len(m.args)
	}
	dst = append(slices.Grow(dst, need), int64(len(members)))
	c := any(cost)
	for i, m := range members {
		n := len(dst)
		dst = append(dst, m.args...)
		if costs != nil {
			c = costs[i]
		}
		dst[n+1+ArgCost] = c // after the member's algorithm code
	}
	return dst
}

// SetStatusAllowed and SetStatusNotAllowed are the set reply's first
// integer: every member ALLOWED, or at least one member not.
const (
	SetStatusAllowed    int64 = 1
	SetStatusNotAllowed int64 = 2
)

// EvaluateSet is the reference model of the set program: every member
// decided by EvaluateMicros on its own state at the one instant
// serverNowMicros; admitted iff every member answers StatusAllowed, and
// the states returned are the ones written (the members' next states) only
// then; otherwise they are the states given (nothing written).
func EvaluateSet(members []ratelimit.Policy, states []State, serverNowMicros, cost int64) (allowed bool, replies []Reply, next []State) {
	replies = make([]Reply, len(members))
	next = make([]State, len(members))
	allowed = true
	for i, p := range members {
		var st State
		if i < len(states) {
			st = states[i]
		}
		r, n := EvaluateMicros(p, st, serverNowMicros, cost)
		replies[i], next[i] = r, n
		allowed = allowed && r.Status == StatusAllowed
	}
	if !allowed {
		for i := range next {
			next[i] = nil
			if i < len(states) {
				next[i] = states[i]
			}
		}
	}
	return allowed, replies, next
}

// DecodeSet parses the set program's reply for members (in KEYS order):
// 2 + 7n integers, the status SetStatusAllowed or SetStatusNotAllowed, n
// = len(members), then each member's reply, which Decode's checks must
// accept for its policy; the status must be SetStatusAllowed exactly when
// every member's is StatusAllowed. The error is a *ReplyError.
func DecodeSet(v any, members []ratelimit.Policy) (allowed bool, replies []Reply, err error) {
	arr, ok := v.([]any)
	if !ok {
		return false, nil, replyError(v, "want an array of 2 + %d x %d integers, got %s", len(members), ReplyLen, typeName(v))
	}
	if len(arr) != 2+ReplyLen*len(members) {
		return false, nil, replyError(v, "want %d elements, got %d", 2+ReplyLen*len(members), len(arr))
	}
	head := [2]int64{}
	for i := range head {
		n, ok := arr[i].(int64)
		if !ok {
			return false, nil, replyError(v, "element %d: want an integer, got %s", i, typeName(arr[i]))
		}
		head[i] = n
	}
	if head[1] != int64(len(members)) {
		return false, nil, replyError(v, "member count %d, want %d", head[1], len(members))
	}
	replies = make([]Reply, len(members))
	all := true
	for i, p := range members {
		r, err := Decode(arr[2+i*ReplyLen:2+(i+1)*ReplyLen], p)
		if err != nil {
			return false, nil, fmt.Errorf("member %d (%s): %w", i, p.ID(), err)
		}
		replies[i] = r
		all = all && r.Status == StatusAllowed
	}
	switch {
	case head[0] == SetStatusAllowed && all, head[0] == SetStatusNotAllowed && !all:
		return all, replies, nil
	}
	return false, nil, replyError(v, "set status %d does not match the members' statuses", head[0])
}
