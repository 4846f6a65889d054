package wiring

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
)

// Options is the whole application for cfg: the modules cfg enables, the
// supplied configuration and logger, and fx's own events logged at debug
// level through logger.
func Options(cfg config.Config, logger *slog.Logger) fx.Option {
	opts := []fx.Option{
		fx.Supply(cfg, logger),
		fx.WithLogger(func() fxevent.Logger {
			l := &fxevent.SlogLogger{Logger: logger}
			l.UseLogLevel(slog.LevelDebug)
			return l
		}),
		// Hooks are bounded by their context; the timeouts keep a hung
		// dependency from hanging start-up or shutdown forever.
		fx.StartTimeout(startTimeout(cfg)),
		fx.StopTimeout(cfg.ShutdownTimeout),
	}
	if !cfg.RateLimit.Enabled {
		// A module before the web one (fx runs a module's invokes, and so
		// appends their hooks, in order): SIGHUP is handled once the
		// service is listening, as the limiter's Policies, a dependency
		// of the web handler, is.
		opts = append(opts, fx.Module("policyreload", fx.Invoke(noPolicyReload)))
	}
	opts = append(opts,
		MetricsModule(),
		WebModule(),
	)
	if cfg.RateLimit.Enabled {
		opts = append(opts, RateLimitModule())
	}
	if cfg.Cache.Enabled {
		opts = append(opts, CacheModule())
	}
	if cfg.RLS.Enabled() {
		opts = append(opts, RLSModule())
	}
	return fx.Options(opts...)
}

// startTimeout bounds OnStart: binding the port and, when enabled, the
// coordination checks (two commands per program, each bounded by the
// command timeout).
func startTimeout(cfg config.Config) time.Duration {
	d := 5 * time.Second
	if cfg.RateLimit.Enabled {
		d += 10 * cfg.RateLimit.CommandTimeout
	}
	return d
}

// MetricsModule provides *metrics.Metrics, the private registry.
func MetricsModule() fx.Option {
	return fx.Module("metrics", fx.Provide(metrics.New))
}

// NewLogger returns the service logger for cfg writing to w: JSON, or text
// when cfg.Format is text, or auto and w is a terminal.
func NewLogger(cfg config.Log, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.Level}
	format := cfg.Format
	if format == config.LogAuto || format == "" {
		format = config.LogJSON
		if isTerminal(w) {
			format = config.LogText
		}
	}
	if format == config.LogText {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// redisLogger routes go-redis's internal log lines (pool dial failures and
// the like) into the service logger at warn level instead of stderr.
type redisLogger struct{ log *slog.Logger }

// Printf implements go-redis's internal logging interface.
func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}

// SetRedisLogger makes go-redis log through logger. go-redis's logger is
// process-global, so only main calls it.
func SetRedisLogger(logger *slog.Logger) { redis.SetLogger(redisLogger{log: logger}) }
