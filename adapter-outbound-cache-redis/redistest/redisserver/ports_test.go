package redisserver

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClusterBusPortChosenAgainOnEachAttempt: when a node's cluster bus
// port is taken before the node binds it, the next attempt chooses both
// ports again (and ignores the failed attempt's nodes.conf). CI once saw a
// node retry four times on the same taken bus port and fail the cluster.
func TestClusterBusPortChosenAgainOnEachAttempt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("REDIS_REQUIRED") == "1" {
			t.Fatal("redis-server not on PATH and REDIS_REQUIRED=1")
		}
		t.Skip("needs redis-server")
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer held.Close()
	heldPort := held.Addr().(*net.TCPAddr).Port

	orig := pickPort
	t.Cleanup(func() { pickPort = orig })
	picks := 0
	pickPort = func() (int, error) {
		picks++
		if picks == 2 { // the first attempt's bus port
			return heldPort, nil
		}
		return orig()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	p, err := Launch(ctx, Config{Dir: t.TempDir(), Cluster: true})
	require.NoError(t, err)
	defer p.Kill()
	require.GreaterOrEqual(t, picks, 4, "a second attempt chose both ports again")
	require.NotEqual(t, heldPort, p.BusPort)
	info, err := p.Info(ctx, "server")
	require.NoError(t, err)
	require.Contains(t, info, "redis_mode:cluster")
	// The bus port the node listens on is the one it reports.
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.BusPort)), time.Second)
	require.NoError(t, err)
	_ = conn.Close()
}
