package ratelease

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (a
// sweep, a client's pool).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
