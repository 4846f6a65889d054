package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/tech-log/tech-log-backend/tools/internal/archrules"
)

// workspace is everything archcheck loaded from the go command.
type workspace struct {
	goMods     []archrules.GoMod
	packages   []archrules.Package
	pkgCount   map[string]int
	edges      int
	std        map[string]bool
	loadErrors []error
}

func (w *workspace) isStd(importPath string) bool { return w.std[importPath] }

// goRunner runs the go command in a fixed environment.
type goRunner struct {
	env []string
}

// withGoWork returns a runner whose GOWORK is goWork, whatever environ says:
// the check must read the workspace it was pointed at.
func withGoWork(environ []string, goWork string) goRunner {
	env := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "GOWORK=") {
			env = append(env, kv)
		}
	}
	return goRunner{env: append(env, "GOWORK="+goWork)}
}

// run executes `go args...` in dir and returns its standard output; the error
// names the command and carries its standard error.
func (g goRunner) run(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = g.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s (in %s): %w: %s", strings.Join(args, " "), dir, err,
			strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// loadWorkspace reads the go.work at root, every module's go.mod and every
// package's direct imports. Errors that make the whole check impossible are
// returned; per-package problems are collected in loadErrors.
func loadWorkspace(root string, environ []string) (*workspace, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("root %q: %w", root, err)
	}
	goWork := filepath.Join(root, "go.work")
	if _, err := os.Stat(goWork); err != nil {
		return nil, fmt.Errorf("root %s: no go.work: %w", root, err)
	}
	g := withGoWork(environ, goWork)

	dirs, err := workspaceDirs(g, root, goWork)
	if err != nil {
		return nil, err
	}
	// The standard library does not depend on the workspace; listing it
	// outside the workspace keeps a broken go.mod a per-module error.
	std, err := stdPackages(withGoWork(environ, "off"), root)
	if err != nil {
		return nil, err
	}
	ws := &workspace{std: std, pkgCount: map[string]int{}}
	for _, dir := range dirs {
		gm, err := readGoMod(g, root, dir)
		if err != nil {
			return nil, err
		}
		ws.goMods = append(ws.goMods, gm)
	}
	for _, gm := range ws.goMods {
		pkgs, errs, err := listPackages(g, root, gm)
		if err != nil {
			return nil, err
		}
		ws.loadErrors = append(ws.loadErrors, errs...)
		ws.packages = append(ws.packages, pkgs...)
		ws.pkgCount[gm.Dir] = len(pkgs)
		for _, p := range pkgs {
			ws.edges += len(p.Imports) + len(p.TestImports)
		}
	}
	return ws, nil
}

// workspaceDirs returns the go.work use directories, relative to root,
// slash-separated and sorted.
func workspaceDirs(g goRunner, root, goWork string) ([]string, error) {
	out, err := g.run(root, "work", "edit", "-json", goWork)
	if err != nil {
		return nil, fmt.Errorf("read go.work: %w", err)
	}
	var work struct {
		Use []struct{ DiskPath string }
	}
	if err := json.Unmarshal(out, &work); err != nil {
		return nil, fmt.Errorf("decode go.work of %s: %w", root, err)
	}
	if len(work.Use) == 0 {
		return nil, fmt.Errorf("go.work of %s uses no module", root)
	}
	var dirs []string
	seen := map[string]bool{}
	for _, u := range work.Use {
		abs := u.DiskPath
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(root, abs)
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("go.work use %q: module directory must be below the root %s", u.DiskPath, root)
		}
		rel = filepath.ToSlash(rel)
		if !seen[rel] {
			seen[rel] = true
			dirs = append(dirs, rel)
		}
	}
	sort.Strings(dirs)
	return dirs, nil
}

// stdPackages returns the import paths of the standard library.
func stdPackages(g goRunner, root string) (map[string]bool, error) {
	out, err := g.run(root, "list", "std")
	if err != nil {
		return nil, fmt.Errorf("list the standard library: %w", err)
	}
	std := map[string]bool{}
	for _, line := range strings.Fields(string(out)) {
		std[line] = true
	}
	if !std["fmt"] {
		return nil, errors.New("list the standard library: go list std did not report fmt")
	}
	return std, nil
}

// readGoMod parses dir/go.mod with `go mod edit -json`.
func readGoMod(g goRunner, root, dir string) (archrules.GoMod, error) {
	modDir := filepath.Join(root, filepath.FromSlash(dir))
	out, err := g.run(modDir, "mod", "edit", "-json", filepath.Join(modDir, "go.mod"))
	if err != nil {
		return archrules.GoMod{}, fmt.Errorf("module %s: read go.mod: %w", dir, err)
	}
	var mod struct {
		Module  struct{ Path string }
		Require []struct {
			Path     string
			Indirect bool
		}
		Replace []struct {
			Old struct{ Path string }
			New struct{ Path string }
		}
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		return archrules.GoMod{}, fmt.Errorf("module %s: decode go.mod: %w", dir, err)
	}
	gm := archrules.GoMod{Dir: dir, Path: mod.Module.Path, Replaces: map[string]string{}}
	for _, r := range mod.Require {
		gm.Requires = append(gm.Requires, archrules.Require{Path: r.Path, Indirect: r.Indirect})
	}
	for _, r := range mod.Replace {
		gm.Replaces[r.Old.Path] = r.New.Path
	}
	return gm, nil
}

// listedPackage is the part of `go list -json` output archcheck reads.
type listedPackage struct {
	Dir            string
	ImportPath     string
	Module         *struct{ Path string }
	Imports        []string
	TestImports    []string
	XTestImports   []string
	IgnoredGoFiles []string
	Error          *struct{ Pos, Err string }
}

const listFields = "Dir,ImportPath,Module,Imports,TestImports,XTestImports,IgnoredGoFiles,Error"

// listPackages returns the module's packages with their direct imports. A
// failing go list is an error; a package go list could not read, or an
// ignored file that does not parse, is a load error (its imports would be
// incomplete).
func listPackages(g goRunner, root string, gm archrules.GoMod) ([]archrules.Package, []error, error) {
	modDir := filepath.Join(root, filepath.FromSlash(gm.Dir))
	out, err := g.run(modDir, "list", "-e", "-deps=false", "-json="+listFields, "./...")
	if err != nil {
		return nil, nil, fmt.Errorf("module %s: list packages: %w", gm.Dir, err)
	}
	var pkgs []archrules.Package
	var loadErrs []error
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var lp listedPackage
		if err := dec.Decode(&lp); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("module %s: decode go list output: %w", gm.Dir, err)
		}
		if lp.Error != nil {
			msg := lp.Error.Err
			if lp.Error.Pos != "" && !strings.Contains(msg, lp.Error.Pos) {
				msg = lp.Error.Pos + ": " + msg
			}
			loadErrs = append(loadErrs, fmt.Errorf("module %s: package %s: %s", gm.Dir, lp.ImportPath, msg))
			continue
		}
		if lp.Module == nil || lp.Module.Path != gm.Path {
			loadErrs = append(loadErrs, fmt.Errorf("module %s: package %s is not in module %s", gm.Dir, lp.ImportPath, gm.Path))
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(lp.ImportPath, gm.Path), "/")
		p := archrules.Package{
			Module:      gm.Dir,
			Path:        rel,
			Imports:     lp.Imports,
			TestImports: union(lp.TestImports, lp.XTestImports),
		}
		code, test, err := ignoredImports(lp.Dir, lp.IgnoredGoFiles)
		if err != nil {
			loadErrs = append(loadErrs, fmt.Errorf("module %s: package %s: %w", gm.Dir, lp.ImportPath, err))
		}
		p.Imports = union(p.Imports, code)
		p.TestImports = union(p.TestImports, test)
		pkgs = append(pkgs, p)
	}
	return pkgs, loadErrs, nil
}

// ignoredImports parses the imports of files the build context excludes
// (build tags, GOOS/GOARCH suffixes): they are still code of the module.
func ignoredImports(dir string, files []string) (code, test []string, err error) {
	fset := token.NewFileSet()
	var errs []error
	for _, name := range files {
		if !strings.HasSuffix(name, ".go") {
			continue
		}
		f, perr := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ImportsOnly)
		if perr != nil {
			errs = append(errs, fmt.Errorf("parse ignored file %s: %w", name, perr))
			continue
		}
		for _, is := range f.Imports {
			p, uerr := strconv.Unquote(is.Path.Value)
			if uerr != nil {
				errs = append(errs, fmt.Errorf("file %s: import %s: %w", name, is.Path.Value, uerr))
				continue
			}
			if strings.HasSuffix(name, "_test.go") {
				test = append(test, p)
			} else {
				code = append(code, p)
			}
		}
	}
	return code, test, errors.Join(errs...)
}

// union returns the sorted, deduplicated union of the lists.
func union(lists ...[]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range lists {
		for _, s := range l {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}
