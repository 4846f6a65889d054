package programs

import (
	"strconv"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// SchemaVersion is the value of FieldSchema in every state hash the v1
// programs write.
const SchemaVersion = 1

// Stored hash field names. Single letters keep a subject's state small; the
// values are canonical decimal integers.
const (
	FieldSchema       = "v" // schema version, SchemaVersion
	FieldAlgorithm    = "a" // int(ratelimit.Algorithm): 1, 2 or 3
	FieldRevision     = "r" // policy revision
	FieldLastObserved = "l" // lastObservedMillis (token bucket: also the last refill)
	FieldWindow       = "w" // fixed/sliding: window id = floor(l / window)
	FieldCount        = "c" // fixed/sliding: units admitted in window w
	FieldPrevious     = "p" // sliding: units admitted in window w-1
	FieldTokens       = "t" // token bucket: whole tokens
	FieldRemainder    = "m" // token bucket: sub-token remainder, in 1/period tokens
)

// stateFields lists each algorithm's fields in the order the programs write
// them.
func stateFields(a ratelimit.Algorithm) []string {
	switch a {
	case ratelimit.AlgorithmFixedWindow:
		return []string{FieldSchema, FieldAlgorithm, FieldRevision, FieldLastObserved, FieldWindow, FieldCount}
	case ratelimit.AlgorithmSlidingWindowCounter:
		return []string{FieldSchema, FieldAlgorithm, FieldRevision, FieldLastObserved, FieldWindow, FieldCount, FieldPrevious}
	case ratelimit.AlgorithmTokenBucket:
		return []string{FieldSchema, FieldAlgorithm, FieldRevision, FieldLastObserved, FieldTokens, FieldRemainder}
	}
	return nil
}

// State is the content of one state hash exactly as HGETALL returns it: field
// name to value. A nil or empty State is an absent key. Evaluate never
// modifies the State it is given.
type State map[string]string

// parseInt is the programs' int(): a canonical non-negative decimal integer
// (no sign, no leading zero, at most 16 digits) no greater than MaxExactInt.
func parseInt(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 16 || (s[0] == '0' && s != "0") {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > ratelimit.MaxExactInt {
		return 0, false
	}
	return n, true
}

// fields parses st for algorithm a: exactly a's fields, each a valid integer.
func (st State) fields(a ratelimit.Algorithm) (map[string]int64, bool) {
	names := stateFields(a)
	if len(st) != len(names) {
		return nil, false
	}
	f := make(map[string]int64, len(names))
	for _, name := range names {
		s, ok := st[name]
		if !ok {
			return nil, false
		}
		n, ok := parseInt(s)
		if !ok {
			return nil, false
		}
		f[name] = n
	}
	return f, true
}

func encodeState(a ratelimit.Algorithm, values ...int64) State {
	names := stateFields(a)
	st := make(State, len(names))
	for i, name := range names {
		st[name] = strconv.FormatInt(values[i], 10)
	}
	return st
}
