package route

import (
	"fmt"
	"net/http"
)

// Table is a set of ServeMux patterns, each with its handler: Add checks a
// pattern into it, Handle maps one to a handler, Handler finds the handler
// of a request by ServeMux's precedence (the most specific pattern wins).
// The zero value is not usable; build it with NewTable. It is not safe for
// concurrent Add or Handle; Handler is safe once the table is built.
type Table struct {
	mux *http.ServeMux
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{mux: http.NewServeMux()} }

// Add adds pattern with no handler of interest (a check only); see Handle.
func (t *Table) Add(pattern string) error { return t.Handle(pattern, http.NotFoundHandler()) }

// Handle maps pattern to h. The error is ServeMux's reason for refusing
// the pattern (empty, malformed, or conflicting with an earlier one, which
// it names); the table is then unchanged.
func (t *Table) Handle(pattern string, h http.Handler) (err error) {
	// ServeMux panics on a pattern it refuses: a configuration error, not a
	// program fault, answered as the error it is.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	t.mux.Handle(pattern, h)
	return nil
}

// Handler returns the handler ServeMux would call for r: the handler of
// the pattern r matches, or ServeMux's own (not found, a redirect, 405)
// when no pattern matches it as it is.
func (t *Table) Handler(r *http.Request) http.Handler {
	h, _ := t.mux.Handler(r)
	return h
}
