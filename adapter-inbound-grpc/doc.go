// Package rlsmodule is a placeholder that keeps the module importable while
// its packages are written.
package rlsmodule
