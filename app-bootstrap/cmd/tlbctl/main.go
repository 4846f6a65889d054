package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/wiring"
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

// The variables of tlbctl's own ACL user. They are required unless
// --use-service-credentials is given (then they must be unset).
const (
	EnvUsername     = "APP_TLBCTL_REDIS_USERNAME"
	EnvPassword     = "APP_TLBCTL_REDIS_PASSWORD"
	EnvPasswordFile = "APP_TLBCTL_REDIS_PASSWORD_FILE"
)

// flagUseServiceCredentials connects as the service's ACL user
// (APP_RATE_LIMIT_REDIS_USERNAME and _PASSWORD) instead of tlbctl's own.
const flagUseServiceCredentials = "use-service-credentials"

// commandTimeout is the least per-command timeout of tlbctl: an operator
// tool may wait longer than the service's hot path.
const commandTimeout = 2 * time.Second

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr))
}

// usageError is bad input: printed as one line, exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

const usage = `usage:
  tlbctl check   [--use-service-credentials]
  tlbctl inspect --policy ID (--api-key-file FILE|- | --principal NAME | --ip A) [--use-service-credentials]
  tlbctl reset   --policy ID (--api-key-file FILE|- | --principal NAME | --ip A) [--yes] [--audit-log FILE] [--use-service-credentials]
  tlbctl plan set   --plan ID (--api-key-file FILE|- | --principal NAME | --ip A) [--yes] [--audit-log FILE] [--use-service-credentials]
  tlbctl plan get   (--api-key-file FILE|- | --principal NAME | --ip A) [--use-service-credentials]
  tlbctl plan unset (--api-key-file FILE|- | --principal NAME | --ip A) [--yes] [--audit-log FILE] [--use-service-credentials]
  tlbctl plan list  [--plan ID] [--use-service-credentials]
(--api-key-file - reads the key from standard input; an API key is never taken from the command line)`

// run is main without os: it returns the exit code.
func run(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return exitUsage
	}
	var err error
	switch cmd := args[0]; cmd {
	case "check":
		err = runCheck(ctx, args[1:], environ, stdout)
	case "inspect", "reset":
		err = runSubject(ctx, cmd, args[1:], environ, stdin, stdout, stderr)
	case "plan":
		err = runPlan(ctx, args[1:], environ, stdin, stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return exitOK
	default:
		err = usagef("unknown command %q (want check, inspect, reset or plan)", bounded(cmd))
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

// refuseArgvAPIKey refuses an API key given on the command line (--api-key
// K, --api-key=K, with one or two dashes), before any flag is parsed: argv
// lands in ps and in shell history. The error names the flag, never the
// value.
func refuseArgvAPIKey(cmd string, args []string) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "api-key" {
			return usagef("%s: --api-key is refused (a key on the command line lands in ps and shell history): put it in a file and pass --api-key-file FILE, or pipe it with --api-key-file -", cmd)
		}
	}
	return nil
}

// parseFlags parses a command's flags; every error is a usageError.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := refuseArgvAPIKey(fs.Name(), args); err != nil {
		return err
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return usagef("%s: %v", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), bounded(fs.Arg(0)))
	}
	return nil
}

// loadConfig loads the service configuration from environ: the same
// variables, parser and validation as the service (config.Load, then
// wiring.CheckIdentity), every topology included. tlbctl needs the Redis
// limiter enabled.
func loadConfig(environ []string) (config.Config, error) {
	env := config.FromEnviron(environ)
	cfg, err := config.Load(env)
	if err == nil {
		_, err = wiring.CheckIdentity(cfg.Web)
	}
	if err == nil {
		_, _, err = wiring.CheckRLS(cfg.RLS)
	}
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
	return cfg, nil
}

// credentials returns the ACL user and password tlbctl connects as: its
// own (EnvUsername with EnvPassword or EnvPasswordFile, the file read by
// the service's secret reader), or with useService the service's. Its own
// are required without useService, and must be unset with it: tlbctl never
// falls back to the service's user silently.
func credentials(cfg config.Config, environ []string, useService bool) (user string, password config.Secret, err error) {
	env := config.FromEnviron(environ)
	user = env[EnvUsername]
	pw, pwFile := env[EnvPassword], env[EnvPasswordFile]
	if useService {
		if user != "" || pw != "" || pwFile != "" {
			return "", config.Secret{}, usagef("--%s: unset %s, %s and %s (it connects as the service's user %s)", flagUseServiceCredentials, EnvUsername, EnvPassword, EnvPasswordFile, userName(cfg.RateLimit.Redis.Username))
		}
		return cfg.RateLimit.Redis.Username, cfg.RateLimit.Redis.Password, nil
	}
	switch {
	case pw != "" && pwFile != "":
		return "", config.Secret{}, usagef("%s and %s are both set; set one", EnvPassword, EnvPasswordFile)
	case user == "" && pw == "" && pwFile == "":
		return "", config.Secret{}, usagef("%s is not set: tlbctl connects as its own ACL user (tlb-ctl, docs/operations.md); set %s and %s (or %s), or pass --%s to connect as the service's user", EnvUsername, EnvUsername, EnvPassword, EnvPasswordFile, flagUseServiceCredentials)
	case user == "" && pw != "":
		return "", config.Secret{}, usagef("%s is set but %s is not", EnvPassword, EnvUsername)
	case user == "":
		return "", config.Secret{}, usagef("%s is set but %s is not", EnvPasswordFile, EnvUsername)
	}
	password = config.NewSecret(pw)
	if pwFile != "" {
		if password, err = config.ReadSecretFile(pwFile); err != nil {
			return "", config.Secret{}, usagef("%s: %v", EnvPasswordFile, err)
		}
	}
	if password.IsZero() {
		return "", config.Secret{}, usagef("%s is set but neither %s nor %s is: tlbctl's user needs its password", EnvUsername, EnvPassword, EnvPasswordFile)
	}
	return user, password, nil
}

// connect builds tlbctl's client for the configured topology with the
// service's own constructor (wiring.CoordinationClient: the same dialer,
// TLS and failure settings), as the user credentials chose, with one
// connection per node and at least commandTimeout per command.
func connect(cfg config.Config, environ []string, useService bool) (redis.UniversalClient, string, error) {
	user, pw, err := credentials(cfg, environ, useService)
	if err != nil {
		return nil, "", err
	}
	rl := cfg.RateLimit
	timeout := max(rl.CommandTimeout, commandTimeout)
	rl.Redis.Username, rl.Redis.Password = user, pw
	rl.CommandTimeout, rl.DialTimeout, rl.PoolTimeout = timeout, timeout, timeout
	rl.PoolSize = 1
	c, err := wiring.CoordinationClient(rl, ClientName)
	if err != nil {
		return nil, "", fmt.Errorf("coordination client: %w", err)
	}
	return c, userName(user), nil
}

// userName is an ACL user name as Redis calls it ("" is "default").
func userName(u string) string {
	if u == "" {
		return "default"
	}
	return u
}

// endpoint names the coordination Redis for messages: the address in
// standalone mode, the topology (no password) otherwise.
func endpoint(rl config.RateLimit) string {
	if rl.Topology.Mode == config.ModeStandalone || rl.Topology.Mode == "" {
		return rl.Redis.Addr
	}
	return rl.Topology.String()
}

// bounded shortens s for an error message.
func bounded(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
