// Package dirwatch calls a reload function when a directory changes or a
// signal arrives: a file written, added, removed or renamed in the
// directory, or the directory swapped the way a Kubernetes ConfigMap mount
// swaps it (a new ..data_tmp symlink renamed over ..data), gathered over a
// short debounce into one call; and every value on the caller's signal
// channel (SIGHUP) at once.
//
// It owns the watching and the debounce, never what a file means: the
// caller's Reload reads, validates and swaps. rlsreload (the Envoy rule
// directory) and app-bootstrap's policy-file reload both watch through it.
// It lives in this module because fsnotify is allowed here only
// (tools/internal/archrules), and both of its importers may import this
// module; it must never import go-redis, fx or another module of the
// project, and never call signal.Notify (the composition root does and
// passes the channel).
package dirwatch
