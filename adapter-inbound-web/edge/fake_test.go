package edge

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var _ ratelimit.EdgePort = (*fakePort)(nil)

// fakePort is the kit's scriptable port (ratelimittest.Fake) with the
// shorthands these tests use: out answers a fixed outcome, fn computes one.
// Set them before the first call.
type fakePort struct {
	out  ratelimit.Outcome
	fn   func(ratelimit.Request) ratelimit.Outcome
	once sync.Once
	fake ratelimittest.Fake
}

func (p *fakePort) Evaluate(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	p.init()
	return p.fake.Evaluate(ctx, req)
}

// init hands p.out and p.fn to the kit's Fake, once.
func (p *fakePort) init() {
	p.once.Do(func() {
		p.fake.Outcome, p.fake.UseOutcome = p.out, true
		if fn := p.fn; fn != nil {
			p.fake.Func = func(_ context.Context, r ratelimit.Request) ratelimit.Outcome { return fn(r) }
		}
	})
}

// EvaluateSet answers the fixed outcome as the kit's Fake does (these
// tests script single requests; fakeSetPort scripts sets).
func (p *fakePort) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) ratelimit.Outcome {
	p.init()
	return p.fake.EvaluateSet(ctx, req)
}

// errNoRefund is what a fakePort's refund fails with: it keeps every
// charge (refundingPort gives them back).
var errNoRefund = errors.New("fakePort: no refund")

// Refund fails (Unavailable{closed}): the charge stays.
func (p *fakePort) Refund(_ context.Context, req ratelimit.Request, _ ratelimit.Receipt) ratelimit.Outcome {
	return ratelimit.Unavailable{PolicyID: req.PolicyID, Category: ratelimit.CategoryClosed, Cause: errNoRefund}
}

func (p *fakePort) requests() []ratelimit.Request { return p.fake.Requests() }

// ctxDeadlines returns each call's context deadline (zero: none).
func (p *fakePort) ctxDeadlines() []time.Time {
	var out []time.Time
	for _, c := range p.fake.Calls() {
		out = append(out, c.ContextDeadline)
	}
	return out
}

func testSecret(t testing.TB) keyspace.Secret {
	t.Helper()
	s, err := keyspace.NewSecret([]byte(strings.Repeat("w", 32)))
	require.NoError(t, err)
	return s
}

// baseConfig is a valid Config around port with a fixed clock at now.
func baseConfig(t testing.TB, port ratelimit.EdgePort, now time.Time) Config {
	t.Helper()
	ids, err := subject.NewResolver(subject.Config{})
	require.NoError(t, err)
	ps, err := subject.NewPseudonymizer(testSecret(t))
	require.NoError(t, err)
	return Config{
		Port:          port,
		Subjects:      ids,
		Pseudonymizer: ps,
		DefaultPolicy: "api",
		Timeout:       200 * time.Millisecond,
		Now:           func() time.Time { return now },
	}
}

func mustPolicy(t testing.TB, spec ratelimit.PolicySpec) ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(spec)
	require.NoError(t, err)
	return p
}
