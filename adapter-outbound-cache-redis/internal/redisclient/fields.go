package redisclient

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// MinTimeout is the least timeout a setting accepts.
const MinTimeout = time.Millisecond

// The setting checks both capabilities' Validate share. Each names the
// field as the capability spells it and wraps the profile's Invalid error;
// nil means the value is acceptable.

// CheckAddr reports an address that is not host:port with a non-empty host
// and a port in 1..65535.
func (p Profile) CheckAddr(field, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	switch {
	case err != nil || host == "":
		return fmt.Errorf("%w: %s %q must be host:port", p.invalid(), field, addr)
	case !ValidAddr(addr):
		return fmt.Errorf("%w: %s %q: port must be 1..65535", p.invalid(), field, addr)
	}
	return nil
}

// CheckTLS reports a TLS configuration whose MinVersion is set below TLS
// 1.2 (field names the MinVersion setting).
func (p Profile) CheckTLS(field string, c *tls.Config) error {
	if c != nil && c.MinVersion != 0 && c.MinVersion < tls.VersionTLS12 {
		return fmt.Errorf("%w: %s %#x must be at least TLS 1.2", p.invalid(), field, c.MinVersion)
	}
	return nil
}

// CheckTimeout reports a timeout outside MinTimeout..limit.
func (p Profile) CheckTimeout(field string, d, limit time.Duration) error {
	if d < MinTimeout || d > limit {
		return fmt.Errorf("%w: %s %v must be in %v..%v", p.invalid(), field, d, MinTimeout, limit)
	}
	return nil
}

// CheckPoolSize reports a pool size outside 1..limit.
func (p Profile) CheckPoolSize(field string, n, limit int) error {
	if n < 1 || n > limit {
		return fmt.Errorf("%w: %s %d must be in 1..%d", p.invalid(), field, n, limit)
	}
	return nil
}

// CheckAddrs reports malformed and duplicate host:port addresses of a
// topology (1..MaxAddrs), each error naming field[i].
func (p Profile) CheckAddrs(field string, addrs []string) []error {
	if len(addrs) == 0 || len(addrs) > MaxAddrs {
		return []error{fmt.Errorf("%w: %s: %d addresses, want 1..%d", p.invalid(), field, len(addrs), MaxAddrs)}
	}
	var errs []error
	seen := map[string]int{}
	for i, a := range addrs {
		if !ValidAddr(a) {
			errs = append(errs, fmt.Errorf("%w: %s[%d] %q must be host:port with port 1..65535", p.invalid(), field, i, a))
			continue
		}
		if j, dup := seen[strings.ToLower(a)]; dup {
			errs = append(errs, fmt.Errorf("%w: %s[%d] %q duplicates %s[%d]", p.invalid(), field, i, a, field, j))
		}
		seen[strings.ToLower(a)] = i
	}
	return errs
}

// CheckMasterName reports a Sentinel master name that is not one
// non-empty word.
func (p Profile) CheckMasterName(field, name string) error {
	if name == "" || strings.ContainsAny(name, " \t\r\n") {
		return fmt.Errorf("%w: %s must be one non-empty word", p.invalid(), field)
	}
	return nil
}

// ValidAddr reports whether a is host:port with a non-empty host and a port
// in 1..65535.
func ValidAddr(a string) bool {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}
