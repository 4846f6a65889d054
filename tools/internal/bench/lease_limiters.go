package bench

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratelease"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// leaseSet holds the lease phase's limiters: two providers over clients
// of their own and disjoint keys (the leased one is wrapped in a fresh
// ratelease.Leaser for every run, closed at its end so that the units it
// gives back are counted in the run), and redis_rate over a third client.
type leaseSet struct {
	leasedInner *redisrate.Provider
	plain       *redisrate.Provider
	rateClient  *redis.Client
	rl          *redis_rate.Limiter
	hot, nearly ratelimit.Policy
	// hold is the holds scenario's concurrency limit.
	hold     ratelimit.Policy
	policies []ratelimit.Policy
	deadline time.Time
	// nextSubject numbers the nearly spent runs' fresh subjects.
	nextSubject int
	closers     []func() error
}

// Policy ids of the lease phase (two characters, like the others).
const (
	leaseHotID    ratelimit.PolicyID = "lh"
	leaseNearlyID ratelimit.PolicyID = "ln"
	leaseHoldID   ratelimit.PolicyID = "lc"
)

// holdPolicy is the holds scenario's concurrency limit: leaseHoldLimit
// slots held at most leaseHoldMaxHold.
func holdPolicy() (ratelimit.Policy, error) {
	pols, err := newPolicies([]ratelimit.PolicySpec{{ID: leaseHoldID, Algorithm: ratelimit.AlgorithmConcurrency,
		Params: ratelimit.Concurrency{Limit: leaseHoldLimit, MaxHold: leaseHoldMaxHold}}})
	if err != nil {
		return ratelimit.Policy{}, err
	}
	return pols[0], nil
}

// leaseSubject is the lease phase's subject i, a digest like newSubjects'
// (43 characters): 0 is the hot subject, -1 the warm-up's, 1.. the nearly
// spent runs'.
func leaseSubject(i int) ratelimit.SubjectDigest {
	var buf [16]byte
	copy(buf[:8], "lease-ph")
	binary.BigEndian.PutUint64(buf[8:], uint64(int64(i)))
	sum := sha256.Sum256(buf[:])
	return ratelimit.SubjectDigest(base64.RawURLEncoding.EncodeToString(sum[:]))
}

// leasePolicies are the hot policy (leaseHotLimit per hour) and the
// nearly spent one (leaseNearlyLimit per hour, a MaxCost that lets one
// request charge it down to a few units), both fixed windows with the
// phase's lease.
func leasePolicies() (hot, nearly ratelimit.Policy, err error) {
	lease := &ratelimit.Lease{MaxShare: leaseMaxShare, TTL: leaseTTL}
	pols, err := newPolicies([]ratelimit.PolicySpec{
		{ID: leaseHotID, Algorithm: ratelimit.AlgorithmFixedWindow, Params: ratelimit.FixedWindow{Limit: leaseHotLimit, Window: time.Hour}, Lease: lease},
		{ID: leaseNearlyID, Algorithm: ratelimit.AlgorithmFixedWindow, Params: ratelimit.FixedWindow{Limit: leaseNearlyLimit, Window: time.Hour}, Lease: lease},
	})
	if err != nil {
		return hot, nearly, err
	}
	// newPolicies sets MaxCost 1; the nearly spent policy is charged by
	// one request of up to its limit.
	spec := ratelimit.PolicySpec{ID: leaseNearlyID, Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: leaseNearlyLimit, Window: time.Hour}, Lease: lease, MaxCost: leaseNearlyLimit,
		CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.FailClosed}
	if nearly, err = ratelimit.NewPolicy(spec); err != nil {
		return hot, nearly, fmt.Errorf("bench: policy %s: %w", spec.ID, err)
	}
	return pols[0], nearly, nil
}

// newLeaseLimiters builds the lease phase's limiters against addr: the
// providers as the service ships them (pipelined, PipelineMaxBatch
// benchPipelineBatch), each over its own client.
func newLeaseLimiters(ctx context.Context, addr string) (s *leaseSet, err error) {
	s = &leaseSet{deadline: time.Now().Add(30 * 24 * time.Hour)}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.hot, s.nearly, err = leasePolicies(); err != nil {
		return s, err
	}
	if s.hold, err = holdPolicy(); err != nil {
		return s, err
	}
	s.policies = []ratelimit.Policy{s.hot, s.nearly, s.hold}
	cfg := clientConfig(addr)
	provider := func(seed string) (*redisrate.Provider, error) {
		keys, err := keyBuilder(seed)
		if err != nil {
			return nil, err
		}
		c, err := redisrate.NewClient(cfg)
		if err != nil {
			return nil, err
		}
		p, err := redisrate.New(c, keys, s.policies, redisrate.Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize, PipelineMaxBatch: benchPipelineBatch})
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("bench: lease provider: %w", err)
		}
		s.closers = append(s.closers, p.Close)
		if err := p.Start(ctx); err != nil {
			return nil, fmt.Errorf("bench: lease provider start: %w", err)
		}
		return p, nil
	}
	if s.leasedInner, err = provider("lease-leased"); err != nil {
		return s, err
	}
	if s.plain, err = provider("lease-plain"); err != nil {
		return s, err
	}
	if s.rateClient, err = redisrate.NewClient(cfg); err != nil {
		return s, err
	}
	s.closers = append(s.closers, s.rateClient.Close)
	s.rl = redis_rate.NewLimiter(s.rateClient)
	return s, nil
}

func (s *leaseSet) close() {
	for _, c := range s.closers {
		_ = c()
	}
	s.closers = nil
}

// leaser is a fresh lease decorator over the leased provider, its events
// counted in ev; Timeout is twice the provider's command timeout, as the
// service composes it.
func (s *leaseSet) leaser(ev *leaseEvents) (*ratelease.Leaser, error) {
	l, err := ratelease.New(s.leasedInner, ratelease.Options{Policies: s.policies, Timeout: 2 * benchCommandTimeout,
		Observe: func(_ ratelimit.PolicyID, e ratelease.Event, units int64) {
			switch e {
			case ratelease.Reserved:
				ev.reserved.Add(1)
			case ratelease.Local:
				ev.local.Add(1)
			case ratelease.Returned:
				ev.returned.Add(units)
			case ratelease.NotReturned:
			}
		}})
	if err != nil {
		return nil, fmt.Errorf("bench: leaser: %w", err)
	}
	return l, nil
}

// decide is one request of cost 1 for subject under policy id through
// port.
func (s *leaseSet) decide(port ratelimit.EdgePort, id ratelimit.PolicyID, subject ratelimit.SubjectDigest) leasePort {
	return func(ctx context.Context) (bool, error) {
		out := port.Evaluate(ctx, ratelimit.Request{PolicyID: id, SubjectDigest: subject, Cost: 1, Deadline: s.deadline})
		ev, ok := out.(ratelimit.Evaluated)
		if !ok {
			return false, fmt.Errorf("not evaluated: %#v", out)
		}
		return ev.Decision.Allowed, nil
	}
}

// warm opens c of port's connections (cfg.Warmup calls, each admitted)
// for the hot subject (fixed: hot true) or the warm-up subject.
func (s *leaseSet) warm(ctx context.Context, cfg Config, name string, c int, decide leasePort) error {
	err := parallel(c, cfg.Warmup, func(int) error {
		ok, err := decide(ctx)
		if err == nil && !ok {
			err = errors.New("denied")
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("bench: lease warm-up %s: %w", name, err)
	}
	return nil
}

// hotRun is one run of limiter name on the hot subject at concurrency c.
// The leased limiter's leaser is built before the warm-up (which gives
// it the subject's demand) and closed after the timed part, before the
// command counts are read.
func (s *leaseSet) hotRun(ctx context.Context, cfg Config, srv *Server, name string, c, rep int) (LeaseRun, error) {
	r := LeaseRun{Scenario: LeaseScenarioHot, Limiter: name, Concurrency: c, Rep: rep}
	subject := leaseSubject(0)
	done := func() {}
	var decide leasePort
	var ev *leaseEvents
	switch name {
	case LeaseLeased:
		ev = &leaseEvents{}
		l, err := s.leaser(ev)
		if err != nil {
			return r, err
		}
		decide, done = s.decide(l, leaseHotID, subject), l.Close
	case LeaseUnleased:
		decide = s.decide(s.plain, leaseHotID, subject)
	case FamilyRedisRate:
		limit := redis_rate.Limit{Rate: leaseHotLimit, Burst: leaseHotLimit, Period: time.Hour}
		key := "lease:" + string(subject)
		decide = func(ctx context.Context) (bool, error) {
			res, err := s.rl.Allow(ctx, key, limit)
			if err != nil {
				return false, err
			}
			return res.Allowed >= 1, nil
		}
	default:
		return r, fmt.Errorf("bench: lease: no limiter %q", name)
	}
	if err := s.warm(ctx, cfg, name, c, decide); err != nil {
		done()
		return r, err
	}
	if ev != nil {
		// Count the timed part and the give-back only.
		ev.reserved.Store(0)
		ev.local.Store(0)
		ev.returned.Store(0)
	}
	r, err := leaseRun(ctx, cfg, srv, r, decide, done, true)
	if ev != nil {
		r.Reserved, r.Local, r.Returned = ev.reserved.Load(), ev.local.Load(), ev.returned.Load()
	}
	return r, err
}

// nearlyRun is one run of limiter name (leased or unleased) on a fresh
// subject of the nearly spent policy, charged first so that remaining
// units are left. A run during which the hour (the policy's window)
// ended, so that its budget came back, is made again on another subject.
func (s *leaseSet) nearlyRun(ctx context.Context, cfg Config, srv *Server, name string, rep int, remaining int64) (LeaseRun, error) {
	for attempt := 0; ; attempt++ {
		r := LeaseRun{Scenario: LeaseScenarioNearly, Limiter: name, Concurrency: leaseNearlyConcurrency, Rep: rep}
		var inner *redisrate.Provider
		switch name {
		case LeaseLeased:
			inner = s.leasedInner
		case LeaseUnleased:
			inner = s.plain
		default:
			return r, fmt.Errorf("bench: lease: no nearly spent limiter %q", name)
		}
		if err := s.warm(ctx, cfg, name, leaseNearlyConcurrency, s.decide(inner, leaseHotID, leaseSubject(-1))); err != nil {
			return r, err
		}
		s.nextSubject++
		subject := leaseSubject(s.nextSubject)
		hour := time.Now().Unix() / 3600
		out := inner.Evaluate(ctx, ratelimit.Request{PolicyID: leaseNearlyID, SubjectDigest: subject, Cost: leaseNearlyLimit - remaining, Deadline: s.deadline})
		if e, ok := out.(ratelimit.Evaluated); !ok || !e.Decision.Allowed || e.Decision.Remaining != remaining {
			return r, fmt.Errorf("bench: lease: charging the nearly spent subject (%s): %#v, want admitted with %d remaining", name, out, remaining)
		}
		decide, done := s.decide(inner, leaseNearlyID, subject), func() {}
		var ev *leaseEvents
		if name == LeaseLeased {
			ev = &leaseEvents{}
			l, err := s.leaser(ev)
			if err != nil {
				return r, err
			}
			decide, done = s.decide(l, leaseNearlyID, subject), l.Close
		}
		r, err := leaseRun(ctx, cfg, srv, r, decide, done, false)
		if ev != nil {
			r.Reserved, r.Local, r.Returned = ev.reserved.Load(), ev.local.Load(), ev.returned.Load()
		}
		if err != nil || r.Admitted <= remaining || time.Now().Unix()/3600 == hour || attempt >= 2 {
			return r, err
		}
		cfg.logf("   nearly-spent %s rep %d: the hour ended during the run (%d admitted of %d left); again on a fresh subject", name, rep, r.Admitted, remaining)
	}
}

// holding is one request under the concurrency limit through port: its slot
// taken, then given back by the receipt (what the edge does around a
// handler); an error when either is not evaluated or the slot does not
// come back.
func (s *leaseSet) holding(port ratelimit.EdgePort, subject ratelimit.SubjectDigest) leasePort {
	return func(ctx context.Context) (bool, error) {
		req := ratelimit.Request{PolicyID: leaseHoldID, SubjectDigest: subject, Cost: 1, Deadline: s.deadline}
		out := port.Evaluate(ctx, req)
		ev, ok := out.(ratelimit.Evaluated)
		if !ok {
			return false, fmt.Errorf("acquire not evaluated: %#v", out)
		}
		if !ev.Decision.Allowed {
			return false, nil
		}
		back := port.Refund(ctx, req, ev.Decision.Receipt)
		if bv, ok := back.(ratelimit.Evaluated); !ok || bv.Decision.Refunded != 1 {
			return false, fmt.Errorf("release did not give the slot back: %#v", back)
		}
		return true, nil
	}
}

// holdRun is one run of limiter name in the holds scenario at
// concurrency c: a slot taken and given back per request, or one
// decision of the hot policy, both on the unleased provider and the hot
// subject.
func (s *leaseSet) holdRun(ctx context.Context, cfg Config, srv *Server, name string, c, rep int) (LeaseRun, error) {
	r := LeaseRun{Scenario: LeaseScenarioHolds, Limiter: name, Concurrency: c, Rep: rep}
	subject := leaseSubject(0)
	var decide leasePort
	switch name {
	case LeaseHolding:
		decide = s.holding(s.plain, subject)
	case LeaseUnleased:
		decide = s.decide(s.plain, leaseHotID, subject)
	default:
		return r, fmt.Errorf("bench: lease: no concurrency limiter %q", name)
	}
	if err := s.warm(ctx, cfg, name, c, decide); err != nil {
		return r, err
	}
	return leaseRun(ctx, cfg, srv, r, decide, func() {}, true)
}
