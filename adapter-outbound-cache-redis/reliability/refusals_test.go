package reliability_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestServerRefusalsBeforeRunning (fault-matrix row 11): NOREPLICAS
// (min-replicas-to-write with no replica) and MASTERDOWN (a replica whose
// primary is gone, replica-serve-stale-data no) are refusals before the
// #!lua program runs: Unavailable{server_rejected}, nothing consumed.
func TestServerRefusalsBeforeRunning(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, srv *redistest.Server)
		prefix string
	}{
		{"NOREPLICAS", func(t *testing.T, srv *redistest.Server) {
			require.NoError(t, srv.Client().ConfigSet(redistest.AdminCtx(t), "min-replicas-to-write", "1").Err())
		}, "NOREPLICAS"},
		{"MASTERDOWN", func(t *testing.T, srv *redistest.Server) {
			admin := srv.Client()
			require.NoError(t, admin.ConfigSet(redistest.AdminCtx(t), "replica-serve-stale-data", "no").Err())
			// Writable, so that READONLY (row 10) does not answer first.
			require.NoError(t, admin.ConfigSet(redistest.AdminCtx(t), "replica-read-only", "no").Err())
			// A loopback port nothing listens on: the primary is down.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			_, port, _ := net.SplitHostPort(ln.Addr().String())
			require.NoError(t, ln.Close())
			require.NoError(t, admin.Do(redistest.AdminCtx(t), "REPLICAOF", "127.0.0.1", port).Err())
		}, "MASTERDOWN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			ownServer(t, srv)
			admin := srv.Client()
			keys := randomKeys(t)
			pols := hourPolicies(t)
			p := newProvider(t, clientConfig(srv.Addr(), 2*time.Second, 2), keys, pols...)
			subject := randomSubject(t)
			require.True(t, ratelimit.Admitted(ask(p, pols[0].ID(), subject, 1)))
			tt.setup(t, srv)
			t.Cleanup(func() {
				_ = admin.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err()
				_ = admin.ConfigSet(context.Background(), "min-replicas-to-write", "0").Err()
			})
			for _, pol := range pols {
				out := ask(p, pol.ID(), subject, 1)
				assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%s: %v", pol.ID(), out)
				assert.Equal(t, ratelimit.CategoryServerRejected, ratelimit.CategoryOf(out), "%s: %v", pol.ID(), out)
				var ce *redisrate.CallError
				if assert.ErrorAs(t, out.(ratelimit.Unavailable).Cause, &ce) {
					assert.True(t, strings.HasPrefix(ce.Err.Error(), tt.prefix+" "), ce.Err.Error())
					assert.True(t, ce.Written, "refused by the server's reply, after the write")
				}
			}
			// Undo before reading: a MASTERDOWN replica refuses the admin too.
			require.NoError(t, admin.Do(redistest.AdminCtx(t), "REPLICAOF", "NO", "ONE").Err())
			require.NoError(t, admin.ConfigSet(redistest.AdminCtx(t), "min-replicas-to-write", "0").Err())
			c, ok := consumed(t, admin, keys, pols[0], subject)
			require.True(t, ok)
			assert.Equal(t, int64(1), c, "the refused calls consumed nothing")
			for _, pol := range pols[1:] {
				_, ok := consumed(t, admin, keys, pol, subject)
				assert.False(t, ok, "%s: no state written", pol.ID())
			}
		})
	}
}
