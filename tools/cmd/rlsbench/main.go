package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/tools/internal/envoyrls"
)

// benchYAML is what both services load. The throughput limits are never
// reached; flood's is spent by the first call.
const benchYAML = `domain: bench
descriptors:
  - key: one
    rate_limit:
      unit: hour
      requests_per_unit: 1000000000
  - key: d1
    rate_limit:
      unit: hour
      requests_per_unit: 1000000000
  - key: d2
    rate_limit:
      unit: hour
      requests_per_unit: 1000000000
  - key: d3
    rate_limit:
      unit: hour
      requests_per_unit: 1000000000
  - key: flood
    rate_limit:
      unit: hour
      requests_per_unit: 1
  - key: mem
    rate_limit:
      unit: hour
      requests_per_unit: 100
`

const benchDomain = "bench"

// localCacheBytes is the reference's local cache in the flood phase.
const localCacheBytes = 16 << 20

type options struct {
	root     string
	doc      string
	reps     int
	duration time.Duration
	values   int
	smoke    bool
	refOnly  bool
	// floodOnly runs the flood phase alone (no throughput, no memory):
	// its rows are printed, nothing is written.
	floodOnly bool
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rlsbench:", err)
		os.Exit(1)
	}
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("rlsbench", flag.ContinueOnError)
	fs.StringVar(&o.root, "root", "..", "repository root")
	fs.StringVar(&o.doc, "doc", "", "document to write the table into (default <root>/docs/performance.md)")
	fs.IntVar(&o.reps, "reps", 5, "interleaved repetitions")
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "length of one load run")
	fs.IntVar(&o.values, "values", 20000, "distinct descriptor values for the memory measure")
	fs.BoolVar(&o.smoke, "smoke", false, "one short repetition, writes nothing (a shape check)")
	fs.BoolVar(&o.refOnly, "ref-only", false, "run the reference alone (no ratios; writes nothing)")
	fs.BoolVar(&o.floodOnly, "flood-only", false, "run the flood phase alone (prints its rows; writes nothing)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.smoke {
		o.reps, o.duration, o.values = 1, 300*time.Millisecond, 500
	}
	if o.reps < 1 || o.reps > 50 || o.duration <= 0 || o.duration > time.Minute || o.values < 1 || o.values > 1_000_000 {
		return o, errors.New("want 1 <= -reps <= 50, 0 < -duration <= 1m, 1 <= -values <= 1000000")
	}
	if o.doc == "" {
		o.doc = filepath.Join(o.root, "docs", "performance.md")
	}
	return o, nil
}

func run(args []string, stdout io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	root, err := filepath.Abs(o.root)
	if err != nil {
		return fmt.Errorf("root: %w", err)
	}
	bins, err := envoyrls.FindBinaries(root)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	env, err := startAll(ctx, root, bins, o, stdout)
	if env != nil {
		defer env.close()
	}
	if err != nil {
		return err
	}
	res, err := measure(ctx, env, o, stdout)
	if err != nil {
		return err
	}
	res.version = bins.Version
	table := render(res, o)
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, table)
	if o.smoke || o.refOnly || o.floodOnly {
		fmt.Fprintln(stdout, "(smoke, -ref-only or -flood-only: docs not written)")
		return nil
	}
	if err := writeDoc(o.doc, table); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", o.doc)
	return nil
}

// services is everything the bench started.
type services struct {
	redis   *envoyrls.Redis
	admin   *redis.Client
	ref     *envoyrls.Reference // no local cache
	refLC   *envoyrls.Reference // LOCAL_CACHE_SIZE_IN_BYTES
	ours    *envoyrls.Ours
	closers []func()
}

func (s *services) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

func startAll(ctx context.Context, root string, bins envoyrls.Binaries, o options, stdout io.Writer) (*services, error) {
	s := &services{}
	rs, err := envoyrls.StartRedis(ctx)
	if err != nil {
		return s, err
	}
	s.redis = rs
	s.closers = append(s.closers, func() { _ = rs.Close() })
	s.admin = redis.NewClient(&redis.Options{Addr: rs.Addr, Protocol: 2, DisableIdentity: true})
	s.closers = append(s.closers, func() { _ = s.admin.Close() })
	configs := map[string]string{"bench.yaml": benchYAML}

	ref, err := envoyrls.StartReference(ctx, envoyrls.ReferenceConfig{Bin: bins.Service, RedisAddr: rs.Addr, Configs: configs})
	if err != nil {
		return s, err
	}
	s.ref = ref
	s.closers = append(s.closers, func() { _ = ref.Close() })
	refLC, err := envoyrls.StartReference(ctx, envoyrls.ReferenceConfig{Bin: bins.Service, RedisAddr: rs.Addr, Configs: configs, LocalCacheBytes: localCacheBytes})
	if err != nil {
		return s, err
	}
	s.refLC = refLC
	s.closers = append(s.closers, func() { _ = refLC.Close() })
	fmt.Fprintf(stdout, "reference envoyproxy/ratelimit %s: %s (local cache %d B: %s), redis-server %s\n", bins.Version, ref.GRPCAddr, localCacheBytes, refLC.GRPCAddr, rs.Addr)
	if o.refOnly {
		return s, nil
	}
	dir, err := os.MkdirTemp("", "tlb-rlsbench-")
	if err != nil {
		return s, fmt.Errorf("temp dir: %w", err)
	}
	s.closers = append(s.closers, func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "tech-log-backend")
	fmt.Fprintln(stdout, "building tech-log-backend")
	if err := envoyrls.BuildOurs(ctx, root, bin); err != nil {
		return s, err
	}
	ours, err := envoyrls.StartOurs(ctx, envoyrls.OursConfig{Bin: bin, RedisAddr: rs.Addr, Configs: configs})
	if err != nil {
		return s, fmt.Errorf("our service with APP_RLS_ADDR (has the RLS wiring landed?): %w", err)
	}
	s.ours = ours
	s.closers = append(s.closers, func() { _ = ours.Close() })
	fmt.Fprintf(stdout, "ours: %s\n", ours.GRPCAddr)
	return s, nil
}
