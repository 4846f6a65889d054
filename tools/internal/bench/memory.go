package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// memoryLimiters are measured for Redis memory per subject. The bare calls
// store exactly what the provider stores, so they are not repeated; the
// trivial script's INCR key with a TTL is the cost of a key name alone.
var memoryLimiters = []string{
	providerName("fixed_window"), providerName("sliding_window_counter"), providerName("token_bucket"), gcraName,
	FamilyRedisRate, FamilyUlule, FamilyTrivial,
}

// abuseLimiters are measured by the memory-under-abuse phase: algorithms
// whose state could grow with the requests a subject sends (a log).
var abuseLimiters = []string{slidingLogName}

// memoryPhase measures used_memory growth over MemorySubjects subjects,
// each limiter after a FLUSHALL of the private server.
func memoryPhase(ctx context.Context, cfg Config, srv *Server, set *limiterSet) ([]Memory, error) {
	cfg.logf("== Redis memory per subject (%d subjects each, after FLUSHALL)", cfg.MemorySubjects)
	var out []Memory
	for _, name := range memoryLimiters {
		lim := set.byName[name]
		if lim == nil || lim.memOp == nil {
			return nil, fmt.Errorf("bench: no memory-phase limiter %q", name)
		}
		if err := srv.Flush(ctx); err != nil {
			return nil, err
		}
		before, err := usedMemorySettled(ctx, srv)
		if err != nil {
			return nil, err
		}
		var next atomic.Int64
		next.Store(-1)
		err = parallel(16, int64(cfg.MemorySubjects), func(int) error {
			return lim.memOp(ctx, int(next.Add(1)))
		})
		if err != nil {
			return nil, fmt.Errorf("bench: memory %s: %w", name, err)
		}
		after, err := usedMemorySettled(ctx, srv)
		if err != nil {
			return nil, err
		}
		m := Memory{Limiter: name, Subjects: cfg.MemorySubjects, UsedBefore: before, UsedAfter: after,
			BytesPerSubject: float64(after-before) / float64(cfg.MemorySubjects)}
		if m.Keys, err = srv.Admin.DBSize(ctx).Result(); err != nil {
			return nil, fmt.Errorf("bench: DBSIZE: %w", err)
		}
		if m.Keys != int64(cfg.MemorySubjects) {
			return nil, fmt.Errorf("bench: memory %s: %d keys for %d subjects: a limiter must keep one key per subject", name, m.Keys, cfg.MemorySubjects)
		}
		key, err := srv.Admin.RandomKey(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("bench: RANDOMKEY: %w", err)
		}
		m.SampleKeyLen = len(key)
		if m.SampleUsage, err = srv.Admin.MemoryUsage(ctx, key, 0).Result(); err != nil {
			return nil, fmt.Errorf("bench: MEMORY USAGE: %w", err)
		}
		if m.SampleEncoding, err = srv.Admin.ObjectEncoding(ctx, key).Result(); err != nil {
			return nil, fmt.Errorf("bench: OBJECT ENCODING: %w", err)
		}
		if m.SampleType, err = srv.Admin.Type(ctx, key).Result(); err != nil {
			return nil, fmt.Errorf("bench: TYPE: %w", err)
		}
		cfg.logf("   %-32s %7.1f B/subject  (key %d B, MEMORY USAGE %d B, %s %s)", name, m.BytesPerSubject, m.SampleKeyLen, m.SampleUsage, m.SampleType, m.SampleEncoding)
		out = append(out, m)
	}
	return out, srv.Flush(ctx)
}

// memoryAbusePhase measures, for each of abuseLimiters, used_memory growth
// per subject over AbuseSubjects subjects twice, each after a FLUSHALL:
// first every subject is sent exactly its limit (memLimit calls, every one
// admitted), then every subject is sent abuseFactor times its limit (the
// first memLimit admitted, the rest denied). A state bounded by the limit
// costs the same per subject both times. A limiter absent from the set
// (its algorithm not yet accepted by ratelimit.NewPolicy) is recorded as
// skipped.
func memoryAbusePhase(ctx context.Context, cfg Config, srv *Server, set *limiterSet) ([]MemoryAbuse, error) {
	cfg.logf("== Redis memory per subject under abuse (%d subjects, limit %d per hour, %dx the limit)", cfg.AbuseSubjects, memLimit, abuseFactor)
	var out []MemoryAbuse
	for _, name := range abuseLimiters {
		lim := set.byName[name]
		if lim == nil || lim.abuseOp == nil {
			out = append(out, MemoryAbuse{Limiter: name, Skipped: "ratelimit.NewPolicy does not accept the algorithm yet"})
			cfg.logf("   %-32s skipped: not accepted by ratelimit.NewPolicy", name)
			continue
		}
		m := MemoryAbuse{Limiter: name, Subjects: cfg.AbuseSubjects, Limit: memLimit}
		var err error
		if m.Exact, err = abuseRound(ctx, srv, lim, cfg.AbuseSubjects, memLimit); err != nil {
			return nil, err
		}
		if m.Abused, err = abuseRound(ctx, srv, lim, cfg.AbuseSubjects, abuseFactor*memLimit); err != nil {
			return nil, err
		}
		m.GrowthPercent = growthPercent(m.Exact.UsageBytesPerSubject, m.Abused.UsageBytesPerSubject)
		m.UsedGrowthPercent = growthPercent(m.Exact.BytesPerSubject, m.Abused.BytesPerSubject)
		cfg.logf("   %-32s %dx%d calls: %7.1f B/subject MEMORY USAGE, %7.1f used_memory; %dx%d calls: %7.1f, %7.1f (%+.2f%%, %+.2f%%)",
			name, m.Subjects, m.Exact.CallsPerSubject, m.Exact.UsageBytesPerSubject, m.Exact.BytesPerSubject,
			m.Subjects, m.Abused.CallsPerSubject, m.Abused.UsageBytesPerSubject, m.Abused.BytesPerSubject, m.GrowthPercent, m.UsedGrowthPercent)
		out = append(out, m)
	}
	return out, srv.Flush(ctx)
}

// growthPercent is 100 * (b - a) / a, 0 when a is not positive.
func growthPercent(a, b float64) float64 {
	if a <= 0 {
		return 0
	}
	return 100 * (b - a) / a
}

// abuseRound flushes the server, sends calls calls for each of n subjects
// (interleaved over the subjects, 16 workers) and measures used_memory
// growth per subject and the mean MEMORY USAGE of the n keys. Every subject must end with exactly memLimit
// admitted calls: a limiter that admits more or fewer is not the exact
// limiter the phase is for.
func abuseRound(ctx context.Context, srv *Server, lim *limiter, n int, calls int64) (AbuseRound, error) {
	if err := srv.Flush(ctx); err != nil {
		return AbuseRound{}, err
	}
	before, err := usedMemorySettled(ctx, srv)
	if err != nil {
		return AbuseRound{}, err
	}
	admitted := make([]atomic.Int64, n)
	var next atomic.Int64
	next.Store(-1)
	err = parallel(16, int64(n)*calls, func(int) error {
		i := int(next.Add(1) % int64(n))
		ok, err := lim.abuseOp(ctx, i)
		if ok {
			admitted[i].Add(1)
		}
		return err
	})
	if err != nil {
		return AbuseRound{}, fmt.Errorf("bench: memory under abuse %s: %w", lim.Name, err)
	}
	after, err := usedMemorySettled(ctx, srv)
	if err != nil {
		return AbuseRound{}, err
	}
	r := AbuseRound{CallsPerSubject: calls, UsedBefore: before, UsedAfter: after, BytesPerSubject: float64(after-before) / float64(n)}
	for i := range admitted {
		a := admitted[i].Load()
		if a != memLimit {
			return AbuseRound{}, fmt.Errorf("bench: memory under abuse %s: subject %d admitted %d of %d calls, want %d", lim.Name, i, a, calls, memLimit)
		}
		r.Admitted += a
	}
	r.Denied = int64(n)*calls - r.Admitted
	if r.Keys, err = srv.Admin.DBSize(ctx).Result(); err != nil {
		return AbuseRound{}, fmt.Errorf("bench: DBSIZE: %w", err)
	}
	if r.Keys != int64(n) {
		return AbuseRound{}, fmt.Errorf("bench: memory under abuse %s: %d keys for %d subjects", lim.Name, r.Keys, n)
	}
	// The keys' own bytes: MEMORY USAGE (SAMPLES 0) of every key, which
	// does not depend on anything but the keys (used_memory moves by tens
	// of KB with the server's own bookkeeping, a lot over 1,000 subjects).
	var usage int64
	var cursor uint64
	for range n + 1 { // SCAN returns at least one key per call until done
		keys, next, err := srv.Admin.Scan(ctx, cursor, "", 1000).Result()
		if err != nil {
			return AbuseRound{}, fmt.Errorf("bench: SCAN: %w", err)
		}
		for _, key := range keys {
			u, err := srv.Admin.MemoryUsage(ctx, key, 0).Result()
			if err != nil {
				return AbuseRound{}, fmt.Errorf("bench: MEMORY USAGE: %w", err)
			}
			usage += u
			r.SampleUsage = u
			if r.SampleEncoding == "" {
				if r.SampleEncoding, err = srv.Admin.ObjectEncoding(ctx, key).Result(); err != nil {
					return AbuseRound{}, fmt.Errorf("bench: OBJECT ENCODING: %w", err)
				}
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if cursor != 0 {
		return AbuseRound{}, fmt.Errorf("bench: memory under abuse %s: SCAN did not finish over %d keys", lim.Name, n)
	}
	r.UsageBytesPerSubject = float64(usage) / float64(n)
	return r, nil
}

// Settling of used_memory readings: INFO's mem_clients_normal follows the
// connections' buffers with a delay (a reading right after a burst of
// calls was seen off by 300 KB, 3 B per subject over 100,000 subjects), so
// a reading is taken once two consecutive ones, settleEvery apart, agree.
const (
	settleEvery = 250 * time.Millisecond
	settleReads = 24 // at most 6 s
)

// usedMemorySettled is usedMemory once two consecutive readings agree, or
// an error after settleReads readings that never did.
func usedMemorySettled(ctx context.Context, srv *Server) (int64, error) {
	prev, err := usedMemory(ctx, srv)
	if err != nil {
		return 0, err
	}
	for range settleReads {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("bench: used_memory: %w", ctx.Err())
		case <-time.After(settleEvery):
		}
		cur, err := usedMemory(ctx, srv)
		if err != nil {
			return 0, err
		}
		if cur == prev {
			return cur, nil
		}
		prev = cur
	}
	return 0, fmt.Errorf("bench: used_memory did not settle: %d readings %v apart all differed", settleReads+1, settleEvery)
}

// usedMemory is INFO used_memory minus mem_clients_normal: the connections'
// query and output buffers grow and shrink with traffic and are not state.
func usedMemory(ctx context.Context, srv *Server) (int64, error) {
	info, err := srv.Info(ctx, "memory")
	if err != nil {
		return 0, err
	}
	used, err := infoFloat(info, "used_memory")
	if err != nil {
		return 0, err
	}
	clients, err := infoFloat(info, "mem_clients_normal")
	if err != nil {
		return 0, err
	}
	return int64(used - clients), nil
}
