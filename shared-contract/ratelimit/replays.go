package ratelimit

import (
	"errors"
	"fmt"
)

// ErrReplaysWithoutWindow is wrapped by CheckDedupMaxReplays's error for
// a replay count given to a policy without a dedup window.
var ErrReplaysWithoutWindow = errors.New("dedup max replays set without a dedup window")

// CheckDedupMaxReplays is the one replay rule (ADR 0013, ADR 0033): a
// replay count n needs a dedup window (hasWindow; otherwise an error
// wrapping ErrReplaysWithoutWindow: replays exist only within a window)
// and is 0..MaxDedupMaxReplays (otherwise ErrDedupMaxReplays). NewPolicy
// and the policy file both ask it, each in its own words.
func CheckDedupMaxReplays(hasWindow bool, n int64) error {
	switch {
	case !hasWindow:
		return fmt.Errorf("%w: %d", ErrReplaysWithoutWindow, n)
	case n < 0 || n > MaxDedupMaxReplays:
		return fmt.Errorf("%w: %d is not 0..%d", ErrDedupMaxReplays, n, MaxDedupMaxReplays)
	}
	return nil
}
