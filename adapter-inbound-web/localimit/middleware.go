package localimit

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
)

// The bodies the middleware writes (application/problem+json). They hold no
// client data.
const (
	problemTooMany    = `{"type":"about:blank","title":"too many requests","status":429}`
	problemBadSubject = `{"type":"about:blank","title":"invalid client identity","status":400}`
)

// Wrap returns next behind the limiter: each request takes one token from
// its client's bucket, the client being its IP address as ids resolves it
// (trusted proxies honoured). It is keyed by IP in every identity mode,
// never by a header, so a flood from one address is bounded whatever
// identity the edge uses. Over the limit it answers 429 with Retry-After
// (whole seconds, ceiling, at least 1) and a problem body, without calling
// next. A request without a client address gets 500.
func (l *Limiter) Wrap(ids *subject.Resolver, next http.Handler) http.Handler {
	if ids == nil {
		panic("localimit: Wrap with a nil *subject.Resolver")
	}
	if next == nil {
		panic("localimit: Wrap with a nil next handler")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := ids.Identify(r)
		if err != nil {
			status := http.StatusBadRequest
			if errors.Is(err, subject.ErrNoClientAddress) {
				status = http.StatusInternalServerError
			}
			writeProblem(w, status, problemFor(status))
			return
		}
		now := time.Now()
		ok, wait := l.allowHash(id.Sum64(l.seed), now)
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", strconv.FormatInt(ceilSeconds(wait), 10))
		writeProblem(w, http.StatusTooManyRequests, problemTooMany)
	})
}

func problemFor(status int) string {
	if status == http.StatusBadRequest {
		return problemBadSubject
	}
	return `{"type":"about:blank","title":"client address unavailable","status":500}`
}

func writeProblem(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// ceilSeconds is d in whole seconds rounded up, at least 1.
func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return max(s, 1)
}
