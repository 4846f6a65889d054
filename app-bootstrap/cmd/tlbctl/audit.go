package main

import (
	"io"
	"log/slog"
	"os"
	"os/user"
	"strconv"
)

// auditFileMode is the mode of an audit log tlbctl creates.
const auditFileMode = 0o600

// openAuditLog opens path for appending, creating it with auditFileMode.
// It must be a regular file: a directory, device or pipe is refused (as a
// usage error, before any connection).
func openAuditLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, auditFileMode)
	if err != nil {
		return nil, usagef("--audit-log: %v", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, usagef("--audit-log: %v", err)
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, usagef("--audit-log %s: not a regular file", bounded(path))
	}
	return f, nil
}

// writeAudit writes the JSON audit line of a deletion to w: the policy,
// the subject's kind and pseudonymous digest (HMAC under
// APP_WEB_SUBJECT_SECRET, the value the service keys by), the key, what was
// deleted, the Redis user and endpoint. Never the API key, principal or
// address, nor any password.
func writeAudit(w io.Writer, who auditInfo, tg target, deleted int64) {
	slog.New(slog.NewJSONHandler(w, nil)).Info("tlbctl reset",
		"policy", string(tg.policy.ID()),
		"revision", tg.policy.Revision(),
		"subject_kind", tg.kind,
		"subject_digest", string(tg.digest),
		"key", tg.key,
		"deleted", deleted,
		"redis_user", who.user,
		"redis", who.endpoint,
		"pid", os.Getpid(),
		"os_user", osUser(),
	)
}

// osUser is the operator's login name, or the numeric user ID when it has
// none, for the audit line.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return bounded(u.Username)
	}
	return strconv.Itoa(os.Getuid())
}
