package keyspace

// Violation: testify is allowed in shared-contract tests only.
import _ "github.com/stretchr/testify/require"
