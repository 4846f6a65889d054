package certainty

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

// TestFollow: the refusals a sender follows are recognised through
// go-redis's predicates, with MOVED and ASK carrying their address; a
// redirect to an unknown endpoint, a transport error and any other reply
// are not followed.
func TestFollow(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Refusal
		addr string
	}{
		{"moved", serverError("MOVED 3999 127.0.0.1:6381"), RefusalMoved, "127.0.0.1:6381"},
		{"ask", serverError("ASK 3999 10.0.0.2:7000"), RefusalAsk, "10.0.0.2:7000"},
		{"moved to unknown endpoint", serverError("MOVED 3999 :6381"), RefusalNone, ""},
		{"tryagain", serverError("TRYAGAIN Multiple keys request during rehashing of slot"), RefusalTryAgain, ""},
		{"clusterdown", serverError("CLUSTERDOWN The cluster is down"), RefusalClusterDown, ""},
		{"noscript", redis.ErrNoScript, RefusalNoScript, ""},
		{"noscript raw", serverError("NOSCRIPT No matching script. Please use EVAL."), RefusalNoScript, ""},
		{"err noscript is another error", serverError("ERR NOSCRIPT"), RefusalNone, ""},
		{"oom", serverError("OOM command not allowed"), RefusalNone, ""},
		{"transport text that looks like MOVED", errors.New("MOVED 1 127.0.0.1:1"), RefusalNone, ""},
		{"nil", nil, RefusalNone, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, addr := Follow(tt.err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.addr, addr)
		})
	}
}

// TestReadinessReason maps NOAUTH, WRONGPASS and NOPERM to auth and LOADING
// to loading, wrapped or not; anything else has no reason here.
func TestReadinessReason(t *testing.T) {
	for msg, want := range map[string]string{
		"NOAUTH Authentication required.":                                  ReasonAuth,
		"WRONGPASS invalid username-password pair or user is disabled.":    ReasonAuth,
		"NOPERM User limiter has no permissions to run the 'ping' command": ReasonAuth,
		"LOADING Redis is loading the dataset in memory":                   ReasonLoading,
		"ERR unknown command":                                              "",
	} {
		assert.Equal(t, want, ReadinessReason(serverError(msg)), msg)
		assert.Equal(t, want, ReadinessReason(fmt.Errorf("ready: PING: %w", serverError(msg))), "wrapped "+msg)
	}
	assert.Empty(t, ReadinessReason(errors.New("NOAUTH but not a server reply")))
	assert.Empty(t, ReadinessReason(nil))
}
