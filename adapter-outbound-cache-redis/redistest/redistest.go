package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
)

// Environment variables read by [Start].
const (
	// EnvLane selects the lane: "process" (default), "container" or "external".
	EnvLane = "REDIS_TEST_LANE"
	// EnvImage names the container lane's image.
	EnvImage = "REDIS_TEST_IMAGE"
	// EnvAddr points the external lane at a loopback host:port.
	EnvAddr = "REDIS_TEST_ADDR"
	// EnvRequired, when true ("1"), turns a missing prerequisite into a test failure.
	EnvRequired = "REDIS_REQUIRED"
)

// Lane names returned by [Server.Lane].
const (
	LaneProcess   = "process"
	LaneContainer = "container"
	LaneExternal  = "external"
)

// DefaultImage is the container lane's image when REDIS_TEST_IMAGE is unset.
const DefaultImage = "tech-log/redis-test:local"

// startTimeout bounds how long Start and Restart wait for the server to answer PING.
const startTimeout = 15 * time.Second

// Capability is a fault control a lane may or may not offer; see [Server.Require].
type Capability int

// Capabilities a test can require.
const (
	// CapKill is [Server.Kill].
	CapKill Capability = iota + 1
	// CapRestart is [Server.Restart].
	CapRestart
	// CapPause is [Server.Pause] and [Server.Resume].
	CapPause
	// CapReplicate means two servers of the lane reach each other at their
	// Addr, so one can be made a syncing replica of the other (REPLICAOF).
	// Containers cannot: each container's 127.0.0.1 is its own.
	CapReplicate
)

// String returns the capability's method name.
func (c Capability) String() string {
	switch c {
	case CapKill:
		return "Kill"
	case CapReplicate:
		return "Replicate"
	case CapRestart:
		return "Restart"
	case CapPause:
		return "Pause"
	default:
		return "Capability(" + strconv.Itoa(int(c)) + ")"
	}
}

// Option configures the server [Start] launches.
type Option func(*config)

type directive struct{ name, value string }

type config struct {
	directives []directive
	tls        *tlsSetup // WithTLS; nil for plaintext
	// clusterNode makes the process lane start a cluster node
	// (redisserver.Config.Cluster: a free bus port chosen with the client
	// port on every start attempt).
	clusterNode bool
	// clock: WithClock.
	clock bool
}

// WithConfig sets a redis.conf directive on the server, for example
// WithConfig("maxmemory", "2mb") or WithConfig("enable-debug-command", "yes").
// The value is passed as one argument (quoted by redis-server if it holds
// spaces). Directives apply after the lane's defaults, so they override them.
// The external lane cannot apply directives: Start skips the test instead.
func WithConfig(name, value string) Option {
	return func(c *config) { c.directives = append(c.directives, directive{name, value}) }
}

func (c *config) validate() error {
	var errs []error
	for i, d := range c.directives {
		if d.name == "" || strings.ContainsAny(d.name, " \t\r\n\"'") || strings.HasPrefix(d.name, "-") {
			errs = append(errs, fmt.Errorf("redistest: config directive %d: invalid name %q", i, d.name))
		}
		if strings.ContainsAny(d.value, "\r\n") {
			errs = append(errs, fmt.Errorf("redistest: config directive %q: value %q contains a line break", d.name, d.value))
		}
	}
	return errors.Join(errs...)
}

// lane is what a Server needs from a lane implementation.
type lane interface {
	name() string
	addr() string
	caps() map[Capability]bool
	kill() error
	restart(ctx context.Context) error
	pause() error
	resume() error
	// close stops the server and releases everything; it returns when no
	// process or goroutine started by the lane is left.
	close() error
	// logTail returns the last lines of the server log, or "".
	logTail() string
	pid() int
}

// Server is a Redis server private to one test (except in the external
// lane). Its methods may be called from any goroutine; they fail the test
// that started the server (t.Fatal semantics are not used from other
// goroutines: errors there are reported with t.Error).
type Server struct {
	t       testing.TB
	lane    lane
	client  *redis.Client
	version string
	// tlsMaterial is set for a server started WithTLS.
	tlsMaterial *TLS

	mu        sync.Mutex
	pauseStop chan struct{} // non-nil while paused; closed on resume
	wg        sync.WaitGroup
}

// Start launches a private Redis server for t in the lane the environment
// selects and registers its removal with t.Cleanup. It skips t under
// testing.Short(), and when the lane's prerequisite is missing (for example
// redis-server not on PATH) unless REDIS_REQUIRED=1, in which case it fails t
// naming what is missing. A misconfigured environment (unknown lane,
// non-loopback REDIS_TEST_ADDR) always fails t.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("redistest: skipping Redis test under -short")
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	e, err := readEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.clock && e.lane != LaneProcess {
		t.Skipf("redistest: the %s lane cannot control a server's clock (WithClock)", e.lane)
	}
	if cfg.tls != nil {
		if e.lane != LaneProcess {
			t.Skipf("redistest: the %s lane cannot run a TLS server", e.lane)
		}
		if err := cfg.tls.prepare(t); err != nil {
			t.Fatal(err)
		}
	}

	var (
		l       lane
		missing string
	)
	switch e.lane {
	case LaneProcess:
		l, missing, err = startProcess(t, &cfg)
	case LaneContainer:
		l, missing, err = startContainer(t, &cfg, e.image)
	case LaneExternal:
		if len(cfg.directives) > 0 {
			t.Skipf("redistest: the external lane cannot apply config directives (%d given)", len(cfg.directives))
		}
		l, err = newExternal(e.addr)
	}
	switch decide(e.required, missing) {
	case verdictFail:
		t.Fatalf("redistest: %s lane unavailable: %s (%s=1)", e.lane, missing, EnvRequired)
	case verdictSkip:
		t.Skipf("redistest: %s lane unavailable: %s (set %s=1 to fail instead)", e.lane, missing, EnvRequired)
	}
	if err != nil {
		t.Fatal(err)
	}

	s := &Server{t: t, lane: l}
	if cfg.tls != nil {
		s.tlsMaterial = cfg.tls.m
	}
	s.client = redis.NewClient(s.adminOptions())
	t.Cleanup(s.cleanup)

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	info, err := s.client.Info(ctx, "server").Result()
	if err != nil {
		t.Fatalf("redistest: INFO server on %s: %v%s", l.addr(), err, s.tail())
	}
	s.version, _ = redisinfo.Field(info, "redis_version")
	if s.version == "" {
		t.Fatalf("redistest: INFO server on %s: no redis_version field%s", l.addr(), s.tail())
	}
	return s
}

func (s *Server) adminOptions() *redis.Options {
	o := s.Options()
	o.MaxRetries = -1
	o.DialerRetries = 1 // a dead server answers at once, not after 5 dials
	o.DialTimeout = 2 * time.Second
	o.ReadTimeout = 5 * time.Second
	o.WriteTimeout = 5 * time.Second
	if s.tlsMaterial != nil {
		o.TLSConfig = s.tlsMaterial.adminConfig(hostOf(o.Addr))
	}
	return o
}

// Addr returns the server address, "127.0.0.1:port" in the process and
// container lanes. It stays the same across Restart.
func (s *Server) Addr() string { return s.lane.addr() }

// Options returns fresh base client options (Addr, Protocol 3, and for a
// server started WithTLS the TLS.ClientConfig) for a client the test
// configures and closes itself.
func (s *Server) Options() *redis.Options {
	o := &redis.Options{Addr: s.lane.addr(), Protocol: 3}
	if s.tlsMaterial != nil {
		o.TLSConfig = s.tlsMaterial.ClientConfig()
	}
	return o
}

// Client returns the admin client owned by the Server (MaxRetries -1),
// closed at cleanup. Tests must not close it.
func (s *Server) Client() *redis.Client { return s.client }

// Clock is the server's controlled clock; it fails the test unless the
// server was started WithClock.
func (s *Server) Clock() *Clock {
	s.t.Helper()
	if p, ok := s.lane.(*processLane); ok && p.clock != nil {
		return p.clock
	}
	s.t.Fatal("redistest: Clock: the server was not started WithClock")
	return nil
}

// Version returns the server's redis_version, for example "7.0.15".
func (s *Server) Version() string { return s.version }

// Lane returns "process", "container" or "external".
func (s *Server) Lane() string { return s.lane.name() }

// PID returns the redis-server process id in the process lane, 0 otherwise
// (and 0 after Kill until Restart).
func (s *Server) PID() int { return s.lane.pid() }

// Require skips t unless the lane offers every capability in caps.
func (s *Server) Require(t testing.TB, caps ...Capability) {
	t.Helper()
	have := s.lane.caps()
	var lacking []string
	for _, c := range caps {
		if !have[c] {
			lacking = append(lacking, c.String())
		}
	}
	if len(lacking) > 0 {
		t.Skipf("redistest: the %s lane cannot %s", s.lane.name(), strings.Join(lacking, ", "))
	}
}

func (s *Server) must(c Capability) {
	s.t.Helper()
	if !s.lane.caps()[c] {
		s.t.Fatalf("redistest: the %s lane cannot %s (call Require first)", s.lane.name(), c)
	}
}

func (s *Server) cleanup() {
	s.mu.Lock()
	s.endPauseLocked(true)
	s.mu.Unlock()
	s.wg.Wait()
	if err := s.client.Close(); err != nil {
		s.t.Errorf("redistest: close admin client: %v", err)
	}
	if s.t.Failed() {
		if tail := s.tail(); tail != "" {
			s.t.Logf("redistest: %s lane server log%s", s.lane.name(), tail)
		}
	}
	if err := s.lane.close(); err != nil {
		s.t.Errorf("redistest: stop server: %v", err)
	}
}

func (s *Server) tail() string { return tailSuffix(s.lane.logTail()) }
