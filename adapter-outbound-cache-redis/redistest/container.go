package redistest

import "testing"

// startContainer is the container lane (REDIS_TEST_LANE=container).
func startContainer(t testing.TB, cfg *config, image string) (lane, string, error) {
	t.Helper()
	return nil, "container lane not implemented yet", nil
}
