// Package ratelimit is a fixture: stdlib imports only.
package ratelimit

import "errors"

// ErrDenied is a fixture value.
var ErrDenied = errors.New("denied")
