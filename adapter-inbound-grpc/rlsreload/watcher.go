package rlsreload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/dirwatch"
	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
)

// DefaultDebounce is how long a Watcher gathers file events before one
// reload (dirwatch.DefaultDebounce).
const DefaultDebounce = dirwatch.DefaultDebounce

// MaxDebounce bounds Options.Debounce (dirwatch.MaxDebounce).
const MaxDebounce = dirwatch.MaxDebounce

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

// Trigger says what started a reload (dirwatch.Trigger).
type Trigger = dirwatch.Trigger

// The reload triggers. The zero value is invalid.
const (
	// TriggerFile: a file event in the directory (write, create, remove,
	// rename, a ConfigMap swap).
	TriggerFile = dirwatch.TriggerFile
	// TriggerSignal: a value on Options.Signals (SIGHUP).
	TriggerSignal = dirwatch.TriggerSignal
	// TriggerCall: a call of Watcher.Reload.
	TriggerCall = dirwatch.TriggerCall
)

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

	dw *dirwatch.Watcher // the directory's events and the signals
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
	dw, err := dirwatch.New(dirwatch.Options{
		Dir:      opts.Dir,
		Reload:   func(t dirwatch.Trigger) { _ = w.reload(t) },
		Signals:  opts.Signals,
		Debounce: opts.Debounce,
		OnWatchError: func(err error) {
			if opts.OnWatchError != nil {
				opts.OnWatchError(fmt.Errorf("rlsreload: %w", err))
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("rlsreload: %w", err)
	}
	w.dw = dw
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
	if err := w.dw.Start(ctx); err != nil {
		return fmt.Errorf("rlsreload: %w", err)
	}
	return nil
}

// Stop ends watching and waits for the Watcher's goroutine to return. The
// configuration keeps serving. Stop before Start, or twice, is a no-op.
func (w *Watcher) Stop() { w.dw.Stop() }

// Reload loads the directory now: on success the new configuration
// serves and Reload returns nil; otherwise the error wraps ErrRefused and
// the reason, and the previous configuration keeps serving.
func (w *Watcher) Reload() error { return w.reload(TriggerCall) }

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
