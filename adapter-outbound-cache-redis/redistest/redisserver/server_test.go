package redisserver_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
)

func requireServer(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("REDIS_REQUIRED") == "1" {
			t.Fatal("redis-server not on PATH and REDIS_REQUIRED=1")
		}
		t.Skip("redis-server not on PATH")
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestLaunchInfoStop(t *testing.T) {
	requireServer(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	p, err := redisserver.Launch(ctx, redisserver.Config{Dir: dir, Args: []string{"--maxmemory", "1mb"}})
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	assert.True(t, p.Running())
	assert.NotZero(t, p.PID())
	require.NoError(t, redisserver.Ping(ctx, p.Addr()))

	info, err := p.Info(ctx, "memory")
	require.NoError(t, err)
	mm, ok := redisinfo.Field(info, "maxmemory")
	assert.True(t, ok)
	assert.Equal(t, "1048576", mm, "the caller's directive is applied")
	info, err = p.Info(ctx, "server")
	require.NoError(t, err)
	_, err = redisinfo.ParseVersion(redisinfo.Parse(info)["redis_version"])
	assert.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "redis.log"), p.LogPath)

	require.NoError(t, p.Stop(10*time.Second))
	assert.False(t, p.Running())
	assert.Zero(t, p.PID())
	assert.Error(t, redisserver.Ping(ctx, p.Addr()), "stopped")
	assert.ErrorIs(t, p.Signal(0), redisserver.ErrNotRunning)
	require.NoError(t, p.Stop(time.Second), "stopping twice is a no-op")
}

func TestStartOnTakenPortIsAddrInUse(t *testing.T) {
	requireServer(t)
	ctx := ctxT(t)
	a, err := redisserver.Launch(ctx, redisserver.Config{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(a.Kill)
	b := &redisserver.Process{Bin: a.Bin, Args: redisserver.DefaultArgs(t.TempDir()), LogPath: filepath.Join(t.TempDir(), "b.log"), Port: a.Port}
	err = b.Start(ctx)
	require.ErrorIs(t, err, redisserver.ErrAddrInUse)
	assert.False(t, b.Running(), "the failed child is reaped")
	require.NoError(t, redisserver.Ping(ctx, a.Addr()), "the first server is untouched")
}

func TestLaunchBadDirectiveNamesTheLog(t *testing.T) {
	requireServer(t)
	_, err := redisserver.Launch(ctxT(t), redisserver.Config{Dir: t.TempDir(), Args: []string{"--no-such-directive", "1"}})
	require.Error(t, err)
	assert.ErrorContains(t, err, "server log (tail)")
}

func TestLaunchNeedsDir(t *testing.T) {
	_, err := redisserver.Launch(context.Background(), redisserver.Config{})
	assert.ErrorContains(t, err, "Config.Dir")
}

func TestPoll(t *testing.T) {
	t.Parallel()
	calls := 0
	err := redisserver.Poll(ctxT(t), time.Millisecond, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, calls, "until the first nil")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = redisserver.Poll(ctx, time.Millisecond, func() error { return errNever })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, errNever, "the last error is kept")
}

var errNever = errors.New("never")
