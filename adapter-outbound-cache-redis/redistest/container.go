package redistest

import (
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"

	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
	"github.com/testcontainers/testcontainers-go/wait"
)

// redisPort is the server port inside the container.
const redisPort = "6379/tcp"

// containerLane runs the server in a testcontainers-go Redis container.
// The container port is published on a fixed 127.0.0.1 host port chosen at
// Start, so the address survives docker stop/start.
type containerLane struct {
	docker  *testcontainers.DockerClient
	ctr     *tcredis.RedisContainer
	port    int
	running bool
}

var _ lane = (*containerLane)(nil)

// startContainer starts a container from image; missing is set when the
// docker engine is unreachable or the image is not present locally (no
// registry is reachable, so a pull is never attempted).
func startContainer(t testing.TB, cfg *config, image string) (l lane, missing string, err error) {
	t.Helper()
	// No reaper image can be pulled; cleanup terminates the container itself.
	// testcontainers reads this once per process, so set it before first use.
	if _, ok := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !ok {
		if err := os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true"); err != nil {
			return nil, "", fmt.Errorf("redistest: set TESTCONTAINERS_RYUK_DISABLED: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout+30*time.Second)
	defer cancel()

	docker, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, "docker engine not reachable: " + err.Error(), nil
	}
	if _, err := docker.ImageInspect(ctx, image); err != nil {
		_ = docker.Close()
		return nil, fmt.Sprintf("image %s not present locally (build it with `make redis-image`; %s=%s): %v", image, EnvImage, image, err), nil
	}
	// The port docker publishes is chosen again on each attempt
	// (redisserver.OnFreePort, the one port-retry helper).
	var c *containerLane
	err = redisserver.OnFreePort(func(port int) error {
		if c != nil { // a failed attempt: a fresh engine client
			if docker, err = testcontainers.NewDockerClientWithOpts(ctx); err != nil {
				return fmt.Errorf("reconnect to docker: %w", err)
			}
		}
		c = &containerLane{docker: docker, port: port}
		err := c.run(ctx, t, cfg, image)
		if err == nil {
			return nil
		}
		tail := c.logTail()
		_ = c.close()
		if strings.Contains(err.Error(), "address already in use") || strings.Contains(err.Error(), "port is already allocated") {
			err = fmt.Errorf("%w: %w", redisserver.ErrAddrInUse, err)
		}
		return fmt.Errorf("%w%s", err, tailSuffix(tail))
	})
	if err != nil {
		return nil, "", fmt.Errorf("redistest: start container from %s: %w", image, err)
	}
	return c, "", nil
}

// containerArgs are the redis-server arguments after the image entrypoint.
// Connections arrive through docker's port forwarding, not from loopback,
// so protected mode is off inside; the host side is published on
// 127.0.0.1 only.
func containerArgs(cfg *config) []string {
	args := []string{
		"--save", "",
		"--appendonly", "no",
		"--dir", "/data",
		"--bind", "0.0.0.0",
		"--protected-mode", "no",
		"--port", "6379",
	}
	for _, d := range cfg.directives {
		args = append(args, "--"+d.name, d.value)
	}
	return args
}

func (c *containerLane) run(ctx context.Context, t testing.TB, cfg *config, image string) error {
	hostPort := strconv.Itoa(c.port)
	ctr, err := tcredis.Run(ctx, image,
		testcontainers.WithLogger(tclog.TestLogger(t)),
		testcontainers.WithCmd(containerArgs(cfg)...),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{
				network.MustParsePort(redisPort): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: hostPort}},
			}
		}),
		// No port probes: the scratch image has no shell for the
		// in-container one, and testcontainers' host guess (the default
		// gateway when the tests run inside a container) misses a port
		// published on 127.0.0.1. waitPing below is the readiness check.
		testcontainers.WithWaitStrategyAndDeadline(startTimeout,
			wait.ForLog("Ready to accept connections"),
		),
	)
	c.ctr = ctr
	if err != nil {
		return err
	}
	c.running = true
	mapped, err := ctr.MappedPort(ctx, redisPort)
	if err != nil {
		return fmt.Errorf("mapped port: %w", err)
	}
	if mapped.Num() != uint16(c.port) {
		return fmt.Errorf("container published %s on host port %d, want %d", redisPort, mapped.Num(), c.port)
	}
	return redisserver.WaitPing(ctx, c.addr(), nil)
}

func (c *containerLane) name() string { return LaneContainer }
func (c *containerLane) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)) }
func (c *containerLane) caps() map[Capability]bool {
	return map[Capability]bool{CapKill: true, CapRestart: true, CapPause: true}
}
func (c *containerLane) pid() int { return 0 }

func (c *containerLane) id() string { return c.ctr.GetContainerID() }

// kill is docker kill (SIGKILL); docker stop with no grace period blocks
// until the container has exited.
func (c *containerLane) kill() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	zero := 0
	if _, err := c.docker.ContainerStop(ctx, c.id(), client.ContainerStopOptions{Signal: "SIGKILL", Timeout: &zero}); err != nil {
		return fmt.Errorf("docker stop %s: %w", c.id(), err)
	}
	c.running = false
	return nil
}

// restart is docker stop (if running) then docker start; the container
// keeps its host port binding, and with no persistence the dataset is empty.
func (c *containerLane) restart(ctx context.Context) error {
	if c.running {
		if err := c.kill(); err != nil {
			return err
		}
	}
	if _, err := c.docker.ContainerStart(ctx, c.id(), client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("docker start %s: %w", c.id(), err)
	}
	c.running = true
	return redisserver.WaitPing(ctx, c.addr(), nil)
}

func (c *containerLane) pause() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := c.docker.ContainerPause(ctx, c.id(), client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("docker pause %s: %w", c.id(), err)
	}
	return nil
}

func (c *containerLane) resume() error {
	if !c.running {
		return nil // killed while paused: docker already thawed it
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := c.docker.ContainerUnpause(ctx, c.id(), client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("docker unpause %s: %w", c.id(), err)
	}
	return nil
}

// close removes the container and closes the docker client.
func (c *containerLane) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout+30*time.Second)
	defer cancel()
	var errs []error
	if c.ctr != nil {
		if err := c.ctr.Terminate(ctx); err != nil {
			errs = append(errs, fmt.Errorf("terminate container %s: %w", c.ctr.GetContainerID(), err))
		}
		c.ctr = nil
	}
	if c.docker != nil {
		if err := c.docker.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close docker client: %w", err))
		}
		c.docker = nil
	}
	return errors.Join(errs...)
}

func (c *containerLane) logTail() string {
	if c.ctr == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := c.ctr.Logs(ctx)
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil && len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
