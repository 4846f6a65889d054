package programs

import (
	"maps"
	"sort"
	"strconv"
	"strings"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The statuses only the dedup programs (rate-<algorithm>-dedup-v2) answer.
const (
	// StatusReplayed: the evaluation ID was recorded, within the dedup
	// window, for an ALLOWED reply of the same policy, revision and cost,
	// and had been replayed fewer than the policy's DedupMaxReplays times;
	// the reply is that recorded one (its serverNow, effectiveNow,
	// remaining and resetAt; retryAfter 0), and only the record's replay
	// count was written.
	StatusReplayed Status = 6
	// StatusDedupConflict: the evaluation ID was recorded, within the
	// window, for another policy, revision or cost; serverNow, the rest 0,
	// nothing written.
	StatusDedupConflict Status = 7
)

// Dedup program constants.
const (
	// DedupMaxEntries is the per-subject cap on dedup records: a subject's
	// dedup hash never holds more. Recording into a full hash first drops
	// every expired record, and when none has expired the one expiring
	// first (ties: the smallest ID). docs/degraded-mode.md has the memory
	// arithmetic.
	DedupMaxEntries = 64
	// DedupMaxWindowMillis is ratelimit.MaxDedupWindow in ms; the programs
	// answer StatusInvalid above it.
	DedupMaxWindowMillis = int64(ratelimit.MaxDedupWindow / 1e6)
	// dedupMaxCap is the largest maxEntries argument the programs accept.
	dedupMaxCap = 1024
)

// Positions of the dedup arguments after the decision program's ARGV: the
// dedup programs take the decision program's ARGV followed by these five.
const (
	// ArgDedupID is the evaluation ID ([A-Za-z0-9._-]{1,64}).
	ArgDedupID = iota
	// ArgDedupPolicy is the policy ID, recorded with the reply.
	ArgDedupPolicy
	// ArgDedupWindow is the dedup window in ms (1..DedupMaxWindowMillis).
	ArgDedupWindow
	// ArgDedupMaxReplays is the policy's DedupMaxReplays
	// (0..ratelimit.MaxDedupMaxReplays): how many repeats of a recorded ID
	// are answered as replays.
	ArgDedupMaxReplays
	// ArgDedupMaxEntries is the per-subject cap (DedupMaxEntries).
	ArgDedupMaxEntries
	// ArgCountDedup is the number of dedup arguments.
	ArgCountDedup
)

// NumKeysDedup is the KEYS count of the dedup programs: the state hash and
// the subject's dedup hash (same slot tag).
const NumKeysDedup = 2

// DedupArgs returns the ArgCountDedup ARGV entries a dedup program takes
// after Args(p, cost), in ArgDedupID order.
func DedupArgs(p ratelimit.Policy, id ratelimit.EvaluationID) []any {
	return []any{string(id), string(p.ID()), p.DedupWindow().Milliseconds(), p.DedupMaxReplays(), int64(DedupMaxEntries)}
}

// Dedup is the content of one subject's dedup hash exactly as HGETALL
// returns it: evaluation ID to record. A nil or empty Dedup is an absent
// key. A record is "<policy> <revision> <cost> <expiresAt> <serverNow>
// <effectiveNow> <remaining> <resetAt> <replays>": the policy ID and eight
// canonical decimal integers, one space apart. A record without <replays>
// (written by the v1 programs) reads as replays 0.
type Dedup map[string]string

// dedupRecord is one parsed record.
type dedupRecord struct {
	policy                     string
	revision, cost, expires    int64
	serverNow, eff, rem, reset int64
	replays                    int64
}

func (d dedupRecord) String() string {
	return d.policy + " " + strings.Join([]string{
		strconv.FormatInt(d.revision, 10), strconv.FormatInt(d.cost, 10), strconv.FormatInt(d.expires, 10),
		strconv.FormatInt(d.serverNow, 10), strconv.FormatInt(d.eff, 10), strconv.FormatInt(d.rem, 10),
		strconv.FormatInt(d.reset, 10), strconv.FormatInt(d.replays, 10),
	}, " ")
}

// parseDedupRecord mirrors the programs' record pattern: a policy of
// [a-z0-9._-]+ and seven canonical integers (int()), then a canonical
// replay count or nothing (a v1 record: replays 0).
func parseDedupRecord(s string) (dedupRecord, bool) {
	parts := strings.Split(s, " ")
	if (len(parts) != 8 && len(parts) != 9) || parts[0] == "" {
		return dedupRecord{}, false
	}
	var replays int64
	if len(parts) == 9 {
		n, ok := parseInt(parts[8])
		if !ok {
			return dedupRecord{}, false
		}
		replays = n
	}
	for i := 0; i < len(parts[0]); i++ {
		if c := parts[0][i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return dedupRecord{}, false
		}
	}
	var v [7]int64
	for i := range v {
		n, ok := parseInt(parts[i+1])
		if !ok {
			return dedupRecord{}, false
		}
		v[i] = n
	}
	return dedupRecord{parts[0], v[0], v[1], v[2], v[3], v[4], v[5], v[6], replays}, true
}

// recordExpiry is what the programs' eviction reads of a record: its
// expiresAt, or ok false when the record does not parse.
func recordExpiry(s string) (int64, bool) {
	r, ok := parseDedupRecord(s)
	return r.expires, ok
}

// validDedupID mirrors the programs' check of the evaluation ID argument.
func validDedupID(id string) bool {
	return ratelimit.EvaluationID(id).Validate() == nil
}

// EvaluateDedup is the reference model of the dedup programs: what
// rate-<algorithm>-dedup-v2 answers, and the state and dedup hash it leaves,
// for one request of the given cost carrying evaluation ID id, when the
// subject's state hash holds st, its dedup hash holds d and the server's
// TIME reads serverNowMillis. The returned maps are st and d themselves
// when nothing was written. A dedup hash write sets the hash's TTL to at
// least the policy's dedup window (DedupTTLMillis).
//
// In order: the decision program's argument check (StatusInvalid), a
// server time past MaxServerMillis (StatusClockUnsafe), the dedup
// arguments (StatusInvalid: no dedup window, an ID outside
// [A-Za-z0-9._-]{1,64}), the ID's record: malformed
// (StatusStateIncompatible), unexpired with another policy, revision or
// cost (StatusDedupConflict), unexpired with fewer than p.DedupMaxReplays()
// replays (StatusReplayed, the record's replay count raised by one); then
// exactly Evaluate, and on StatusAllowed of an ID without an unexpired
// record the record is written (expiresAt = serverNow + window, replays 0)
// after making room when the hash holds DedupMaxEntries records and this
// ID is not among them. An unexpired record whose replays are spent is
// left as it is: the request is charged like one without an ID.
func EvaluateDedup(p ratelimit.Policy, st State, d Dedup, serverNowMillis, cost int64, id string) (Reply, State, Dedup) {
	return evaluateDedup(p, st, d, serverNowMillis, cost, id, DedupMaxEntries)
}

// evaluateDedup is EvaluateDedup with the per-subject cap as a parameter
// (the programs take it as an argument; tests use small caps).
func evaluateDedup(p ratelimit.Policy, st State, d Dedup, serverNowMillis, cost int64, id string, maxEntries int) (Reply, State, Dedup) {
	now := serverNowMillis
	future := now < 0 || now > ratelimit.MaxServerMillis
	if p.IsZero() || cost < 1 || cost > p.Limit() || future {
		r, _ := Evaluate(p, st, now, cost)
		return r, st, d
	}
	window := p.DedupWindow().Milliseconds()
	maxReplays := p.DedupMaxReplays()
	if window < 1 || window > DedupMaxWindowMillis || !validDedupID(id) || maxEntries < 1 || maxEntries > dedupMaxCap ||
		maxReplays < 0 || maxReplays > ratelimit.MaxDedupMaxReplays {
		return fail(StatusInvalid, now), st, d
	}
	raw, seen := d[id]
	if seen {
		rec, ok := parseDedupRecord(raw)
		if !ok {
			return fail(StatusStateIncompatible, now), st, d
		}
		if rec.expires > now {
			if rec.policy != string(p.ID()) || rec.revision != p.Revision() || rec.cost != cost {
				return fail(StatusDedupConflict, now), st, d
			}
			if rec.replays >= maxReplays {
				// Spent: charged like a request without an ID.
				r, next := Evaluate(p, st, now, cost)
				return r, next, d
			}
			nd := maps.Clone(d)
			rec.replays++
			nd[id] = rec.String()
			return Reply{StatusReplayed, rec.serverNow, rec.eff, p.Limit(), rec.rem, 0, rec.reset}, st, nd
		}
	}
	r, next := Evaluate(p, st, now, cost)
	if r.Status != StatusAllowed {
		return r, next, d
	}
	nd := make(Dedup, len(d)+1)
	for k, v := range d {
		nd[k] = v
	}
	if !seen && len(nd) >= maxEntries {
		makeRoom(nd, now)
	}
	nd[id] = dedupRecord{string(p.ID()), p.Revision(), cost, now + window,
		r.ServerNowMillis, r.EffectiveNowMillis, r.Remaining, r.ResetAtMillis, 0}.String()
	return r, next, nd
}

// makeRoom drops every expired or unparsable record of d; when there is
// none, the record expiring first (ties: the smallest ID).
func makeRoom(d Dedup, now int64) {
	ids := make([]string, 0, len(d))
	for k := range d {
		ids = append(ids, k)
	}
	sort.Strings(ids)
	freed := false
	oldest, oldestExp := "", int64(-1)
	for _, k := range ids {
		e, ok := recordExpiry(d[k])
		if !ok || e <= now {
			delete(d, k)
			freed = true
			continue
		}
		if oldestExp < 0 || e < oldestExp { // ids are sorted: a tie keeps the smaller
			oldest, oldestExp = k, e
		}
	}
	if !freed {
		delete(d, oldest)
	}
}

// DedupTTLMillis is the least TTL a dedup program leaves on the dedup hash
// after recording under p: the dedup window (it raises a shorter TTL and
// keeps a longer one, which another policy's longer window set).
func DedupTTLMillis(p ratelimit.Policy) int64 { return p.DedupWindow().Milliseconds() }
