package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// options are the demo's knobs; every one is bounded.
type options struct {
	root        string
	clients     int
	requests    int
	duration    time.Duration
	rate        float64
	concurrency int
	limit       int64
	window      time.Duration
	keep        bool
	cluster     bool
	fallback    bool
}

// outageClient is phase 2's client, one phase 1 never used: a client the
// server denied in phase 1 may still be answered its denial locally (429,
// the denial cache, ADR 0022) in the moment before an instance sees its
// invalidation subscription drop, so only a client with no denial on
// record shows that every undecidable request fails closed with 503.
const outageClient = "demo-outage"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o := options{}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.root, "root", "..", "repository root (holds app-bootstrap/)")
	fs.IntVar(&o.clients, "clients", 3, "distinct clients (X-API-Key values), 1..20")
	fs.IntVar(&o.requests, "requests", 600, "total requests of the load phase, 1..10000")
	fs.DurationVar(&o.duration, "duration", 8*time.Second, "longest load phase, up to 60s")
	fs.Float64Var(&o.rate, "rate", 80, "requests per second across both instances, 1..2000")
	fs.IntVar(&o.concurrency, "concurrency", 4, "concurrent requests, 1..64")
	fs.Int64Var(&o.limit, "limit", 20, "the demo policy's limit per client per window, 1..1000")
	fs.DurationVar(&o.window, "window", 5*time.Second, "the demo policy's fixed window, whole seconds 1s..60s")
	fs.BoolVar(&o.keep, "keep-logs", false, "keep the temporary directory with the instances' logs")
	fs.BoolVar(&o.fallback, "fallback", false, `make the demo policy "failurePolicy": "local-fallback" with "fallbackInstances": 2: with Redis down each instance decides alone on half the limit (docs/degraded-mode.md)`)
	fs.BoolVar(&o.cluster, "cluster", false, "run against a private 3-primary Redis Cluster (APP_RATE_LIMIT_REDIS_MODE=cluster) and show the keys spread over the primaries")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A hard bound on the whole run, whatever happens.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := demo(ctx, o, stdout, stderr); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			fmt.Fprintln(stderr, "demo: interrupted; everything it started has been stopped")
			return 130
		}
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	return 0
}

func (o options) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.clients < 1 || o.clients > 20 {
		bad("-clients %d not in 1..20", o.clients)
	}
	if o.requests < 1 || o.requests > 10000 {
		bad("-requests %d not in 1..10000", o.requests)
	}
	if o.duration <= 0 || o.duration > time.Minute {
		bad("-duration %v not in (0, 60s]", o.duration)
	}
	if !(o.rate >= 1 && o.rate <= 2000) {
		bad("-rate %v not in 1..2000", o.rate)
	}
	if o.concurrency < 1 || o.concurrency > 64 {
		bad("-concurrency %d not in 1..64", o.concurrency)
	}
	if o.limit < 1 || o.limit > 1000 {
		bad("-limit %d not in 1..1000", o.limit)
	}
	if o.window < time.Second || o.window > time.Minute || o.window%time.Second != 0 {
		bad("-window %v must be whole seconds in 1s..60s", o.window)
	}
	if o.fallback && o.cluster {
		bad("-fallback and -cluster do not combine")
	}
	// The recovery check tells a local decision from one made with Redis
	// by its quota (the share is half the limit) and places each decision
	// in its window from its reset, which needs windows of a few seconds.
	if o.fallback && o.limit < 2 {
		bad("-limit %d with -fallback: at least 2 (the share must differ from the limit)", o.limit)
	}
	if o.fallback && o.window < 5*time.Second {
		bad("-window %v with -fallback: at least 5s", o.window)
	}
	return errors.Join(errs...)
}

func demo(ctx context.Context, o options, stdout, stderr io.Writer) (err error) {
	root, err := filepath.Abs(o.root)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "app-bootstrap", "cmd", "tech-log-backend")); err != nil {
		return fmt.Errorf("-root %s does not hold app-bootstrap/cmd/tech-log-backend: %w", root, err)
	}
	dir, err := os.MkdirTemp("", "tlb-demo-")
	if err != nil {
		return err
	}
	defer func() {
		// Logs are kept when asked, and after a failure (not after Ctrl-C).
		if o.keep || (err != nil && !errors.Is(err, context.Canceled)) {
			fmt.Fprintf(stderr, "demo: logs kept in %s\n", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()

	say := func(format string, args ...any) { fmt.Fprintf(stdout, "==> "+format+"\n", args...) }

	var (
		rs      *redisServer
		cluster *redisCluster
	)
	if o.cluster {
		say("starting a private %d-primary Redis Cluster on 127.0.0.1", clusterPrimaries)
		if cluster, err = startCluster(ctx, dir); err != nil {
			return err
		}
		defer cluster.stop()
		say("cluster nodes %s (cluster_state:ok, a third of the %d slots each)", strings.Join(cluster.addrs(), ", "), clusterSlots)
	} else {
		say("starting a private redis-server on 127.0.0.1")
		if rs, err = startRedis(ctx, dir); err != nil {
			return err
		}
		defer rs.stop()
		say("redis-server %s on %s (no persistence, data in %s)", rs.version, rs.addr, dir)
	}

	say("building the service (app-bootstrap/cmd/tech-log-backend)")
	bin := filepath.Join(dir, "tech-log-backend")
	if err := build(ctx, root, bin); err != nil {
		return err
	}

	policies := filepath.Join(dir, "policies.json")
	if err := os.WriteFile(policies, []byte(policyFile(o)), 0o600); err != nil {
		return err
	}
	// The clients are verified API keys (APP_WEB_IDENTITY=api-key): the
	// keys file holds their SHA-256 digests.
	keys := filepath.Join(dir, "api-keys")
	if err := os.WriteFile(keys, []byte(apiKeysFile(append(clientNames(o.clients), recoveryClient, outageClient))), 0o600); err != nil {
		return err
	}
	redisAddr := ""
	if rs != nil {
		redisAddr = rs.addr
	}
	env := append(instanceEnv(redisAddr, policies, randomSecret(), randomSecret()),
		"APP_WEB_IDENTITY=api-key", "APP_WEB_API_KEYS_FILE="+keys)
	if cluster != nil {
		env = clusterEnv(env, cluster.addrs())
	}
	var instances []*instance
	defer func() {
		for _, in := range instances {
			in.stop()
		}
	}()
	for _, name := range []string{"A", "B"} {
		in, err := startInstance(ctx, name, bin, env, filepath.Join(dir, "instance-"+name+".log"))
		if err != nil {
			return err
		}
		instances = append(instances, in)
		say("instance %s listening on http://%s (log: %s)", name, in.addr, in.logPath)
	}

	say("phase 1: %d clients, up to %d requests in at most %v at ~%.0f req/s, alternating between A and B", o.clients, o.requests, o.duration, o.rate)
	load := runLoad(ctx, loadSpec{
		targets:     instances,
		clients:     clientNames(o.clients),
		requests:    o.requests,
		duration:    o.duration,
		rate:        o.rate,
		concurrency: o.concurrency,
		path:        demoPath,
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	printPhase1(stdout, o, load)
	if cluster != nil {
		perNode := cluster.keysPerNode(ctx)
		spread := 0
		for i, n := range perNode {
			fmt.Fprintf(stdout, "  primary %s holds %d rate-limit keys\n", cluster.addrs()[i], n)
			if n > 0 {
				spread++
			}
		}
		say("the %d clients' keys are spread over %d of the %d primaries (the slot comes from each key's {tag}, derived from the client alone)", o.clients, spread, clusterPrimaries)
	}

	if o.fallback {
		if err := fallbackPhases(ctx, o, rs, instances, load, stdout, say); err != nil {
			return err
		}
		say("done: the global limit held across both instances, without Redis each instance decided locally on its share, and after Redis came back nothing was admitted beyond max(L, U + A)")
		return nil
	}
	if cluster != nil {
		say("phase 2: every cluster node stopped; every limited request must now fail closed")
		cluster.stop()
	} else {
		say("phase 2: redis-server stopped; every limited request must now fail closed (after 5 connection failures per instance the circuit breaker answers at once: circuit_open)")
		rs.stop()
	}
	outage, err := outageLoad(ctx, instances, outageClient)
	if err != nil {
		return err
	}
	printPhase2(stdout, o, outage)

	if v := verdict(o, load, outage); v != nil {
		return v
	}
	say("done: the global limit held across both instances, and the limiter failed closed without Redis")
	return nil
}

// randomSecret returns 32 random bytes, hex-encoded (64 characters).
func randomSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}
