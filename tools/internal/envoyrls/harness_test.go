package envoyrls_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/tools/internal/envoyrls"
)

// TestParseClientOutput reads client_cmd's printout (flags, then one
// "response: " line in protobuf text format).
func TestParseClientOutput(t *testing.T) {
	out := "Flag: --dial_string=\"127.0.0.1:1\"\nFlag: --domain=\"diff\"\n" +
		"response: overall_code:OVER_LIMIT  statuses:{code:OK}  statuses:{code:OVER_LIMIT  current_limit:{requests_per_unit:2  unit:MINUTE}  duration_until_reset:{seconds:38}}\n"
	resp, err := envoyrls.ParseClientOutput([]byte(out))
	require.NoError(t, err)
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{
		rlsv3.RateLimitResponse_OVER_LIMIT, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT,
	}, envoyrls.Codes(resp))
	assert.Equal(t, uint32(2), resp.GetStatuses()[1].GetCurrentLimit().GetRequestsPerUnit())

	_, err = envoyrls.ParseClientOutput([]byte("request error: rpc error\n"))
	require.Error(t, err)
}

// TestDescriptorForms: the client_cmd flag and the message carry the same
// entries; hits, when given, is the descriptor's own hits_addend.
func TestDescriptorForms(t *testing.T) {
	d := envoyrls.D("a", "1", "b", "2")
	assert.Equal(t, "a=1,b=2", d.Flag())
	zero := uint64(0)
	p := d.Proto(&zero)
	require.NotNil(t, p.GetHitsAddend())
	assert.Equal(t, uint64(0), p.GetHitsAddend().GetValue())
	assert.Nil(t, d.Proto(nil).GetHitsAddend())
	req := envoyrls.Request("dom", d, envoyrls.D("c", "3"))
	assert.Equal(t, "dom", req.GetDomain())
	assert.Len(t, req.GetDescriptors(), 2)
}

// TestWindowLeft: windows are aligned to the Unix epoch.
func TestWindowLeft(t *testing.T) {
	at := time.UnixMilli(120_000 + 15_250)
	assert.Equal(t, 44_750*time.Millisecond, envoyrls.WindowLeft(at, time.Minute))
	assert.Equal(t, time.Minute, envoyrls.WindowLeft(time.UnixMilli(180_000), time.Minute))
	require.Error(t, envoyrls.AwaitWindow(context.Background(), time.Second, 2*time.Second))
}

// TestReferenceEnv: service_cmd is configured on loopback only, over TCP
// to the given Redis, with statsd off.
func TestReferenceEnv(t *testing.T) {
	env := envoyrls.ReferenceEnv(envoyrls.ReferenceConfig{RedisAddr: "127.0.0.1:7", LocalCacheBytes: 1 << 20, StopIncrementWhenOverLimit: true}, "/rt", 1, 2, 3)
	joined := "\n" + strings.Join(env, "\n") + "\n"
	for _, want := range []string{
		"REDIS_URL=127.0.0.1:7", "REDIS_SOCKET_TYPE=tcp", "RUNTIME_ROOT=/rt", "RUNTIME_WATCH_ROOT=false",
		"USE_STATSD=false", "HOST=127.0.0.1", "GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1",
		"GRPC_PORT=1", "PORT=2", "DEBUG_PORT=3", "LOCAL_CACHE_SIZE_IN_BYTES=1048576",
		"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true",
	} {
		assert.Contains(t, joined, "\n"+want+"\n")
	}
}

// TestReferenceStartsAndAnswers: the harness brings service_cmd up on a
// private redis-server, client_cmd and the Go client reach it, and Close
// stops it.
func TestReferenceStartsAndAnswers(t *testing.T) {
	_, bins := needBinaries(t)
	rs := startRedis(t)
	ref, err := envoyrls.StartReference(context.Background(), envoyrls.ReferenceConfig{
		Bin: bins.Service, RedisAddr: rs.Addr, Configs: map[string]string{"diff.yaml": diffYAML},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, ref.Close()) }()
	resp, err := envoyrls.RunClient(context.Background(), bins.Client, ref.GRPCAddr, diffDomain, envoyrls.D("free", "x"))
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
	c, err := envoyrls.Dial(ref.GRPCAddr)
	require.NoError(t, err)
	defer c.Close()
	resp, err = c.ShouldRateLimit(context.Background(), envoyrls.Request(diffDomain, envoyrls.D("fixed", "x")))
	require.NoError(t, err)
	assert.Equal(t, uint32(3), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())
}

// TestProcessCPU reads this process's own CPU time.
func TestProcessCPU(t *testing.T) {
	d, err := envoyrls.ProcessCPU(os.Getpid())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, d, time.Duration(0))
}
