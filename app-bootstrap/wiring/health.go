package wiring

import (
	"log/slog"
	"sync/atomic"
	"time"

	"go.uber.org/fx"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/health"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
)

// healthParams are the dependencies of the health handlers.
type healthParams struct {
	fx.In

	Config  config.Config
	Logger  *slog.Logger
	Metrics *metrics.Metrics `optional:"true"`
	Checks  []ReadinessCheck `group:"readiness"`
}

// newHealth builds /healthz and /readyz over every contributed readiness
// check; with none (rate limit disabled) /readyz is always ready. Changes of
// readiness are logged (with the cause), not every probe.
func newHealth(p healthParams) (*health.Handlers, error) {
	log := p.Logger.With("component", "readiness")
	var ready atomic.Int32 // 0 unknown, 1 ready, 2 not ready
	cfg := health.Config{
		Timeout: readyTimeout(p.Config),
		OnCheck: func(err error, took time.Duration) {
			if p.Metrics != nil {
				p.Metrics.SetReady(err == nil)
			}
			state := int32(1)
			if err != nil {
				state = 2
			}
			if ready.Swap(state) == state {
				return
			}
			if err != nil {
				log.Warn("not ready", "err", err, "took", took)
			} else {
				log.Info("ready", "took", took)
			}
		},
	}
	if len(p.Checks) > 0 {
		cfg.Checker = readiness(p.Checks)
	}
	return health.New(cfg)
}

// readyTimeout bounds one /readyz run: a PING, plus the start-up checks
// (INFO and one SCRIPT LOAD per program) if they have not passed yet.
func readyTimeout(cfg config.Config) time.Duration {
	d := 2 * time.Second
	if rl := cfg.RateLimit; rl.Enabled {
		d = max(d, 6*rl.CommandTimeout)
	}
	return min(d, health.MaxTimeout)
}
