package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// nodeFor is the client that serves key: in cluster mode its slot's
// primary (so that TIME is that server's clock), otherwise c itself.
func nodeFor(ctx context.Context, c redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := c.(type) {
	case *redis.ClusterClient:
		n, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("primary of the key's slot: %w", err)
		}
		return n, nil
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("unexpected client %T", c)
}

// state is what Redis holds for a target.
type state struct {
	raw programs.State // the value GET returned; nil: no key
	ttl time.Duration  // < 0: no TTL (or no key)
	now time.Time      // server time
}

func read(ctx context.Context, c *redis.Client, tg target) (state, error) {
	var st state
	raw, err := c.Get(ctx, tg.key).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return st, fmt.Errorf("GET: %w", err)
	default:
		st.raw = programs.State(raw)
	}
	if st.ttl, err = c.PTTL(ctx, tg.key).Result(); err != nil {
		return st, fmt.Errorf("PTTL: %w", err)
	}
	if st.now, err = c.Time(ctx).Result(); err != nil {
		return st, fmt.Errorf("TIME: %w", err)
	}
	return st, nil
}

// printState prints the decoded state. Remaining and reset come from the
// reference model (programs.Evaluate) on the stored state at the server's
// time: what the program would answer now, without writing anything.
func printState(w io.Writer, tg target, st state) {
	p := tg.policy
	fmt.Fprintf(w, "policy      %s (revision %d, %s)\n", p.ID(), p.Revision(), p.Algorithm())
	fmt.Fprintf(w, "subject     %s %s\n", tg.kind, tg.shown)
	fmt.Fprintf(w, "key         %s\n", tg.key)
	if st.raw == nil {
		fmt.Fprintf(w, "state       absent (never limited, or expired): the full limit of %d is available\n", limitOf(p))
		return
	}
	fmt.Fprintf(w, "state       present\n")
	fields, err := st.raw.Decode()
	if err != nil {
		fmt.Fprintf(w, "stored      undecodable: %v\n", err)
	} else {
		fmt.Fprintf(w, "stored      algorithm=%s revision=%d schema=%d\n", algorithmName(fields[programs.FieldAlgorithm]), fields[programs.FieldRevision], fields[programs.FieldSchema])
	}
	// At the server's microsecond: GCRA decides on it (ADR 0021).
	r, _ := programs.EvaluateMicros(p, st.raw, st.now.UnixMicro(), 1)
	switch r.Status {
	case programs.StatusAllowed, programs.StatusDenied:
		remaining := r.Remaining
		if r.Status == programs.StatusAllowed {
			remaining++ // the probe took one unit
		}
		fmt.Fprintf(w, "remaining   %d of %d (consumed %d)\n", remaining, r.Limit, r.Limit-remaining)
		if r.Status == programs.StatusDenied {
			fmt.Fprintf(w, "retry after %v\n", time.Duration(r.RetryAfterMillis)*time.Millisecond)
		}
		reset := time.UnixMilli(r.ResetAtMillis).UTC()
		fmt.Fprintf(w, "reset at    %s (in %v)\n", reset.Format(time.RFC3339Nano), reset.Sub(st.now).Round(time.Millisecond))
	default:
		fmt.Fprintf(w, "decision    the program would answer status %d (%s): the stored state does not fit this policy revision\n", r.Status, statusName(r.Status))
	}
	if st.ttl >= 0 {
		fmt.Fprintf(w, "ttl         %v\n", st.ttl.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "ttl         none (every state key should have one)\n")
	}
	if err == nil {
		fmt.Fprintf(w, "fields      %s\n", formatFields(fields))
		if tat, ok := arrival(p, fields); ok {
			what := "GCRA theoretical arrival time"
			if alg, _ := p.Algorithm().Spec(); alg.Delays {
				what = "the queue's last slot ends"
			}
			fmt.Fprintf(w, "arrival     %s (%s, to the µs)\n", tat.UTC().Format(time.RFC3339Nano), what)
		}
		printLog(w, st)
	}
	fmt.Fprintf(w, "value       %d bytes %s\n", len(st.raw), bounded(hex.EncodeToString(st.raw)))
}

// auditInfo is who changed what where, for the audit line.
type auditInfo struct{ user, endpoint string }

// reset deletes the target's state with --yes, and otherwise says what it
// would delete. The audit line of a deletion goes to audit (stderr, and
// the --audit-log file). After a deletion it publishes the key on the
// denial cache's channel (ratedenial.Publish).
func reset(ctx context.Context, c *redis.Client, who auditInfo, tg target, st state, yes bool, stdout, audit io.Writer) error {
	what := fmt.Sprintf("state of %s %s under policy %s: key %s", tg.kind, tg.shown, tg.policy.ID(), tg.key)
	if st.raw == nil {
		fmt.Fprintf(stdout, "nothing to reset: no %s\n", what)
		return nil
	}
	if !yes {
		fmt.Fprintf(stdout, "would delete the %s (ttl %v); run again with --yes to delete it\n", what, st.ttl.Round(time.Millisecond))
		return nil
	}
	n, err := c.Del(ctx, tg.key).Result()
	if err != nil {
		return fmt.Errorf("DEL: %w", err)
	}
	fmt.Fprintf(stdout, "deleted the %s\n", what)
	writeAudit(audit, who, tg, n)
	// Every instance's denial cache drops its entry for this state
	// (ADR 0022); without it, an instance that cached a denial of this
	// subject keeps denying until that denial's retry-after has passed.
	receivers, err := ratedenial.Publish(ctx, c, tg.key)
	if err != nil {
		return fmt.Errorf("the state is deleted, but the invalidation was not published (instances that cached a denial of this subject keep denying for at most its retry-after; the ACL user needs &%s +publish, docs/operations.md): %w", ratedenial.Channel, err)
	}
	fmt.Fprintf(stdout, "invalidation published on %s: %d subscribed instance connection(s) received it\n", ratedenial.Channel, receivers)
	return nil
}

// arrival is a GCRA or leaky-bucket state's theoretical arrival time,
// l*1000 + d/R µs (rounded down to the µs), when the state holds the
// fields of p's algorithm and p is a GCRA or leaky-bucket policy (its
// reduced rate R is the unit of d; for a queue, the last slot's end).
func arrival(p ratelimit.Policy, f map[string]int64) (time.Time, bool) {
	rate, _, _, ok := p.Emission()
	if !ok || f[programs.FieldAlgorithm] != int64(p.Algorithm()) {
		return time.Time{}, false
	}
	return time.UnixMicro(f[programs.FieldLastObserved]*1000 + f[programs.FieldArrival]/rate), true
}

// printLog prints a sliding log's entries (ADR 0024): how many, their
// sum, and the oldest and newest admission with when each leaves the
// window; nothing for another algorithm's state.
func printLog(w io.Writer, st state) {
	entries, err := st.raw.LogEntries()
	if err != nil || len(entries) == 0 {
		return
	}
	var sum int64
	for _, e := range entries {
		sum += e.Cost
	}
	fmt.Fprintf(w, "log         %d entries, cost %d (%d bytes each)\n", len(entries), sum, programs.LogEntryBytes)
	for _, e := range []struct {
		name  string
		entry programs.LogEntry
	}{{"oldest", entries[0]}, {"newest", entries[len(entries)-1]}} {
		at := time.UnixMilli(e.entry.AtMillis).UTC()
		fmt.Fprintf(w, "%-11s %s cost %d (%v ago)\n", e.name, at.Format(time.RFC3339Nano), e.entry.Cost, st.now.Sub(at).Round(time.Millisecond))
	}
}

func limitOf(p ratelimit.Policy) int64 {
	r, _ := programs.Evaluate(p, nil, 1, 1)
	return r.Limit
}

func algorithmName(a int64) string {
	if alg := ratelimit.Algorithm(a); int64(alg) == a && alg.Valid() {
		return alg.String()
	}
	return fmt.Sprintf("unknown(%d)", a)
}

func statusName(s programs.Status) string {
	switch s {
	case programs.StatusClockUnsafe:
		return "clock unsafe"
	case programs.StatusStateIncompatible:
		return "state incompatible"
	case programs.StatusInvalid:
		return "invalid"
	}
	return "unknown"
}

func formatFields(f map[string]int64) string {
	names := make([]string, 0, len(f))
	for k := range f {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, k+"="+strconv.FormatInt(f[k], 10))
	}
	return strings.Join(parts, " ")
}
