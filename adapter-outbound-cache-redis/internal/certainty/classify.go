package certainty

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/redisclient"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Verdict is what Classify concludes about a failed program call: the
// outcome kind and its category.
type Verdict struct {
	Kind     ratelimit.OutcomeKind
	Category ratelimit.Category
}

// The Redis error-reply forms Classify keys on that go-redis has no
// predicate for.
const (
	// wrongTypePrefix starts the error of a data command on a key of another
	// type; for a program call it can only come from inside the script.
	wrongTypePrefix = "WRONGTYPE "
	// busyPrefix starts the refusal of a server running a slow script.
	busyPrefix = "BUSY "
	// crossSlotPrefix starts a cluster's refusal of keys in several slots.
	crossSlotPrefix = "CROSSSLOT "
	// ScriptRunMarker and ScriptErrorSuffixKey: Redis appends
	// " script: <sha>, on @user_script:<n>." to an error raised inside a
	// running script, and names the chunk "user_script:<n>" in Lua runtime
	// errors (also "@user_script:" in Redis 6 "Error running script"). A
	// pre-run refusal has neither.
	ScriptRunMarker      = "user_script:"
	ScriptErrorSuffixKey = " script: "
)

// DialError marks an error that came out of the coordination client's
// dialer (the adapter's one dialer, internal/redisclient). A dial happens
// before any command byte is written on the new connection, so for the
// command waiting on it nothing was sent.
type DialError = redisclient.DialError

// PreRunRefusal reports whether err is an error with which Redis refuses a
// command before executing it: ACL (NOPERM), memory (OOM), role (READONLY,
// MASTERDOWN, NOREPLICAS), state (LOADING, BUSY), cluster (CLUSTERDOWN,
// TRYAGAIN, and the redirects MOVED and ASK, and CROSSSLOT, all answered
// before the command runs), a discarded transaction (EXECABORT),
// authentication (NOAUTH, WRONGPASS) and the maxclients greeting. With the
// programs' `#!lua` shebang, OOM and READONLY are among these checks (a
// script declared as writing is refused up front), so the script cannot
// have run. go-redis's own predicates recognise all but BUSY and CROSSSLOT.
func PreRunRefusal(err redis.Error) bool {
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask ||
		redis.IsPermissionError(err) || redis.IsOOMError(err) || redis.IsReadOnlyError(err) ||
		redis.IsLoadingError(err) || redis.IsMasterDownError(err) || redis.IsClusterDownError(err) ||
		redis.IsNoReplicasError(err) || redis.IsTryAgainError(err) || redis.IsExecAbortError(err) ||
		redis.IsAuthError(err) || redis.IsMaxClientsError(err) ||
		strings.HasPrefix(err.Error(), busyPrefix) || strings.HasPrefix(err.Error(), crossSlotPrefix)
}

// Classify maps the error of one program call to a verdict. written says
// whether go-redis began serializing the call: when false, no byte of it
// can have left the process. It never answers Unavailable for a call that
// may have been written unless the server's own reply says the program was
// refused before it ran.
func Classify(err error, written bool) Verdict {
	var rerr redis.Error
	switch {
	case errors.Is(err, redis.Nil):
		// The server replied with a nil: the program ran (or something
		// answered for it) and did not return 7 integers.
		return Verdict{ratelimit.KindIncompatible, ratelimit.CategoryMalformedReply}
	case errors.As(err, &rerr):
		return classifyServerError(rerr, written)
	case !written:
		return classifyBeforeWrite(err)
	default:
		return classifyAfterWrite(err)
	}
}

// classifyServerError maps an error reply from the server.
func classifyServerError(err redis.Error, written bool) Verdict {
	if !written {
		// The call was never serialized, so this is the reply to the
		// connection handshake (HELLO, AUTH, CLIENT SETNAME) or the
		// maxclients greeting: the server refused the connection.
		return Verdict{ratelimit.KindUnavailable, ratelimit.CategoryServerRejected}
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, ScriptRunMarker) || strings.Contains(msg, ScriptErrorSuffixKey):
		// Raised while the script ran: a Lua runtime error or a failing
		// redis.call. The programs validate everything before writing, so
		// this is a program (or deployment) fault, never a decision.
		return Verdict{ratelimit.KindIncompatible, ratelimit.CategoryProgramFault}
	case strings.HasPrefix(msg, wrongTypePrefix):
		return Verdict{ratelimit.KindIncompatible, ratelimit.CategoryProgramFault}
	case PreRunRefusal(err):
		return Verdict{ratelimit.KindUnavailable, ratelimit.CategoryServerRejected}
	default:
		// NOSCRIPT after the EVAL fallback, UNKILLABLE, an unknown ERR:
		// the server answered the program call in a way this provider does
		// not expect. It is not proof that nothing ran.
		return Verdict{ratelimit.KindIncompatible, ratelimit.CategoryProgramFault}
	}
}

// classifyBeforeWrite maps a failure that happened before the call was
// serialized: while waiting for a pool turn, dialing, or initializing a new
// connection. Nothing of the call was sent.
func classifyBeforeWrite(err error) Verdict {
	var de *DialError
	switch {
	case errors.Is(err, redis.ErrClosed):
		return Verdict{ratelimit.KindUnavailable, ratelimit.CategoryClosed}
	case errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted):
		return Verdict{ratelimit.KindUnavailable, ratelimit.CategoryAdmission}
	case errors.As(err, &de):
		return Verdict{ratelimit.KindUnavailable, ratelimit.CategoryConnection}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Verdict{ratelimit.KindUnavailable, ratelimit.CategoryDeadline}
	default:
		// A transport failure during the connection handshake, or a
		// client-side refusal: no connection could be had.
		return Verdict{ratelimit.KindUnavailable, ratelimit.CategoryConnection}
	}
}

// classifyAfterWrite maps a failure after the call may have been written:
// whatever the error, the program may have run.
func classifyAfterWrite(err error) Verdict {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Verdict{ratelimit.KindIndeterminate, ratelimit.CategoryCancelled}
	case errors.As(err, &ne) && ne.Timeout():
		return Verdict{ratelimit.KindIndeterminate, ratelimit.CategoryTimeout}
	default:
		return Verdict{ratelimit.KindIndeterminate, ratelimit.CategoryConnectionLost}
	}
}
