// Package problem owns the application/problem+json (RFC 9457) body that
// every response the web adapter writes itself carries: the edge
// middleware, the local limiter and the identity gate share this one
// writer, so the bodies cannot drift apart.
//
// It imports only the standard library. It must never import another
// package of this module, shared-contract or anything outside the standard
// library.
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Problem is an RFC 9457 problem body with the rate-limit extensions. Every
// field is a fixed token chosen by the adapter: never client data, a
// subject or an error's text.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	// Detail is a fixed explanation chosen by the adapter (RFC 9457
	// "detail"), never client data.
	Detail   string `json:"detail,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	Category string `json:"category,omitempty"`
	Policy   string `json:"policy,omitempty"`
}

// New is a Problem of type about:blank.
func New(status int, title string) Problem {
	return Problem{Type: "about:blank", Title: title, Status: status}
}

// Write sends p with its status, Content-Type application/problem+json,
// Cache-Control no-store and Content-Length. Header fields already set on w
// (Retry-After, RateLimit) are kept.
func Write(w http.ResponseWriter, p Problem) {
	body, err := json.Marshal(p)
	if err != nil { // cannot happen: every field is a string or an int
		body = []byte(`{"type":"about:blank","status":` + strconv.Itoa(p.Status) + `}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}
