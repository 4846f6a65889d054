package programs

import (
	"fmt"
	"strconv"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// SchemaVersion is the schema of every state value the v1 programs write:
// the high four bits of its first byte (ADR 0010). Schema 1 was the
// six/seven-field hash, which the programs now refuse (WRONGTYPE).
const SchemaVersion = 2

// Names of the stored state's fields, as Decode returns them. The value is
// one binary string (ADR 0010, docs/programs.md): a header byte
// 16*schema + algorithm, the algorithm's fields as big-endian unsigned
// integers of fixed widths (stateLayout), then the policy revision as its
// canonical decimal.
const (
	FieldSchema       = "v" // schema version, SchemaVersion
	FieldAlgorithm    = "a" // int(ratelimit.Algorithm): 1, 2, 3 or 4
	FieldRevision     = "r" // policy revision
	FieldLastObserved = "l" // lastObservedMillis (token bucket: also the last refill)
	FieldWindow       = "w" // fixed/sliding: window id = floor(l / window)
	FieldCount        = "c" // fixed/sliding: units admitted in window w
	FieldPrevious     = "p" // sliding: units admitted in window w-1
	FieldTokens       = "t" // token bucket: whole tokens
	FieldRemainder    = "m" // token bucket: sub-token remainder, in 1/period tokens
	// FieldArrival is GCRA's theoretical arrival time as its offset from
	// l*1000 µs in 1/R µs (R the reduced rate): TAT = l*1000 + d/R µs.
	FieldArrival = "d"
)

// field is one packed field: its name and width in bytes.
type field struct {
	name  string
	width int
}

// stateLayout is each algorithm's packed fields after the header byte, in
// order (the programs' struct format: fixed window `>B I6 I6 I7`, sliding
// counter `>B I6 I6 I5 I5`, token bucket `>B I6 I7 I6`, GCRA `>B I6 I7`).
// Every width covers the field's bound: l, w <= S < 2^48; fixed-window
// c <= M/2 < 2^56; sliding c, p <= M/Q < 2^40; t < C <= M < 2^56;
// m < P <= H < 2^48; d <= B*P + 999*R <= M < 2^56 (G1).
func stateLayout(a ratelimit.Algorithm) []field {
	switch a {
	case ratelimit.AlgorithmFixedWindow:
		return []field{{FieldLastObserved, 6}, {FieldWindow, 6}, {FieldCount, 7}}
	case ratelimit.AlgorithmSlidingWindowCounter:
		return []field{{FieldLastObserved, 6}, {FieldWindow, 6}, {FieldCount, 5}, {FieldPrevious, 5}}
	case ratelimit.AlgorithmTokenBucket:
		return []field{{FieldLastObserved, 6}, {FieldTokens, 7}, {FieldRemainder, 6}}
	case ratelimit.AlgorithmGCRA:
		return []field{{FieldLastObserved, 6}, {FieldArrival, 7}}
	}
	return nil
}

// stateFields lists each algorithm's fields in the order they are stored:
// schema, algorithm and revision, then the packed fields.
func stateFields(a ratelimit.Algorithm) []string {
	lay := stateLayout(a)
	if lay == nil {
		return nil
	}
	names := []string{FieldSchema, FieldAlgorithm, FieldRevision}
	for _, f := range lay {
		names = append(names, f.name)
	}
	return names
}

// FixedStateBytes is the length of algorithm a's state value without the
// revision (the header byte and the packed fields); 0 for an unknown
// algorithm.
func FixedStateBytes(a ratelimit.Algorithm) int {
	lay := stateLayout(a)
	if lay == nil {
		return 0
	}
	n := 1
	for _, f := range lay {
		n += f.width
	}
	return n
}

// State is the value of one state key exactly as GET returns it. A nil
// State is an absent key (an empty, present value is malformed). Evaluate
// never modifies the State it is given.
type State []byte

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

// Decode returns the fields of a state value by name (FieldSchema,
// FieldAlgorithm, FieldRevision and the algorithm's fields). It checks only
// the encoding: a known schema and algorithm in the header, the length, and
// a canonical decimal revision; the ranges are the programs' (Evaluate).
func (st State) Decode() (map[string]int64, error) {
	if len(st) == 0 {
		return nil, fmt.Errorf("state: empty value")
	}
	schema, alg := int64(st[0]>>4), ratelimit.Algorithm(st[0]&15)
	if schema != SchemaVersion {
		return nil, fmt.Errorf("state: schema %d, want %d", schema, SchemaVersion)
	}
	lay := stateLayout(alg)
	if lay == nil {
		return nil, fmt.Errorf("state: unknown algorithm %d", int(alg))
	}
	fixed := FixedStateBytes(alg)
	if len(st) <= fixed {
		return nil, fmt.Errorf("state: %d bytes, want more than %d for %v", len(st), fixed, alg)
	}
	f := map[string]int64{FieldSchema: schema, FieldAlgorithm: int64(alg)}
	pos := 1
	for _, fl := range lay {
		var v uint64
		for _, b := range st[pos : pos+fl.width] {
			v = v<<8 | uint64(b)
		}
		f[fl.name] = int64(v) // widths <= 7 bytes: never negative
		pos += fl.width
	}
	rev, ok := parseInt(string(st[fixed:]))
	if !ok {
		return nil, fmt.Errorf("state: revision %q is not a canonical decimal", st[fixed:])
	}
	f[FieldRevision] = rev
	return f, nil
}

// fields decodes st for algorithm a; false when it does not decode or holds
// another algorithm's state.
func (st State) fields(a ratelimit.Algorithm) (map[string]int64, bool) {
	f, err := st.Decode()
	if err != nil || f[FieldAlgorithm] != int64(a) {
		return nil, false
	}
	return f, true
}

// encodeState packs values: schema, algorithm, revision, then a's fields in
// stateLayout order. Each field is truncated to its width and the header to
// four bits each (tests encode out-of-range values this way).
func encodeState(a ratelimit.Algorithm, values ...int64) State {
	lay := stateLayout(a)
	rev := strconv.FormatInt(values[2], 10)
	st := make(State, 0, FixedStateBytes(a)+len(rev))
	st = append(st, byte((values[0]&15)<<4|values[1]&15))
	for i, fl := range lay {
		v := uint64(values[3+i])
		for sh := (fl.width - 1) * 8; sh >= 0; sh -= 8 {
			st = append(st, byte(v>>uint(sh)))
		}
	}
	return append(st, rev...)
}

// stateFormat is the Lua struct format of algorithm a's packed part, e.g.
// ">BI6I6I7" for the fixed window.
func stateFormat(a ratelimit.Algorithm) string {
	s := ">B"
	for _, f := range stateLayout(a) {
		s += "I" + strconv.Itoa(f.width)
	}
	return s
}
