//go:build !race

package keyspace_test

const raceEnabled = false
