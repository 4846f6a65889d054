package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/rediscluster"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
)

// Defaults of [StartSentinel].
const (
	// DefaultMasterName is the name the sentinels monitor the primary under.
	DefaultMasterName = "mymaster"
	// DefaultDownAfter is the sentinels' down-after-milliseconds.
	DefaultDownAfter = 1 * time.Second
)

// SentinelOption configures the set [StartSentinel] creates.
type SentinelOption func(*sentinelConfig)

type sentinelConfig struct {
	replicas  int
	sentinels int
	downAfter time.Duration
	opts      []Option
}

// WithSentinelReplicas sets the number of replicas (0..4; default 2).
func WithSentinelReplicas(n int) SentinelOption {
	return func(c *sentinelConfig) { c.replicas = n }
}

// WithDownAfter sets the sentinels' down-after-milliseconds (at least
// 100ms; default DefaultDownAfter).
func WithDownAfter(d time.Duration) SentinelOption {
	return func(c *sentinelConfig) { c.downAfter = d }
}

// WithServerConfig sets a redis.conf directive on the primary and every
// replica (see WithConfig).
func WithServerConfig(name, value string) SentinelOption {
	return func(c *sentinelConfig) { c.opts = append(c.opts, WithConfig(name, value)) }
}

// Sentinel is a primary, its replicas and three redis-sentinel processes
// monitoring it as DefaultMasterName, all loopback processes private to one
// test and removed with t.Cleanup.
type Sentinel struct {
	t         testing.TB
	servers   []*Server
	sentinels []*sentinelNode
	downAfter time.Duration
}

// sentinelNode is one redis-sentinel process and its client.
type sentinelNode struct {
	lane   *processLane
	client *redis.SentinelClient
}

// StartSentinel starts a primary, two replicas and three sentinels (quorum
// 2) and returns once every sentinel reports the primary, both replicas
// and the two other sentinels. It needs the process lane and
// redis-sentinel on PATH (the Debian package redis-sentinel); a missing
// binary skips t unless REDIS_REQUIRED=1.
func StartSentinel(t testing.TB, opts ...SentinelOption) *Sentinel {
	t.Helper()
	cfg := sentinelConfig{replicas: 2, sentinels: 3, downAfter: DefaultDownAfter}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.replicas < 0 || cfg.replicas > 4 {
		t.Fatalf("redistest: sentinel replicas %d: want 0..4", cfg.replicas)
	}
	if cfg.downAfter < 100*time.Millisecond {
		t.Fatalf("redistest: sentinel down-after %v: want at least 100ms", cfg.downAfter)
	}
	requireProcessLane(t, "a sentinel set")
	e, err := readEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := exec.LookPath("redis-sentinel")
	missing := ""
	if err != nil {
		missing = "redis-sentinel not on PATH (Debian package redis-sentinel)"
	}
	switch decide(e.required, missing) {
	case verdictFail:
		t.Fatalf("redistest: sentinel unavailable: %s (%s=1)", missing, EnvRequired)
	case verdictSkip:
		t.Skipf("redistest: sentinel unavailable: %s (set %s=1 to fail instead)", missing, EnvRequired)
	}

	s := &Sentinel{t: t, downAfter: cfg.downAfter}
	serverOpts := append([]Option{WithConfig("repl-diskless-sync-delay", "0")}, cfg.opts...)
	for range 1 + cfg.replicas {
		s.servers = append(s.servers, Start(t, serverOpts...))
	}
	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	host, port, _ := net.SplitHostPort(s.servers[0].Addr())
	for _, r := range s.servers[1:] {
		if err := r.Client().Do(ctx, "replicaof", host, port).Err(); err != nil {
			t.Fatalf("redistest: node %s: REPLICAOF %s: %v", r.Addr(), s.servers[0].Addr(), err)
		}
	}
	if err := poll(ctx, func() error { return replicasUp(ctx, s.servers[0], cfg.replicas) }); err != nil {
		t.Fatalf("redistest: replicas of %s not in sync within %v: %v", s.servers[0].Addr(), topologyTimeout, err)
	}
	for range cfg.sentinels {
		n, err := startSentinelNode(t, bin, s.servers[0].Addr(), cfg.downAfter)
		if n != nil {
			s.sentinels = append(s.sentinels, n)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := poll(ctx, func() error { return s.agreed(ctx, s.servers[0], nil) }); err != nil {
		t.Fatalf("redistest: sentinels did not agree within %v: %v", topologyTimeout, err)
	}
	return s
}

// replicasUp reports whether primary has n connected replicas in sync.
func replicasUp(ctx context.Context, primary *Server, n int) error {
	repl, err := rediscluster.Replication(ctx, primary.Client())
	if err != nil {
		return err
	}
	if repl.Role != redisinfo.RolePrimary || repl.Online() != n {
		return fmt.Errorf("primary %s: role %s, %d of %d replicas online", primary.Addr(), repl.Role, repl.Online(), n)
	}
	return nil
}

// startSentinelNode starts redis-sentinel on a free loopback port,
// monitoring primary with quorum 2, and registers its removal. It returns
// the node whenever a process was started, so the caller's cleanup holds.
func startSentinelNode(t testing.TB, bin, primary string, downAfter time.Duration) (*sentinelNode, error) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	host, port, _ := net.SplitHostPort(primary)
	text := strings.Join([]string{
		"bind 127.0.0.1",
		"protected-mode no",
		"dir " + dir,
		"logfile \"\"",
		"sentinel resolve-hostnames no",
		fmt.Sprintf("sentinel monitor %s %s %s 2", DefaultMasterName, host, port),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", DefaultMasterName, downAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", DefaultMasterName, 10_000),
		fmt.Sprintf("sentinel parallel-syncs %s 2", DefaultMasterName),
		"",
	}, "\n")
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return nil, fmt.Errorf("redistest: write sentinel config: %w", err)
	}
	p := &processLane{proc: &redisserver.Process{Bin: bin, Args: []string{conf}, LogPath: filepath.Join(dir, "sentinel.log")}}
	n := &sentinelNode{lane: p}
	t.Cleanup(func() {
		if n.client != nil {
			_ = n.client.Close()
		}
		if t.Failed() {
			if tail := tailSuffix(p.logTail()); tail != "" {
				t.Logf("redistest: sentinel %s log%s", p.addr(), tail)
			}
		}
		p.stop()
	})
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := p.proc.StartOnFreePort(ctx); err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	n.client = redis.NewSentinelClient(&redis.Options{
		Addr: p.addr(), Protocol: 3, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
	})
	return n, nil
}

// agreed reports whether every running sentinel names master as the
// primary, sees the other sentinels and every running server but master
// and except as a replica of master with its link up.
func (s *Sentinel) agreed(ctx context.Context, master, except *Server) error {
	var running []*sentinelNode
	for _, n := range s.sentinels {
		if n.lane.pid() != 0 {
			running = append(running, n)
		}
	}
	wantReplicas := 0
	for _, srv := range s.servers {
		if srv != master && srv != except && srv.PID() != 0 {
			wantReplicas++
		}
	}
	for _, n := range running {
		addr, err := n.client.GetMasterAddrByName(ctx, DefaultMasterName).Result()
		if err != nil {
			return fmt.Errorf("sentinel %s: get-master-addr-by-name: %w", n.lane.addr(), err)
		}
		if got := net.JoinHostPort(addr[0], addr[1]); got != master.Addr() {
			return fmt.Errorf("sentinel %s names %s, want %s", n.lane.addr(), got, master.Addr())
		}
		m, err := n.client.Master(ctx, DefaultMasterName).Result()
		if err != nil {
			return fmt.Errorf("sentinel %s: SENTINEL MASTER: %w", n.lane.addr(), err)
		}
		if m["flags"] != "master" {
			return fmt.Errorf("sentinel %s: master flags %q", n.lane.addr(), m["flags"])
		}
		if m["num-other-sentinels"] != strconv.Itoa(len(s.sentinels)-1) {
			return fmt.Errorf("sentinel %s: %s other sentinels, want %d", n.lane.addr(), m["num-other-sentinels"], len(s.sentinels)-1)
		}
		replicas, err := n.client.Replicas(ctx, DefaultMasterName).Result()
		if err != nil {
			return fmt.Errorf("sentinel %s: SENTINEL REPLICAS: %w", n.lane.addr(), err)
		}
		good := 0
		for _, r := range replicas {
			if r["flags"] == "slave" && r["master-link-status"] == "ok" && r["master-host"]+":"+r["master-port"] == master.Addr() {
				good++
			}
		}
		if good < wantReplicas {
			return fmt.Errorf("sentinel %s: %d healthy replicas of %s, want %d", n.lane.addr(), good, master.Addr(), wantReplicas)
		}
	}
	return nil
}

// MasterName returns the name the sentinels monitor the primary under.
func (s *Sentinel) MasterName() string { return DefaultMasterName }

// Servers returns the primary (first, as started) and the replicas.
func (s *Sentinel) Servers() []*Server { return append([]*Server(nil), s.servers...) }

// SentinelAddrs returns the sentinels' addresses.
func (s *Sentinel) SentinelAddrs() []string {
	out := make([]string, len(s.sentinels))
	for i, n := range s.sentinels {
		out[i] = n.lane.addr()
	}
	return out
}

// Master returns the server every running sentinel currently names as the
// primary (failing t when they disagree or name no server of the set).
func (s *Sentinel) Master() *Server {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got *Server
	for _, n := range s.sentinels {
		if n.lane.pid() == 0 {
			continue
		}
		addr, err := n.client.GetMasterAddrByName(ctx, DefaultMasterName).Result()
		if err != nil {
			s.t.Fatalf("redistest: sentinel %s: get-master-addr-by-name: %v", n.lane.addr(), err)
		}
		srv := s.server(net.JoinHostPort(addr[0], addr[1]))
		if srv == nil || got != nil && srv != got {
			s.t.Fatalf("redistest: sentinels disagree on the master (%v)", addr)
		}
		got = srv
	}
	if got == nil {
		s.t.Fatal("redistest: no running sentinel")
	}
	return got
}

// server returns the data node at addr, or nil.
func (s *Sentinel) server(addr string) *Server { return serverAt(s.servers, addr) }

// Failover asks a sentinel for a forced failover (SENTINEL FAILOVER) and
// waits as WaitNewMaster does. It returns the new primary.
func (s *Sentinel) Failover() *Server {
	s.t.Helper()
	old := s.Master()
	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	// A failover refused because one is already running (INPROG) or the
	// replicas are not yet known (NOGOODSLAVE) is retried.
	err := poll(ctx, func() error {
		return s.sentinels[0].client.Failover(ctx, DefaultMasterName).Err()
	})
	if err != nil {
		s.t.Fatalf("redistest: SENTINEL FAILOVER: %v", err)
	}
	return s.WaitNewMaster(old)
}

// WaitNewMaster waits (bounded) until the running sentinels agree on a
// primary other than old that answers ROLE master and that every other
// running replica follows, and returns it. It does not wait for old to be
// converted into a replica (sentinels do that on their next 10-second INFO
// poll of old).
func (s *Sentinel) WaitNewMaster(old *Server) *Server {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	var master *Server
	err := poll(ctx, func() error {
		for _, n := range s.sentinels {
			if n.lane.pid() == 0 {
				continue
			}
			addr, err := n.client.GetMasterAddrByName(ctx, DefaultMasterName).Result()
			if err != nil {
				return err
			}
			master = s.server(net.JoinHostPort(addr[0], addr[1]))
			break
		}
		if master == nil || master == old {
			return errors.New("no new master named yet")
		}
		role, err := nodeRole(ctx, master)
		if err != nil {
			return err
		}
		if role != "master" {
			return fmt.Errorf("%s named but still a %s", master.Addr(), role)
		}
		return s.agreed(ctx, master, old)
	})
	if err != nil {
		s.t.Fatalf("redistest: no new master within %v: %v", topologyTimeout, err)
	}
	return master
}

// CommandCalls sums INFO commandstats calls of the named commands over
// every running server of the set (see Cluster.CommandCalls).
func (s *Sentinel) CommandCalls(commands ...string) int64 {
	s.t.Helper()
	var live []*Server
	for _, srv := range s.servers {
		if srv.PID() != 0 {
			live = append(live, srv)
		}
	}
	return sumCommandCalls(s.t, live, commands)
}
