package main

import (
	"io"
	"log/slog"
	"os"
	"os/user"
	"strconv"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rateplan"
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
	writeAuditLine(w, who, "tlbctl reset",
		"policy", string(tg.policy.ID()),
		"revision", tg.policy.Revision(),
		"subject_kind", tg.kind,
		"subject_digest", string(tg.digest),
		"key", tg.key,
		"deleted", deleted,
	)
}

// writePlanAudit writes the JSON audit line of a plan change (tlbctl plan
// set or unset) to w: the subject's kind and pseudonymous digest, as
// reset's line has them, the assignment key, the plan stored before and
// after ("none": no assignment), the effective plans
// before and after, what was carried per base policy, and reset's who and
// where. Never the API key, principal or address, nor any password.
func writePlanAudit(w io.Writer, who auditInfo, msg string, tg target, key, before, after string, c rateplan.Change) {
	moves := make([]auditMove, len(c.Moves))
	for i, m := range c.Moves {
		moves[i] = auditMove{Base: string(m.Base), From: string(m.From), To: string(m.To), Consumed: m.Consumed, Carried: m.Carried}
	}
	writeAuditLine(w, who, msg,
		"subject_kind", tg.kind,
		"subject_digest", string(tg.digest),
		"key", key,
		"stored_before", before,
		"stored_after", after,
		"plan_from", string(c.From),
		"plan_to", string(c.To),
		"moves", moves,
	)
}

// auditMove is one rateplan.Move in a plan change's audit line.
type auditMove struct {
	Base     string `json:"base"`
	From     string `json:"from"`
	To       string `json:"to"`
	Consumed int64  `json:"consumed"`
	Carried  int64  `json:"carried"`
}

// writeAuditLine writes one JSON audit line: msg, attrs (what was
// changed), then who changed it where: the Redis user and endpoint, the
// pid and the operator's login.
func writeAuditLine(w io.Writer, who auditInfo, msg string, attrs ...any) {
	attrs = append(attrs,
		"redis_user", who.user,
		"redis", who.endpoint,
		"pid", os.Getpid(),
		"os_user", osUser(),
	)
	slog.New(slog.NewJSONHandler(w, nil)).Info(msg, attrs...)
}

// osUser is the operator's login name, or the numeric user ID when it has
// none, for the audit line.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return bounded(u.Username)
	}
	return strconv.Itoa(os.Getuid())
}
