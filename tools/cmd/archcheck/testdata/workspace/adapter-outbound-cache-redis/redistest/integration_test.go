//go:build integration

package redistest

// Excluded by a build tag, yet checked: the tool parses ignored files too.
import _ "github.com/testcontainers/testcontainers-go"
