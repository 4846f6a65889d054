package localimit

import (
	"math"
	"net/http"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/internal/fields"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/internal/problem"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
)

// PolicyName names the local limiter's bucket in its RateLimit and
// RateLimit-Policy fields.
const PolicyName = "local"

// WrapOptions tune the answers of Wrap.
type WrapOptions struct {
	// OmitLegacyFields drops RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset from the 429, leaving the RateLimit and
	// RateLimit-Policy pair of the current draft.
	OmitLegacyFields bool
}

// Wrap returns next behind the limiter with the default WrapOptions (every
// field sent). See WrapWith.
func (l *Limiter) Wrap(ids *subject.Resolver, next http.Handler) http.Handler {
	return l.WrapWith(ids, next, WrapOptions{})
}

// WrapWith returns next behind the limiter: each request takes one token
// from its client's bucket, the client being its IP address as ids resolves
// it (trusted proxies honoured). It is keyed by IP in every identity mode,
// never by a header, so a flood from one address is bounded whatever
// identity the edge uses. Over the limit it answers 429 without calling
// next, with Retry-After (the wait for one token, whole seconds, rounded up,
// at least 1), the rate-limit fields of its own bucket (policy "local", q
// the burst, r 0, t the time until the bucket is full, w the time to refill
// it from empty) and a problem body. A request without a client address
// gets 500. On admitted requests it writes no field: those belong to the
// edge middleware when it runs.
func (l *Limiter) WrapWith(ids *subject.Resolver, next http.Handler, opts WrapOptions) http.Handler {
	if ids == nil {
		panic("localimit: Wrap with a nil *subject.Resolver")
	}
	if next == nil {
		panic("localimit: Wrap with a nil next handler")
	}
	legacy := !opts.OmitLegacyFields
	window := l.windowSeconds()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := ids.Identify(r)
		if err != nil {
			subject.WriteError(w, err)
			return
		}
		now := time.Now()
		v := l.take(id.Sum64(l.seed), now)
		if v.ok {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		fields.Set(h, fields.Bucket{
			Policy:    PolicyName,
			Quota:     int64(l.burst),
			Remaining: int64(math.Floor(max(v.tokens, 0))),
			Reset:     l.untilFull(v.tokens),
			Window:    window,
		}, legacy)
		fields.SetRetryAfter(h, v.retryAfter)
		problem.Write(w, problem.New(http.StatusTooManyRequests, "too many requests"))
	})
}
