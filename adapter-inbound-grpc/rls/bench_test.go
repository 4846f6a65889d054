package rls_test

import (
	"context"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
)

// BenchmarkShouldRateLimit is the service's own work per call (matching,
// pseudonymizing, the set request, the response and its headers) over a
// fake decider, without gRPC or Redis: 1 and 3 descriptors.
func BenchmarkShouldRateLimit(b *testing.B) {
	for _, tc := range []struct {
		name string
		req  *pb.RateLimitRequest
	}{
		{"1-descriptor", request("web", desc("user", "alice"))},
		{"3-descriptors", request("web", desc("user", "alice"), desc("path", "/login"), desc("client", "mobile"))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := oneRule("web", minuteRule("web", "user", 1<<30), minuteRule("web", "path", 1<<30), minuteRule("web", "client", 1<<30))
			svc, err := rls.New(newPorts(), &testPseud{}, rls.Options{Metrics: newMetrics()})
			if err != nil {
				b.Fatal(err)
			}
			if err := svc.Load(cfg); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = svc.Close() })
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := svc.ShouldRateLimit(ctx, tc.req)
				if err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OK {
					b.Fatalf("%v %v", resp.GetOverallCode(), err)
				}
			}
		})
	}
}
