package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
)

// Subject sets of the throughput matrix.
const (
	SubjectsDistinct = "distinct" // round robin over the distinct subjects
	SubjectsHot      = "hot"      // one subject for every call
)

// maxErrorsKept bounds the error samples a run keeps.
const maxErrorsKept = 3

// RunResult is one timed measurement of one limiter at one concurrency.
type RunResult struct {
	Limiter     string  `json:"limiter"`
	Family      string  `json:"family"`
	Algorithm   string  `json:"algorithm"`
	Concurrency int     `json:"concurrency"`
	Subjects    string  `json:"subjects"`
	Rep         int     `json:"rep"`
	Ops         int64   `json:"ops"`
	Errors      int64   `json:"errors"`
	Seconds     float64 `json:"seconds"`
	OpsPerSec   float64 `json:"opsPerSec"`
	P50Micros   float64 `json:"p50Micros"`
	P99Micros   float64 `json:"p99Micros"`
	P999Micros  float64 `json:"p999Micros"`
	MaxMicros   float64 `json:"maxMicros"`
	AllocsPerOp float64 `json:"allocsPerOp"`
	BytesPerOp  float64 `json:"bytesPerOp"`
	// ClientCPUMicrosPerOp is this process's user+system CPU per call.
	ClientCPUMicrosPerOp float64 `json:"clientCpuMicrosPerOp"`
	// ServerCPUMicrosPerOp is redis-server's used_cpu_user+used_cpu_sys
	// per call: script, I/O and event loop together.
	ServerCPUMicrosPerOp float64 `json:"serverCpuMicrosPerOp"`
	// EvalshaUsecPerCall is INFO commandstats usec_per_call of evalsha:
	// the script's execution time inside the server.
	EvalshaUsecPerCall float64 `json:"evalshaUsecPerCall"`
	// Commands are the commandstats of the run (CONFIG RESETSTAT before).
	Commands map[string]CommandStat `json:"commands,omitempty"`
	// ErrorSamples are up to three error texts when Errors > 0.
	ErrorSamples []string `json:"errorSamples,omitempty"`
}

// runSpec describes one measurement.
type runSpec struct {
	lim         *limiter
	concurrency int
	subjects    string
	rep         int
	duration    time.Duration // stop after this long
	maxOps      int64         // or after this many calls (0: no cap)
	warmup      int64         // untimed calls first
	nDistinct   int           // distinct subject count; index nDistinct is the hot one
	next        *atomic.Uint64
}

// measure runs spec against srv. Workers share the subject sequence next,
// so successive runs of a limiter keep walking its subject set.
func measure(ctx context.Context, srv *Server, spec runSpec) (RunResult, error) {
	r := RunResult{
		Limiter: spec.lim.Name, Family: spec.lim.Family, Algorithm: spec.lim.Algorithm,
		Concurrency: spec.concurrency, Subjects: spec.subjects, Rep: spec.rep,
	}
	subject := func() int {
		if spec.subjects == SubjectsHot {
			return spec.nDistinct
		}
		return int(spec.next.Add(1) % uint64(spec.nDistinct))
	}
	// Warm-up: opens the pool's connections and loads scripts.
	if err := parallel(spec.concurrency, spec.warmup, func(int) error { return spec.lim.op(ctx, subject()) }); err != nil {
		return r, fmt.Errorf("bench: warm-up %s: %w", spec.lim.Name, err)
	}
	if err := srv.ResetStats(ctx); err != nil {
		return r, err
	}
	cpu0, err := srv.serverCPU(ctx)
	if err != nil {
		return r, err
	}

	hists := make([]Histogram, spec.concurrency)
	errs := make([][]string, spec.concurrency)
	var ops, nerr atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	ru0 := rusage()
	start := time.Now()
	timer := time.AfterFunc(spec.duration, func() { stop.Store(true) })
	for w := range spec.concurrency {
		wg.Go(func() {
			h := &hists[w]
			for !stop.Load() {
				if spec.maxOps > 0 && ops.Add(1) > spec.maxOps {
					return
				}
				i := subject()
				t0 := time.Now()
				err := spec.lim.op(ctx, i)
				h.Record(time.Since(t0))
				if spec.maxOps == 0 {
					ops.Add(1)
				}
				if err != nil {
					nerr.Add(1)
					if len(errs[w]) < maxErrorsKept {
						errs[w] = append(errs[w], err.Error())
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	timer.Stop()
	ru1 := rusage()
	runtime.ReadMemStats(&m1)

	var all Histogram
	for i := range hists {
		all.Merge(&hists[i])
	}
	n := int64(all.Count())
	cpu1, err := srv.serverCPU(ctx)
	if err != nil {
		return r, err
	}
	info, err := srv.infoText(ctx, "commandstats")
	if err != nil {
		return r, err
	}
	if r.Commands, err = redisinfo.CommandStats(info); err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	for name := range r.Commands { // the harness's own CONFIG RESETSTAT and INFO
		if name == "info" || name == "config" || strings.HasPrefix(name, "config|") {
			delete(r.Commands, name)
		}
	}
	if n == 0 {
		return r, fmt.Errorf("bench: %s: no call completed", spec.lim.Name)
	}
	r.Ops, r.Errors = n, nerr.Load()
	r.Seconds = elapsed.Seconds()
	r.OpsPerSec = float64(n) / r.Seconds
	r.P50Micros = micros(all.Quantile(0.50))
	r.P99Micros = micros(all.Quantile(0.99))
	r.P999Micros = micros(all.Quantile(0.999))
	r.MaxMicros = micros(all.Max())
	r.AllocsPerOp = float64(m1.Mallocs-m0.Mallocs) / float64(n)
	r.BytesPerOp = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n)
	r.ClientCPUMicrosPerOp = (ru1 - ru0).Seconds() * 1e6 / float64(n)
	r.ServerCPUMicrosPerOp = (cpu1 - cpu0) * 1e6 / float64(n)
	r.EvalshaUsecPerCall = r.Commands["evalsha"].UsecPerCall
	for _, e := range errs {
		if len(r.ErrorSamples) < maxErrorsKept {
			r.ErrorSamples = append(r.ErrorSamples, e...)
		}
	}
	if len(r.ErrorSamples) > maxErrorsKept {
		r.ErrorSamples = r.ErrorSamples[:maxErrorsKept]
	}
	return r, nil
}

// parallel runs n calls of f over c goroutines and returns the first error.
func parallel(c int, n int64, f func(worker int) error) error {
	var left atomic.Int64
	left.Store(n)
	errs := make([]error, c)
	var wg sync.WaitGroup
	for w := range c {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := f(w); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// rusage is this process's user+system CPU time.
func rusage() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
