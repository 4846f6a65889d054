package rlsconfig

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels a caller can branch on with errors.Is. Every error Load returns
// wraps one of them inside a *FileError.
var (
	// ErrInvalidConfig wraps every refusal of Load and LoadDir.
	ErrInvalidConfig = errors.New("invalid rate limit configuration")
	// ErrRead: a file or the directory could not be read.
	ErrRead = errors.New("cannot read configuration")
	// ErrYAML: the text is not YAML, or a value has the wrong type for its
	// field.
	ErrYAML = errors.New("malformed yaml")
	// ErrUnknownKey: a key is not in the reference's table of valid keys
	// (nor one of our extensions where they are allowed), or is not a
	// string.
	ErrUnknownKey = errors.New("unknown key")
	// ErrBadValue: a value the reference refuses while checking keys: a
	// list of something other than maps, or a scalar that is not a string,
	// an integer, a boolean or null (a float, for example).
	ErrBadValue = errors.New("unsupported value")
	// ErrEmptyDomain: the file has no domain.
	ErrEmptyDomain = errors.New("empty domain")
	// ErrDuplicateDomain: two files configure the same domain.
	ErrDuplicateDomain = errors.New("duplicate domain")
	// ErrEmptyKey: a descriptor has no key.
	ErrEmptyKey = errors.New("empty descriptor key")
	// ErrDuplicateKey: two descriptors at one level have the same composite
	// key (key, or key_value).
	ErrDuplicateKey = errors.New("duplicate descriptor key")
	// ErrInvalidUnit: a limit's unit is missing or not a unit.
	ErrInvalidUnit = errors.New("invalid rate limit unit")
	// ErrUnlimitedWithUnit: an unlimited limit names a unit.
	ErrUnlimitedWithUnit = errors.New("unlimited limit with a unit")
	// ErrReplaces: an empty replaces entry, or one naming its own limit.
	ErrReplaces = errors.New("invalid replaces")
	// ErrShareThreshold: share_threshold on a descriptor without a
	// wildcard.
	ErrShareThreshold = errors.New("share_threshold without a wildcard")
	// ErrMetadata: metadata that cannot become a protobuf Struct.
	ErrMetadata = errors.New("invalid metadata")
	// ErrPolicy: the policy extension mixed with unit, requests_per_unit,
	// unlimited or algorithm, or an empty policy id.
	ErrPolicy = errors.New("invalid policy reference")
	// ErrAlgorithm: the algorithm extension names an unknown algorithm,
	// lacks or mixes its fields, or has a field out of range.
	ErrAlgorithm = errors.New("invalid algorithm")
)

// FileError is one refusal, located: the file, the domain (when known) and
// the descriptor key path (domain.key_value.key2, the reference's composite
// key, when the fault is in a descriptor). Err wraps the sentinel.
type FileError struct {
	File   string
	Domain string
	Key    string
	Err    error
}

// Error says where and what, lowercase: file "a.yaml": domain "d": key
// "d.k_v": duplicate descriptor key ....
func (e *FileError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "file %q", e.File)
	if e.Domain != "" {
		fmt.Fprintf(&b, ": domain %q", e.Domain)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ": key %q", e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap exposes ErrInvalidConfig and the specific sentinel to errors.Is.
func (e *FileError) Unwrap() []error { return []error{ErrInvalidConfig, e.Err} }
