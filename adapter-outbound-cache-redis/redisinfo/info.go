package redisinfo

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrMalformed is wrapped by every error about INFO text that does not
// have the documented form.
var ErrMalformed = errors.New("malformed INFO reply")

// Parse returns the name -> value fields of an INFO reply (any number of
// sections); section headers ("# Server") and blank lines are skipped, and
// a later duplicate name wins.
func Parse(text string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		if line == "" || line[0] == '#' {
			continue
		}
		if name, value, ok := strings.Cut(line, ":"); ok {
			out[name] = value
		}
	}
	return out
}

// Field returns the value of the first field called name in an INFO reply
// without building a map; ok is false when there is none.
func Field(text, name string) (value string, ok bool) {
	for line := range strings.Lines(text) {
		n, v, found := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if found && n == name {
			return v, true
		}
	}
	return "", false
}

// CommandStat is one cmdstat_<command> line of INFO commandstats.
type CommandStat struct {
	Calls         int64   `json:"calls"`
	Usec          int64   `json:"usec"`
	UsecPerCall   float64 `json:"usecPerCall"`
	RejectedCalls int64   `json:"rejectedCalls,omitempty"`
	FailedCalls   int64   `json:"failedCalls,omitempty"`
}

// CommandStats returns every cmdstat_ line of an INFO commandstats reply
// keyed by command name ("evalsha", "config|resetstat"). A figure that is
// not a number is an error wrapping ErrMalformed; unknown figures are
// ignored.
func CommandStats(text string) (map[string]CommandStat, error) {
	out := map[string]CommandStat{}
	for name, value := range Parse(text) {
		cmd, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		st, err := parseCommandStat(value)
		if err != nil {
			return nil, fmt.Errorf("%w: cmdstat_%s: %w", ErrMalformed, cmd, err)
		}
		out[cmd] = st
	}
	return out, nil
}

func parseCommandStat(value string) (CommandStat, error) {
	var st CommandStat
	for kv := range strings.SplitSeq(value, ",") {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "calls":
			st.Calls, err = strconv.ParseInt(v, 10, 64)
		case "usec":
			st.Usec, err = strconv.ParseInt(v, 10, 64)
		case "usec_per_call":
			st.UsecPerCall, err = strconv.ParseFloat(v, 64)
		case "rejected_calls":
			st.RejectedCalls, err = strconv.ParseInt(v, 10, 64)
		case "failed_calls":
			st.FailedCalls, err = strconv.ParseInt(v, 10, 64)
		}
		if err != nil {
			return CommandStat{}, fmt.Errorf("%s=%q is not a number", k, v)
		}
	}
	return st, nil
}

// Version is a server version major.minor.patch.
type Version [3]int

// ParseVersion parses "major.minor.patch" as INFO server's redis_version
// reports it (a missing patch is 0).
func ParseVersion(s string) (Version, error) {
	var v Version
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("version %q: want major.minor.patch", bounded(s))
	}
	for i, part := range parts {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return v, fmt.Errorf("version %q: part %d is not a number", bounded(s), i)
		}
		v[i] = n
	}
	return v, nil
}

// Compare returns -1, 0 or 1 as v is older than, equal to or newer than w.
func (v Version) Compare(w Version) int {
	for i := range v {
		if v[i] != w[i] {
			if v[i] < w[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// bounded cuts s for an error message.
func bounded(s string) string {
	const maxLen = 32
	if len(s) > maxLen {
		return s[:maxLen] + "..."
	}
	return s
}
