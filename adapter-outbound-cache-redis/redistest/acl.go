package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// operationsDoc is the document whose "ACL users" section names the
// least-privilege users, relative to the repository root.
const operationsDoc = "docs/operations.md"

// DocumentedACLUser returns the ACL SETUSER command for user exactly as
// docs/operations.md writes it, with its password (the one word starting
// with ">") replaced by password, as arguments for Do. A test that creates
// its users with it proves the documented line is enough. It fails t when
// the document is not found above the working directory or does not hold
// exactly one such line with one password.
func DocumentedACLUser(t testing.TB, user, password string) []any {
	t.Helper()
	path, err := findUp(operationsDoc)
	if err != nil {
		t.Fatalf("redistest: %s: %v", operationsDoc, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("redistest: read %s: %v", path, err)
	}
	args, err := aclUserLine(string(b), user, password)
	if err != nil {
		t.Fatalf("redistest: %s: %v", path, err)
	}
	return args
}

// aclUserLine finds the one line "ACL SETUSER <user> ..." in doc and
// returns its words with the password word replaced by ">" + password.
func aclUserLine(doc, user, password string) ([]any, error) {
	var found []string
	for _, line := range strings.Split(doc, "\n") {
		words := strings.Fields(line)
		if len(words) > 2 && words[0] == "ACL" && words[1] == "SETUSER" && words[2] == user {
			found = append(found, line)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("ACL SETUSER %s: %d lines, want 1", user, len(found))
	}
	var args []any
	passwords := 0
	for _, w := range strings.Fields(found[0]) {
		if strings.HasPrefix(w, ">") {
			passwords++
			w = ">" + password
		}
		args = append(args, w)
	}
	if passwords != 1 {
		return nil, fmt.Errorf("ACL SETUSER %s: %d password words (\">...\"), want 1", user, passwords)
	}
	return args, nil
}

// findUp returns the first dir/rel for dir the working directory or one
// of its parents (at most 8 levels up).
func findUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 8 {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("not found in the working directory or its 8 parents: %w", os.ErrNotExist)
}
