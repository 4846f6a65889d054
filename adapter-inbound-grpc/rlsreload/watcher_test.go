package rlsreload_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsreload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// effective bounds how long a change may take to serve (the issue: within
// a second); every wait in these tests is bounded by it or by settle.
const (
	effective = time.Second
	settle    = 300 * time.Millisecond
)

func limitFile(domain string, rpu int) string {
	return "domain: " + domain + "\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: " + itoa(rpu) + "}\n"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rpu is the limit serving for domain's key k, or -1 when none.
func rpu(w *rlsreload.Watcher, domain string) int {
	rl := w.Config().Match(domain, []rlsconfig.Entry{{Key: "k", Value: "v"}})
	if rl == nil {
		return -1
	}
	return int(rl.RequestsPerUnit)
}

// eventually waits, at most effective, until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(effective)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, effective)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type counts struct {
	mu     sync.Mutex
	byRes  map[rlsreload.Result]int
	events chan error
}

func (c *counts) Reload(r rlsreload.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byRes[r]++
}

func (c *counts) get(r rlsreload.Result) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byRes[r]
}

// start builds and starts a Watcher on dir, stopped at cleanup.
func start(t *testing.T, opts rlsreload.Options) (*rlsreload.Watcher, *counts) {
	t.Helper()
	c := &counts{byRes: map[rlsreload.Result]int{}, events: make(chan error, 64)}
	opts.Metrics = c
	opts.OnReload = func(_ rlsreload.Trigger, cfg *rlsconfig.Config, err error) {
		if (cfg == nil) == (err == nil) {
			t.Errorf("OnReload: cfg %v with err %v", cfg, err)
		}
		select {
		case c.events <- err:
		default:
		}
	}
	w, err := rlsreload.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(); cancel() })
	return w, c
}

// nextReload waits, at most effective, for the next reload report.
func nextReload(t *testing.T, c *counts) error {
	t.Helper()
	select {
	case err := <-c.events:
		return err
	case <-time.After(effective):
		t.Fatalf("no reload within %v", effective)
		return nil
	}
}

func TestWriteAddRemove(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), limitFile("a", 1))
	w, c := start(t, rlsreload.Options{Dir: dir})
	if got := rpu(w, "a"); got != 1 {
		t.Fatalf("initial: %d, want 1", got)
	}

	write(t, filepath.Join(dir, "a.yaml"), limitFile("a", 2))
	eventually(t, "write", func() bool { return rpu(w, "a") == 2 })

	write(t, filepath.Join(dir, "b.yml"), limitFile("b", 3))
	eventually(t, "add", func() bool { return rpu(w, "b") == 3 })
	if rpu(w, "a") != 2 {
		t.Fatal("adding b lost a")
	}

	if err := os.Remove(filepath.Join(dir, "b.yml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "remove", func() bool { return !w.Config().HasDomain("b") })

	write(t, filepath.Join(dir, "notes.txt"), "not yaml: [")
	time.Sleep(settle)
	if !w.Config().HasDomain("a") || c.get(rlsreload.ResultRefused) != 0 {
		t.Fatalf("a non-yaml file changed the set: refused %d", c.get(rlsreload.ResultRefused))
	}
}

func TestBrokenFileKeepsPreviousSet(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), limitFile("a", 1))
	write(t, filepath.Join(dir, "b.yaml"), limitFile("b", 2))
	w, c := start(t, rlsreload.Options{Dir: dir})
	before := w.Config()

	write(t, filepath.Join(dir, "b.yaml"), "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 9}\n")
	err := nextReload(t, c)
	if !errors.Is(err, rlsreload.ErrRefused) || !errors.Is(err, rlsconfig.ErrInvalidUnit) {
		t.Fatalf("reload error %v: want ErrRefused and ErrInvalidUnit", err)
	}
	var fe *rlsconfig.FileError
	if !errors.As(err, &fe) || fe.File != "b.yaml" {
		t.Fatalf("error does not name b.yaml: %v", err)
	}
	if w.Config() != before || rpu(w, "a") != 1 || rpu(w, "b") != 2 {
		t.Fatal("a refused set changed what serves")
	}
	if c.get(rlsreload.ResultRefused) < 1 || c.get(rlsreload.ResultApplied) != 0 {
		t.Fatalf("metrics: applied %d refused %d", c.get(rlsreload.ResultApplied), c.get(rlsreload.ResultRefused))
	}

	// A duplicate domain across files is refused whole too.
	write(t, filepath.Join(dir, "b.yaml"), limitFile("a", 5))
	if err := nextReload(t, c); !errors.Is(err, rlsconfig.ErrDuplicateDomain) {
		t.Fatalf("reload error %v: want ErrDuplicateDomain", err)
	}
	if w.Config() != before {
		t.Fatal("a refused set changed what serves")
	}

	// Fixing the file applies.
	write(t, filepath.Join(dir, "b.yaml"), limitFile("b", 7))
	eventually(t, "fix", func() bool { return rpu(w, "b") == 7 })
}

// configMap lays out dir the way the kubelet mounts a ConfigMap: the data in
// a timestamped directory, ..data a symlink to it, and each file a symlink
// through ..data.
func configMapSwap(t *testing.T, dir, stamp string, files map[string]string) {
	t.Helper()
	ts := filepath.Join(dir, stamp)
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		write(t, filepath.Join(ts, name), text)
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Symlink(stamp, filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	configMapSwap(t, dir, "..2024_01_01_00_00_00.000000001", map[string]string{"limits.yaml": limitFile("cm", 1)})
	w, c := start(t, rlsreload.Options{Dir: dir})
	if got := rpu(w, "cm"); got != 1 {
		t.Fatalf("initial: %d, want 1", got)
	}
	applied := c.get(rlsreload.ResultApplied)

	began := time.Now()
	configMapSwap(t, dir, "..2024_01_01_00_00_01.000000002", map[string]string{"limits.yaml": limitFile("cm", 2)})
	eventually(t, "configmap swap", func() bool { return rpu(w, "cm") == 2 })
	t.Logf("swap effective after %v", time.Since(began))

	time.Sleep(settle)
	if got := c.get(rlsreload.ResultApplied) - applied; got != 1 {
		t.Errorf("the swap made %d reloads, want 1 (debounced)", got)
	}
	if got := c.get(rlsreload.ResultRefused); got != 0 {
		t.Errorf("the swap made %d refused reloads", got)
	}
}

func TestSignalReloads(t *testing.T) {
	// The file is a symlink to a target outside the watched directory, so
	// writing the target makes no event there: only the signal reloads.
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "real.yaml")
	write(t, target, limitFile("sig", 1))
	if err := os.Symlink(target, filepath.Join(dir, "sig.yaml")); err != nil {
		t.Fatal(err)
	}
	sig := make(chan os.Signal, 1)
	w, c := start(t, rlsreload.Options{Dir: dir, Signals: sig})

	write(t, target, limitFile("sig", 2))
	time.Sleep(settle)
	if got := rpu(w, "sig"); got != 1 {
		t.Fatalf("changed without a signal: %d", got)
	}
	sig <- syscall.SIGHUP
	if err := nextReload(t, c); err != nil {
		t.Fatalf("signal reload: %v", err)
	}
	if got := rpu(w, "sig"); got != 2 {
		t.Fatalf("after SIGHUP: %d, want 2", got)
	}
}

func TestTargetAndReload(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), limitFile("a", 1))
	var target atomic.Pointer[rlsconfig.Config]
	refuse := errors.New("policy p is unknown")
	var veto atomic.Bool
	w, err := rlsreload.New(rlsreload.Options{Dir: dir, Target: &target, Validate: func(*rlsconfig.Config) error {
		if veto.Load() {
			return refuse
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if target.Load() == nil || target.Load() != w.Config() {
		t.Fatal("New did not store the configuration in Target")
	}
	first := target.Load()
	veto.Store(true)
	if err := w.Reload(); !errors.Is(err, rlsreload.ErrRefused) || !errors.Is(err, refuse) {
		t.Fatalf("Reload with a refusing Validate: %v", err)
	}
	if target.Load() != first {
		t.Fatal("a refused reload replaced the configuration")
	}
	veto.Store(false)
	if err := w.Reload(); err != nil || target.Load() == first {
		t.Fatalf("Reload: %v", err)
	}
	w.Stop() // before Start: a no-op
}

func TestNewRefusesBadInitialSet(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), "domain: a\nbogus: 1\n")
	_, err := rlsreload.New(rlsreload.Options{Dir: dir})
	if !errors.Is(err, rlsconfig.ErrUnknownKey) {
		t.Fatalf("New: %v, want ErrUnknownKey", err)
	}
	if _, err := rlsreload.New(rlsreload.Options{}); err == nil {
		t.Fatal("New without a directory succeeded")
	}
	if _, err := rlsreload.New(rlsreload.Options{Dir: t.TempDir(), Debounce: 2 * time.Second}); err == nil {
		t.Fatal("New with a debounce above MaxDebounce succeeded")
	}
}

func TestStopOnContextAndTwice(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), limitFile("a", 1))
	w, err := rlsreload.New(rlsreload.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err == nil {
		t.Fatal("second Start succeeded")
	}
	cancel()
	w.Stop()
	w.Stop()
}
