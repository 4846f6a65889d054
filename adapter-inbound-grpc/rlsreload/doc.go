// Package rlsreload reloads the rate-limit configuration without a
// restart: a Watcher over one directory reloads every file with
// rlsconfig.LoadDir when a file is written, added or removed, when the
// directory is swapped the way a Kubernetes ConfigMap mount does it (a new
// ..data_tmp symlink renamed over ..data), or when the caller's SIGHUP
// channel fires. A set that does not load (or that the caller's Validate
// refuses) is refused whole and reported; the previous *rlsconfig.Config
// keeps serving from an atomic pointer the server reads.
//
// It owns the load-validate-swap; dirwatch owns the watching and the
// debounce (shared with the policy file's reload in app-bootstrap), and
// rlsconfig owns what a file means. It never calls signal.Notify (the composition root does and
// passes the channel), and it must never import go-redis, fx or another
// module of the project but shared-contract.
package rlsreload
