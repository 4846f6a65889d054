package wiring

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// Environment of TestFaultHistory: the seed to replay and the number of
// steps (defaults: a new seed, printed, and historySteps).
const (
	envHistorySeed  = "TLB_FAULT_SEED"
	envHistorySteps = "TLB_FAULT_STEPS"
	historySteps    = 8
	maxHistorySteps = 100
)

// historyFault is one fault a step of TestFaultHistory applies.
type historyFault struct {
	name string
	// local reports whether the fault can let "login" decide locally (the
	// coordination Redis unreachable or the breaker open).
	local bool
	// restart reports whether the fault loses Redis's data (a fresh
	// budget for every subject).
	restart bool
	apply   func(b *faultBench, rng *rand.Rand, s *historyStep)
}

// historyStep is what one step saw during its fault.
type historyStep struct {
	loginAdmitted, loginSent int
	ordersAdmittedInFault    int
}

// during runs the load that a fault sees on both instances for d: "login"
// (local fallback) and "orders" (fail-closed, so never admitted while
// Redis cannot decide).
func (b *faultBench) during(d time.Duration, s *historyStep) {
	a, n := b.load(d, 2)
	s.loginAdmitted += a
	s.loginSent += n
	for i := range 4 {
		if b.get(i, ordersPath).admitted() {
			s.ordersAdmittedInFault++
		}
	}
}

// span draws a duration in [lo, hi].
func span(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

var historyFaults = []historyFault{
	{name: "outage", local: true, apply: func(b *faultBench, rng *rand.Rand, s *historyStep) {
		// Short outages may not reach the breaker's threshold, long
		// ones trip it.
		b.proxy.Refuse()
		b.during(span(rng, 200*time.Millisecond, 2*time.Second), s)
		require.NoError(b.t, b.proxy.Accept())
	}},
	{name: "frozen server", local: true, apply: func(b *faultBench, rng *rand.Rand, s *historyStep) {
		d := span(rng, 300*time.Millisecond, 1500*time.Millisecond)
		b.rs.Pause(d + 30*time.Second) // resumed below; the timer is a backstop
		b.during(d, s)
		b.rs.Resume()
	}},
	{name: "restart", restart: true, apply: func(b *faultBench, _ *rand.Rand, _ *historyStep) { b.rs.Restart() }},
	{name: "script flush", apply: func(b *faultBench, _ *rand.Rand, _ *historyStep) {
		require.NoError(b.t, b.rs.Client().ScriptFlush(redistest.AdminCtx(b.t)).Err())
	}},
	{name: "lost reply, closed", apply: func(b *faultBench, _ *rand.Rand, s *historyStep) { b.loseLogin(redistest.LoseAndClose, s) }},
	{name: "lost reply, held", apply: func(b *faultBench, _ *rand.Rand, s *historyStep) { b.loseLogin(redistest.LoseAndHold, s) }},
}

// loseLogin loses the reply of the next "login" decision and checks that
// the request is not admitted on doubt: Indeterminate is a 503, never a
// local decision. A request the denial cache answers sends nothing: then
// nothing is lost and it is a 429.
func (b *faultBench) loseLogin(mode redistest.LossMode, s *historyStep) {
	lost := b.proxy.Lost()
	b.proxy.LoseNextReplyTo(mode, b.loginSHA)
	a := b.get(0, loginPath)
	b.proxy.Disarm()
	s.loginSent++
	if a.admitted() {
		s.loginAdmitted++
	}
	if b.proxy.Lost() == lost+1 {
		require.Equal(b.t, 503, a.code, "a lost decision is not admitted")
	} else {
		require.Equal(b.t, 429, a.code, "nothing sent: the denial cache answered")
	}
}

// TestFaultHistory draws a sequence of faults from a seed it prints
// (outage at the proxy, a frozen server, a restart, a SCRIPT FLUSH, lost
// replies closed and held; an outage long enough trips the breaker) and
// after every step checks each degraded-mode promise on two instances at
// the shipped defaults: fail closed during the fault ("orders" never
// admitted while Redis cannot decide), recovery (Redis decides again
// within recoveryWithin), the lost-reply retry and its single charge
// (lostReply), and the local-fallback bound on "login" over the whole
// history (every global admission comes out of the bucket, a restart
// gives a fresh one, and each fault that can decide locally adds at most
// each instance's share). TLB_FAULT_SEED replays a history,
// TLB_FAULT_STEPS sets its length (default 8, at most 100).
func TestFaultHistory(t *testing.T) {
	seed := time.Now().UnixNano()
	if v := os.Getenv(envHistorySeed); v != "" {
		var err error
		seed, err = strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, envHistorySeed)
	}
	steps := historySteps
	if v := os.Getenv(envHistorySteps); v != "" {
		var err error
		steps, err = strconv.Atoi(v)
		require.NoError(t, err, envHistorySteps)
		require.True(t, steps >= 1 && steps <= maxHistorySteps, "%s in 1..%d", envHistorySteps, maxHistorySteps)
	}
	t.Logf("seed %d (replay: %s=%d)", seed, envHistorySeed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed>>1)))

	b := newFaultBench(t, redistest.Start(t))
	var history []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d, history %v", seed, history)
		}
	})
	share := loginCapacity / fallbackInstances
	budget := loginCapacity // login admissions the history allows so far
	loginAdmitted := 0
	b.awaitRecovery()
	for i := range steps {
		f := historyFaults[rng.IntN(len(historyFaults))]
		history = append(history, f.name)
		var s historyStep
		f.apply(b, rng, &s)
		if f.local {
			budget += fallbackInstances * share
		}
		if f.restart {
			budget += loginCapacity
		}
		require.Zero(t, s.ordersAdmittedInFault, "step %d (%s): fail-closed policy admitted while Redis could not decide", i, f.name)

		a, _ := b.load(span(rng, 0, time.Second), 2)
		loginAdmitted += s.loginAdmitted + a
		left := b.awaitRecovery()
		mode := lossModes[rng.IntN(len(lossModes))]
		b.lostReply(mode.mode, fmt.Sprintf("history-%d-%d", seed, i), left)
		require.LessOrEqual(t, loginAdmitted, budget, "step %d (%s): login admitted beyond the bucket, the restarts and the local shares", i, f.name)
		t.Logf("step %d: %s; login %d admitted (bound %d); orders left %d, lost-reply retry (%s) decided", i, f.name, loginAdmitted, budget, left-2, mode.name)
	}
}
