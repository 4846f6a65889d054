package redistest

import (
	"crypto/sha256"
	_ "embed" // the shim's source
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

//go:embed clockshim/clockshim.c
var clockShimSource []byte

// WithClock starts the server with a wall clock the test controls
// (Server.Clock): redis-server runs with a small preloaded library
// (clockshim/clockshim.c, compiled with gcc once into the temporary
// directory, named by its source's hash) that adds an
// offset read from a file on every call to the realtime clock, so TIME,
// key expiry and everything else on the server's wall clock move when the
// test advances it; the monotonic clock (the event loop's timers) stays
// real. Process lane only: another lane skips the test; without gcc Start
// treats the lane as unavailable (a failure with REDIS_REQUIRED=1).
func WithClock() Option { return func(c *config) { c.clock = true } }

// Clock is a server's controlled wall clock (WithClock): real time plus an
// offset that only Advance changes. Safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	file   string
	offset time.Duration
}

var (
	shimOnce sync.Once
	shimPath string
	shimErr  error
	shimMiss string
)

// clockShim compiles the shim once per process into the temporary
// directory, named by its source's hash.
func clockShim() (path, missing string, err error) {
	shimOnce.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			shimMiss = "gcc not on PATH (WithClock compiles its clock shim)"
			return
		}
		// One file per source version, shared by every test process: no
		// temporary directory is left per run.
		sum := sha256.Sum256(clockShimSource)
		out := filepath.Join(os.TempDir(), "redistest-clockshim-"+hex.EncodeToString(sum[:8])+".so")
		if _, err := os.Stat(out); err == nil {
			shimPath = out
			return
		}
		dir, err := os.MkdirTemp("", "redistest-clockshim-build-")
		if err != nil {
			shimErr = fmt.Errorf("redistest: clock shim: %w", err)
			return
		}
		defer os.RemoveAll(dir)
		src, so := filepath.Join(dir, "clockshim.c"), filepath.Join(dir, "clockshim.so")
		if err := os.WriteFile(src, clockShimSource, 0o600); err != nil {
			shimErr = fmt.Errorf("redistest: clock shim: %w", err)
			return
		}
		if b, err := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-o", so, src).CombinedOutput(); err != nil {
			shimErr = fmt.Errorf("redistest: clock shim: gcc: %w: %s", err, b)
			return
		}
		if err := os.Rename(so, out); err != nil { // atomic: concurrent processes agree
			shimErr = fmt.Errorf("redistest: clock shim: %w", err)
			return
		}
		shimPath = out
	})
	return shimPath, shimMiss, shimErr
}

// newClock writes the offset file in dir and returns the clock and the
// environment that makes the server read it; missing names what is
// missing.
func newClock(dir string) (c *Clock, env []string, missing string, err error) {
	lib, missing, err := clockShim()
	if missing != "" || err != nil {
		return nil, nil, missing, err
	}
	c = &Clock{file: filepath.Join(dir, "clock-offset")}
	if err := c.write(0); err != nil {
		return nil, nil, "", err
	}
	return c, []string{"LD_PRELOAD=" + lib, "TLB_CLOCK_FILE=" + c.file}, "", nil
}

// write sets the offset file to d, in nanoseconds, atomically.
func (c *Clock) write(d time.Duration) error {
	tmp := c.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(int64(d), 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("redistest: clock: %w", err)
	}
	if err := os.Rename(tmp, c.file); err != nil {
		return fmt.Errorf("redistest: clock: %w", err)
	}
	return nil
}

// Advance moves the server's wall clock d forward (d >= 0).
func (c *Clock) Advance(t testing.TB, d time.Duration) {
	t.Helper()
	if d < 0 {
		t.Fatalf("redistest: clock: Advance(%v): the clock only moves forward", d)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.write(c.offset + d); err != nil {
		t.Fatal(err)
	}
	c.offset += d
}

// AdvanceToPhase moves the server's wall clock forward to the next
// instant that is phase past a multiple of period (by the server's clock,
// period and phase positive, phase < period), so that a test of aligned
// windows knows where their boundaries fall whenever it starts.
func (c *Clock) AdvanceToPhase(t testing.TB, period, phase time.Duration) {
	t.Helper()
	if period <= 0 || phase <= 0 || phase >= period {
		t.Fatalf("redistest: clock: AdvanceToPhase(%v, %v): want 0 < phase < period", period, phase)
	}
	into := time.Duration(time.Now().Add(c.Offset()).UnixNano() % int64(period))
	c.Advance(t, (period-into+phase)%period)
}

// Offset is how far the server's clock is ahead of real time.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}
