// Package rate is a fixture stand-in for golang.org/x/time/rate.
package rate
