// Command archcheck fails when an import edge or a go.mod line of the
// workspace is outside the module table (archrules.Project, docs/architecture.md).
//
// It finds the modules in the root's go.work, reads each module's go.mod with
// `go mod edit -json` and its packages' real direct imports with
// `go list -e -deps=false -json ./...` (Imports for non-test files,
// TestImports and XTestImports for tests; files excluded by build constraints
// are parsed too), and evaluates them with tools/internal/archrules. Every
// violation is printed as `module/package imports X: rule <name>`, followed
// by an indented line saying why.
//
// Usage:
//
//	archcheck [-root dir] [-v]
//
// Exit status: 0 when clean, 1 on violations, 2 when the workspace cannot be
// loaded (no go.work, a failing go command, a package that does not parse).
//
// It must never import a module of the project: it checks them.
//
// Files: main.go (flags, exit status, the report), load.go (the workspace
// through the go command: modules, packages, imports, go.mod files).
package main
