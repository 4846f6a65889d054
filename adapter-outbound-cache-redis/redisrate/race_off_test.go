//go:build !race

package redisrate

// raceEnabled: see race_on_test.go.
const raceEnabled = false
