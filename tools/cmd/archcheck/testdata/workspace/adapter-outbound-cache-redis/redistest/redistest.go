// Package redistest is a fixture: the one package allowed testcontainers.
package redistest

import (
	_ "github.com/stretchr/testify/require"
	_ "github.com/testcontainers/testcontainers-go"
)
