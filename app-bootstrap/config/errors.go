package config

import (
	"errors"
	"fmt"
)

// Sentinel errors wrapped by every *VarError, for callers (and tests) that
// branch with errors.Is.
var (
	// ErrRequired: a variable that the enabled capability needs is unset.
	ErrRequired = errors.New("is required")
	// ErrUnsupported: the value is well-formed but not supported in v1.
	ErrUnsupported = errors.New("is not supported")
	// ErrInvalid: the value cannot be parsed or is out of range.
	ErrInvalid = errors.New("is invalid")
	// ErrConflict: two variables that exclude each other are both set.
	ErrConflict = errors.New("conflicts with another variable")
	// ErrSharedRedis: the cache and the coordination limiter name the same
	// Redis without APP_RATE_LIMIT_ALLOW_SHARED_REDIS=true.
	ErrSharedRedis = errors.New("names the same redis as the cache")
	// ErrPolicyFile: the policy file is malformed or a policy is invalid.
	ErrPolicyFile = errors.New("invalid policy file")
)

// VarError is one configuration failure, naming the environment variable at
// fault. Its message never contains a secret's value.
type VarError struct {
	// Var is the full variable name, e.g. "APP_RATE_LIMIT_REDIS_ADDR".
	Var string
	// Err wraps one of the sentinels above and says why.
	Err error
}

func (e *VarError) Error() string { return e.Var + ": " + e.Err.Error() }

// Unwrap exposes the cause to errors.Is and errors.As.
func (e *VarError) Unwrap() error { return e.Err }

// errs collects VarErrors in the order the checks run.
type errs struct{ list []error }

func (c *errs) add(name string, sentinel error, format string, args ...any) {
	c.list = append(c.list, &VarError{Var: name, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)})
}

func (c *errs) wrap(name string, err error) {
	c.list = append(c.list, &VarError{Var: name, Err: err})
}

func (c *errs) err() error { return errors.Join(c.list...) }

// VarErrors flattens err (as returned by Load) into its VarErrors, in order.
func VarErrors(err error) []*VarError {
	var out []*VarError
	var walk func(error)
	walk = func(e error) {
		var ve *VarError
		if errors.As(e, &ve) && e == error(ve) {
			out = append(out, ve)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, inner := range j.Unwrap() {
				walk(inner)
			}
			return
		}
		if errors.As(e, &ve) {
			out = append(out, ve)
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}
