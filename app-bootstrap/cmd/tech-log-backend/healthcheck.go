package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/tech-log/tech-log-backend/app-bootstrap/wiring"
)

// healthcheckTimeout bounds the whole probe (dial, request, response).
const healthcheckTimeout = 3 * time.Second

// healthcheck is the -healthcheck mode, for a container HEALTHCHECK in an
// image without curl: it sends GET /healthz to the service's own listen
// address and returns exitOK on a 200, exitFailure otherwise, printing one
// line on failure. It reads only the listen address (-addr, else
// APP_WEB_ADDR, else :8080), never the rest of the configuration or its
// secrets. A wildcard or empty host is probed on loopback.
func healthcheck(addr string, environ []string, stderr io.Writer) int {
	if addr == "" {
		addr = ":8080"
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, "APP_WEB_ADDR="); ok && v != "" {
				addr = v
			}
		}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: healthcheck: listen address %q: want [host]:port\n", name, addr)
		return exitFailure
	}
	if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	url := "http://" + net.JoinHostPort(host, port) + wiring.PathHealthz
	ctx, cancel := context.WithTimeout(context.Background(), healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		fmt.Fprintf(stderr, "%s: healthcheck: %v\n", name, err)
		return exitFailure
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "%s: healthcheck: %v\n", name, err)
		return exitFailure
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "%s: healthcheck: GET %s: %s\n", name, url, resp.Status)
		return exitFailure
	}
	return exitOK
}
