package config

import (
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// The field checks every section uses. Each records a *VarError naming the
// variable and returns the zero value for a rejected setting, so that later
// relation checks skip it.

func (v *errs) keyPrefix(name, p string) string {
	if !keyspace.IsSegment(p) {
		v.add(name, ErrInvalid, "%q must be 1..%d bytes of [a-z0-9._-] starting with [a-z0-9]", bounded(p), keyspace.MaxSegmentLen)
	}
	return p
}

// duration accepts d in 1ms..max (no setting here is meaningful below a
// millisecond, and the Redis clients reject it).
func (v *errs) duration(name string, d, max time.Duration) time.Duration {
	if d < time.Millisecond || d > max {
		v.add(name, ErrInvalid, "%v: want a positive duration of at least 1ms and at most %v", d, max)
		return 0
	}
	return d
}

// notAbove reports d > limit (both already validated, zero if invalid).
func (v *errs) notAbove(name string, d time.Duration, limitName string, limit time.Duration) {
	if d > 0 && limit > 0 && d > limit {
		v.add(name, ErrInvalid, "%v exceeds %s (%v)", d, limitName, limit)
	}
}

// between accepts n in min..max.
func (v *errs) between(name string, n, min, max int) int {
	if n < min || n > max {
		v.add(name, ErrInvalid, "%d: want %d..%d", n, min, max)
		return 0
	}
	return n
}

// bound accepts n in 1..max.
func (v *errs) bound(name string, n, max int) int {
	if n < 1 || n > max {
		v.add(name, ErrInvalid, "%d: want 1..%d", n, max)
		return 0
	}
	return n
}

func bounded(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
