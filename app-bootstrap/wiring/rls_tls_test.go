package wiring

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// TestRLSMutualTLS: the whole graph with APP_RLS_TLS_CERT_FILE,
// APP_RLS_TLS_KEY_FILE and APP_RLS_TLS_CLIENT_CA_FILE on a private
// redis-server. A client with a certificate of the client CA is decided
// (OK up to the limit, then OVER_LIMIT); a plaintext client, a TLS client
// without a certificate and one whose certificate another CA issued get
// no answer, and none of them spends the subject's budget.
func TestRLSMutualTLS(t *testing.T) {
	rs := redistest.Start(t)
	serverCA, clientCA, otherCA := redistest.NewCA(t), redistest.NewCA(t), redistest.NewCA(t)
	server := serverCA.Issue(t, "rls-server", redistest.CertOptions{Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	client := clientCA.Issue(t, "rls-client", redistest.CertOptions{})
	stranger := otherCA.Issue(t, "rls-stranger", redistest.CertOptions{})

	cfg := loadConfig(t, rlsKV(rs.Addr(), rlsDir(t),
		"APP_RLS_TLS_CERT_FILE", server.CertFile, "APP_RLS_TLS_KEY_FILE", server.KeyFile,
		"APP_RLS_TLS_CLIENT_CA_FILE", clientCA.CertFile)...)
	var srv *RLSServer
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()

	tlsClient := func(certs ...tls.Certificate) grpc.DialOption {
		return grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: serverCA.Pool(), Certificates: certs, MinVersion: tls.VersionTLS12,
		}))
	}
	// refused: the call fails (no certificate, a stranger's, no TLS at all).
	refused := func(name string, opt grpc.DialOption) {
		t.Helper()
		conn, err := grpc.NewClient(srv.Addr(), opt)
		require.NoError(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = pb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, tlsRequest())
		assert.Error(t, err, "%s: a client the server must refuse got an answer", name)
	}
	refused("plaintext", grpc.WithTransportCredentials(insecure.NewCredentials()))
	refused("tls without a client certificate", tlsClient())
	refused("a certificate of another CA", tlsClient(stranger.TLS))

	conn, err := grpc.NewClient(srv.Addr(), tlsClient(client.TLS))
	require.NoError(t, err)
	defer conn.Close()
	c := pb.NewRateLimitServiceClient(conn)
	// remote_address is 3 a minute: the refused clients spent nothing.
	for i := range 3 {
		require.Equal(t, pb.RateLimitResponse_OK, shouldRateLimitReq(t, c, tlsRequest()), "request %d", i+1)
	}
	assert.Equal(t, pb.RateLimitResponse_OVER_LIMIT, shouldRateLimitReq(t, c, tlsRequest()))
}

func tlsRequest() *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlcommon.RateLimitDescriptor{
		{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "192.0.2.9"}}},
	}}
}

// shouldRateLimitReq sends req (5 s at most) and returns the overall code.
func shouldRateLimitReq(t *testing.T, c pb.RateLimitServiceClient, req *pb.RateLimitRequest) pb.RateLimitResponse_Code {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, req)
	require.NoError(t, err)
	return resp.GetOverallCode()
}
