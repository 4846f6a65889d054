package programs

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestModelReproducesVectors runs every golden case through Evaluate, from an
// empty key, and compares every field of every step (docs/contract.md section 5).
func TestModelReproducesVectors(t *testing.T) {
	vf := loadVectors(t)
	steps := 0
	for _, vc := range vf.Cases {
		t.Run(vc.Name, func(t *testing.T) {
			p := vc.policy(t)
			var st State
			for i, step := range vc.Steps {
				where := fmt.Sprintf("step %d at %d cost %d", i, step.ServerNowMillis, step.Cost)
				r, next := Evaluate(p, st, step.ServerNowMillis, step.Cost)
				checkStep(t, where, step, r)
				require.NoError(t, r.Check(p), where)
				if r.Status != StatusAllowed {
					require.Equal(t, st, next, "%s: only an allowed request writes", where)
				}
				st = next
			}
		})
		steps += len(vc.Steps)
	}
	require.Equal(t, 3434, steps)
}

// TestProgramsReproduceVectors runs every golden case through the real Lua
// programs, embedded and bound to the case's policy (ADR 0030), on miniredis with the clock set by SetTime before each step, and
// compares every reply field and the stored hash with the model. Each case
// has its own miniredis, so cases run in parallel without sharing a clock.
func TestProgramsReproduceVectors(t *testing.T) {
	vf := loadVectors(t)
	for n, vc := range vf.Cases {
		t.Run(vc.Name, func(t *testing.T) {
			t.Parallel()
			m := newMini(t) // its own clock
			p := vc.policy(t)
			prog, bound := mustProgram(t, p.Algorithm()), mustBind(t, p)
			key := fmt.Sprintf("vector:%d", n)
			var st State
			for i, step := range vc.Steps {
				where := fmt.Sprintf("step %d at %d cost %d", i, step.ServerNowMillis, step.Cost)
				want, next := Evaluate(p, st, step.ServerNowMillis, step.Cost)
				st = next
				// The embedded program on key, the policy's bound program
				// (ADR 0030) on a twin key: both are the model.
				for _, run := range []struct {
					key  string
					prog Program
					args []any
				}{{key, prog, Args(p, step.Cost)}, {key + ":bound", bound, BoundArgs(p, step.Cost)}} {
					v, err := m.run(run.prog, step.ServerNowMillis, run.key, run.args...)
					require.NoError(t, err, where)
					got := toReply(t, v)
					checkStep(t, where, step, got)
					require.Equal(t, want, got, "%s: %s and model", where, run.key)
					require.Equal(t, st, getState(t, m.c, run.key), "%s: %s stored value", where, run.key)
					if got.Status == StatusAllowed {
						require.Equal(t, got.ExpiryMillis(p), m.srv.TTL(run.key).Milliseconds(), "%s: %s TTL", where, run.key)
					}
				}
			}
		})
	}
}
