package bench

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// clockReadNanos measures one time.Now on this machine: the provider reads
// the clock on every call, and on some virtual machines that is a system
// call rather than a vDSO read.
func clockReadNanos() float64 {
	var sink time.Time
	r := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			sink = time.Now()
		}
	})
	_ = sink
	return float64(r.T.Nanoseconds()) / float64(max(r.N, 1))
}

// machineInfo describes the host.
func machineInfo(ctx context.Context, root string) Machine {
	m := Machine{
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS: runtime.GOOS + "/" + runtime.GOARCH, GoVersion: runtime.Version(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if name, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	m.LoadAvgStart = loadAvg()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource"); err == nil {
		m.ClockSource = strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, "redis-benchmark", "--version").Output(); err == nil {
		m.RedisBenchmark = strings.TrimSpace(string(out))
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.GitCommit = strings.TrimSpace(string(out))
	}
	return m
}

// loadAvg is the first three fields of /proc/loadavg, or "".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
