package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"

	"go.uber.org/fx"

	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/wiring"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // start-up or serving failed
	exitUsage   = 2 // bad flag or configuration
)

const name = "tech-log-backend"

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stderr))
}

func run(args, environ []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "listen address host:port; overrides APP_WEB_ADDR")
	probe := fs.Bool("healthcheck", false, "probe GET /healthz on the listen address (-addr, APP_WEB_ADDR or :8080) and exit 0 on a 200, 1 otherwise (container HEALTHCHECK)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return exitUsage
	}
	if *probe {
		return healthcheck(*addr, environ, stderr)
	}

	cfg, err := config.Load(config.FromEnviron(environ))
	if err == nil {
		// What config left to the web adapter's rules (ADR 0036), reported
		// as config's errors are.
		_, err = wiring.CheckIdentity(cfg.Web)
	}
	if err == nil {
		_, _, err = wiring.CheckRLS(cfg.RLS)
	}
	if err != nil {
		printConfigError(stderr, err)
		return exitUsage
	}
	if *addr != "" {
		if _, _, err := net.SplitHostPort(*addr); err != nil {
			fmt.Fprintf(stderr, "%s: -addr: %q: want [host]:port\n", name, *addr)
			return exitUsage
		}
		cfg.Web.Addr = *addr
	}

	logger := wiring.NewLogger(cfg.Log, stderr)
	wiring.SetRedisLogger(logger)
	logger.Info("starting", "config", cfg)

	app := fx.New(wiring.Options(cfg, logger))
	if err := app.Err(); err != nil {
		logger.Error("start-up failed", "err", err)
		return exitFailure
	}
	startCtx, cancel := context.WithTimeout(context.Background(), app.StartTimeout())
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		logger.Error("start-up failed", "err", err)
		return exitFailure
	}
	// Wait returns on SIGINT/SIGTERM or when a component asks to shut down.
	sig := <-app.Wait()
	logger.Info("stopping", "signal", fmt.Sprint(sig.Signal), "timeout", cfg.ShutdownTimeout.String())
	stopCtx, cancelStop := context.WithTimeout(context.Background(), app.StopTimeout())
	defer cancelStop()
	if err := app.Stop(stopCtx); err != nil {
		logger.Error("shutdown incomplete", "err", err)
		return exitFailure
	}
	logger.Info("stopped")
	if sig.ExitCode != 0 {
		return sig.ExitCode
	}
	return exitOK
}

// printConfigError writes one line per configuration problem, each naming
// its variable.
func printConfigError(w io.Writer, err error) {
	ves := config.VarErrors(err)
	if len(ves) == 0 {
		fmt.Fprintf(w, "%s: config: %v\n", name, err)
		return
	}
	for _, ve := range ves {
		fmt.Fprintf(w, "%s: config: %v\n", name, ve)
	}
	var pfe *config.PolicyFileError
	if errors.As(err, &pfe) {
		fmt.Fprintf(w, "%s: config: the policy file format is described in README.md, \"Policy file\"\n", name)
	}
}
