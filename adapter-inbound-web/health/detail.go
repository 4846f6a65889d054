package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
)

// DetailChecker is a ReadinessChecker that also describes its
// dependencies. When Config.Checker implements it, /readyz answers JSON:
// 200 {"ready":true,"dependencies":D} or 503 with the problem body of a
// failed check plus "ready":false and "dependencies":D, where D is
// ReadyDetail's value.
// D must hold no secret and no address of a credential; it is encoded with
// encoding/json.
type DetailChecker interface {
	ReadinessChecker
	// ReadyDetail is Ready with the description of every dependency.
	ReadyDetail(ctx context.Context) (detail any, err error)
}

// readyBody is the 200 body of a DetailChecker.
type readyBody struct {
	Ready        bool `json:"ready"`
	Dependencies any  `json:"dependencies"`
}

// notReadyBody is the 503 body of a DetailChecker: the problem fields of
// writeNotReady plus the dependencies.
type notReadyBody struct {
	Type         string `json:"type"`
	Title        string `json:"title"`
	Status       int    `json:"status"`
	Detail       string `json:"detail"`
	Ready        bool   `json:"ready"`
	Dependencies any    `json:"dependencies"`
}

// serveDetail answers /readyz for a DetailChecker.
func (h *Handlers) serveDetail(w http.ResponseWriter, r *http.Request, dc DetailChecker) {
	var detail any
	timedOut, err := h.runCheck(r, func(ctx context.Context) error {
		var err error
		detail, err = dc.ReadyDetail(ctx)
		return err
	})
	if err == nil {
		writeJSON(w, http.StatusOK, "application/json", readyBody{Ready: true, Dependencies: detail})
		return
	}
	text := "readiness check failed"
	var d Detailer
	switch {
	case timedOut:
		text = "readiness check timed out"
	case errors.As(err, &d):
		text = d.ReadinessDetail()
	}
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, "application/problem+json",
		notReadyBody{Type: "about:blank", Title: "not ready", Status: http.StatusServiceUnavailable, Detail: text, Dependencies: detail})
}

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeNotReady(w, "readiness detail could not be encoded")
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", contentType)
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
