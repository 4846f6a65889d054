package main

import (
	"fmt"
	"os"
	"regexp"
	"sort"
)

// marked matches a repository path in backquotes followed by a **[n]**
// marker, as docs/architecture.md writes the files of one request.
var marked = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)`\\s*\\*\\*\\[[0-9]+\\]\\*\\*")

// markedFiles returns the sorted, distinct paths doc marks **[n]**.
func markedFiles(doc string) ([]string, error) {
	b, err := os.ReadFile(doc)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var files []string
	for _, m := range marked.FindAllSubmatch(b, -1) {
		if f := string(m[1]); !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no path marked **[n]**", doc)
	}
	sort.Strings(files)
	return files, nil
}
