package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
)

// ReferenceConfig is one service_cmd run.
type ReferenceConfig struct {
	// Bin is service_cmd's path (Binaries.Service).
	Bin string
	// RedisAddr is the private redis-server (host:port), reached over TCP.
	RedisAddr string
	// Configs maps a file name (such as "rls.yaml") to its YAML; they are
	// written into the runtime directory service_cmd loads.
	Configs map[string]string
	// StopIncrementWhenOverLimit sets STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT.
	StopIncrementWhenOverLimit bool
	// LocalCacheBytes sets LOCAL_CACHE_SIZE_IN_BYTES (0: no local cache of
	// over-limit keys).
	LocalCacheBytes int
	// PoolSize sets REDIS_POOL_SIZE (0: the reference's default, 10).
	PoolSize int
	// ExtraEnv is appended last (it overrides).
	ExtraEnv []string
}

// Reference is a running service_cmd: gRPC on GRPCAddr, HTTP (/json,
// /healthcheck) on HTTPAddr, its debug listener on DebugAddr, all on
// 127.0.0.1.
type Reference struct {
	GRPCAddr  string
	HTTPAddr  string
	DebugAddr string
	Dir       string
	proc      *process
}

// ReferenceEnv is service_cmd's whole environment for cfg with the runtime
// tree at runtimeRoot/"rls"/config and the three ports.
func ReferenceEnv(cfg ReferenceConfig, runtimeRoot string, grpcPort, httpPort, debugPort int) []string {
	env := append(baseEnv(),
		"REDIS_SOCKET_TYPE=tcp",
		"REDIS_TYPE=SINGLE",
		"REDIS_URL="+cfg.RedisAddr,
		"RUNTIME_ROOT="+runtimeRoot,
		"RUNTIME_SUBDIRECTORY=rls",
		"RUNTIME_APPDIRECTORY=config",
		"RUNTIME_WATCH_ROOT=false",
		"USE_STATSD=false",
		"DISABLE_STATS=true",
		"LOG_LEVEL=warn",
		"HOST=127.0.0.1",
		"PORT="+strconv.Itoa(httpPort),
		"GRPC_HOST=127.0.0.1",
		"GRPC_PORT="+strconv.Itoa(grpcPort),
		"DEBUG_HOST=127.0.0.1",
		"DEBUG_PORT="+strconv.Itoa(debugPort),
		"LOCAL_CACHE_SIZE_IN_BYTES="+strconv.Itoa(cfg.LocalCacheBytes),
		"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT="+strconv.FormatBool(cfg.StopIncrementWhenOverLimit),
	)
	if cfg.PoolSize > 0 {
		env = append(env, "REDIS_POOL_SIZE="+strconv.Itoa(cfg.PoolSize))
	}
	return append(env, cfg.ExtraEnv...)
}

// StartReference writes the configuration into a new temporary directory,
// starts service_cmd on free 127.0.0.1 ports and waits (bounded by
// ReadyWait) until /healthcheck answers 200 and the gRPC port accepts; a
// port taken in between is retried on new ports (3 attempts).
func StartReference(ctx context.Context, cfg ReferenceConfig) (*Reference, error) {
	dir, err := os.MkdirTemp("", "tlb-envoyrls-ref-")
	if err != nil {
		return nil, fmt.Errorf("envoyrls: reference dir: %w", err)
	}
	if err := WriteConfigs(filepath.Join(dir, "runtime", "rls", "config"), cfg.Configs); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	var last error
	for attempt := 1; attempt <= 3; attempt++ {
		r, err := startReferenceOnce(ctx, cfg, dir, attempt)
		if err == nil {
			return r, nil
		}
		last = err
		if ctx.Err() != nil || !errors.Is(err, errExited) {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, last
}

func startReferenceOnce(ctx context.Context, cfg ReferenceConfig, dir string, attempt int) (*Reference, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	env := ReferenceEnv(cfg, filepath.Join(dir, "runtime"), ports[0], ports[1], ports[2])
	logPath := filepath.Join(dir, fmt.Sprintf("service_cmd-%d.log", attempt))
	p, err := startProcess(cfg.Bin, nil, env, logPath)
	if err != nil {
		return nil, err
	}
	r := &Reference{
		GRPCAddr:  net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		HTTPAddr:  net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		DebugAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2])),
		Dir:       dir,
		proc:      p,
	}
	err = poll(ctx, p, ReadyWait, "service_cmd", func(ctx context.Context) error {
		if err := httpOK(ctx, "http://"+r.HTTPAddr+"/healthcheck"); err != nil {
			return err
		}
		return dialProbe(r.GRPCAddr)(ctx)
	})
	if err != nil {
		p.stop()
		return nil, err
	}
	return r, nil
}

// PID is the process id (for its CPU time, ProcessCPU).
func (r *Reference) PID() int { return r.proc.cmd.Process.Pid }

// LogTail is the end of service_cmd's log.
func (r *Reference) LogTail() string { return r.proc.logTail() }

// Close stops service_cmd and removes its directory.
func (r *Reference) Close() error {
	r.proc.stop()
	if err := os.RemoveAll(r.Dir); err != nil {
		return fmt.Errorf("envoyrls: remove %s: %w", r.Dir, err)
	}
	return nil
}

// WriteConfigs writes each named YAML into dir (created).
func WriteConfigs(dir string, configs map[string]string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("envoyrls: config dir: %w", err)
	}
	for name, yaml := range configs {
		if name != filepath.Base(name) || name == "" {
			return fmt.Errorf("envoyrls: config file name %q: want a plain file name", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(yaml), 0o600); err != nil {
			return fmt.Errorf("envoyrls: write config %s: %w", name, err)
		}
	}
	return nil
}

// httpOK succeeds on a 200 from GET url.
func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", errNotReady, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s: %s", errNotReady, url, resp.Status)
	}
	return nil
}
