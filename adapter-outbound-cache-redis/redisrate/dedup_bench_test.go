package redisrate

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// benchDedup evaluates on a fixed-window policy with a dedup window (a
// limit no run reaches). id returns the evaluation ID of call i ("" for
// none).
func benchDedup(b *testing.B, id func(i int) ratelimit.EvaluationID) {
	srv := redistest.Start(b)
	pol := mustPolicy(b, ratelimit.PolicySpec{ID: "bench", Params: ratelimit.FixedWindow{Limit: 1 << 40, Window: time.Hour}, MaxCost: 1, DedupWindow: 10 * time.Minute})
	p := serviceProvider(b, srv, randomKeys(b), []ratelimit.Policy{pol}, nil)
	req := ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: randomSubject(b), Cost: 1, Deadline: time.Now().Add(time.Hour)}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		req.EvaluationID = id(i)
		i++
		if !ratelimit.Admitted(p.Evaluate(context.Background(), req)) {
			b.Fatal("not admitted")
		}
	}
}

// BenchmarkEvaluateDedup compares, on one subject: no evaluation ID (the
// plain program), a new ID per call (a record per call; past 64 the hash is
// full and every call evicts: the worst case), and one ID repeated (every
// call a replay).
func BenchmarkEvaluateDedup(b *testing.B) {
	b.Run("no_id", func(b *testing.B) { benchDedup(b, func(int) ratelimit.EvaluationID { return "" }) })
	b.Run("new_id_full_hash", func(b *testing.B) {
		benchDedup(b, func(i int) ratelimit.EvaluationID { return ratelimit.EvaluationID("id-" + strconv.Itoa(i)) })
	})
	b.Run("replay", func(b *testing.B) { benchDedup(b, func(int) ratelimit.EvaluationID { return "same-id" }) })
}
