package redisrate

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestClusterHungPrimaryKeepsOtherSlots: one primary hangs (frozen, so
// its calls time out instead of being refused) while more callers than
// MaxInFlight hammer its slots. Its calls hold their in-flight slots for a
// whole command timeout each until its breaker opens; calls for the other
// primaries' slots, sent meanwhile at the shipped default timeouts, must
// all be decided: the in-flight bound, like the breaker and the batcher,
// belongs to a target, so a hung primary cannot take another's slots.
func TestClusterHungPrimaryKeepsOtherSlots(t *testing.T) {
	c := redistest.StartCluster(t, redistest.WithReplicasPerPrimary(0), redistest.WithNodeConfig("cluster-require-full-coverage", "no"))
	keys := randomKeys(t)
	pol := fixedPolicy(t, "hung", 100000, time.Hour)
	const maxInFlight = 4
	cfg := clusterConfig()
	cfg.CommandTimeout, cfg.DialTimeout, cfg.PoolTimeout, cfg.PoolSize = DefaultCommandTimeout, DefaultDialTimeout, DefaultCommandTimeout, maxInFlight
	p := breakerClusterProvider(t, c, keys, pol, cfg, BreakerOptions{Threshold: DefaultBreakerThreshold, ProbeInterval: DefaultBreakerProbeInterval})

	victim := c.Primaries()[0]
	dead := subjectOn(t, c, keys, pol, victim, true)
	alive := subjectOn(t, c, keys, pol, victim, false)
	// askDefault sends one call with the service's default evaluation
	// deadline.
	askDefault := func(s ratelimit.SubjectDigest) ratelimit.Outcome {
		return p.Evaluate(context.Background(), ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: s, Cost: 1, Deadline: time.Now().Add(EvaluationTimeout(DefaultCommandTimeout, false))})
	}
	for _, s := range []ratelimit.SubjectDigest{dead, alive} {
		_, ok := askDefault(s).(ratelimit.Evaluated)
		require.True(t, ok)
	}

	victim.Pause(30 * time.Second)
	defer victim.Resume()
	const flooders, callsEach = 3 * maxInFlight, 12
	started := make(chan struct{}, flooders)
	deadOutcomes := make(chan ratelimit.Outcome, flooders*callsEach)
	var wg sync.WaitGroup
	for range flooders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			for range callsEach {
				deadOutcomes <- askDefault(dead)
			}
		}()
	}
	for range flooders {
		<-started
	}
	// The live calls run while the flood holds the hung primary's slots
	// (each of its first calls waits a whole command timeout).
	var decided, refused int
	var failures []ratelimit.Outcome
	for range 20 {
		out := askDefault(alive)
		if e, ok := out.(ratelimit.Evaluated); ok && e.Decision.Allowed {
			decided++
			continue
		}
		refused++
		failures = append(failures, out)
	}
	wg.Wait()
	close(deadOutcomes)
	var deadEvaluated int
	for out := range deadOutcomes {
		if out.Kind() == ratelimit.KindEvaluated {
			deadEvaluated++
		}
	}
	assert.Zero(t, deadEvaluated, "no call for the frozen primary's slots is decided")
	assert.Equal(t, 20, decided, "every call for a live primary is decided; %d were not: %v", refused, failures)
}
