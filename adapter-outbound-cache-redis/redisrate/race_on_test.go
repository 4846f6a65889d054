//go:build race

package redisrate

// raceEnabled: under the race detector sync.Pool drops items at random, so
// allocation counts are not repeatable (make alloc-budget runs the budget
// without it).
const raceEnabled = true
