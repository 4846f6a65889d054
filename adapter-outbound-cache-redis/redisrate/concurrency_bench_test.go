package redisrate

import (
	"context"
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// BenchmarkConcurrencyAcquireRelease is what a concurrency limit costs a
// request (issue 37 item 5, ADR 0041): its slot taken (one decision) and
// given back (one refund by the receipt), against one decision of a fixed
// window (BenchmarkEvaluate) on the same kind of server and client. Run
// both side by side: go test -run '^$' -bench 'BenchmarkEvaluate$|AcquireRelease' ./redisrate/
func BenchmarkConcurrencyAcquireRelease(b *testing.B) {
	srv := redistest.Start(b)
	pol := mustPolicy(b, ratelimit.PolicySpec{ID: "slots", Params: ratelimit.Concurrency{Limit: 100, MaxHold: 30 * time.Second}})
	p := serviceProvider(b, srv, randomKeys(b), []ratelimit.Policy{pol}, nil)
	req := ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: randomSubject(b), Cost: 1, Deadline: time.Now().Add(time.Hour)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		out := p.Evaluate(ctx, req)
		ev, ok := out.(ratelimit.Evaluated)
		if !ok || !ev.Decision.Allowed {
			b.Fatalf("slot not taken: %v", out)
		}
		back := p.Refund(ctx, req, ev.Decision.Receipt)
		if bv, ok := back.(ratelimit.Evaluated); !ok || bv.Decision.Refunded != 1 {
			b.Fatalf("slot not given back: %v", back)
		}
	}
}
