package dirwatch_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/dirwatch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// within bounds every wait: a change must be seen within a second.
const within = time.Second

// recorder collects the triggers Reload was called with.
type recorder struct {
	mu       sync.Mutex
	triggers []dirwatch.Trigger
	seen     chan struct{}
}

func newRecorder() *recorder { return &recorder{seen: make(chan struct{}, 64)} }

func (r *recorder) reload(t dirwatch.Trigger) {
	r.mu.Lock()
	r.triggers = append(r.triggers, t)
	r.mu.Unlock()
	r.seen <- struct{}{}
}

func (r *recorder) wait(t *testing.T, want dirwatch.Trigger) {
	t.Helper()
	select {
	case <-r.seen:
	case <-time.After(within):
		t.Fatalf("no %s reload within %v", want, within)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if got := r.triggers[len(r.triggers)-1]; got != want {
		t.Fatalf("trigger %s, want %s", got, want)
	}
}

func (r *recorder) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-r.seen:
		t.Fatalf("a reload for an event Match refuses")
	case <-time.After(d):
	}
}

func start(t *testing.T, opts dirwatch.Options) {
	t.Helper()
	w, err := dirwatch.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

// TestConfigMapSwapIsOneReload: the kubelet's atomic writer (a new
// timestamped directory, a ..data_tmp symlink renamed over ..data) seen
// through the file's own symlink is a reload; an unrelated file is not.
func TestConfigMapSwapIsOneReload(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "..v1", "policies.json"), "1")
	mustSymlink(t, "..v1", filepath.Join(dir, "..data"))
	mustSymlink(t, filepath.Join("..data", "policies.json"), filepath.Join(dir, "policies.json"))

	r := newRecorder()
	start(t, dirwatch.Options{Dir: dir, Reload: r.reload, Match: func(name string) bool {
		return name == "policies.json" || name == "..data"
	}})

	mustWrite(t, filepath.Join(dir, "unrelated.txt"), "x")
	r.none(t, 3*dirwatch.DefaultDebounce)

	mustWrite(t, filepath.Join(dir, "..v2", "policies.json"), "2")
	mustSymlink(t, "..v2", filepath.Join(dir, "..data_tmp"))
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	r.wait(t, dirwatch.TriggerFile)
	if b, err := os.ReadFile(filepath.Join(dir, "policies.json")); err != nil || string(b) != "2" {
		t.Fatalf("the file reads %q, %v after the swap", b, err)
	}
}

// TestSignalReloadsAtOnce: a value on Signals is a reload, without waiting
// for the debounce.
func TestSignalReloadsAtOnce(t *testing.T) {
	hup := make(chan os.Signal, 1)
	r := newRecorder()
	start(t, dirwatch.Options{Dir: t.TempDir(), Reload: r.reload, Signals: hup, Debounce: dirwatch.MaxDebounce})
	hup <- syscall.SIGHUP
	r.wait(t, dirwatch.TriggerSignal)
}

// TestOptionsChecked: a missing directory or reload function, or a
// debounce beyond MaxDebounce, is refused by New.
func TestOptionsChecked(t *testing.T) {
	for name, opts := range map[string]dirwatch.Options{
		"no dir":        {Reload: func(dirwatch.Trigger) {}},
		"no reload":     {Dir: t.TempDir()},
		"long debounce": {Dir: t.TempDir(), Reload: func(dirwatch.Trigger) {}, Debounce: 2 * dirwatch.MaxDebounce},
	} {
		if _, err := dirwatch.New(opts); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

func mustWrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
