// Package require is a fixture stand-in for github.com/stretchr/testify/require.
package require
