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
	FieldAlgorithm    = "a" // int(ratelimit.Algorithm): 1..6
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
	// FieldSum is the sliding log's sum of its entries' costs.
	FieldSum = "s"
	// FieldEntries is the sliding log's number of entries; the entries
	// themselves are LogEntries.
	FieldEntries = "n"
	// FieldLeases is a token bucket's or a GCRA's number of live lease
	// records (ADR 0042), present only when it has some (schema 3); the records
	// themselves are LeaseRecords.
	FieldLeases = "k"
)

// LogEntryBytes is the size of one sliding-log entry: the admission's
// millisecond (6 bytes) and its cost (2 bytes), big-endian (ADR 0024).
const LogEntryBytes = 8

// LeaseRecordBytes is the size of one lease record of a token bucket's
// or a GCRA's state (ADR 0042): the reservation's effective millisecond and the
// lease's end (6 bytes each) and its units (7 bytes), big-endian.
const LeaseRecordBytes = 19

// LogEntry is one admission a sliding log holds: its effective millisecond
// and its cost.
type LogEntry struct {
	AtMillis int64
	Cost     int64
}

// field is one packed field: its name and width in bytes.
type field struct {
	name  string
	width int
}

// stateLayout is algorithm a's packed fields after the header byte, in
// order (the programs' struct format; each algorithm's model.layout, which
// gives the bound every width covers): nil for an unknown algorithm.
func stateLayout(a ratelimit.Algorithm) []field {
	if m := modelOf(a); m != nil {
		return m.layout
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
// revision (the header byte and the packed fields; for the sliding log
// without its entries either; for GCRA and the leaky bucket the longest
// form, d in 7 bytes: a value's own length is State.packedLen); 0 for an
// unknown algorithm.
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

// GCRA and the leaky bucket write d in the fewest of 4..7 bytes that hold it
// (ADR 0029); l's 6-byte field then holds 2^arrivalCodeShift*(7-w) + l,
// which S < 2^46 leaves room for. A value with d in 7 bytes (the form
// before ADR 0029) reads as before: its code is 0.
const (
	arrivalCodeShift = 46
	minArrivalWidth  = 4
	maxArrivalWidth  = 7
	// lastObservedBytes is l's field width; arrivalAt is where d starts,
	// after the header byte and l's field.
	lastObservedBytes = 6
	arrivalAt         = 1 + lastObservedBytes
)

// compactArrival reports whether a's d has a width carried in l's field.
func compactArrival(a ratelimit.Algorithm) bool {
	m := modelOf(a)
	return m != nil && m.compactArrival
}

// arrivalWidth is the width the programs write d in: the fewest of 4..7
// bytes that hold it.
func arrivalWidth(d uint64) int {
	switch {
	case d < 1<<32:
		return minArrivalWidth
	case d < 1<<40:
		return 5
	case d < 1<<48:
		return 6
	}
	return maxArrivalWidth
}

// packedLen is the length of st's header and packed fields (without a
// sliding log's entries and the revision): FixedStateBytes of its
// algorithm, for GCRA and the leaky bucket with d's width from l's field;
// 0 when st is too short to tell or its header names no algorithm.
func (st State) packedLen() int {
	if len(st) == 0 {
		return 0
	}
	alg := ratelimit.Algorithm(st[0] & 15)
	n := FixedStateBytes(alg)
	if n == 0 || !compactArrival(alg) {
		return n
	}
	if len(st) < arrivalAt {
		return 0
	}
	// The code 7-w is the top 2 bits of l's field, whose first byte is st[1].
	return n - int(st[1]>>(arrivalCodeShift-8*(lastObservedBytes-1)))
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
// FieldAlgorithm, FieldRevision and the algorithm's fields; a sliding log's
// entries are LogEntries). It checks only the encoding: a known schema and
// algorithm in the header, the length, and a canonical decimal revision;
// the ranges are the programs' (Evaluate).
func (st State) Decode() (map[string]int64, error) {
	if len(st) == 0 {
		return nil, fmt.Errorf("state: empty value")
	}
	schema, alg := int64(st[0]>>4), ratelimit.Algorithm(st[0]&15)
	leases := schema == SchemaVersion+1 && (alg == ratelimit.AlgorithmTokenBucket || alg == ratelimit.AlgorithmGCRA)
	if schema != SchemaVersion && !leases {
		return nil, fmt.Errorf("state: schema %d, want %d", schema, SchemaVersion)
	}
	lay := stateLayout(alg)
	if lay == nil {
		return nil, fmt.Errorf("state: unknown algorithm %d", int(alg))
	}
	fixed := st.packedLen()
	if len(st) <= fixed || fixed == 0 {
		return nil, fmt.Errorf("state: %d bytes, want more than %d for %v", len(st), max(fixed, FixedStateBytes(alg)), alg)
	}
	f := map[string]int64{FieldSchema: schema, FieldAlgorithm: int64(alg)}
	pos := 1
	for i, fl := range lay {
		width := fl.width
		if compactArrival(alg) && i == 1 {
			width = fixed - arrivalAt // d's width, from l's field
		}
		var v uint64
		for _, b := range st[pos : pos+width] {
			v = v<<8 | uint64(b)
		}
		if compactArrival(alg) && i == 0 {
			v &= 1<<arrivalCodeShift - 1 // l without d's width
		}
		f[fl.name] = int64(v) // widths <= 7 bytes: never negative
		pos += width
	}
	if leases {
		// ADR 0042: the record count, then the records.
		if len(st) <= fixed {
			return nil, fmt.Errorf("state: %d bytes, want a lease record count", len(st))
		}
		f[FieldLeases] = int64(st[fixed])
		fixed += 1 + LeaseRecordBytes*int(st[fixed])
		if len(st) <= fixed {
			return nil, fmt.Errorf("state: %d bytes, want more than %d for %d lease records", len(st), fixed, f[FieldLeases])
		}
	}
	if modelOf(alg).logEntries {
		fixed += LogEntryBytes * int(f[FieldEntries])
		if len(st) <= fixed {
			return nil, fmt.Errorf("state: %d bytes, want more than %d for %d log entries", len(st), fixed, f[FieldEntries])
		}
	}
	rev, ok := parseInt(string(st[fixed:]))
	if !ok {
		return nil, fmt.Errorf("state: revision %q is not a canonical decimal", st[fixed:])
	}
	f[FieldRevision] = rev
	return f, nil
}

// LeaseRecord is one live lease a token bucket's or a GCRA's state
// records (ADR 0042): the effective millisecond of its reservation (its receipt's),
// its end and its units.
type LeaseRecord struct {
	AtMillis, EndMillis, Units int64
}

// LeaseRecords returns a token bucket's or a GCRA's lease records in
// stored order (none for a value without them). It checks the encoding
// as Decode does.
func (st State) LeaseRecords() ([]LeaseRecord, error) {
	f, err := st.Decode()
	if err != nil {
		return nil, err
	}
	n := int(f[FieldLeases])
	out := make([]LeaseRecord, n)
	pos := st.packedLen() + 1
	be := func(b []byte) int64 {
		var v uint64
		for _, x := range b {
			v = v<<8 | uint64(x)
		}
		return int64(v)
	}
	for i := range out {
		out[i] = LeaseRecord{AtMillis: be(st[pos : pos+6]), EndMillis: be(st[pos+6 : pos+12]), Units: be(st[pos+12 : pos+LeaseRecordBytes])}
		pos += LeaseRecordBytes
	}
	return out, nil
}

// LogEntries returns a sliding-log state's entries, oldest first. It
// checks the encoding as Decode does.
func (st State) LogEntries() ([]LogEntry, error) {
	f, err := st.Decode()
	if err != nil {
		return nil, err
	}
	if m := modelOf(ratelimit.Algorithm(f[FieldAlgorithm])); m == nil || !m.logEntries {
		return nil, fmt.Errorf("state: algorithm %v has no log entries", ratelimit.Algorithm(f[FieldAlgorithm]))
	}
	return st.logEntries(f[FieldEntries]), nil
}

// logEntries unpacks n entries after the sliding log's header; st must
// hold them (Decode checked its length).
func (st State) logEntries(n int64) []LogEntry {
	out := make([]LogEntry, n)
	pos := FixedStateBytes(ratelimit.AlgorithmSlidingLog)
	for i := range out {
		var at uint64
		for _, b := range st[pos : pos+6] {
			at = at<<8 | uint64(b)
		}
		out[i] = LogEntry{AtMillis: int64(at), Cost: int64(st[pos+6])<<8 | int64(st[pos+7])}
		pos += LogEntryBytes
	}
	return out
}

// encodeLog packs a sliding-log state: the header (l, the entries' cost
// sum, their count), the entries and the revision. Each value is
// truncated to its width.
func encodeLog(rev, last int64, entries []LogEntry) State {
	var sum int64
	for _, e := range entries {
		sum += e.Cost
	}
	return encodeLogRaw(rev, last, sum, int64(len(entries)), entries)
}

// encodeLogRaw is encodeLog with the header's sum and count given (tests
// encode inconsistent headers this way).
func encodeLogRaw(rev, last, sum, n int64, entries []LogEntry) State {
	return encodeLogOf(ratelimit.AlgorithmSlidingLog, rev, last, sum, n, entries)
}

// encodeLogOf packs the state of alg, an algorithm with log entries (the
// sliding log, a concurrency limit's holds).
func encodeLogOf(alg ratelimit.Algorithm, rev, last, sum, n int64, entries []LogEntry) State {
	st := encodeState(alg, SchemaVersion, int64(alg), rev, last, sum, n)
	rs := strconv.FormatInt(rev, 10)
	st = st[:len(st)-len(rs)]
	for _, e := range entries {
		at := uint64(e.AtMillis)
		st = append(st, byte(at>>40), byte(at>>32), byte(at>>24), byte(at>>16), byte(at>>8), byte(at), byte(e.Cost>>8), byte(e.Cost))
	}
	return append(st, rs...)
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
// stateLayout order, GCRA's and the leaky bucket's d in its arrivalWidth
// with l's field carrying it. Each field is truncated to its width and the
// header to four bits each (tests encode out-of-range values this way).
func encodeState(a ratelimit.Algorithm, values ...int64) State {
	lay := stateLayout(a)
	rev := strconv.FormatInt(values[2], 10)
	st := make(State, 0, FixedStateBytes(a)+len(rev))
	st = append(st, byte((values[0]&15)<<4|values[1]&15))
	var w int // d's width, when l's field carries it
	if compactArrival(a) {
		w = arrivalWidth(uint64(values[4]))
	}
	for i, fl := range lay {
		v, width := uint64(values[3+i]), fl.width
		switch {
		case w > 0 && i == 0:
			v += uint64(maxArrivalWidth-w) << arrivalCodeShift
		case w > 0:
			width = w
		}
		for sh := (width - 1) * 8; sh >= 0; sh -= 8 {
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
