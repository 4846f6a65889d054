package certainty

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Refusal is a server reply a sender may follow, because the server sends
// it before running the command: nothing ran, so the call may be sent
// again (to another node, or as EVAL).
type Refusal int

// The refusals a sender follows; RefusalNone is every other reply or
// failure (the call ends there).
const (
	RefusalNone Refusal = iota
	// RefusalNoScript: EVALSHA of a digest the server does not know.
	RefusalNoScript
	// RefusalMoved: the slot lives on another primary (Addr).
	RefusalMoved
	// RefusalAsk: the key is being migrated; ask Addr once, with ASKING.
	RefusalAsk
	// RefusalTryAgain: the slot is being migrated and the keys are split.
	RefusalTryAgain
	// RefusalClusterDown: the cluster cannot serve the slot right now.
	RefusalClusterDown
)

// noScriptPrefix starts the reply to EVALSHA of an unknown digest; the
// script did not run.
const noScriptPrefix = "NOSCRIPT "

// Follow returns the refusal err is, and for MOVED and ASK the address
// to follow it to (as go-redis's IsMovedError and IsAskError read it). A
// redirect to an address without a host (Redis's ":port" for an unknown
// endpoint) has nowhere to go and is RefusalNone.
func Follow(err error) (Refusal, string) {
	if IsNoScript(err) {
		return RefusalNoScript, ""
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return RefusalNone, ""
	}
	err = rerr
	if addr, ok := redis.IsMovedError(err); ok {
		return redirect(RefusalMoved, addr)
	}
	if addr, ok := redis.IsAskError(err); ok {
		return redirect(RefusalAsk, addr)
	}
	switch {
	case redis.IsTryAgainError(err):
		return RefusalTryAgain, ""
	case redis.IsClusterDownError(err):
		return RefusalClusterDown, ""
	}
	return RefusalNone, ""
}

func redirect(r Refusal, addr string) (Refusal, string) {
	if addr == "" || strings.HasPrefix(addr, ":") || !strings.Contains(addr, ":") {
		return RefusalNone, ""
	}
	return r, addr
}

// IsNoScript reports whether err is the server's NOSCRIPT reply, as
// go-redis normalizes it (redis.ErrNoScript) or raw. redis.HasErrorPrefix
// is not used: it also accepts "ERR NOSCRIPT...", which is another error.
func IsNoScript(err error) bool {
	var rerr redis.Error
	return errors.Is(err, redis.ErrNoScript) ||
		errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), noScriptPrefix)
}

// IsServerReply reports whether err is an error reply of the server (the
// connection is fine).
func IsServerReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}

// Readiness reasons of a server's refusal (the "reason" of the /readyz
// detail; app-bootstrap's runbook has an entry for each).
const (
	ReasonAuth    = "auth"
	ReasonLoading = "loading"
)

// ReadinessReason is the readiness reason of a server refusal err wraps:
// ReasonAuth for NOAUTH, WRONGPASS and NOPERM, ReasonLoading for LOADING,
// "" for anything else.
func ReadinessReason(err error) string {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return ""
	}
	switch {
	case redis.IsAuthError(rerr), redis.IsPermissionError(rerr):
		return ReasonAuth
	case redis.IsLoadingError(rerr):
		return ReasonLoading
	}
	return ""
}
