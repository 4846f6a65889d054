package ratelimittest

import (
	"sync"
	"time"
)

// Clock is a controlled local clock for the Now options of decorators
// (a denial cache's, a plan cache's): it reads what Set or Advance last
// made it. The zero Clock reads the zero time. Safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock reading at.
func NewClock(at time.Time) *Clock { return &Clock{now: at} }

// Now is the clock's reading.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set makes the clock read t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock d forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
