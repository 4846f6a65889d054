package archrules

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Rule names that are not module or edge rules of the table.
const (
	// RuleKnownModules: every workspace module must have a row in the table.
	RuleKnownModules = "known-modules"
	// RuleModulePath: a module's path is ProjectPrefix + its directory.
	RuleModulePath = "module-path"
	// RuleSiblingReplace: every required sibling module has a
	// replace => ../<dir>, so the module builds with GOWORK=off.
	RuleSiblingReplace = "sibling-replace"
)

// Set is a set of import paths. The zero Set is empty.
type Set struct {
	// Std contains every package of the Go standard library.
	Std bool
	// Modules contains every package of these project modules (directory names).
	Modules []string
	// Paths are import-path patterns: "p" is exactly p, "p/..." is p and
	// every path below it.
	Paths []string
	// Any contains every import path.
	Any bool
}

// ModuleRule is the allow-list of one module.
type ModuleRule struct {
	// Module is the module's directory name, e.g. "adapter-inbound-web".
	Module string
	// Code is what non-test files may import.
	Code Set
	// Test is what _test.go files may import in addition to Code.
	Test Set
	// Packages widen Code and Test for some packages of the module.
	Packages []PackageRule
	// DirectRequires, when non-nil, lists the only module paths go.mod may
	// require directly (indirect requires are the go command's business).
	DirectRequires []string
}

// PackageRule widens a module's allow-list for the packages matching Package.
type PackageRule struct {
	// Package is a pattern relative to the module root ("redistest/...").
	Package string
	// Code is added to the module's Code (and so also to its tests).
	Code Set
	// Test is added to the module's Test.
	Test Set
}

// EdgeRule forbids imports of To from the modules in From (every module when
// From is empty) or, when Only is set, from the sites in Only, except from
// the sites in Except.
type EdgeRule struct {
	// Name is printed with every violation ("rule <Name>").
	Name string
	// Why says what the boundary protects.
	Why string
	// From lists the importer modules the rule applies to; empty means all.
	From []string
	// To is the set of forbidden imports.
	To Set
	// Except lists the importer sites allowed to import To anyway.
	Except []Site
	// Only, when set, narrows the importers to these sites (packages of
	// the From modules).
	Only []Site
}

// Site is a module, or some packages of a module.
type Site struct {
	// Module is the module's directory name.
	Module string
	// Package is a pattern relative to the module root; empty means the
	// whole module.
	Package string
}

// Table is the complete rule set: per-module allow-lists and global edges.
type Table struct {
	// Modules has one row per workspace module.
	Modules []ModuleRule
	// Edges are checked, in order, before the module allow-lists.
	Edges []EdgeRule
}

// Package is one loaded package and its direct imports.
type Package struct {
	// Module is the directory name of the package's module.
	Module string
	// Path is the import path relative to the module root; "" is the root.
	Path string
	// Imports are the imports of the package's non-test files.
	Imports []string
	// TestImports are the imports of its _test.go files (in-package and
	// external test package together).
	TestImports []string
}

// GoMod is the part of one module's go.mod the rules read.
type GoMod struct {
	// Dir is the module directory relative to the workspace root,
	// slash-separated ("shared-contract").
	Dir string
	// Path is the module path from the module directive.
	Path string
	// Requires are the require directives.
	Requires []Require
	// Replaces maps a replaced module path to its replacement path.
	Replaces map[string]string
}

// Require is one require directive.
type Require struct {
	// Path is the required module path.
	Path string
	// Indirect is true for a "// indirect" require.
	Indirect bool
}

// Violation is one edge or go.mod line outside the rules.
type Violation struct {
	// From is "module/package" for an import, "module/go.mod" for go.mod.
	From string
	// Verb is "imports", "requires" or "declares module".
	Verb string
	// To is the imported package or the required/declared module path.
	To string
	// Rule is the name of the broken rule.
	Rule string
	// Why explains the rule, for the line under the violation.
	Why string
	// Test is true when only test files have the import.
	Test bool
}

// String renders the violation as "from verb to: rule name".
func (v Violation) String() string {
	return fmt.Sprintf("%s %s %s: rule %s", v.From, v.Verb, v.To, v.Rule)
}

// Validate reports inconsistencies of the table itself: duplicate or unnamed
// rows, unknown module names, malformed patterns.
func (t Table) Validate() error {
	var errs []error
	names := map[string]bool{}
	for _, m := range t.Modules {
		if m.Module == "" || names[m.Module] {
			errs = append(errs, fmt.Errorf("module rule %q: empty or duplicate module", m.Module))
		}
		names[m.Module] = true
	}
	checkSet := func(where string, s Set) {
		for _, mod := range s.Modules {
			if _, ok := t.module(mod); !ok {
				errs = append(errs, fmt.Errorf("%s: unknown module %q", where, mod))
			}
		}
		for _, p := range s.Paths {
			if err := validPattern(p); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
	}
	checkSite := func(where string, s Site) {
		if _, ok := t.module(s.Module); !ok {
			errs = append(errs, fmt.Errorf("%s: unknown module %q", where, s.Module))
		}
		if s.Package != "" {
			if err := validPattern(s.Package); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
	}
	for _, m := range t.Modules {
		checkSet("module "+m.Module+" code", m.Code)
		checkSet("module "+m.Module+" test", m.Test)
		for _, p := range m.Packages {
			checkSite("module "+m.Module+" package rule", Site{Module: m.Module, Package: p.Package})
			checkSet("module "+m.Module+" package "+p.Package+" code", p.Code)
			checkSet("module "+m.Module+" package "+p.Package+" test", p.Test)
		}
	}
	for i, e := range t.Edges {
		where := fmt.Sprintf("edge %d (%s)", i, e.Name)
		if e.Name == "" || e.Why == "" {
			errs = append(errs, fmt.Errorf("%s: name and why are required", where))
		}
		if e.To.Any || e.To.Std {
			errs = append(errs, fmt.Errorf("%s: an edge must forbid specific modules or paths", where))
		}
		checkSet(where+" to", e.To)
		for _, from := range e.From {
			checkSite(where+" from", Site{Module: from})
		}
		for _, s := range e.Except {
			checkSite(where+" except", s)
		}
		for _, s := range e.Only {
			checkSite(where+" only", s)
		}
	}
	return errors.Join(errs...)
}

func validPattern(p string) error {
	base := strings.TrimSuffix(p, "/...")
	if base == "" || strings.Contains(base, "...") || strings.HasPrefix(base, "/") || strings.HasSuffix(base, "/") ||
		path.Clean(base) != base {
		return fmt.Errorf("malformed pattern %q", p)
	}
	return nil
}
