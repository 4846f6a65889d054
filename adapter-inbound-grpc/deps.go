//go:build tools

package rlsmodule

import (
	_ "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	_ "github.com/fsnotify/fsnotify"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/health"
)
