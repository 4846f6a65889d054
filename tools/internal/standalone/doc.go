// Package standalone keeps the repository self-contained: no tracked file
// may cite a document or a path that exists only outside it (the design
// notes the project started from, a sibling checkout, a path on one
// machine). What those notes said that still holds is in docs/contract.md
// and the documents it points to; a reference belongs there.
//
// Rules lists what is refused, Scan finds it in a list of files and
// TrackedFiles lists the files git tracks. The package's test runs them
// over the whole repository (make docs-check, part of make test).
//
// It depends on the standard library only.
package standalone
