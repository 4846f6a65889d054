package envoyrls

import (
	"context"
	"fmt"
	"time"
)

// WindowLeft is what remains of the fixed window of length w (aligned to
// the Unix epoch, as both services align theirs) that holds now.
func WindowLeft(now time.Time, w time.Duration) time.Duration {
	ms := now.UnixMilli()
	wms := w.Milliseconds()
	return time.Duration(wms-ms%wms) * time.Millisecond
}

// AwaitWindow returns at once when at least need remains of the current
// window of length w; otherwise it waits for the next window to begin
// (plus a 100 ms margin for the two clocks), at most need + 100 ms. need
// must be shorter than w.
func AwaitWindow(ctx context.Context, w, need time.Duration) error {
	if need >= w {
		return fmt.Errorf("envoyrls: %v of work does not fit in a %v window", need, w)
	}
	left := WindowLeft(time.Now(), w)
	if left >= need {
		return nil
	}
	t := time.NewTimer(left + 100*time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("envoyrls: waiting for a window boundary: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}
