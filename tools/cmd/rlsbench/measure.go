package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/tools/internal/envoyrls"
)

// Names of the measured services.
const (
	nameOurs    = "ours"
	nameRef     = "reference"
	nameRefLC   = "reference, local cache"
	floodConc   = 16
	memReps     = 3
	memSample   = 200
	memWorkers  = 16
	callTimeout = 10 * time.Second
)

var (
	concurrencies = []int{1, 16, 64}
	shapes        = []string{"1 descriptor", "3 descriptors"}
)

// target is one measured service; pid is its process, for CPU per call.
type target struct {
	name, addr string
	pid        int
}

// results holds every sample by key (see the key functions).
type results struct {
	version      string
	redisVersion string
	reps         int
	duration     time.Duration
	values       int
	refOnly      bool
	samples      map[string][]float64
}

func (r *results) add(key string, v float64) { r.samples[key] = append(r.samples[key], v) }

func rpsKey(shape string, c int, name string) string {
	return fmt.Sprintf("rps|%s|%d|%s", shape, c, name)
}
func p99Key(shape string, c int, name string) string {
	return fmt.Sprintf("p99|%s|%d|%s", shape, c, name)
}
func cpuKey(kind, shape string, c int, name string) string {
	return fmt.Sprintf("cpu|%s|%s|%d|%s", kind, shape, c, name)
}
func floodKey(name string) string     { return "flood|" + name }
func memKey(kind, name string) string { return "mem|" + kind + "|" + name }

// request is the throughput request of a shape: one descriptor or three.
func request(shape string) *rlsv3.RateLimitRequest {
	if shape == shapes[0] {
		return envoyrls.Request(benchDomain, envoyrls.D("one", "v"))
	}
	return envoyrls.Request(benchDomain, envoyrls.D("d1", "v"), envoyrls.D("d2", "v"), envoyrls.D("d3", "v"))
}

func measure(ctx context.Context, s *services, o options, out io.Writer) (*results, error) {
	res := &results{reps: o.reps, duration: o.duration, values: o.values, refOnly: o.refOnly, samples: map[string][]float64{}}
	if info, err := s.admin.Info(ctx, "server").Result(); err == nil {
		res.redisVersion, _ = redisinfo.Field(info, "redis_version")
	}
	targets := []target{{nameRef, s.ref.GRPCAddr, s.ref.PID()}}
	floodTargets := []target{{nameRefLC, s.refLC.GRPCAddr, s.refLC.PID()}, {nameRef, s.ref.GRPCAddr, s.ref.PID()}}
	if s.ours != nil {
		targets = append(targets, target{nameOurs, s.ours.GRPCAddr, s.ours.PID()})
		floodTargets = append(floodTargets, target{nameOurs, s.ours.GRPCAddr, s.ours.PID()})
	}
	for rep := range o.reps {
		fmt.Fprintf(out, "repetition %d/%d\n", rep+1, o.reps)
		order := rotate(targets, rep)
		if o.floodOnly {
			order = nil
		}
		for _, shape := range shapes {
			for _, c := range concurrencies {
				for _, tg := range order {
					cpu0, rcpu0, err := cpuNow(ctx, s, tg)
					if err != nil {
						return nil, err
					}
					lr, err := envoyrls.Load(ctx, tg.addr, c, o.duration, func(int) *rlsv3.RateLimitRequest { return request(shape) })
					if err != nil {
						return nil, fmt.Errorf("%s, %s, c=%d: %w", tg.name, shape, c, err)
					}
					cpu1, rcpu1, err := cpuNow(ctx, s, tg)
					if err != nil {
						return nil, err
					}
					// Per call, in µs (the warm-up calls are a handful among thousands).
					res.add(cpuKey("svc", shape, c, tg.name), float64(cpu1-cpu0)/float64(time.Microsecond)/float64(lr.Calls()))
					res.add(cpuKey("redis", shape, c, tg.name), (rcpu1-rcpu0)*1e6/float64(lr.Calls()))
					if lr.Errors > 0 || lr.Over > 0 {
						return nil, fmt.Errorf("%s, %s, c=%d: %d errors (first: %v), %d denials in a throughput run", tg.name, shape, c, lr.Errors, lr.FirstErr, lr.Over)
					}
					res.add(rpsKey(shape, c, tg.name), lr.PerSecond())
					res.add(p99Key(shape, c, tg.name), float64(lr.Quantile(0.99))/float64(time.Millisecond))
					fmt.Fprintf(out, "  %-9s %-13s c=%-2d %9.0f/s p99 %.3f ms\n", tg.name, shape, c, lr.PerSecond(), float64(lr.Quantile(0.99))/float64(time.Millisecond))
				}
			}
		}
		for _, tg := range rotate(floodTargets, rep) {
			cpu0, rcpu0, err := cpuNow(ctx, s, tg)
			if err != nil {
				return nil, err
			}
			// Load's warm-up call spends the limit of 1; everything after
			// is denied.
			lr, err := envoyrls.Load(ctx, tg.addr, floodConc, o.duration, func(int) *rlsv3.RateLimitRequest {
				return envoyrls.Request(benchDomain, envoyrls.D("flood", "x"))
			})
			if err != nil {
				return nil, fmt.Errorf("%s, flood: %w", tg.name, err)
			}
			if lr.Errors > 0 || lr.OK > 0 {
				return nil, fmt.Errorf("%s, flood: %d errors (first: %v), %d admitted over a spent limit", tg.name, lr.Errors, lr.FirstErr, lr.OK)
			}
			cpu1, rcpu1, err := cpuNow(ctx, s, tg)
			if err != nil {
				return nil, err
			}
			res.add(floodKey(tg.name), lr.OverPerSecond())
			// Per denial, in µs: what a denial costs each process, whatever
			// the client's share of the cores.
			res.add(cpuKey("svc", "flood", floodConc, tg.name), float64(cpu1-cpu0)/float64(time.Microsecond)/float64(lr.Calls()))
			res.add(cpuKey("redis", "flood", floodConc, tg.name), (rcpu1-rcpu0)*1e6/float64(lr.Calls()))
			fmt.Fprintf(out, "  %-22s flood c=%d %9.0f denials/s\n", tg.name, floodConc, lr.OverPerSecond())
		}
	}
	memRuns := min(o.reps, memReps)
	if o.floodOnly {
		memRuns = 0
	}
	for rep := range memRuns {
		for _, tg := range rotate(targets, rep) {
			used, usage, keys, err := memory(ctx, s, tg, o.values, fmt.Sprintf("%d", rep))
			if err != nil {
				return nil, fmt.Errorf("%s, memory: %w", tg.name, err)
			}
			res.add(memKey("used", tg.name), used)
			res.add(memKey("usage", tg.name), usage)
			res.add(memKey("keys", tg.name), keys)
			fmt.Fprintf(out, "  %-9s memory: %.1f B/value used_memory, %.1f B/value MEMORY USAGE, %.2f keys/value\n", tg.name, used, usage, keys)
		}
	}
	return res, nil
}

// rotate alternates the order of the services per repetition.
func rotate(ts []target, rep int) []target {
	out := slices.Clone(ts)
	if rep%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// memory empties the server, makes one call (so that whatever a service
// keeps once, such as its programs, exists before the baseline), then
// sends n distinct values of "mem" and returns used_memory's growth per
// value, the keys' MEMORY USAGE (a sample, scaled to all keys) per value,
// and keys per value.
func memory(ctx context.Context, s *services, tg target, n int, tag string) (used, usage, keysPerValue float64, err error) {
	if err := s.admin.Do(ctx, "flushall", "sync").Err(); err != nil {
		return 0, 0, 0, fmt.Errorf("redis flushall: %w", err)
	}
	c, err := envoyrls.Dial(tg.addr)
	if err != nil {
		return 0, 0, 0, err
	}
	defer c.Close()
	call := func(v string) error {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		resp, err := c.ShouldRateLimit(cctx, envoyrls.Request(benchDomain, envoyrls.D("mem", v)))
		if err == nil && resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			err = fmt.Errorf("value %s: %v", v, resp.GetOverallCode())
		}
		return err
	}
	if err := call("warm-" + tag); err != nil {
		return 0, 0, 0, err
	}
	before, err := usedMemory(ctx, s)
	if err != nil {
		return 0, 0, 0, err
	}
	keysBefore, err := s.admin.DBSize(ctx).Result()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("redis dbsize: %w", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, memWorkers)
	for w := range memWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += memWorkers {
				if err := call(tag + "-" + strconv.Itoa(i)); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, 0, 0, err
		}
	}
	after, err := usedMemory(ctx, s)
	if err != nil {
		return 0, 0, 0, err
	}
	keysAfter, err := s.admin.DBSize(ctx).Result()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("redis dbsize: %w", err)
	}
	newKeys := keysAfter - keysBefore
	keys, _, err := s.admin.Scan(ctx, 0, "*", 1000).Result()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("redis scan: %w", err)
	}
	var sum, sampled float64
	for _, k := range keys[:min(len(keys), memSample)] {
		u, err := s.admin.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			continue // expired or the warm key gone: not sampled
		}
		sum += float64(u)
		sampled++
	}
	if sampled == 0 {
		return 0, 0, 0, fmt.Errorf("no key to sample among %d", len(keys))
	}
	return float64(after-before) / float64(n), sum / sampled * float64(newKeys) / float64(n), float64(newKeys) / float64(n), nil
}

func usedMemory(ctx context.Context, s *services) (int64, error) {
	info, err := s.admin.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("redis info memory: %w", err)
	}
	v, ok := redisinfo.Field(info, "used_memory")
	if !ok {
		return 0, errors.New("redis info memory has no used_memory")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("used_memory %q: %w", v, err)
	}
	return n, nil
}

// cpuNow is the service's CPU time and redis-server's (INFO cpu, seconds).
func cpuNow(ctx context.Context, s *services, tg target) (time.Duration, float64, error) {
	svc, err := envoyrls.ProcessCPU(tg.pid)
	if err != nil {
		return 0, 0, err
	}
	info, err := s.admin.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, 0, fmt.Errorf("redis info cpu: %w", err)
	}
	var sum float64
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, ok := redisinfo.Field(info, f)
		if !ok {
			return 0, 0, fmt.Errorf("redis info cpu has no %s", f)
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("redis info cpu %s=%q: %w", f, v, err)
		}
		sum += x
	}
	return svc, sum, nil
}
