package rlsconfig

import (
	"fmt"
	"strings"
	"time"
)

// Unit is the time unit of a limit, as envoyproxy/ratelimit's unit field
// names it. The values are the numbers of the protocol's
// envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit enum, so
// pb.RateLimitResponse_RateLimit_Unit(u) is the unit on the wire. The zero
// value is invalid (the protocol's UNKNOWN); an unlimited or policy limit
// has no unit.
type Unit int

// The units the reference accepts (every value of the protocol enum but
// UNKNOWN).
const (
	UnitSecond Unit = 1
	UnitMinute Unit = 2
	UnitHour   Unit = 3
	UnitDay    Unit = 4
	UnitMonth  Unit = 5
	UnitYear   Unit = 6
	UnitWeek   Unit = 7
)

// unitTable is the one home of what varies by unit: its name in the file
// (upper case, the protocol's enum name) and its length, as the reference's
// utils.UnitToDivider defines it (a month is 30 days, a year 365).
var unitTable = [...]struct {
	name string
	dur  time.Duration
}{
	UnitSecond: {"SECOND", time.Second},
	UnitMinute: {"MINUTE", time.Minute},
	UnitHour:   {"HOUR", time.Hour},
	UnitDay:    {"DAY", 24 * time.Hour},
	UnitMonth:  {"MONTH", 30 * 24 * time.Hour},
	UnitYear:   {"YEAR", 365 * 24 * time.Hour},
	UnitWeek:   {"WEEK", 7 * 24 * time.Hour},
}

// Valid reports whether u is one of the units above.
func (u Unit) Valid() bool { return u >= UnitSecond && u <= UnitWeek }

// Duration is the length of one window of the unit (a month is 30 days and
// a year 365, as in the reference); 0 for an invalid unit.
func (u Unit) Duration() time.Duration {
	if !u.Valid() {
		return 0
	}
	return unitTable[u].dur
}

// String is the unit's protocol name in lower case ("second", ...).
func (u Unit) String() string {
	if !u.Valid() {
		return fmt.Sprintf("Unit(%d)", int(u))
	}
	return strings.ToLower(unitTable[u].name)
}

// ParseUnit reads a unit field the way the reference does: the text upper
// cased (strings.ToUpper, so "Second" and "SECOND" are accepted) must name
// a protocol unit other than UNKNOWN.
func ParseUnit(s string) (Unit, error) {
	up := strings.ToUpper(s)
	for u := UnitSecond; u <= UnitWeek; u++ {
		if unitTable[u].name == up {
			return u, nil
		}
	}
	return 0, fmt.Errorf("%w: %q is not second, minute, hour, day, week, month or year", ErrInvalidUnit, bounded(s))
}

// bounded cuts text quoted in an error to a readable length.
func bounded(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
