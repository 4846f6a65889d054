// Package leftpad is a fixture stand-in for github.com/acme/leftpad.
package leftpad
