package send

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
)

// TestBreakerWaitIsJitteredWithinTheInterval: every probe wait lies in
// [interval/2, interval].
func TestBreakerWaitIsJitteredWithinTheInterval(t *testing.T) {
	b := newBreaker(BreakerOptions{Threshold: 1, ProbeInterval: 100 * time.Millisecond}, nil, nil)
	seen := map[time.Duration]bool{}
	for range 1000 {
		w := b.wait()
		require.GreaterOrEqual(t, w, 50*time.Millisecond)
		require.LessOrEqual(t, w, 100*time.Millisecond)
		seen[w] = true
	}
	assert.Greater(t, len(seen), 100, "the waits vary")
}

// BenchmarkBreakerAdmit is the breaker's cost per call: closed (admit and
// record a success) and open (the refusal), on one goroutine and in
// parallel.
func BenchmarkBreakerAdmit(b *testing.B) {
	var ok Sent = Replied{}
	for _, tc := range []struct {
		name string
		open bool
	}{{"closed", false}, {"open", true}} {
		br := newBreaker(BreakerOptions{Threshold: 1, ProbeInterval: MaxProbeInterval}, func(context.Context) error { return io.EOF }, nil)
		if tc.open {
			done, _ := br.admit()
			done(NotSent{Reason: ReasonPreSend, Cause: &certainty.DialError{Err: io.EOF}})
		}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if done, _ := br.admit(); done != nil {
					done(ok)
				}
			}
		})
		b.Run(tc.name+"-parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if done, _ := br.admit(); done != nil {
						done(ok)
					}
				}
			})
		})
		br.shutdown()
	}
}
