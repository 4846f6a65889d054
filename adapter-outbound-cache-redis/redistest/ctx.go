package redistest

import (
	"context"
	"testing"
	"time"
)

// adminWait bounds one test's admin commands (setup, fault injection,
// inspection) so a hung server fails the test instead of stalling it.
const adminWait = 10 * time.Second

// AdminCtx returns a context for a test's admin commands: it ends after
// 10 seconds or when the test is cleaned up, whichever is first.
func AdminCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), adminWait)
	t.Cleanup(cancel)
	return ctx
}
