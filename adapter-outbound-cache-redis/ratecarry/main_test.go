package ratecarry_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (a
// client's pool, a provider). The tests that need a server start their
// own (redistest.Start: skipped without redis-server unless
// REDIS_REQUIRED=1); the options' tests need none.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
