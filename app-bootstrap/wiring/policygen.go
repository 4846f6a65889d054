package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// policyGen is one generation of the policy file: the configuration with
// its policies, a provider with a client of its own over them (redisrate
// owns the client it is given, and its breaker, in-flight bound and
// script set are per provider: ADR 0038), the decorators the
// configuration asks for (local fallback, denial cache: empty when the
// generation starts, so it never serves a denial of limits it does not
// have), the instrumented port, and the web edge's handler over them (the
// routes of this file). Requests hold its read lock while they use it;
// retire takes the write lock, so the generation closes after the last of
// them (or at the drain bound).
type policyGen struct {
	cfg  config.Config
	c    *coordination
	st   stack
	edge *metrics.Edge
	// handler is the web edge over this generation (PolicySet.Handler's
	// build); nil until built.
	handler http.Handler

	mu      sync.RWMutex
	retired bool
	closed  sync.Once
}

// newPolicyGen builds the generation of cfg's policies. It does no I/O;
// the caller starts it (start) and closes it on error.
func newPolicyGen(cfg config.Config, prev []ratelimit.Policy, log *slog.Logger, m *metrics.Metrics) (*policyGen, error) {
	rl := cfg.RateLimit
	client, err := coordinationClient(rl)
	if err != nil {
		return nil, fmt.Errorf("rate limit: coordination client: %w", err)
	}
	c, err := newCoordinationOver(rl, client, log)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	var pm *metrics.Plans
	if !rl.Policies.Plans.IsZero() || len(predecessors(prev, rl.Policies.Policies)) > 0 {
		pm = m.Plans()
	}
	var lm *metrics.Leases
	if HasLease(rl.Policies.Policies) {
		lm = m.Leases()
	}
	st, err := c.decorate(rl, pm, lm, prev)
	if err != nil {
		_ = c.provider.Close()
		return nil, err
	}
	// Shadow policies are counted as at start (ADR 0037).
	return &policyGen{cfg: cfg, c: c, st: st, edge: m.InstrumentEdge(st.port, policyIDs(rl.Policies)).CountShadow(rl.Policies.Policies)}, nil
}

// policyIDs are the IDs of set's policies, in file order.
func policyIDs(set config.PolicySet) []ratelimit.PolicyID {
	ids := make([]ratelimit.PolicyID, 0, len(set.Policies))
	for _, p := range set.Policies {
		ids = append(ids, p.ID())
	}
	return ids
}

// start runs the provider's start-up checks (coordination.start: fatal
// only for a server that cannot run these programs) and the plan and
// denial caches' subscriptions.
func (g *policyGen) start(ctx context.Context) error {
	if err := g.c.start(ctx); err != nil {
		return err
	}
	return g.st.start(ctx)
}

// acquire read-locks g unless it has been retired; release with
// g.mu.RUnlock.
func (g *policyGen) acquire() bool {
	g.mu.RLock()
	if g.retired {
		g.mu.RUnlock()
		return false
	}
	return true
}

// retire waits, at most drain, for the requests using g, then closes it.
// A request still using g after drain gets Unavailable{closed} (503) from
// the closed provider; it is never admitted by a limit that no longer
// serves.
func (g *policyGen) retire(drain time.Duration) error {
	locked := make(chan struct{})
	go func() {
		g.mu.Lock()
		g.retired = true
		g.mu.Unlock()
		close(locked)
	}()
	timer := time.NewTimer(drain)
	defer timer.Stop()
	var err error
	select {
	case <-locked:
	case <-timer.C:
		err = fmt.Errorf("rate limit: the previous policy generation did not drain within %v; closed with requests in flight", drain)
	}
	return errors.Join(err, g.close())
}

// close stops the decorators, then closes the provider and its client.
// It is idempotent.
func (g *policyGen) close() error {
	var err error
	g.closed.Do(func() {
		g.st.close()
		err = g.c.provider.Close()
	})
	return err
}

// sameServing reports whether a and b serve alike: the same policy set
// (every policy and parameter, route, denial-cache opt-out, and whatever
// else the file's PolicySet comes to hold: compared whole, so a field
// added there is never missed), default policy and evaluation timeout. A
// reload that changes none of them is unchanged.
func sameServing(a, b config.Config) bool {
	return reflect.DeepEqual(a.RateLimit.Policies, b.RateLimit.Policies) &&
		a.RateLimit.DefaultPolicy == b.RateLimit.DefaultPolicy &&
		a.Web.EvaluationTimeout == b.Web.EvaluationTimeout
}

// ErrChangedWithoutRevision: a reloaded policy file changes a policy's
// parameters under the revision it already serves. The state key is
// per revision (ADR 0003), so the old state would be read under new
// parameters; a new revision is a new key.
var ErrChangedWithoutRevision = errors.New("changed without a new revision")

// checkRevisions refuses every policy of next that keeps its ID and
// revision in prev but changes anything else (any parameter, algorithm,
// failure policy or bound: every field of ratelimit.Policy, which is what
// its programs are built from) but its enforcement. Each error names the
// policy.
func checkRevisions(prev, next config.PolicySet) error {
	var errs []error
	for _, p := range next.Policies {
		old, ok := prev.Policy(p.ID())
		if ok && old.Revision() == p.Revision() && !sameButEnforcement(old, p) {
			errs = append(errs, fmt.Errorf("policy %q: %w (revision %d); give it a new revision", p.ID(), ErrChangedWithoutRevision, p.Revision()))
		}
	}
	return errors.Join(errs...)
}

// sameButEnforcement reports whether a and b are equal in every field but
// their enforcement: promoting a shadow policy to enforced (or back) needs
// no new revision, since enforcement changes no key, program or decision
// (ADR 0037), and a new revision would hand every subject a fresh budget.
// The fields are compared by reflection so that one added to
// ratelimit.Policy is compared too.
func sameButEnforcement(a, b ratelimit.Policy) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		if va.Type().Field(i).Name == "enforcement" {
			continue
		}
		if !va.Field(i).Equal(vb.Field(i)) {
			return false
		}
	}
	return true
}
