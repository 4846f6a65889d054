package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tech-log/tech-log-backend/tools/internal/archrules"
)

// Exit statuses.
const (
	exitOK         = 0
	exitViolations = 1
	exitLoad       = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// run is main without the process: it parses args, checks the workspace with
// the go command run in environ, and returns the exit status.
func run(args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("archcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "workspace root (the directory holding go.work)")
	verbose := fs.Bool("v", false, "list every module and its package count")
	if err := fs.Parse(args); err != nil {
		return exitLoad
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "archcheck: unexpected arguments %q\n", fs.Args())
		return exitLoad
	}

	table := archrules.Project()
	if err := table.Validate(); err != nil {
		fmt.Fprintf(stderr, "archcheck: invalid rule table: %v\n", err)
		return exitLoad
	}

	ws, err := loadWorkspace(*root, environ)
	if err != nil {
		fmt.Fprintf(stderr, "archcheck: %v\n", err)
		return exitLoad
	}

	checker := archrules.Checker{Table: table, IsStd: ws.isStd}
	violations := checker.CheckGoMods(ws.goMods)
	violations = append(violations, checker.CheckPackages(ws.packages)...)

	if *verbose {
		for _, m := range ws.goMods {
			fmt.Fprintf(stdout, "archcheck: module %s: %d packages\n", m.Dir, ws.pkgCount[m.Dir])
		}
	}
	for _, v := range violations {
		where := ""
		switch {
		case v.Verb != "imports":
		case v.Test:
			where = "; found in test code"
		default:
			where = "; found in non-test code"
		}
		fmt.Fprintf(stdout, "%s\n\t%s%s\n", v, v.Why, where)
	}
	for _, e := range ws.loadErrors {
		fmt.Fprintf(stderr, "archcheck: %v\n", e)
	}

	switch {
	case len(ws.loadErrors) > 0:
		fmt.Fprintf(stderr, "archcheck: FAIL: %d load errors, %d violations (the check is incomplete)\n",
			len(ws.loadErrors), len(violations))
		return exitLoad
	case len(violations) > 0:
		fmt.Fprintf(stderr, "archcheck: FAIL: %d violations of the module table (docs/architecture.md)\n", len(violations))
		return exitViolations
	}
	fmt.Fprintf(stdout, "archcheck: ok: %d modules, %d packages, %d import edges\n",
		len(ws.goMods), len(ws.packages), ws.edges)
	return exitOK
}
