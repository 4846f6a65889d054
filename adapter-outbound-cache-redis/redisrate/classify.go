package redisrate

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// verdict is what the classifier concludes about a failed program call: the
// outcome kind and its category.
type verdict struct {
	kind     ratelimit.OutcomeKind
	category ratelimit.Category
}

// The Redis error-reply forms the classifier keys on that go-redis has no
// predicate for.
const (
	// wrongTypePrefix starts the error of a data command on a key of another
	// type; for a program call it can only come from inside the script.
	wrongTypePrefix = "WRONGTYPE "
	// noScriptPrefix starts the reply to EVALSHA of an unknown digest; the
	// script did not run.
	noScriptPrefix = "NOSCRIPT "
	// busyPrefix starts the refusal of a server running a slow script.
	busyPrefix = "BUSY "
	// crossSlotPrefix starts a cluster's refusal of keys in several slots.
	crossSlotPrefix = "CROSSSLOT "
	// scriptRunMarker and scriptErrorSuffixKey: Redis appends
	// " script: <sha>, on @user_script:<n>." to an error raised inside a
	// running script, and names the chunk "user_script:<n>" in Lua runtime
	// errors (also "@user_script:" in Redis 6 "Error running script"). A
	// pre-run refusal has neither.
	scriptRunMarker      = "user_script:"
	scriptErrorSuffixKey = " script: "
)

// preRunRefusal reports whether err is an error with which Redis refuses a
// command before executing it: ACL (NOPERM), memory (OOM), role (READONLY,
// MASTERDOWN, NOREPLICAS), state (LOADING, BUSY), cluster (CLUSTERDOWN,
// TRYAGAIN, and the redirects MOVED and ASK, and CROSSSLOT, all answered
// before the command runs), a discarded transaction (EXECABORT),
// authentication (NOAUTH, WRONGPASS) and the maxclients greeting. With the
// programs' `#!lua` shebang, OOM and READONLY are among these checks (a
// script declared as writing is refused up front), so the script cannot
// have run. go-redis's own predicates recognise all but BUSY and CROSSSLOT.
func preRunRefusal(err redis.Error) bool {
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask ||
		redis.IsPermissionError(err) || redis.IsOOMError(err) || redis.IsReadOnlyError(err) ||
		redis.IsLoadingError(err) || redis.IsMasterDownError(err) || redis.IsClusterDownError(err) ||
		redis.IsNoReplicasError(err) || redis.IsTryAgainError(err) || redis.IsExecAbortError(err) ||
		redis.IsAuthError(err) || redis.IsMaxClientsError(err) ||
		strings.HasPrefix(err.Error(), busyPrefix) || strings.HasPrefix(err.Error(), crossSlotPrefix)
}

// isNoScript reports whether err is the server's NOSCRIPT reply, as
// go-redis normalizes it (redis.ErrNoScript) or raw. redis.HasErrorPrefix
// is not used: it also accepts "ERR NOSCRIPT...", which is another error.
func isNoScript(err error) bool {
	var rerr redis.Error
	return errors.Is(err, redis.ErrNoScript) ||
		errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), noScriptPrefix)
}

// classify maps the error of one program call to an outcome. written says
// whether go-redis began serializing the call (see wireArg): when false, no
// byte of it can have left the process. It never answers Unavailable for a
// call that may have been written unless the server's own reply says the
// program was refused before it ran.
func classify(err error, written bool) verdict {
	var rerr redis.Error
	switch {
	case errors.Is(err, redis.Nil):
		// The server replied with a nil: the program ran (or something
		// answered for it) and did not return 7 integers.
		return verdict{ratelimit.KindIncompatible, ratelimit.CategoryMalformedReply}
	case errors.As(err, &rerr):
		return classifyServerError(rerr, written)
	case !written:
		return classifyBeforeWrite(err)
	default:
		return classifyAfterWrite(err)
	}
}

// classifyServerError maps an error reply from the server.
func classifyServerError(err redis.Error, written bool) verdict {
	if !written {
		// The call was never serialized, so this is the reply to the
		// connection handshake (HELLO, AUTH, CLIENT SETNAME) or the
		// maxclients greeting: the server refused the connection.
		return verdict{ratelimit.KindUnavailable, ratelimit.CategoryServerRejected}
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, scriptRunMarker) || strings.Contains(msg, scriptErrorSuffixKey):
		// Raised while the script ran: a Lua runtime error or a failing
		// redis.call. The programs validate everything before writing, so
		// this is a program (or deployment) fault, never a decision.
		return verdict{ratelimit.KindIncompatible, ratelimit.CategoryProgramFault}
	case strings.HasPrefix(msg, wrongTypePrefix):
		return verdict{ratelimit.KindIncompatible, ratelimit.CategoryProgramFault}
	case preRunRefusal(err):
		return verdict{ratelimit.KindUnavailable, ratelimit.CategoryServerRejected}
	default:
		// NOSCRIPT after the EVAL fallback, UNKILLABLE, an unknown ERR:
		// the server answered the program call in a way this provider does
		// not expect. It is not proof that nothing ran.
		return verdict{ratelimit.KindIncompatible, ratelimit.CategoryProgramFault}
	}
}

// classifyBeforeWrite maps a failure that happened before the call was
// serialized: while waiting for a pool turn, dialing, or initializing a new
// connection. Nothing of the call was sent.
func classifyBeforeWrite(err error) verdict {
	var de *dialError
	switch {
	case errors.Is(err, redis.ErrClosed):
		return verdict{ratelimit.KindUnavailable, ratelimit.CategoryClosed}
	case errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted):
		return verdict{ratelimit.KindUnavailable, ratelimit.CategoryAdmission}
	case errors.As(err, &de):
		return verdict{ratelimit.KindUnavailable, ratelimit.CategoryConnection}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return verdict{ratelimit.KindUnavailable, ratelimit.CategoryDeadline}
	default:
		// A transport failure during the connection handshake, or a
		// client-side refusal: no connection could be had.
		return verdict{ratelimit.KindUnavailable, ratelimit.CategoryConnection}
	}
}

// classifyAfterWrite maps a failure after the call may have been written:
// whatever the error, the program may have run.
func classifyAfterWrite(err error) verdict {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return verdict{ratelimit.KindIndeterminate, ratelimit.CategoryCancelled}
	case errors.As(err, &ne) && ne.Timeout():
		return verdict{ratelimit.KindIndeterminate, ratelimit.CategoryTimeout}
	default:
		return verdict{ratelimit.KindIndeterminate, ratelimit.CategoryConnectionLost}
	}
}
