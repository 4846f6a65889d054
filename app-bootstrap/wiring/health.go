package wiring

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// readyTimeout bounds one /readyz run.
const readyTimeout = 2 * time.Second

// registerHealth mounts /healthz and /readyz.
// TODO(web adapter): switch to adapter-inbound-web/health once it lands.
func registerHealth(mux *http.ServeMux, r readiness, log *slog.Logger) error {
	mux.HandleFunc("GET "+PathHealthz, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET "+PathReadyz, func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), readyTimeout)
		defer cancel()
		if err := r.Ready(ctx); err != nil {
			log.Warn("not ready", "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	return nil
}
