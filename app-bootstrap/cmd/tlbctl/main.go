package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// Exit codes.
const (
	exitOK      = 0
	exitProblem = 1 // a check failed, or Redis could not be reached
	exitUsage   = 2 // bad input: nothing was changed
)

const name = "tlbctl"

// ClientName is the CLIENT SETNAME of tlbctl's connections.
const ClientName = "tlb-ctl"

// The variables of tlbctl's own ACL user; unset, tlbctl uses the service's
// APP_RATE_LIMIT_REDIS_USERNAME and _PASSWORD.
const (
	EnvUsername     = "APP_TLBCTL_REDIS_USERNAME"
	EnvPassword     = "APP_TLBCTL_REDIS_PASSWORD"
	EnvPasswordFile = "APP_TLBCTL_REDIS_PASSWORD_FILE"
)

// commandTimeout is the least per-command timeout of tlbctl: an operator
// tool may wait longer than the service's hot path.
const commandTimeout = 2 * time.Second

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// usageError is bad input: printed as one line, exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

const usage = `usage:
  tlbctl check
  tlbctl inspect --policy ID (--api-key K | --ip A)
  tlbctl reset   --policy ID (--api-key K | --ip A) [--yes]`

// run is main without os: it returns the exit code.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return exitUsage
	}
	var err error
	switch cmd := args[0]; cmd {
	case "check":
		err = runCheck(ctx, args[1:], environ, stdout)
	case "inspect":
		err = runSubject(ctx, cmd, args[1:], environ, stdout, stderr)
	case "reset":
		err = runSubject(ctx, cmd, args[1:], environ, stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return exitOK
	default:
		err = usagef("unknown command %q (want check, inspect or reset)", bounded(cmd))
	}
	var ue usageError
	var ce configError
	var pe problemsError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\n", name, ue)
		return exitUsage
	case errors.As(err, &ce):
		for _, line := range ce.lines {
			fmt.Fprintf(stderr, "%s: config: %s\n", name, line)
		}
		return exitUsage
	case errors.As(err, &pe):
		fmt.Fprintf(stderr, "%s: %v\n", name, pe)
		return exitProblem
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitProblem
	}
}

// configError is an invalid APP_* configuration: one line per variable.
type configError struct{ lines []string }

func (e configError) Error() string { return strings.Join(e.lines, "; ") }

// problemsError is a check that found problems (already printed).
type problemsError struct{ n int }

func (e problemsError) Error() string { return fmt.Sprintf("%d problem(s) found", e.n) }

// parseFlags parses a command's flags; every error is a usageError.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return usagef("%s: %v", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), bounded(fs.Arg(0)))
	}
	return nil
}

// loadConfig loads the service configuration from environ. tlbctl needs
// the Redis limiter enabled in standalone mode.
func loadConfig(environ []string) (config.Config, error) {
	env := config.FromEnviron(environ)
	cfg, err := config.Load(env)
	if err != nil {
		var lines []string
		for _, ve := range config.VarErrors(err) {
			lines = append(lines, ve.Error())
		}
		if len(lines) == 0 {
			lines = []string{err.Error()}
		}
		return config.Config{}, configError{lines}
	}
	if !cfg.RateLimit.Enabled {
		return config.Config{}, usagef("%sRATE_LIMIT_ENABLED is not true: the service's Redis limiter is off, there is nothing to operate on", config.Prefix)
	}
	if m := cfg.RateLimit.Topology.Mode; m != "" && m != config.ModeStandalone {
		return config.Config{}, usagef("%sRATE_LIMIT_REDIS_MODE=%s: tlbctl supports the standalone mode only", config.Prefix, m)
	}
	return cfg, nil
}

// credentials returns tlbctl's own ACL user and password, or the
// service's when EnvUsername is unset.
func credentials(cfg config.Config, environ []string) (user, password string, err error) {
	env := config.FromEnviron(environ)
	user = env[EnvUsername]
	pw, pwFile := env[EnvPassword], env[EnvPasswordFile]
	if pw != "" && pwFile != "" {
		return "", "", usagef("%s and %s are both set; set one", EnvPassword, EnvPasswordFile)
	}
	if pwFile != "" {
		b, err := os.ReadFile(pwFile)
		if err != nil {
			return "", "", usagef("%s: %v", EnvPasswordFile, err)
		}
		pw = strings.TrimSuffix(string(b), "\n")
	}
	if user == "" {
		if pw != "" {
			return "", "", usagef("%s is set but %s is not", EnvPassword, EnvUsername)
		}
		return cfg.RateLimit.Redis.Username, cfg.RateLimit.Redis.Password.Reveal(), nil
	}
	return user, pw, nil
}

// connect builds tlbctl's client with redisrate's constructor (the same
// dialer, TLS and failure settings as the service) as tlbctl's user.
func connect(cfg config.Config, environ []string) (*redis.Client, string, error) {
	user, pw, err := credentials(cfg, environ)
	if err != nil {
		return nil, "", err
	}
	rl := cfg.RateLimit
	timeout := max(rl.CommandTimeout, commandTimeout)
	c, err := redisrate.NewClient(redisrate.ClientConfig{
		Addr:           rl.Redis.Addr,
		Username:       user,
		Password:       pw,
		TLSConfig:      rl.Redis.TLSConfig(),
		Protocol:       redisrate.ProtocolRESP2,
		CommandTimeout: timeout,
		DialTimeout:    timeout,
		PoolSize:       1,
		PoolTimeout:    timeout,
		ClientName:     ClientName,
	})
	if err != nil {
		return nil, "", fmt.Errorf("coordination client: %w", err)
	}
	if user == "" {
		user = "default"
	}
	return c, user, nil
}

// newLogger is the audit log of changes (reset), JSON on w.
func newLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

// bounded shortens s for an error message.
func bounded(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
