package edge

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var _ ratelimit.EdgePort = (*fakePort)(nil)

// fakePort answers a fixed outcome (or one computed by fn) and records every
// request and whether its context had a deadline.
type fakePort struct {
	mu     sync.Mutex
	out    ratelimit.Outcome
	fn     func(ratelimit.Request) ratelimit.Outcome
	reqs   []ratelimit.Request
	ctxDls []time.Time
}

func (p *fakePort) Evaluate(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, req)
	d, _ := ctx.Deadline()
	p.ctxDls = append(p.ctxDls, d)
	if p.fn != nil {
		return p.fn(req)
	}
	return p.out
}

func (p *fakePort) requests() []ratelimit.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ratelimit.Request(nil), p.reqs...)
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
