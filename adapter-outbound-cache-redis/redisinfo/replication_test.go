package redisinfo_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
)

// primaryInfo is INFO replication of a Redis 7.0 primary with one replica
// online at its offset and one still loading the snapshot.
const primaryInfo = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n" +
	"slave0:ip=127.0.0.1,port=40001,state=online,offset=4242,lag=0\r\n" +
	"slave1:ip=127.0.0.1,port=40002,state=wait_bgsave,offset=0,lag=3\r\n" +
	"master_failover_state:no-failover\r\nmaster_repl_offset:4242\r\nslave_read_only:1\r\nsecond_repl_offset:-1\r\n"

const replicaInfo = "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:40000\r\n" +
	"master_link_status:up\r\nslave_repl_offset:4242\r\nconnected_slaves:0\r\nmaster_repl_offset:4242\r\n"

func TestParseReplicationPrimary(t *testing.T) {
	t.Parallel()
	r, err := redisinfo.ParseReplication(primaryInfo)
	require.NoError(t, err)
	assert.Equal(t, redisinfo.Replication{
		Role:   redisinfo.RolePrimary,
		Offset: 4242,
		Replicas: []redisinfo.Replica{
			{IP: "127.0.0.1", Port: 40001, State: redisinfo.ReplicaOnline, Offset: 4242, Lag: 0},
			{IP: "127.0.0.1", Port: 40002, State: "wait_bgsave", Offset: 0, Lag: 3},
		},
	}, r, "slave_read_only is not a replica line")
	assert.Equal(t, 1, r.Online())
	assert.True(t, r.CaughtUp())
	reps, err := redisinfo.Replicas(primaryInfo)
	require.NoError(t, err)
	assert.Equal(t, r.Replicas, reps, "Replicas alone reads the same lines")
	_, err = redisinfo.Replicas("slave0:ip=a,port=1,state=online,offset=1,lag=x\r\n")
	assert.ErrorIs(t, err, redisinfo.ErrMalformed, "without role or offset, a bad figure still counts")

	behind, err := redisinfo.ParseReplication(primaryInfo + "master_repl_offset:5000\r\n")
	require.NoError(t, err)
	assert.Equal(t, int64(5000), behind.Offset, "a later duplicate wins")
	assert.False(t, behind.CaughtUp(), "no online replica at 5000")
}

func TestParseReplicationReplica(t *testing.T) {
	t.Parallel()
	r, err := redisinfo.ParseReplication(replicaInfo)
	require.NoError(t, err)
	assert.Equal(t, redisinfo.Replication{Role: redisinfo.RoleReplica, LinkUp: true, Offset: 4242}, r)
	assert.Zero(t, r.Online())
	assert.False(t, r.CaughtUp())

	down, err := redisinfo.ParseReplication("role:slave\r\nmaster_link_status:down\r\nmaster_repl_offset:0\r\n")
	require.NoError(t, err)
	assert.False(t, down.LinkUp)
}

func TestParseReplicationMalformed(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{
		"no role":        "master_repl_offset:1\r\n",
		"no offset":      "role:master\r\n",
		"offset":         "role:master\r\nmaster_repl_offset:x\r\n",
		"replica port":   "role:master\r\nmaster_repl_offset:1\r\nslave0:ip=a,port=p,state=online,offset=1,lag=0\r\n",
		"replica offset": "role:master\r\nmaster_repl_offset:1\r\nslave0:ip=a,port=1,state=online,offset=,lag=0\r\n",
		"replica lag":    "role:master\r\nmaster_repl_offset:1\r\nslave0:ip=a,port=1,state=online,offset=1,lag=-x\r\n",
	} {
		_, err := redisinfo.ParseReplication(text)
		assert.ErrorIs(t, err, redisinfo.ErrMalformed, name)
	}
	r, err := redisinfo.ParseReplication("role:master\r\nmaster_repl_offset:1\r\nslave0:ip=a,port=1,state=online,offset=1\r\n")
	require.NoError(t, err)
	assert.Equal(t, int64(-1), r.Replicas[0].Lag, "no lag figure")
}

func TestParseClusterInfo(t *testing.T) {
	t.Parallel()
	ci, err := redisinfo.ParseClusterInfo("cluster_enabled:1\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\n" +
		"cluster_slots_ok:16380\r\ncluster_slots_pfail:3\r\ncluster_slots_fail:1\r\ncluster_known_nodes:6\r\ncluster_size:3\r\n")
	require.NoError(t, err)
	assert.Equal(t, redisinfo.ClusterInfo{State: redisinfo.ClusterStateOK, SlotsAssigned: 16384, SlotsOK: 16380, SlotsPFail: 3, SlotsFail: 1, KnownNodes: 6}, ci)

	for name, text := range map[string]string{
		"no state":  "cluster_slots_assigned:0\r\n",
		"no counts": "cluster_state:fail\r\n",
		"count":     "cluster_state:ok\r\ncluster_slots_assigned:1\r\ncluster_slots_ok:x\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:1\r\n",
	} {
		_, err := redisinfo.ParseClusterInfo(text)
		assert.ErrorIs(t, err, redisinfo.ErrMalformed, name)
	}
}
