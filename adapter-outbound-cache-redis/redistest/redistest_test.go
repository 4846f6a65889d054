package redistest

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Every lane's cleanup must leave no goroutine behind (other packages
	// of the module run goleak too).
	goleak.VerifyTestMain(m)
}

func newClient(t *testing.T, s *Server, mutate func(*redis.Options)) *redis.Client {
	t.Helper()
	o := s.Options()
	o.MaxRetries = -1
	if mutate != nil {
		mutate(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestStartPing(t *testing.T) {
	s := Start(t)
	ctx := AdminCtx(t)

	host, _, err := net.SplitHostPort(s.Addr())
	require.NoError(t, err)
	if s.Lane() != LaneExternal {
		assert.Equal(t, "127.0.0.1", host)
	}
	assert.Regexp(t, `^\d+\.\d+\.\d+$`, s.Version())
	require.NoError(t, s.Client().Ping(ctx).Err())

	o := s.Options()
	assert.Equal(t, s.Addr(), o.Addr)
	assert.Equal(t, 3, o.Protocol)
	assert.NotSame(t, o, s.Options(), "Options must return fresh options each call")
	assert.Equal(t, -1, s.adminOptions().MaxRetries, "the admin client never retries")

	hello, err := newClient(t, s, nil).Do(ctx, "HELLO").Result()
	require.NoError(t, err)
	m, ok := hello.(map[any]any)
	require.Truef(t, ok, "HELLO reply %#v", hello)
	assert.EqualValues(t, 3, m["proto"])
}

func TestWithConfig(t *testing.T) {
	s := Start(t,
		WithConfig("maxmemory", "2mb"),
		WithConfig("maxmemory-policy", "noeviction"),
		WithConfig("enable-debug-command", "yes"),
	)
	ctx := AdminCtx(t)
	tests := []struct{ directive, want string }{
		{"maxmemory", "2097152"},
		{"maxmemory-policy", "noeviction"},
		{"enable-debug-command", "yes"},
		{"save", ""},
		{"appendonly", "no"},
	}
	for _, tt := range tests {
		t.Run(tt.directive, func(t *testing.T) {
			got, err := s.Client().ConfigGet(ctx, tt.directive).Result()
			require.NoError(t, err)
			assert.Equal(t, map[string]string{tt.directive: tt.want}, got)
		})
	}
	if s.Lane() == LaneProcess {
		got, err := s.Client().ConfigGet(ctx, "bind").Result()
		require.NoError(t, err)
		assert.Equal(t, "127.0.0.1", got["bind"])
	}
	// enable-debug-command yes: DEBUG answers instead of refusing.
	require.NoError(t, s.Client().Do(ctx, "DEBUG", "SLEEP", "0").Err())
}

func TestWithConfigInvalidDirectiveName(t *testing.T) {
	for _, name := range []string{"", "max memory", "--port", "a\nb"} {
		cfg := config{}
		WithConfig(name, "1")(&cfg)
		assert.Errorf(t, cfg.validate(), "name %q", name)
	}
	cfg := config{}
	WithConfig("maxmemory", "1mb\nport 1")(&cfg)
	assert.Error(t, cfg.validate())
	cfg = config{}
	WithConfig("maxmemory", "2mb")(&cfg)
	assert.NoError(t, cfg.validate())
}

func TestKillRestart(t *testing.T) {
	s := Start(t)
	s.Require(t, CapKill, CapRestart)
	ctx := AdminCtx(t)
	addr := s.Addr()
	require.NoError(t, s.Client().Set(ctx, "k", "v", 0).Err())

	s.Kill()
	probe := newClient(t, s, func(o *redis.Options) {
		o.DialTimeout = 300 * time.Millisecond
		o.ReadTimeout = 300 * time.Millisecond
	})
	require.Error(t, probe.Ping(ctx).Err(), "PING must fail after Kill")
	require.Error(t, s.Client().Ping(ctx).Err(), "admin PING must fail after Kill")

	s.Restart()
	assert.Equal(t, addr, s.Addr(), "Restart keeps the address")
	require.NoError(t, s.Client().Ping(ctx).Err())
	require.NoError(t, probe.Ping(ctx).Err())
	n, err := s.Client().DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "dataset must be empty after Restart")
	assert.ErrorIs(t, s.Client().Get(ctx, "k").Err(), redis.Nil)
}

func TestRestartKeepsConfig(t *testing.T) {
	s := Start(t, WithConfig("maxmemory", "3mb"))
	s.Require(t, CapRestart)
	ctx := AdminCtx(t)
	s.Restart() // from running: kills first
	got, err := s.Client().ConfigGet(ctx, "maxmemory").Result()
	require.NoError(t, err)
	assert.Equal(t, "3145728", got["maxmemory"])
}

func TestPauseResume(t *testing.T) {
	s := Start(t)
	s.Require(t, CapPause)
	ctx := AdminCtx(t)
	c := newClient(t, s, func(o *redis.Options) {
		o.ReadTimeout = 100 * time.Millisecond
		o.WriteTimeout = 100 * time.Millisecond
		o.PoolSize = 1
	})
	require.NoError(t, c.Ping(ctx).Err())

	s.Pause(time.Minute)
	err := c.Ping(ctx).Err()
	require.Error(t, err, "PING must time out while paused")
	var ne net.Error
	assert.Truef(t, errors.As(err, &ne) && ne.Timeout(), "want a timeout, got %v", err)

	s.Resume()
	s.Resume() // idempotent
	require.Eventually(t, func() bool { return c.Ping(ctx).Err() == nil }, 5*time.Second, 20*time.Millisecond)
}

func TestPauseEndsByItself(t *testing.T) {
	s := Start(t)
	s.Require(t, CapPause)
	ctx := AdminCtx(t)
	s.Pause(200 * time.Millisecond)
	s.Pause(300 * time.Millisecond) // re-pause moves the deadline
	start := time.Now()
	c := newClient(t, s, func(o *redis.Options) { o.ReadTimeout = 5 * time.Second })
	require.NoError(t, c.Ping(ctx).Err(), "the server resumes after d without Resume")
	// Only a lower bound: a pause that ends early would not be a pause.
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
}

func TestKillWhilePausedThenRestart(t *testing.T) {
	s := Start(t)
	s.Require(t, CapKill, CapRestart, CapPause)
	ctx := AdminCtx(t)
	s.Pause(time.Minute)
	s.Kill()
	s.Resume() // no pause left: nothing to do
	s.Restart()
	require.NoError(t, s.Client().Ping(ctx).Err())
}

func TestCleanupLeavesNoProcess(t *testing.T) {
	if lane := os.Getenv(EnvLane); lane != "" && lane != LaneProcess {
		t.Skip("pid check is for the process lane")
	}
	var pids []int
	t.Run("server", func(t *testing.T) {
		s := Start(t)
		s.Require(t, CapKill, CapRestart, CapPause)
		pids = append(pids, s.PID())
		s.Kill()
		assert.Zero(t, s.PID())
		s.Restart()
		pids = append(pids, s.PID())
		s.Pause(time.Minute) // cleanup must thaw, stop the timer and kill
	})
	if len(pids) == 0 {
		t.Skip("the server subtest skipped")
	}
	require.Len(t, pids, 2)
	for _, pid := range pids {
		require.Positive(t, pid)
		err := syscall.Kill(pid, 0)
		assert.ErrorIsf(t, err, syscall.ESRCH, "pid %d must be gone (killed and reaped) after cleanup", pid)
	}
}

func TestCleanupRemovesContainer(t *testing.T) {
	if os.Getenv(EnvLane) != LaneContainer {
		t.Skip("container check is for the container lane")
	}
	var id string
	t.Run("server", func(t *testing.T) {
		s := Start(t)
		c, ok := s.lane.(*containerLane)
		require.True(t, ok)
		id = c.id()
		s.Pause(time.Minute) // cleanup must unpause and remove it anyway
	})
	if id == "" {
		t.Skip("the server subtest skipped")
	}
	docker, err := testcontainers.NewDockerClientWithOpts(AdminCtx(t))
	require.NoError(t, err)
	defer docker.Close()
	list, err := docker.ContainerList(AdminCtx(t), client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("id", id)})
	require.NoError(t, err)
	assert.Emptyf(t, list.Items, "container %s must be removed (not just stopped) after cleanup", id)
}

func TestRequireSkipsMissingCapability(t *testing.T) {
	s := &Server{lane: &externalLane{address: "127.0.0.1:1"}}
	var skipped bool
	t.Run("external", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		s.Require(t, CapKill)
	})
	assert.True(t, skipped, "Require must skip when the lane lacks Kill")

	p := &Server{lane: &processLane{}}
	t.Run("process", func(t *testing.T) {
		p.Require(t, CapKill, CapRestart, CapPause)
		skipped = t.Skipped()
	})
	assert.False(t, skipped, "the process lane has every capability")
}

func TestCheckExternalAddr(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:6379", true},
		{"127.12.0.3:7000", true},
		{"[::1]:6379", true},
		{"[::ffff:127.0.0.1]:6379", true},
		{"10.0.0.5:6379", false},
		{"192.168.1.2:6379", false},
		{"0.0.0.0:6379", false},
		{"[::]:6379", false},
		{"[2001:db8::1]:6379", false},
		{"8.8.8.8:6379", false},
		{"localhost:6379", false},
		{"redis.example.com:6379", false},
		{"127.0.0.1", false},
		{"127.0.0.1:", false},
		{"127.0.0.1:0", false},
		{"[fe80::1%lo]:6379", false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			err := checkExternalAddr(tt.addr)
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), EnvAddr)
		})
	}
	assert.ErrorIs(t, checkExternalAddr("10.1.2.3:6379"), ErrNotLoopback)
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name     string
		required bool
		missing  string
		want     verdict
	}{
		{"available", false, "", verdictRun},
		{"available required", true, "", verdictRun},
		{"missing skips", false, "redis-server not on PATH", verdictSkip},
		{"missing required fails", true, "redis-server not on PATH", verdictFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, decide(tt.required, tt.missing))
		})
	}
}

func TestReadEnv(t *testing.T) {
	tests := []struct {
		name    string
		vars    map[string]string
		want    env
		wantErr bool
	}{
		{"default", nil, env{lane: LaneProcess, image: DefaultImage}, false},
		{"required", map[string]string{EnvRequired: "1"}, env{lane: LaneProcess, image: DefaultImage, required: true}, false},
		{"not required", map[string]string{EnvRequired: "0"}, env{lane: LaneProcess, image: DefaultImage}, false},
		{"required garbage", map[string]string{EnvRequired: "yes please"}, env{}, true},
		{"container", map[string]string{EnvLane: "container", EnvImage: "x:y"}, env{lane: LaneContainer, image: "x:y"}, false},
		{"addr implies external", map[string]string{EnvAddr: "127.0.0.1:6380"}, env{lane: LaneExternal, addr: "127.0.0.1:6380", image: DefaultImage}, false},
		{"external without addr", map[string]string{EnvLane: "external"}, env{}, true},
		{"process with addr", map[string]string{EnvLane: "process", EnvAddr: "127.0.0.1:6380"}, env{}, true},
		{"unknown lane", map[string]string{EnvLane: "docker"}, env{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readEnv(func(k string) string { return tt.vars[k] })
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestProcessMissingBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Setenv("PATH", t.TempDir())
	_, missing, err := startProcess(t, &config{})
	require.NoError(t, err)
	assert.Equal(t, "redis-server not on PATH", missing)
}

func TestProcessBadConfigShowsLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err != nil {
		t.Skip("needs redis-server")
	}
	_, _, err := startProcess(t, &config{directives: []directive{{"no-such-directive", "1"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "server log")
	assert.Contains(t, err.Error(), "no-such-directive")
}

// TestDocumentedACLUser: the users of docs/operations.md are found, word
// for word, with the test's password; a missing user or a line without
// one password is refused.
func TestDocumentedACLUser(t *testing.T) {
	for _, user := range []string{"tlb-rate", "tlb-ctl", "tlb-cache"} {
		args := DocumentedACLUser(t, user, "test-pass")
		require.Greater(t, len(args), 4, user)
		assert.Equal(t, []any{"ACL", "SETUSER", user}, args[:3])
		assert.Contains(t, args, ">test-pass", user)
	}
	_, err := aclUserLine("ACL SETUSER a on >x\nACL SETUSER a on >y\n", "a", "p")
	assert.ErrorContains(t, err, "2 lines")
	_, err = aclUserLine("ACL SETUSER a on\n", "a", "p")
	assert.ErrorContains(t, err, "0 password words")
	_, err = aclUserLine("ACL SETUSER b on >x\n", "a", "p")
	assert.ErrorContains(t, err, "0 lines")
	args, err := aclUserLine("  ACL SETUSER a reset on >x ~k:* &ch*\n", "a", "p")
	require.NoError(t, err)
	assert.Equal(t, []any{"ACL", "SETUSER", "a", "reset", "on", ">p", "~k:*", "&ch*"}, args)
}
