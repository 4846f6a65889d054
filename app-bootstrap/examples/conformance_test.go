package examples_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/edge"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// countingPort is "your own code against the port": a decorator that counts
// denials before handing the outcome on. It passes on every operation of
// the one port (a decorator that forgets one does not compile, ADR 0033);
// whatever it adds, it must still behave as an EdgePort, and
// TestCountingPortConforms proves it does.
type countingPort struct {
	inner  ratelimit.EdgePort
	denied atomic.Int64
}

var _ ratelimit.EdgePort = (*countingPort)(nil)

func (c *countingPort) Evaluate(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	return c.count(c.inner.Evaluate(ctx, req))
}

func (c *countingPort) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) ratelimit.Outcome {
	return c.count(c.inner.EvaluateSet(ctx, req))
}

func (c *countingPort) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome {
	return c.inner.Refund(ctx, req, r)
}

// count counts out if it is a denial, and returns it.
func (c *countingPort) count(out ratelimit.Outcome) ratelimit.Outcome {
	if e, ok := out.(ratelimit.Evaluated); ok && !e.Decision.Allowed {
		c.denied.Add(1)
	}
	return out
}

// TestCountingPortConforms runs the conformance kit over the decorator. The
// kit's scriptable Fake stands in for the real provider; every port Run
// builds shares the Fake's budgets (With), as two provider instances share
// one Redis. Against the real provider, build it over a private
// redis-server (redistest.Start) in newPort instead.
func TestCountingPortConforms(t *testing.T) {
	backend := ratelimittest.NewFake()
	ratelimittest.Run(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		return &countingPort{inner: backend.With(policies...)}
	})
}

// Example_conformanceFake tests an HTTP stack against the kit's Fake port
// instead of Redis: the default Fake is a conformant in-memory limiter, and
// setting Outcome scripts any answer, here "Redis unreachable", which the
// edge middleware must turn into a 503 without calling the handler.
func Example_conformanceFake() {
	login, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
		ID: "login", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params:  ratelimit.FixedWindow{Limit: 2, Window: time.Hour},
		MaxCost: 1, CleanupGrace: time.Minute, FailurePolicy: ratelimit.FailClosed,
	})
	check(err)
	fake := ratelimittest.NewFake(login)

	ips, err := subject.NewResolver(subject.Config{})
	check(err)
	secret, err := keyspace.NewSecret([]byte("example-subject-secret-0123456789ab"))
	check(err)
	pseudo, err := subject.NewPseudonymizer(secret)
	check(err)
	limiter, err := edge.New(edge.Config{
		Port: fake, Subjects: ips, Pseudonymizer: pseudo, DefaultPolicy: "login",
		Timeout: time.Second, Policies: []ratelimit.Policy{login},
	})
	check(err)
	handled := 0
	h := limiter.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { handled++ }))

	send := func() int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/login", nil))
		return rec.Code
	}
	fmt.Println(send(), send(), send())

	fake.Outcome = ratelimit.Unavailable{PolicyID: "login", Category: ratelimit.CategoryConnection, RetryAfter: time.Second}
	fmt.Println(send())
	fmt.Println("handled:", handled, "port calls:", len(fake.Calls()))
	// Output:
	// 200 200 429
	// 503
	// handled: 2 port calls: 4
}
