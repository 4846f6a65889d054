package ratelimittest

import (
	"testing"
	"time"
)

// ClearOfWindowEnd returns at once unless the current window of length
// window (aligned to the Unix epoch, as fixed and sliding windows are) ends
// within margin; then it sleeps until just after that end. A test that
// counts admissions exactly in one long window calls it first, so that no
// window end falls inside its run. It waits at most margin plus one second.
func ClearOfWindowEnd(t testing.TB, window, margin time.Duration) {
	t.Helper()
	if window <= 0 || margin <= 0 {
		return
	}
	now := time.Now()
	end := time.UnixMilli(0).Add((now.Sub(time.UnixMilli(0))/window + 1) * window)
	if left := end.Sub(now); left < margin {
		t.Logf("ratelimittest: the %v window ends in %v; waiting until it has", window, left.Round(time.Millisecond))
		time.Sleep(left + time.Second)
	}
}
