package archrules

import (
	"path"
	"slices"
	"sort"
	"strings"
)

// Checker evaluates packages and go.mod files against a Table.
type Checker struct {
	// Table is the rule set.
	Table Table
	// IsStd reports whether an import path is a standard-library package.
	IsStd func(importPath string) bool
}

// Match reports whether importPath matches pattern ("p" or "p/...").
func Match(pattern, importPath string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return importPath == base || strings.HasPrefix(importPath, base+"/")
	}
	return importPath == pattern
}

// ProjectModule returns the directory name of the project module that
// importPath belongs to, among the given modules.
func ProjectModule(importPath string, modules []string) (string, bool) {
	rest, ok := strings.CutPrefix(importPath, ProjectPrefix)
	if !ok {
		return "", false
	}
	for _, m := range modules {
		if rest == m || strings.HasPrefix(rest, m+"/") {
			return m, true
		}
	}
	return "", false
}

func (c Checker) contains(s Set, importPath string) bool {
	if s.Any {
		return true
	}
	if s.Std && c.IsStd(importPath) {
		return true
	}
	if _, ok := ProjectModule(importPath, s.Modules); ok {
		return true
	}
	for _, p := range s.Paths {
		if Match(p, importPath) {
			return true
		}
	}
	return false
}

func (s Site) contains(module, pkg string) bool {
	if s.Module != module {
		return false
	}
	return s.Package == "" || Match(s.Package, pkg)
}

func (t Table) module(name string) (ModuleRule, bool) {
	for _, m := range t.Modules {
		if m.Module == name {
			return m, true
		}
	}
	return ModuleRule{}, false
}

// allowed reports whether pkg of module m may import importPath, in test
// files when test is true.
func (c Checker) allowed(m ModuleRule, pkg, importPath string, test bool) bool {
	sets := []Set{m.Code}
	if test {
		sets = append(sets, m.Test)
	}
	for _, p := range m.Packages {
		if Match(p.Package, pkg) {
			sets = append(sets, p.Code)
			if test {
				sets = append(sets, p.Test)
			}
		}
	}
	for _, s := range sets {
		if c.contains(s, importPath) {
			return true
		}
	}
	return false
}

// CheckImport returns the violation of pkg importing importPath (from a test
// file when test is true), or ok=false when the import is allowed.
func (c Checker) CheckImport(pkg Package, importPath string, test bool) (Violation, bool) {
	v := Violation{From: qualified(pkg.Module, pkg.Path), Verb: "imports", To: importPath, Test: test}
	for _, e := range c.Table.Edges {
		if len(e.From) > 0 && !slices.Contains(e.From, pkg.Module) {
			continue
		}
		if !c.contains(e.To, importPath) {
			continue
		}
		if len(e.Only) > 0 && !slices.ContainsFunc(e.Only, func(s Site) bool { return s.contains(pkg.Module, pkg.Path) }) {
			continue
		}
		if slices.ContainsFunc(e.Except, func(s Site) bool { return s.contains(pkg.Module, pkg.Path) }) {
			continue
		}
		v.Rule, v.Why = e.Name, e.Why
		return v, true
	}
	m, ok := c.Table.module(pkg.Module)
	if !ok {
		v.Rule, v.Why = RuleKnownModules, "module "+pkg.Module+" has no row in the rule table"
		return v, true
	}
	if c.allowed(m, pkg.Path, importPath, test) {
		return Violation{}, false
	}
	v.Rule, v.Why = m.Module, describe(m)
	return v, true
}

// CheckPackages returns every violation of the packages' imports. An import
// present in both non-test and test files is reported once, as non-test.
func (c Checker) CheckPackages(pkgs []Package) []Violation {
	var out []Violation
	for _, p := range pkgs {
		seen := map[string]bool{}
		for _, imp := range p.Imports {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			if v, bad := c.CheckImport(p, imp, false); bad {
				out = append(out, v)
			}
		}
		for _, imp := range p.TestImports {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			if v, bad := c.CheckImport(p, imp, true); bad {
				out = append(out, v)
			}
		}
	}
	sortViolations(out)
	return out
}

// CheckGoMods checks every workspace module's go.mod: a known module at its
// canonical path, a replace => ../<dir> for every required sibling, and the
// module's DirectRequires list.
func (c Checker) CheckGoMods(mods []GoMod) []Violation {
	byPath := map[string]GoMod{}
	for _, m := range mods {
		byPath[m.Path] = m
	}
	var out []Violation
	for _, m := range mods {
		from := qualified(m.Dir, "go.mod")
		rule, known := c.Table.module(m.Dir)
		if !known {
			out = append(out, Violation{From: from, Verb: "declares module", To: m.Path, Rule: RuleKnownModules,
				Why: "workspace module " + m.Dir + " has no row in the rule table (tools/internal/archrules)"})
		} else if want := ProjectPrefix + m.Dir; m.Path != want {
			out = append(out, Violation{From: from, Verb: "declares module", To: m.Path, Rule: RuleModulePath,
				Why: "the module in directory " + m.Dir + " must be " + want})
		}
		for _, r := range m.Requires {
			if known && rule.DirectRequires != nil && !r.Indirect && !slices.Contains(rule.DirectRequires, r.Path) {
				out = append(out, Violation{From: from, Verb: "requires", To: r.Path, Rule: rule.Module + "-go-mod",
					Why: m.Dir + "/go.mod may require directly only: " + strings.Join(rule.DirectRequires, ", ")})
			}
			if !strings.HasPrefix(r.Path, ProjectPrefix) {
				continue
			}
			sib, ok := byPath[r.Path]
			if !ok {
				out = append(out, Violation{From: from, Verb: "requires", To: r.Path, Rule: RuleSiblingReplace,
					Why: r.Path + " is not a module of the workspace"})
				continue
			}
			want := relDir(m.Dir, sib.Dir)
			got, has := m.Replaces[r.Path]
			if has && path.Clean(got) == want {
				continue
			}
			why := "missing replace " + r.Path + " => " + want + " (needed to build with GOWORK=off)"
			if has {
				why = "replace " + r.Path + " => " + got + " must point to " + want
			}
			out = append(out, Violation{From: from, Verb: "requires", To: r.Path, Rule: RuleSiblingReplace, Why: why})
		}
	}
	sortViolations(out)
	return out
}

func qualified(module, pkg string) string {
	if pkg == "" {
		return module
	}
	return module + "/" + pkg
}

// relDir is the slash path from module directory from to module directory to.
func relDir(from, to string) string {
	up := strings.Repeat("../", strings.Count(path.Clean(from), "/")+1)
	return path.Clean(up + to)
}

// describe renders a module's allow-list for the line under a violation.
func describe(m ModuleRule) string {
	var b strings.Builder
	b.WriteString(m.Module + " may import: " + describeSet(m.Code))
	if t := describeSet(m.Test); t != "nothing" {
		b.WriteString("; in tests also: " + t)
	}
	for _, p := range m.Packages {
		b.WriteString("; in " + p.Package + " also: " + describeSet(p.Code))
		if t := describeSet(p.Test); t != "nothing" {
			b.WriteString(" (tests also: " + t + ")")
		}
	}
	return b.String()
}

func describeSet(s Set) string {
	if s.Any {
		return "anything"
	}
	var parts []string
	if s.Std {
		parts = append(parts, "stdlib")
	}
	parts = append(parts, s.Modules...)
	parts = append(parts, s.Paths...)
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

func sortViolations(vs []Violation) {
	sort.SliceStable(vs, func(i, j int) bool {
		a, b := vs[i], vs[j]
		if a.From != b.From {
			return a.From < b.From
		}
		if a.To != b.To {
			return a.To < b.To
		}
		return a.Rule < b.Rule
	})
}
