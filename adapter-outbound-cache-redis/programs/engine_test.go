package programs

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// engine runs one key's evaluations: the model, or the real program under a
// controlled clock (miniredis).
type engine interface {
	eval(t *testing.T, p ratelimit.Policy, nowMillis, cost int64) Reply
	state(t *testing.T) State
	seed(t *testing.T, st State)
}

type modelEngine struct{ st State }

func (e *modelEngine) eval(t *testing.T, p ratelimit.Policy, now, cost int64) Reply {
	r, next := Evaluate(p, e.st, now, cost)
	require.NoError(t, r.Check(p), "model reply %+v", r)
	e.st = next
	return r
}
func (e *modelEngine) state(*testing.T) State      { return e.st }
func (e *modelEngine) seed(_ *testing.T, st State) { e.st = st }

type miniEngine struct {
	m   *mini
	key string
}

func (e *miniEngine) eval(t *testing.T, p ratelimit.Policy, now, cost int64) Reply {
	r := e.m.eval(mustProgram(t, p.Algorithm()), p, now, e.key, cost)
	require.NoError(t, r.Check(p), "program reply %+v", r)
	return r
}
func (e *miniEngine) state(t *testing.T) State { return getState(t, e.m.c, e.key) }
func (e *miniEngine) seed(t *testing.T, st State) {
	ctx := context.Background()
	require.NoError(t, e.m.c.Del(ctx, e.key).Err())
	if st != nil {
		require.NoError(t, e.m.c.Set(ctx, e.key, []byte(st), 0).Err())
	}
}

// onEngines runs f once against the model and once against the programs on
// miniredis, each with a fresh key.
func onEngines(t *testing.T, f func(t *testing.T, e engine)) {
	t.Run("model", func(t *testing.T) { f(t, &modelEngine{}) })
	t.Run("lua", func(t *testing.T) { f(t, &miniEngine{m: newMini(t), key: "k"}) })
}

func cloneState(st State) State {
	if st == nil {
		return nil
	}
	return append(State{}, st...)
}
