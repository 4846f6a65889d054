// Package archrules holds the project's architecture-boundary rules as data
// (the module table of docs/contract.md section 1) and evaluates import edges and
// go.mod files against them.
//
// It owns the rule table (Project), the allow-list semantics (an import not
// explicitly allowed for its module is rejected, so an unknown third-party
// package is a violation by default) and the go.mod checks (module path,
// sibling replace directives, shared-contract's require list).
//
// It does no I/O: cmd/archcheck loads the workspace with the go command and
// hands the packages and go.mod files in. It must never import any module of
// the project (nothing may depend on app-bootstrap, and the check must not
// depend on what it checks) nor anything outside the standard library.
//
// Files: rules.go (the rule types, the violation and Table.Validate),
// check.go (the Checker and its checks over packages and go.mod files),
// table.go (Project: the project's module table and rules).
package archrules
