package rls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// HealthService is the service name the gRPC health server reports
// besides "" (the server as a whole), as envoyproxy/ratelimit does.
const HealthService = "ratelimit"

// DefaultMaxRecvMsgSize bounds a request message (ServerOptions.MaxRecvMsgSize).
const DefaultMaxRecvMsgSize = 64 << 10

// ServerOptions configure NewGRPCServer.
type ServerOptions struct {
	// TLS, when not nil, serves TLS (and mutual TLS when it requires
	// client certificates); see LoadTLS.
	TLS *tls.Config
	// MaxRecvMsgSize bounds a request in bytes; 0 means
	// DefaultMaxRecvMsgSize.
	MaxRecvMsgSize int
}

// NewGRPCServer returns a grpc.Server with svc registered as
// RateLimitService and the gRPC health service on the same listener, and
// the health server (SERVING for "" and HealthService while svc has a
// configuration; the caller sets NOT_SERVING on shutdown).
func NewGRPCServer(svc *Service, opt ServerOptions) (*grpc.Server, *health.Server) {
	max := opt.MaxRecvMsgSize
	if max <= 0 {
		max = DefaultMaxRecvMsgSize
	}
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(max)}
	if opt.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(opt.TLS)))
	}
	srv := grpc.NewServer(opts...)
	pb.RegisterRateLimitServiceServer(srv, svc)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if svc.Loaded() {
		st = healthpb.HealthCheckResponse_SERVING
	}
	hs.SetServingStatus("", st)
	hs.SetServingStatus(HealthService, st)
	return srv, hs
}

// ErrTLSConfig is wrapped by LoadTLS's errors.
var ErrTLSConfig = errors.New("invalid rls tls configuration")

// LoadTLS reads a server certificate and key (PEM) and, when clientCAFile
// is not empty, the CAs whose client certificates are required (mutual
// TLS). TLS 1.2 at least. Errors name the file at fault.
func LoadTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: a certificate needs both the cert file and the key file", ErrTLSConfig)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: cert %s, key %s: %w", ErrTLSConfig, certFile, keyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: client ca %s: %w", ErrTLSConfig, clientCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: client ca %s: no PEM certificate in it", ErrTLSConfig, clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// JSONHandler serves envoyproxy/ratelimit's HTTP interface: POST /json
// takes a RateLimitRequest and answers a RateLimitResponse, both proto3
// JSON (protojson), 200 for OK, 429 for OVER_LIMIT, 500 for UNKNOWN; a
// body that is not a request, or a refused request, is 400, and an
// undecided request under UndecidedError is 503 (the reference answers
// 400 for every error). GET /healthcheck answers 200 "OK" once svc has a
// configuration, else 500. The body is read up to maxBody bytes (0 means
// DefaultMaxRecvMsgSize); more is 413.
func JSONHandler(svc *Service, maxBody int64) http.Handler {
	if maxBody <= 0 {
		maxBody = DefaultMaxRecvMsgSize
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /json", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				svc.opt.Metrics.Refused("message_size")
				httpError(w, http.StatusRequestEntityTooLarge)
				return
			}
			httpError(w, http.StatusBadRequest)
			return
		}
		var req pb.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			svc.opt.Metrics.Refused("json")
			httpError(w, http.StatusBadRequest)
			return
		}
		resp, err := svc.ShouldRateLimit(r.Context(), &req)
		if err != nil {
			if status.Code(err) == codes.Unavailable {
				httpError(w, http.StatusServiceUnavailable)
				return
			}
			httpError(w, http.StatusBadRequest)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			httpError(w, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch resp.GetOverallCode() {
		case pb.RateLimitResponse_OVER_LIMIT:
			w.WriteHeader(http.StatusTooManyRequests)
		case pb.RateLimitResponse_UNKNOWN:
			w.WriteHeader(http.StatusInternalServerError)
		}
		_, _ = w.Write(out)
	})
	mux.HandleFunc("GET /healthcheck", func(w http.ResponseWriter, _ *http.Request) {
		if !svc.Loaded() {
			httpError(w, http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("OK"))
	})
	return mux
}

func httpError(w http.ResponseWriter, code int) { http.Error(w, http.StatusText(code), code) }
