package programs

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// TestChargeProgramsInManifest: one reconciliation program per algorithm,
// in the manifest, with the decision program's argument count, and not
// among the decision programs.
func TestChargeProgramsInManifest(t *testing.T) {
	require.NoError(t, Verify())
	charges := Charges()
	require.Len(t, charges, len(algorithms))
	for _, alg := range algorithms {
		ch, ok := ChargeFor(alg)
		require.True(t, ok)
		dec, ok := ForAlgorithm(alg)
		require.True(t, ok)
		assert.NotEqual(t, dec.SHA1, ch.SHA1)
		assert.Equal(t, dec.ArgCount, ch.ArgCount)
		assert.Contains(t, ch.Name, "-charge-v1")
		assert.True(t, len(ch.Source) > 6 && ch.Source[:6] == "#!lua\n")
	}
	assert.Len(t, All(), len(algorithms), "decision programs only")
}

// TestChargeModelNeverDeniesAndSaturates: on every algorithm, charging any
// units from any reachable state answers charged, never more than the
// limit consumed, and a following decision of cost 1 is denied once the
// charge saturated.
func TestChargeModelNeverDeniesAndSaturates(t *testing.T) {
	for name, p := range differentialPolicies(t) {
		now := int64(1_700_000_000_000)
		for units := int64(1); units <= p.Limit(); units++ {
			var st State
			r, next := Evaluate(p, st, now, 1)
			require.Equal(t, StatusAllowed, r.Status)
			cr, cs := Charge(p, next, now, units)
			require.Equal(t, StatusAllowed, cr.Status, name)
			require.Zero(t, cr.RetryAfterMillis)
			require.NoError(t, cr.Check(p), name)
			if units+1 >= p.Limit() {
				assert.Zero(t, cr.Remaining, "%s: saturated", name)
				d, _ := Evaluate(p, cs, now, 1)
				assert.Equal(t, StatusDenied, d.Status, "%s units %d", name, units)
			}
		}
		r, _ := Charge(p, nil, now, p.Limit()+1)
		assert.Equal(t, StatusInvalid, r.Status, "units above the limit")
		r, _ = Charge(p, nil, now, 0)
		assert.Equal(t, StatusInvalid, r.Status)
	}
}

// TestRedisChargeProgramsMatchModel is the charge programs' differential
// test on the real server: seeded random sequences of decisions (the
// decision program) and charges (the charge program, EVAL of the exact
// source) on one key, with random sleeps across the short windows; every
// charge reply, the stored state after it and its TTL equal the model's.
func TestRedisChargeProgramsMatchModel(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	for name, p := range differentialPolicies(t) {
		t.Run(name, func(t *testing.T) {
			ctx := redisCtx(t)
			prog := mustProgram(t, p.Algorithm())
			ch, ok := ChargeFor(p.Algorithm())
			require.True(t, ok)
			rng := rand.New(rand.NewPCG(20261203, uint64(len(name))))
			key := "charge:" + name
			var st State
			charged := 0
			for step := range 50 {
				time.Sleep(time.Duration(rng.Int64N(10)) * time.Millisecond)
				if rng.IntN(2) == 0 {
					cost := 1 + rng.Int64N(p.MaxCost())
					got, stored, _ := evalTx(t, ctx, c, prog, false, key, Args(p, cost)...)
					want, next := Evaluate(p, st, got.ServerNowMillis, cost)
					require.Equal(t, want, got, "step %d decision", step)
					st = next
					require.Equal(t, st, stored, "step %d", step)
					continue
				}
				units := 1 + rng.Int64N(p.Limit())
				got, stored, after := evalTx(t, ctx, c, ch, false, key, Args(p, units)...)
				require.NoError(t, got.Check(p), "step %d: %+v", step, got)
				want, next := Charge(p, st, got.ServerNowMillis, units)
				require.Equal(t, want, got, "step %d charge %d state %v", step, units, st)
				require.Equal(t, StatusAllowed, got.Status)
				st = next
				require.Equal(t, st, stored, "step %d: stored hash after the charge", step)
				requireExpiryAt(t, after.expireAt, p, got)
				charged++
			}
			require.Positive(t, charged)
			// Invalid units are refused before anything is written.
			before := snap(t, ctx, c, key)
			got, _, after := evalTx(t, ctx, c, ch, false, key, Args(p, p.Limit()+1)...)
			assert.Equal(t, StatusInvalid, got.Status)
			assert.Equal(t, before, after)
		})
	}
}
