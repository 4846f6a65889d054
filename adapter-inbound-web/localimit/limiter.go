package localimit

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/internal/fields"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/internal/problem"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"golang.org/x/time/rate"
)

// Bounds on Config.
const (
	// MaxClientsLimit is the largest accepted Config.MaxClients.
	MaxClientsLimit = 10_000_000
	// MaxBurst is the largest accepted Config.Burst.
	MaxBurst = 1_000_000_000
	// maxShards bounds the shard count; minShardCap is the smallest shard
	// capacity worth splitting for.
	maxShards   = 32
	minShardCap = 128
	// maxExpiredPerCall bounds the idle entries dropped per call (O(1)).
	maxExpiredPerCall = 2
)

// ErrInvalidConfig is wrapped by every Config.Validate error.
var ErrInvalidConfig = errors.New("invalid local limiter config")

// Config configures a Limiter.
type Config struct {
	// Rate is the refill rate per client, in tokens per second; finite and
	// > 0.
	Rate float64
	// Burst is the bucket size: the requests a fresh or idle client may make
	// at once; 1..MaxBurst.
	Burst int
	// MaxClients caps the client table; 1..MaxClientsLimit.
	MaxClients int
	// IdleTTL drops a client not seen for this long. It must be at least
	// the time to refill a whole bucket (Burst/Rate), so that dropping an
	// idle client never grants it more than it would have had anyway.
	IdleTTL time.Duration
}

// DefaultConfig is 10 requests per second with a burst of 20, for up to
// 10,000 clients, idle clients dropped after 5 minutes.
func DefaultConfig() Config {
	return Config{Rate: 10, Burst: 20, MaxClients: 10_000, IdleTTL: 5 * time.Minute}
}

// Validate reports every invalid field, joined; each error wraps
// ErrInvalidConfig and names the field.
func (c Config) Validate() error {
	var errs []error
	rateOK := !math.IsNaN(c.Rate) && !math.IsInf(c.Rate, 0) && c.Rate > 0
	if !rateOK {
		errs = append(errs, fmt.Errorf("%w: Rate %v must be finite and > 0", ErrInvalidConfig, c.Rate))
	}
	burstOK := c.Burst >= 1 && c.Burst <= MaxBurst
	if !burstOK {
		errs = append(errs, fmt.Errorf("%w: Burst %d not in 1..%d", ErrInvalidConfig, c.Burst, MaxBurst))
	}
	if c.MaxClients < 1 || c.MaxClients > MaxClientsLimit {
		errs = append(errs, fmt.Errorf("%w: MaxClients %d not in 1..%d", ErrInvalidConfig, c.MaxClients, MaxClientsLimit))
	}
	switch {
	case c.IdleTTL <= 0:
		errs = append(errs, fmt.Errorf("%w: IdleTTL %v must be > 0", ErrInvalidConfig, c.IdleTTL))
	case rateOK && burstOK:
		if refill := float64(c.Burst) / c.Rate; float64(c.IdleTTL)/float64(time.Second) < refill {
			errs = append(errs, fmt.Errorf("%w: IdleTTL %v is shorter than the bucket refill time Burst/Rate = %.3fs", ErrInvalidConfig, c.IdleTTL, refill))
		}
	}
	return errors.Join(errs...)
}

// Limiter is a set of per-client token buckets in a bounded table. It is safe
// for concurrent use; build it with New. The zero value is invalid.
//
// A client absent from the table (new, idle past IdleTTL, or evicted under
// capacity pressure) starts with a full bucket. Under a flood of more than
// MaxClients distinct clients, the least recently seen ones are evicted and
// so regain a full bucket when they return: the table bounds memory, not the
// number of clients.
type Limiter struct {
	limit  rate.Limit
	burst  int
	ttl    time.Duration
	seed   maphash.Seed
	mask   uint64
	shards []shard
}

type shard struct {
	mu         sync.Mutex
	m          map[uint64]*entry
	head, tail *entry // head: most recently seen
	capacity   int
	_          [64]byte // keep neighbouring shard headers off one cache line
}

type entry struct {
	key        uint64
	lim        *rate.Limiter
	seen       time.Time
	prev, next *entry
}

// New validates cfg and returns a Limiter with an empty table.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := 1
	for n < maxShards && cfg.MaxClients/(n*2) >= minShardCap {
		n *= 2
	}
	l := &Limiter{
		limit:  rate.Limit(cfg.Rate),
		burst:  cfg.Burst,
		ttl:    cfg.IdleTTL,
		seed:   maphash.MakeSeed(),
		mask:   uint64(n - 1),
		shards: make([]shard, n),
	}
	for i := range l.shards {
		l.shards[i].capacity = cfg.MaxClients / n
		l.shards[i].m = make(map[uint64]*entry)
	}
	return l, nil
}

// Allow takes one token from key's bucket now. When the bucket is empty it
// returns false and the wait until a token is available.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	return l.AllowAt(key, time.Now())
}

// AllowAt is Allow at the instant now (for tests and replays).
func (l *Limiter) AllowAt(key string, now time.Time) (ok bool, retryAfter time.Duration) {
	return l.allowHash(maphash.String(l.seed, key), now)
}

// Cap is the most clients the table holds (at most Config.MaxClients).
func (l *Limiter) Cap() int {
	return l.shards[0].capacity * len(l.shards)
}

// Len is the number of clients in the table.
func (l *Limiter) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

func (l *Limiter) allowHash(h uint64, now time.Time) (bool, time.Duration) {
	v := l.take(h, now)
	return v.ok, v.retryAfter
}

// verdict is one Allow: whether the token was taken, and the bucket after
// it (for the 429's fields).
type verdict struct {
	ok bool
	// retryAfter is the wait until one token is back (0 when ok).
	retryAfter time.Duration
	// tokens is what the bucket holds after the call (at most burst).
	tokens float64
}

// take takes one token from the bucket of client hash h at now.
func (l *Limiter) take(h uint64, now time.Time) verdict {
	s := &l.shards[h&l.mask]
	s.mu.Lock()
	e := s.m[h]
	if e != nil {
		s.moveToFront(e)
	} else {
		e = s.insert(h, l, now)
	}
	e.seen = now
	lim := e.lim
	s.expire(now, l.ttl)
	s.mu.Unlock()

	// lim stays valid even if the entry is evicted meanwhile: an evicted
	// entry gets a fresh limiter, never a reset of this one.
	if lim.AllowN(now, 1) {
		return verdict{ok: true, tokens: lim.TokensAt(now)}
	}
	tokens := lim.TokensAt(now)
	missing := 1 - tokens
	if missing <= 0 {
		// refilled between the two calls
		return verdict{retryAfter: time.Nanosecond, tokens: tokens}
	}
	wait := time.Duration(math.Ceil(missing / float64(l.limit) * float64(time.Second)))
	return verdict{retryAfter: max(wait, time.Nanosecond), tokens: tokens}
}

// untilFull is the time the bucket takes to refill from tokens to burst.
func (l *Limiter) untilFull(tokens float64) time.Duration {
	missing := float64(l.burst) - max(tokens, 0)
	if missing <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(missing / float64(l.limit) * float64(time.Second)))
}

// windowSeconds is the time to refill an empty bucket, in whole seconds
// (ceiling, at least 1): RateLimit-Policy's w.
func (l *Limiter) windowSeconds() int64 {
	return max(int64(math.Ceil(float64(l.burst)/float64(l.limit))), 1)
}

// insert adds a client, evicting the least recently seen one when the shard
// is full. The evicted entry is reused.
func (s *shard) insert(h uint64, l *Limiter, now time.Time) *entry {
	var e *entry
	if len(s.m) >= s.capacity && s.tail != nil {
		e = s.tail
		s.unlink(e)
		delete(s.m, e.key)
		*e = entry{}
	} else {
		e = new(entry)
	}
	e.key = h
	e.lim = rate.NewLimiter(l.limit, l.burst)
	s.m[h] = e
	s.pushFront(e)
	return e
}

// expire drops up to maxExpiredPerCall entries idle for longer than ttl from
// the tail.
func (s *shard) expire(now time.Time, ttl time.Duration) {
	for range maxExpiredPerCall {
		e := s.tail
		if e == nil || now.Sub(e.seen) <= ttl {
			return
		}
		s.unlink(e)
		delete(s.m, e.key)
	}
}

func (s *shard) pushFront(e *entry) {
	e.prev, e.next = nil, s.head
	if s.head != nil {
		s.head.prev = e
	}
	s.head = e
	if s.tail == nil {
		s.tail = e
	}
}

func (s *shard) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (s *shard) moveToFront(e *entry) {
	if s.head == e {
		return
	}
	s.unlink(e)
	s.pushFront(e)
}

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
