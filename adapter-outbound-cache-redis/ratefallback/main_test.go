package ratefallback_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (a
// background pass, a client's pool).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
