package rlsreload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
)

// DefaultDebounce is how long a Watcher gathers file events before one
// reload: a ConfigMap swap (several events within microseconds) is one
// reload, and a change takes effect well within a second.
const DefaultDebounce = 100 * time.Millisecond

// MaxDebounce bounds Options.Debounce, so a change always takes effect
// within about a second.
const MaxDebounce = 500 * time.Millisecond

// ErrRefused wraps every refused reload: the new set did not load or
// Validate refused it, and the previous configuration keeps serving.
var ErrRefused = errors.New("reload refused, the previous configuration keeps serving")

// Result is the outcome of one reload, for Metrics.
type Result int

// The reload results. The zero value is invalid.
const (
	// ResultApplied: the new set loaded and now serves.
	ResultApplied Result = iota + 1
	// ResultRefused: the new set was refused; the previous one serves.
	ResultRefused
)

// String is the label value: "applied" or "refused".
func (r Result) String() string {
	switch r {
	case ResultApplied:
		return "applied"
	case ResultRefused:
		return "refused"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// Metrics counts reloads by result; the caller implements it (a counter
// vector with a result label). It must be safe for concurrent use and
// fast.
type Metrics interface {
	Reload(Result)
}

// Trigger says what started a reload.
type Trigger int

// The reload triggers. The zero value is invalid.
const (
	// TriggerFile: a file event in the directory (write, create, remove,
	// rename, a ConfigMap swap).
	TriggerFile Trigger = iota + 1
	// TriggerSignal: a value on Options.Signals (SIGHUP).
	TriggerSignal
	// TriggerCall: a call of Watcher.Reload.
	TriggerCall
)

// String is "file", "signal" or "call".
func (t Trigger) String() string {
	switch t {
	case TriggerFile:
		return "file"
	case TriggerSignal:
		return "signal"
	case TriggerCall:
		return "call"
	}
	return fmt.Sprintf("Trigger(%d)", int(t))
}

// Options configure a Watcher. Dir is required; the rest may be zero.
type Options struct {
	// Dir is the directory whose *.yaml and *.yml files make the
	// configuration (rlsconfig.LoadDir).
	Dir string
	// Target is the pointer the server reads; New stores the first
	// configuration in it and every applied reload replaces it. nil: the
	// Watcher keeps its own (read it with Config).
	Target *atomic.Pointer[rlsconfig.Config]
	// Signals, when not nil, triggers a reload on every value (the
	// composition root passes a channel it gave signal.Notify for
	// syscall.SIGHUP).
	Signals <-chan os.Signal
	// Debounce gathers file events for this long before reloading once;
	// 0 means DefaultDebounce, and it must be at most MaxDebounce.
	// Signals reload at once.
	Debounce time.Duration
	// Validate, when not nil, may refuse a set that loads (for example
	// one naming a policy the server does not have); its error is part of
	// the refusal.
	Validate func(*rlsconfig.Config) error
	// OnReload, when not nil, is called after every reload attempt, from
	// the Watcher's goroutine (or Reload's caller): cfg is the new
	// configuration and err nil, or cfg nil and err wraps ErrRefused and
	// the reason.
	OnReload func(trigger Trigger, cfg *rlsconfig.Config, err error)
	// OnWatchError, when not nil, receives errors of the file watcher
	// itself (an overflowed event queue, for example); the Watcher goes on
	// and the next event or signal reloads.
	OnWatchError func(error)
	// Metrics, when not nil, counts reloads by result.
	Metrics Metrics
}

// Watcher keeps the configuration of a directory current. Most callers
// want New, Start, Config (or Options.Target) and Stop. Its methods are
// safe for concurrent use.
type Watcher struct {
	opts   Options
	target *atomic.Pointer[rlsconfig.Config]

	reloadMu sync.Mutex // serializes load-and-store

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// New loads the directory once (a set that does not load is an error: there
// is nothing to serve yet) and returns a Watcher serving it; Start begins
// watching.
func New(opts Options) (*Watcher, error) {
	if opts.Dir == "" {
		return nil, errors.New("rlsreload: options: dir is empty")
	}
	if opts.Debounce < 0 || opts.Debounce > MaxDebounce {
		return nil, fmt.Errorf("rlsreload: options: debounce %v is not within 0..%v", opts.Debounce, MaxDebounce)
	}
	if opts.Debounce == 0 {
		opts.Debounce = DefaultDebounce
	}
	w := &Watcher{opts: opts, target: opts.Target}
	if w.target == nil {
		w.target = new(atomic.Pointer[rlsconfig.Config])
	}
	cfg, err := w.load()
	if err != nil {
		return nil, fmt.Errorf("rlsreload: initial load of %q: %w", opts.Dir, err)
	}
	w.target.Store(cfg)
	return w, nil
}

// Config is the configuration serving now; never nil.
func (w *Watcher) Config() *rlsconfig.Config { return w.target.Load() }

// Start watches the directory until ctx is done or Stop is called. It
// returns an error if the directory cannot be watched, or if the Watcher
// was started before.
func (w *Watcher) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errors.New("rlsreload: watcher already started")
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("rlsreload: watch %q: %w", w.opts.Dir, err)
	}
	if err := fw.Add(w.opts.Dir); err != nil {
		_ = fw.Close()
		return fmt.Errorf("rlsreload: watch %q: %w", w.opts.Dir, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w.started, w.cancel, w.done = true, cancel, make(chan struct{})
	go w.run(ctx, fw)
	return nil
}

// Stop ends watching and waits for the Watcher's goroutine to return. The
// configuration keeps serving. Stop before Start, or twice, is a no-op.
func (w *Watcher) Stop() {
	w.mu.Lock()
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Reload loads the directory now: on success the new configuration
// serves and Reload returns nil; otherwise the error wraps ErrRefused and
// the reason, and the previous configuration keeps serving.
func (w *Watcher) Reload() error { return w.reload(TriggerCall) }

func (w *Watcher) run(ctx context.Context, fw *fsnotify.Watcher) {
	defer close(w.done)
	defer fw.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	armed := false
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-fw.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			// The window opens at the first event and is not extended, so
			// a steady stream of events still reloads every Debounce.
			if !armed {
				timer.Reset(w.opts.Debounce)
				armed = true
			}
		case err, ok := <-fw.Errors:
			if !ok {
				return
			}
			if w.opts.OnWatchError != nil {
				w.opts.OnWatchError(fmt.Errorf("rlsreload: watch %q: %w", w.opts.Dir, err))
			}
		case <-w.opts.Signals:
			_ = w.reload(TriggerSignal)
		case <-timer.C:
			armed = false
			_ = w.reload(TriggerFile)
		}
	}
}

func (w *Watcher) load() (*rlsconfig.Config, error) {
	cfg, err := rlsconfig.LoadDir(w.opts.Dir)
	if err != nil {
		return nil, err
	}
	if w.opts.Validate != nil {
		if err := w.opts.Validate(cfg); err != nil {
			return nil, fmt.Errorf("validate: %w", err)
		}
	}
	return cfg, nil
}

func (w *Watcher) reload(trigger Trigger) error {
	w.reloadMu.Lock()
	defer w.reloadMu.Unlock()
	cfg, err := w.load()
	result := ResultApplied
	if err != nil {
		err = fmt.Errorf("rlsreload: %s reload of %q: %w: %w", trigger, w.opts.Dir, ErrRefused, err)
		result, cfg = ResultRefused, nil
	} else {
		w.target.Store(cfg)
	}
	if w.opts.Metrics != nil {
		w.opts.Metrics.Reload(result)
	}
	if w.opts.OnReload != nil {
		w.opts.OnReload(trigger, cfg, err)
	}
	return err
}
