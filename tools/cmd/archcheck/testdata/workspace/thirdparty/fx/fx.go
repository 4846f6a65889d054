// Package fx is a fixture stand-in for go.uber.org/fx.
package fx
