package programs

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestForPolicyBundle: one call gives a policy's programs; decide, charge,
// refund and (for a policy with a dedup window) dedup are bound, named as
// the generic programs, with the bound ARGV counts; a changed parameter
// changes every bound digest.
func TestForPolicyBundle(t *testing.T) {
	for _, a := range algorithms {
		p := smallPolicy(t, a, time.Second)
		b, err := ForPolicy(p)
		require.NoError(t, err)
		dec, charge, refund := mustProgram(t, a), mustCharge(t, a), mustRefund(t, a)
		require.Equal(t, dec.Name, b.Decide.Name)
		require.Equal(t, charge.Name, b.Charge.Name)
		require.Equal(t, refund.Name, b.Refund.Name)
		require.Equal(t, ArgCountBound+ArgCountRefund, b.Refund.ArgCount)
		require.Equal(t, sha1Hex(b.Refund.Source), b.Refund.SHA1)
		require.NotEqual(t, refund.SHA1, b.Refund.SHA1, "the refund program is bound")
		require.Equal(t, ArgCountBound, b.Decide.ArgCount)
		require.Equal(t, ArgCountBound, b.Charge.ArgCount)
		require.Equal(t, sha1Hex(b.Decide.Source), b.Decide.SHA1)
		require.Equal(t, sha1Hex(b.Charge.Source), b.Charge.SHA1)
		require.False(t, b.HasDedup, "no dedup window")
		require.Equal(t, []Program{b.Decide, b.Charge, b.Refund}, b.Programs())
		other, err := ForPolicy(smallPolicy(t, a, 2*time.Second))
		require.NoError(t, err)
		require.NotEqual(t, b.Decide.SHA1, other.Decide.SHA1)
		require.NotEqual(t, b.Charge.SHA1, other.Charge.SHA1)
		require.NotEqual(t, b.Refund.SHA1, other.Refund.SHA1)
		dedup, ok := DedupFor(a)
		if !ok {
			continue // a queue takes no dedup window (ADR 0028)
		}
		b, err = ForPolicy(withDedupReplays(t, p, time.Minute, "", 0, 1))
		require.NoError(t, err)
		require.True(t, b.HasDedup)
		require.Equal(t, dedup.Name, b.Dedup.Name)
		require.Equal(t, ArgCountBound+ArgCountDedup, b.Dedup.ArgCount)
		require.Equal(t, NumKeysDedup, b.Dedup.NumKeys)
		require.Equal(t, []Program{b.Decide, b.Charge, b.Dedup, b.Refund}, b.Programs())
		other, err = ForPolicy(withDedupReplays(t, p, time.Minute, "", 0, 2))
		require.NoError(t, err)
		require.Equal(t, b.Dedup.SHA1, other.Dedup.SHA1, "max replays travel in ARGV")
	}
}

// TestBoundChargeMatchesGeneric runs seeded sequences of decisions and
// charges on every algorithm through the generic programs on one key and
// the policy's bound programs (ForPolicy) on a twin key: every reply, the
// stored value and the TTL are the same (ADR 0035: same state, same
// answers), and the bound decision and charge refuse a cost above the
// limit, the generic ARGV and another revision, writing nothing.
func TestBoundChargeMatchesGeneric(t *testing.T) {
	for _, a := range algorithms {
		p := smallPolicy(t, a, time.Second)
		t.Run(a.String(), func(t *testing.T) {
			t.Parallel()
			m := newMini(t)
			b, err := ForPolicy(p)
			require.NoError(t, err)
			dec, charge := mustProgram(t, a), mustCharge(t, a)
			rng := rand.New(rand.NewPCG(20261207, uint64(a)))
			now := int64(1_764_000_000_000)
			for step := range 200 {
				now += rng.Int64N(400)
				cost := 1 + rng.Int64N(p.Limit())
				generic, bound := dec, b.Decide
				if rng.IntN(2) == 0 {
					generic, bound = charge, b.Charge
				}
				where := fmt.Sprintf("step %d %s at %d cost %d", step, generic.Name, now, cost)
				want, err := m.run(generic, now, "k", Args(p, cost)...)
				require.NoError(t, err, where)
				got, err := m.run(bound, now, "k:bound", BoundArgs(p, cost)...)
				require.NoError(t, err, where)
				require.Equal(t, want, got, where)
				require.Equal(t, getState(t, m.c, "k"), getState(t, m.c, "k:bound"), where)
				require.Equal(t, m.srv.TTL("k"), m.srv.TTL("k:bound"), where)
			}
			for _, prog := range []Program{b.Decide, b.Charge} {
				v, err := m.run(prog, now, "k:bound", BoundArgs(p, p.Limit()+1)...)
				require.NoError(t, err)
				require.Equal(t, int64(StatusInvalid), v[0], prog.Name)
				v, err = m.run(prog, now, "k:bound", Args(p, 1)...)
				require.NoError(t, err)
				require.Equal(t, int64(StatusInvalid), v[0], "%s given the generic ARGV", prog.Name)
				v, err = m.run(prog, now, "k:bound", withArg(BoundArgs(p, 1), ArgRevision, p.Revision()+1)...)
				require.NoError(t, err)
				require.Equal(t, int64(StatusInvalid), v[0], "%s given another revision", prog.Name)
			}
			require.Equal(t, getState(t, m.c, "k"), getState(t, m.c, "k:bound"), "the refused calls wrote nothing")
		})
	}
}
