package standalone

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Rule is one kind of reference a tracked file must not make.
type Rule struct {
	Name string
	Re   *regexp.Regexp
	// Fix says what to cite instead.
	Fix string
}

// Finding is one line of one file that breaks a rule.
type Finding struct {
	File string // relative to the scanned root, slash-separated
	Line int    // 1-based
	Rule string
	Text string // the line, trimmed and bounded
}

// String renders "file:line: rule: text".
func (f Finding) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", f.File, f.Line, f.Rule, f.Text)
}

// The names are assembled from parts so that this file does not match its
// own rules.
var rules = []Rule{
	{
		Name: "outside-contract",
		Re:   regexp.MustCompile(`CONTRACT` + `\.md`),
		Fix:  "cite docs/contract.md (and its section) or state the rule",
	},
	{
		Name: "outside-design-notes",
		Re:   regexp.MustCompile(`GO-REDIS-` + `FACTS|FAULT-` + `MATRIX|LESSONS` + `\.md|STYLE` + `\.md|distributed-rate-limit-` + `design`),
		Fix:  "bring the fact into docs/ (failure-certainty.md, reliability.md, contract.md) in the project's words",
	},
	{
		// A parent-relative path to a shared or spec directory, at any
		// depth, but not to shared-contract (a module of this repository).
		Name: "outside-path",
		Re:   regexp.MustCompile(`\.\./(\.\./)*(shared|spec)([^A-Za-z0-9_.-]|$)`),
		Fix:  "cite a path inside the repository",
	},
	{
		Name: "machine-path",
		Re:   regexp.MustCompile(`/` + `work/`),
		Fix:  "cite a path relative to the repository root",
	},
}

// Rules returns the rules Scan applies.
func Rules() []Rule { return append([]Rule(nil), rules...) }

// maxText bounds Finding.Text.
const maxText = 160

// Scan reads files (paths relative to root) and returns every line that
// matches a rule, in file order. A file with a NUL byte in its first 8 KiB
// is binary and skipped.
func Scan(root string, files []string) ([]Finding, error) {
	var out []Finding
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return nil, err
		}
		if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			for _, r := range rules {
				if r.Re.MatchString(line) {
					text := strings.TrimSpace(line)
					if len(text) > maxText {
						loc := r.Re.FindStringIndex(text)
						from := max(0, loc[0]-maxText/2)
						text = "..." + text[from:min(len(text), from+maxText)] + "..."
					}
					out = append(out, Finding{File: name, Line: n, Rule: r.Name, Text: text})
				}
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return out, nil
}

// TrackedFiles returns the files git tracks under root, relative to it
// (git ls-files), without deleted ones still in the index.
func TrackedFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %w", root, err)
	}
	var files []string
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if f == "" {
			continue
		}
		info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the work tree, a symlink or a submodule
		}
		files = append(files, f)
	}
	return files, nil
}
