// Package testcontainers is a fixture stand-in for github.com/testcontainers/testcontainers-go.
package testcontainers
