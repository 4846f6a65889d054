package dirwatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long a Watcher gathers file events before one
// reload: a ConfigMap swap (several events within microseconds) is one
// reload, and a change takes effect well within a second.
const DefaultDebounce = 100 * time.Millisecond

// MaxDebounce bounds Options.Debounce, so a change always takes effect
// within about a second.
const MaxDebounce = 500 * time.Millisecond

// Trigger says what started a reload.
type Trigger int

// The reload triggers. The zero value is invalid.
const (
	// TriggerFile: a file event in the directory (write, create, remove,
	// rename, a ConfigMap swap).
	TriggerFile Trigger = iota + 1
	// TriggerSignal: a value on Options.Signals (SIGHUP).
	TriggerSignal
	// TriggerCall: a reload the caller asked for by a call.
	TriggerCall
)

// String is "file", "signal" or "call", the metrics label.
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

// Options configure a Watcher. Dir and Reload are required; the rest may
// be zero.
type Options struct {
	// Dir is the directory watched (not recursively). To follow one file
	// through a ConfigMap's symlink swap, watch its parent directory.
	Dir string
	// Reload is called once per debounced burst of events (TriggerFile)
	// and once per signal (TriggerSignal), from the Watcher's goroutine,
	// never concurrently with itself.
	Reload func(Trigger)
	// Match, when not nil, selects the events that count by the base name
	// of the file they name; nil counts every event but a bare chmod.
	Match func(name string) bool
	// Signals, when not nil, triggers a reload on every value.
	Signals <-chan os.Signal
	// Debounce gathers file events for this long before reloading once;
	// 0 means DefaultDebounce, and it must be at most MaxDebounce.
	Debounce time.Duration
	// OnWatchError, when not nil, receives errors of the file watcher
	// itself (an overflowed event queue, for example); the Watcher goes on
	// and the next event or signal reloads.
	OnWatchError func(error)
}

// Watcher runs Options.Reload on changes of a directory and on signals.
// Most callers want New, Start and Stop. Its methods are safe for
// concurrent use.
type Watcher struct {
	opts Options

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// New checks opts and returns a Watcher; Start begins watching.
func New(opts Options) (*Watcher, error) {
	var errs []error
	if opts.Dir == "" {
		errs = append(errs, errors.New("dirwatch: options: dir is empty"))
	}
	if opts.Reload == nil {
		errs = append(errs, errors.New("dirwatch: options: reload is nil"))
	}
	if opts.Debounce < 0 || opts.Debounce > MaxDebounce {
		errs = append(errs, fmt.Errorf("dirwatch: options: debounce %v is not within 0..%v", opts.Debounce, MaxDebounce))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.Debounce == 0 {
		opts.Debounce = DefaultDebounce
	}
	return &Watcher{opts: opts}, nil
}

// Start watches the directory until ctx is done or Stop is called. It
// returns an error if the directory cannot be watched, or if the Watcher
// was started before.
func (w *Watcher) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errors.New("dirwatch: watcher already started")
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("dirwatch: watch %q: %w", w.opts.Dir, err)
	}
	if err := fw.Add(w.opts.Dir); err != nil {
		_ = fw.Close()
		return fmt.Errorf("dirwatch: watch %q: %w", w.opts.Dir, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w.started, w.cancel, w.done = true, cancel, make(chan struct{})
	go w.run(ctx, fw)
	return nil
}

// Stop ends watching and waits for the Watcher's goroutine to return (and
// with it a Reload in progress). Stop before Start, or twice, is a no-op.
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
			if ev.Op == fsnotify.Chmod || !w.counts(ev.Name) {
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
				w.opts.OnWatchError(fmt.Errorf("dirwatch: watch %q: %w", w.opts.Dir, err))
			}
		case <-w.opts.Signals:
			w.opts.Reload(TriggerSignal)
		case <-timer.C:
			armed = false
			w.opts.Reload(TriggerFile)
		}
	}
}

// counts applies Options.Match to the base name of an event's file.
func (w *Watcher) counts(name string) bool {
	if w.opts.Match == nil {
		return true
	}
	return w.opts.Match(filepath.Base(name))
}
