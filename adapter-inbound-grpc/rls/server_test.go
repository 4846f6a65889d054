package rls_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
)

func TestHealthOnTheSameListener(t *testing.T) {
	f := newFixture(t, oneRule("web", minuteRule("web", "user", 1)), newPorts(), rls.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, svc := range []string{"", rls.HealthService} {
		resp, err := healthpb.NewHealthClient(f.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q: %v %v", svc, resp, err)
		}
	}
}

func TestMaxReceiveMessageSize(t *testing.T) {
	f := newFixture(t, oneRule("web", minuteRule("web", "user", 1)), newPorts(), rls.Options{})
	huge := request("web", desc("user", strings.Repeat("v", rls.DefaultMaxRecvMsgSize+1)))
	if _, err := f.call(t, huge); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized message: %v, want ResourceExhausted", err)
	}
	if e, _ := f.ports.last().calls(); e != 0 {
		t.Fatalf("%d evaluations", e)
	}
}

func TestJSONEndpoint(t *testing.T) {
	f := newFixture(t, oneRule("web", minuteRule("web", "user", 1)), newPorts(), rls.Options{})
	srv := httptest.NewServer(rls.JSONHandler(f.svc, 0))
	t.Cleanup(srv.Close)
	c := &http.Client{Timeout: 10 * time.Second}
	body, err := protojson.Marshal(request("web", desc("user", "alice")))
	if err != nil {
		t.Fatal(err)
	}
	post := func(b []byte) (int, []byte) {
		t.Helper()
		resp, err := c.Post(srv.URL+"/json", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		code, out := post(body)
		if code != want {
			t.Fatalf("request %d: %d, want %d", i, code, want)
		}
		var resp pb.RateLimitResponse
		if err := protojson.Unmarshal(out, &resp); err != nil {
			t.Fatalf("response is not a RateLimitResponse: %v: %s", err, out)
		}
		if (want == http.StatusOK) != (resp.GetOverallCode() == pb.RateLimitResponse_OK) {
			t.Fatalf("status %d with overall %v", code, resp.GetOverallCode())
		}
	}
	if code, _ := post([]byte("{not json")); code != http.StatusBadRequest {
		t.Fatalf("bad body: %d", code)
	}
	unknown, _ := protojson.Marshal(request("nope", desc("user", "alice")))
	if code, _ := post(unknown); code != http.StatusBadRequest {
		t.Fatalf("unknown domain: %d, want 400", code)
	}
	if code, _ := post(bytes.Repeat([]byte(" "), rls.DefaultMaxRecvMsgSize+1)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d, want 413", code)
	}
	resp, err := c.Get(srv.URL + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthcheck: %d", resp.StatusCode)
	}
	_ = f.svc.Close()
	resp, err = c.Get(srv.URL + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("healthcheck after Close: %d, want 500", resp.StatusCode)
	}
}

func TestLoadClosesThePreviousGeneration(t *testing.T) {
	f := newFixture(t, oneRule("web", minuteRule("web", "user", 1)), newPorts(), rls.Options{})
	first := f.ports.last()
	if err := f.svc.Load(oneRule("web", minuteRule("web", "user", 5))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		first.mu.Lock()
		closed := first.closed
		first.mu.Unlock()
		if closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("previous generation's Decider not closed within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Same rule, new limit: same policy ID, so the state carries over.
	f.must(t, request("web", desc("user", "alice")))
	if got := f.ports.st.get("rls.web.user", digest("alice")); got != 1 {
		t.Fatalf("used = %d, want 1", got)
	}
}
