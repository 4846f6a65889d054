package redisrate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestServiceDedup: through the provider on a real server, per algorithm:
// a repeated evaluation ID is answered the recorded decision, free, up to
// the policy's DedupMaxReplays (3 here) times, and a further reuse is
// charged like a new request; the same ID with another cost or on another policy is
// Incompatible{dedup_conflict}; a request without an ID is charged as
// usual; Start loaded the dedup programs; the dedup hash has a TTL no
// longer than the window.
func TestServiceDedup(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	keys := randomKeys(t)
	var pols []ratelimit.Policy
	const maxReplays = 3
	for _, p := range conformancePolicies(t, 1) {
		if spec, _ := p.Algorithm().Spec(); spec.NoDedup != "" {
			continue // a queue, a concurrency limit: no dedup window (ADR 0028, 0041)
		}
		q, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: p.ID() + "-dd", Revision: 1, Algorithm: p.Algorithm(), Params: p.Params(),
			MaxCost: p.MaxCost(), CleanupGrace: p.CleanupGrace(), MaxClockRegression: p.MaxClockRegression(),
			FailurePolicy: ratelimit.FailClosed, DedupWindow: time.Minute, DedupMaxReplays: new(int64(maxReplays))})
		require.NoError(t, err)
		pols = append(pols, q)
	}
	p := serviceProvider(t, srv, keys, pols, nil)
	for _, pol := range pols {
		b, err := programs.ForPolicy(pol)
		require.NoError(t, err)
		require.True(t, b.HasDedup)
		prog := b.Dedup // bound to the policy (ADR 0035)
		exists, err := admin.ScriptExists(redistest.AdminCtx(t), prog.SHA1).Result()
		require.NoError(t, err)
		assert.Equal(t, []bool{true}, exists, "Start loaded %s", prog.Name)
	}
	evaluate := func(id ratelimit.PolicyID, subject ratelimit.SubjectDigest, cost int64, eid ratelimit.EvaluationID) ratelimit.Outcome {
		return p.Evaluate(context.Background(), ratelimit.Request{PolicyID: id, SubjectDigest: subject, Cost: cost, EvaluationID: eid, Deadline: time.Now().Add(30 * time.Second)})
	}
	for i, pol := range pols {
		other := pols[(i+1)%len(pols)]
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			subject := randomSubject(t)
			first := evaluate(pol.ID(), subject, 1, "e-1")
			require.True(t, ratelimit.Admitted(first), "%v", first)
			d1 := first.(ratelimit.Evaluated).Decision
			assert.False(t, d1.Replayed)
			for range maxReplays {
				again := evaluate(pol.ID(), subject, 1, "e-1")
				require.True(t, ratelimit.Admitted(again), "%v", again)
				d := again.(ratelimit.Evaluated).Decision
				assert.True(t, d.Replayed)
				assert.Equal(t, d1.Remaining, d.Remaining, "the recorded decision")
				assert.Equal(t, d1.ServerNow, d.ServerNow)
			}
			for name, out := range map[string]ratelimit.Outcome{
				"another cost":   evaluate(pol.ID(), subject, 2, "e-1"),
				"another policy": evaluate(other.ID(), subject, 1, "e-1"),
			} {
				assert.Equal(t, ratelimit.CategoryDedupConflict, ratelimit.CategoryOf(out), "%s: %v", name, out)
			}
			// The replays are spent: the next reuse is charged.
			spent := evaluate(pol.ID(), subject, 1, "e-1")
			require.True(t, ratelimit.Admitted(spent), "%v", spent)
			assert.False(t, spent.(ratelimit.Evaluated).Decision.Replayed, "spent: charged")
			// Charged twice (the first use and the spent reuse): the next
			// plain request sees two units used.
			next := evaluate(pol.ID(), subject, 1, "")
			require.True(t, ratelimit.Admitted(next), "%v", next)
			if dn := next.(ratelimit.Evaluated).Decision; pol.Algorithm() == ratelimit.AlgorithmFixedWindow && !dn.ResetAt.Equal(d1.ResetAt) {
				// The hour window rolled over between the calls: the new
				// window counts this request and, if it came after the
				// boundary, the spent reuse.
				assert.Contains(t, []int64{dn.Limit - 1, dn.Limit - 2}, dn.Remaining, "a window rolled over: only its own uses count")
			} else {
				assert.Equal(t, d1.Remaining-2, dn.Remaining)
			}
			dk, err := DedupKey(keys, subject)
			require.NoError(t, err)
			ttl, err := admin.PTTL(redistest.AdminCtx(t), dk).Result()
			require.NoError(t, err)
			assert.True(t, ttl > 0 && ttl <= time.Minute, "dedup hash TTL %v", ttl)
		})
	}
}
