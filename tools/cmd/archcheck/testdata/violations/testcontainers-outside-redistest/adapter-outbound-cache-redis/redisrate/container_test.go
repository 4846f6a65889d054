//go:build integration

package redisrate_test

// Violation: testcontainers outside redistest, hidden behind a build tag.
import _ "github.com/testcontainers/testcontainers-go"
