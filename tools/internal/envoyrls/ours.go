package envoyrls

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// BuildWait bounds `go build` of our service.
const BuildWait = 5 * time.Minute

// BuildOurs compiles app-bootstrap/cmd/tech-log-backend of the repository
// at root into out.
func BuildOurs(ctx context.Context, root, out string) error {
	ctx, cancel := context.WithTimeout(ctx, BuildWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/tech-log-backend")
	cmd.Dir = filepath.Join(root, "app-bootstrap")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("envoyrls: go build tech-log-backend: %w\n%s", err, b)
	}
	return nil
}

// OursConfig is one run of our service with its rate limit service on.
type OursConfig struct {
	// Bin is the service binary (BuildOurs).
	Bin string
	// RedisAddr is the private redis-server the limiter uses.
	RedisAddr string
	// Configs maps a file name to its envoyproxy/ratelimit YAML; they are
	// written into the directory APP_RLS_CONFIG_DIR names.
	Configs map[string]string
	// ExtraEnv is appended last (it overrides).
	ExtraEnv []string
}

// Ours is our running service: the envoy.service.ratelimit.v3 gRPC server
// on GRPCAddr (APP_RLS_ADDR), POST /json on HTTPAddr (APP_RLS_HTTP_ADDR),
// the web listener on WebAddr.
type Ours struct {
	GRPCAddr string
	HTTPAddr string
	WebAddr  string
	Dir      string
	proc     *process
}

// policiesFile is the one HTTP policy the limiter's configuration needs to
// start (the RLS requests do not use it).
const policiesFile = `{"policies": [
  {"id": "web", "revision": 1, "algorithm": "fixed_window",
   "limit": 100, "window": "1s", "maxCost": 1, "cleanupGrace": "30s",
   "maxClockRegression": "2s", "failurePolicy": "fail-closed",
   "routes": ["GET /api/v1/ping"]}
]}
`

// OursEnv is our service's whole environment: the Redis limiter on
// redisAddr with fresh secrets, the local limiter off, and the RLS server
// on grpcAddr/httpAddr over the YAML in configDir.
func OursEnv(cfg OursConfig, policies, configDir, grpcAddr, httpAddr string) []string {
	env := append(baseEnv(),
		"APP_LOG_FORMAT=json",
		"APP_SHUTDOWN_TIMEOUT=5s",
		"APP_RATE_LIMIT_ENABLED=true",
		"APP_RATE_LIMIT_PROVIDER=redis",
		"APP_RATE_LIMIT_REDIS_ADDR="+cfg.RedisAddr,
		"APP_RATE_LIMIT_KEY_SECRET="+randomSecret(),
		"APP_RATE_LIMIT_POLICIES_FILE="+policies,
		"APP_RATE_LIMIT_DEFAULT_POLICY=web",
		"APP_WEB_SUBJECT_SECRET="+randomSecret(),
		"APP_WEB_LOCAL_LIMIT_ENABLED=false",
		"APP_RLS_ADDR="+grpcAddr,
		"APP_RLS_CONFIG_DIR="+configDir,
	)
	if httpAddr != "" {
		env = append(env, "APP_RLS_HTTP_ADDR="+httpAddr)
	}
	return append(env, cfg.ExtraEnv...)
}

// StartOurs writes the YAML and a policy file into a new temporary
// directory, starts the binary on free 127.0.0.1 ports and waits (bounded
// by ReadyWait) until its web and gRPC listeners accept and GET /healthcheck on
// the /json listener answers 200; a port
// taken in between is retried on new ports (3 attempts).
func StartOurs(ctx context.Context, cfg OursConfig) (*Ours, error) {
	dir, err := os.MkdirTemp("", "tlb-envoyrls-ours-")
	if err != nil {
		return nil, fmt.Errorf("envoyrls: service dir: %w", err)
	}
	configDir := filepath.Join(dir, "rls")
	if err := WriteConfigs(configDir, cfg.Configs); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	policies := filepath.Join(dir, "policies.json")
	if err := os.WriteFile(policies, []byte(policiesFile), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("envoyrls: policies: %w", err)
	}
	var last error
	for attempt := 1; attempt <= 3; attempt++ {
		o, err := startOursOnce(ctx, cfg, dir, policies, configDir, attempt)
		if err == nil {
			return o, nil
		}
		last = err
		if ctx.Err() != nil || !errors.Is(err, errExited) {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, last
}

func startOursOnce(ctx context.Context, cfg OursConfig, dir, policies, configDir string, attempt int) (*Ours, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	addr := func(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }
	o := &Ours{WebAddr: addr(ports[0]), GRPCAddr: addr(ports[1]), HTTPAddr: addr(ports[2]), Dir: dir}
	env := OursEnv(cfg, policies, configDir, o.GRPCAddr, o.HTTPAddr)
	logPath := filepath.Join(dir, fmt.Sprintf("tech-log-backend-%d.log", attempt))
	p, err := startProcess(cfg.Bin, []string{"-addr", o.WebAddr}, env, logPath)
	if err != nil {
		return nil, err
	}
	o.proc = p
	err = poll(ctx, p, ReadyWait, "tech-log-backend", func(ctx context.Context) error {
		for _, a := range []string{o.WebAddr, o.GRPCAddr} {
			if err := dialProbe(a)(ctx); err != nil {
				return err
			}
		}
		// GET /healthcheck answers 200 once a rule set is loaded, as the
		// reference's does.
		return httpOK(ctx, "http://"+o.HTTPAddr+"/healthcheck")
	})
	if err != nil {
		p.stop()
		return nil, err
	}
	return o, nil
}

// PID is the process id (for its CPU time, ProcessCPU).
func (o *Ours) PID() int { return o.proc.cmd.Process.Pid }

// LogTail is the end of the service's log.
func (o *Ours) LogTail() string { return o.proc.logTail() }

// Close stops the service and removes its directory.
func (o *Ours) Close() error {
	o.proc.stop()
	if err := os.RemoveAll(o.Dir); err != nil {
		return fmt.Errorf("envoyrls: remove %s: %w", o.Dir, err)
	}
	return nil
}

func randomSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
