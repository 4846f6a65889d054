package redisrate

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: a
// client's pool, a fake server or a helper that outlives its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
