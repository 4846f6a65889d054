package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// fixed answers out, whatever it is (nil included).
func fixed(out ratelimit.Outcome) *ratelimittest.Fake {
	return &ratelimittest.Fake{Outcome: out, UseOutcome: true}
}

func req(id ratelimit.PolicyID) ratelimit.Request {
	return ratelimit.Request{PolicyID: id, SubjectDigest: "c3ViamVjdC1kaWdlc3QtMDE", Cost: 1, Deadline: time.Now().Add(time.Second)}
}

func TestInstrumentEdgeCountsEveryOutcome(t *testing.T) {
	tests := []struct {
		name                     string
		out                      ratelimit.Outcome
		policy                   ratelimit.PolicyID
		wantPolicy               string
		kind, category, decision string
	}{
		{"allowed", ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Limit: 5, Remaining: 4}}, "login", "login", "evaluated", "none", "allowed"},
		{"denied", ratelimit.Evaluated{Decision: ratelimit.Decision{Limit: 5, RetryAfter: time.Second}}, "login", "login", "evaluated", "none", "denied"},
		{"unavailable", ratelimit.Unavailable{Category: ratelimit.CategoryConnection}, "api", "api", "unavailable", "connection", "fail_closed"},
		{"indeterminate", ratelimit.Indeterminate{Category: ratelimit.CategoryTimeout}, "api", "api", "indeterminate", "timeout", "fail_closed"},
		{"incompatible", ratelimit.Incompatible{Category: ratelimit.CategoryMalformedReply}, "api", "api", "incompatible", "malformed_reply", "fail_closed"},
		{"unknown policy label bounded", ratelimit.Unavailable{Category: ratelimit.CategoryUnknownPolicy}, "made-up", "other", "unavailable", "unknown_policy", "fail_closed"},
		{"nil outcome", nil, "api", "api", "unknown", "unknown", "fail_closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			port := m.InstrumentEdge(fixed(tt.out), []ratelimit.PolicyID{"api", "login"})
			for range 3 {
				got := port.Evaluate(context.Background(), req(tt.policy))
				assert.Equal(t, tt.out, got, "the decorator returns the inner outcome unchanged")
			}
			c := m.outcomes.WithLabelValues(tt.wantPolicy, tt.kind, tt.category, tt.decision)
			assert.Equal(t, 3.0, testutil.ToFloat64(c))
			assert.Equal(t, 1, testutil.CollectAndCount(m.outcomes), "exactly one series")
			assert.Equal(t, 1, testutil.CollectAndCount(m.latency))
			assert.Equal(t, 0.0, testutil.ToFloat64(m.inFlight))
		})
	}
}

func TestInstrumentEdgeInFlight(t *testing.T) {
	m := New()
	entered, release := make(chan struct{}), make(chan struct{})
	inner := &ratelimittest.Fake{Func: func(context.Context, ratelimit.Request) ratelimit.Outcome {
		entered <- struct{}{}
		<-release
		return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true}}
	}}
	port := m.InstrumentEdge(inner, []ratelimit.PolicyID{"api"})
	const n = 4
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			port.Evaluate(context.Background(), req("api"))
		}()
	}
	for range n {
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			t.Fatal("evaluations did not start")
		}
	}
	assert.Equal(t, float64(n), testutil.ToFloat64(m.inFlight))
	close(release)
	wg.Wait()
	assert.Equal(t, 0.0, testutil.ToFloat64(m.inFlight))
}

func TestCacheFailure(t *testing.T) {
	m := New()
	m.CacheFailure("get", errors.New("boom"))
	m.CacheFailure("get", errors.New("boom"))
	m.CacheFailure("delete", nil)
	m.CacheFailure("weird op from elsewhere", nil)
	assert.Equal(t, 2.0, testutil.ToFloat64(m.cacheErr.WithLabelValues("get")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.cacheErr.WithLabelValues("delete")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.cacheErr.WithLabelValues("other")))
}

func TestHandlerExposesEverything(t *testing.T) {
	m := New()
	port := m.InstrumentEdge(fixed(ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true}}), []ratelimit.PolicyID{"api"})
	port.Evaluate(context.Background(), req("api"))
	m.CacheFailure("set", nil)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code)
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`tlb_ratelimit_outcomes_total{category="none",decision="allowed",kind="evaluated",policy="api"} 1`,
		`tlb_ratelimit_evaluation_seconds_count{kind="evaluated",policy="api"} 1`,
		`tlb_ratelimit_in_flight 0`,
		`tlb_cache_fail_open_total{op="set"} 1`,
		"go_goroutines ",
		"process_start_time_seconds ",
	} {
		assert.Contains(t, text, want)
	}
	assert.False(t, strings.Contains(text, "c3ViamVjdC1kaWdlc3QtMDE"), "the subject digest is never a label")
}

func TestRegistriesArePrivate(t *testing.T) {
	// Two instances in one process (tests, the fx graph) must not collide.
	a, b := New(), New()
	a.CacheFailure("get", nil)
	assert.Equal(t, 0.0, testutil.ToFloat64(b.cacheErr.WithLabelValues("get")))
}

func TestEdgeAndLocalResponses(t *testing.T) {
	m := New()
	known := KnownPolicies([]ratelimit.PolicyID{"api"})
	m.EdgeResponse("api", known, true, 0)
	m.EdgeResponse("api", known, false, 429)
	m.EdgeResponse("nope", known, false, 503)
	m.EdgeResponse("api", known, false, 418)
	m.LocalLimited(429)
	m.LocalLimited(400)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.edgeResp.WithLabelValues("api", "admitted")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.edgeResp.WithLabelValues("api", "429")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.edgeResp.WithLabelValues("other", "503")), "unknown policy IDs are bounded")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.edgeResp.WithLabelValues("api", "other")), "unexpected statuses are bounded")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.localRes.WithLabelValues("429")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.localRes.WithLabelValues("400")))
}

func TestRegisterBreaker(t *testing.T) {
	m := New()
	state := "closed"
	var trips uint64
	m.RegisterBreaker(func() string { return state }, func() uint64 { return trips })
	read := func() string {
		var b strings.Builder
		for _, s := range BreakerStates {
			fmt.Fprintf(&b, "%s=%v ", s, gaugeValue(t, m, BreakerState, s))
		}
		return b.String()
	}
	assert.Equal(t, "closed=1 open=0 half_open=0 ", read())
	state, trips = "open", 2
	assert.Equal(t, "closed=0 open=1 half_open=0 ", read())
	state = "half_open"
	assert.Equal(t, "closed=0 open=0 half_open=1 ", read())
	state = "disabled"
	assert.Equal(t, "closed=0 open=0 half_open=0 ", read())
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	found := false
	for _, f := range families {
		if f.GetName() == BreakerTripsTotal {
			found = true
			assert.Equal(t, 2.0, f.GetMetric()[0].GetCounter().GetValue())
		}
	}
	assert.True(t, found, "trips counter exported")
}

// gaugeValue gathers the registry and returns the value of name{state=s}.
func gaugeValue(t *testing.T, m *Metrics, name, s string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == s {
					return mt.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("%s{state=%q} not exported", name, s)
	return 0
}

// TestInstrumentEdgeConforms: the decorator over a conformant port is a
// conformant port (the EdgePort kit, run through the decorator).
func TestInstrumentEdgeConforms(t *testing.T) {
	m := New()
	fakes := ratelimittest.FakePorts()
	ratelimittest.Run(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		return m.InstrumentEdge(fakes(t, policies), nil)
	})
}

// TestDedupMetrics: a replayed decision and a dedup conflict are counted
// per policy; other outcomes leave the dedup counter alone; the retry
// counters are read at scrape time.
func TestDedupMetrics(t *testing.T) {
	m := New()
	replay := m.InstrumentEdge(fixed(ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Limit: 5, Remaining: 4, Replayed: true}}), []ratelimit.PolicyID{"api"})
	conflict := m.InstrumentEdge(fixed(ratelimit.Incompatible{Category: ratelimit.CategoryDedupConflict}), []ratelimit.PolicyID{"api"})
	plain := m.InstrumentEdge(fixed(ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Limit: 5, Remaining: 4}}), []ratelimit.PolicyID{"api"})
	for range 2 {
		replay.Evaluate(context.Background(), req("api"))
	}
	conflict.Evaluate(context.Background(), req("api"))
	plain.Evaluate(context.Background(), req("api"))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.dedup.WithLabelValues("api", DedupReplayed)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.dedup.WithLabelValues("api", DedupConflict)))
	assert.Equal(t, 2, testutil.CollectAndCount(m.dedup))

	var decided, failed uint64 = 3, 1
	m.RegisterDedupRetries(func() uint64 { return decided }, func() uint64 { return failed })
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() == DedupRetriesTotal {
			for _, mt := range f.GetMetric() {
				got[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
			}
		}
	}
	assert.Equal(t, map[string]float64{"decided": 3, "failed": 1}, got)

	m.RegisterDedupRetryFailures(func() []DedupRetryFailure {
		return []DedupRetryFailure{{Kind: "indeterminate", Category: "timeout", Count: 1}, {Kind: "unavailable", Category: "circuit_open", Count: 2}}
	})
	families, err = m.Registry().Gather()
	require.NoError(t, err)
	byCause := map[string]float64{}
	for _, f := range families {
		if f.GetName() == DedupRetryFailuresTotal {
			for _, mt := range f.GetMetric() {
				l := map[string]string{}
				for _, lp := range mt.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				byCause[l["kind"]+"/"+l["category"]] = mt.GetCounter().GetValue()
			}
		}
	}
	assert.Equal(t, map[string]float64{"indeterminate/timeout": 1, "unavailable/circuit_open": 2}, byCause)
}

func TestRegisterPipeline(t *testing.T) {
	m := New()
	m.RegisterPipeline(func() (int64, int64, int) { return 7, 40, 3 })
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			switch f.GetName() {
			case PipelineBatchesTotal, PipelineBatchedCallsTotal:
				got[f.GetName()] = mt.GetCounter().GetValue()
			case PipelineQueued:
				got[f.GetName()] = mt.GetGauge().GetValue()
			}
		}
	}
	assert.Equal(t, map[string]float64{PipelineBatchesTotal: 7, PipelineBatchedCallsTotal: 40, PipelineQueued: 3}, got)
}

// TestRegisterTargetBreakers: one series per target and state, the
// target's state 1 and the others 0; the targets are read at each scrape.
func TestRegisterTargetBreakers(t *testing.T) {
	m := New()
	targets := []TargetBreaker{{Target: "0", State: "closed"}, {Target: "1", State: "open"}}
	m.RegisterTargetBreakers(func() []TargetBreaker { return targets })
	value := func(target, state string) (float64, bool) {
		families, err := m.Registry().Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() != BreakerTargetState {
				continue
			}
			for _, mt := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range mt.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["target"] == target && labels["state"] == state {
					return mt.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}
	for _, tc := range []struct {
		target, state string
		want          float64
	}{{"0", "closed", 1}, {"0", "open", 0}, {"1", "open", 1}, {"1", "half_open", 0}} {
		v, ok := value(tc.target, tc.state)
		require.True(t, ok, "%s/%s exported", tc.target, tc.state)
		assert.Equal(t, tc.want, v, "%s/%s", tc.target, tc.state)
	}
	targets = targets[:1]
	_, ok := value("1", "open")
	assert.False(t, ok, "a target no longer serving is not exported")
}

// setPort answers every set with out.
type setPort struct {
	ratelimittest.Fake
	out ratelimit.Outcome
}

func (p *setPort) EvaluateSet(context.Context, ratelimit.SetRequest) ratelimit.Outcome { return p.out }

// TestInstrumentEdgeSets: a policy set is counted once, under the member
// its outcome names; a set the decorated port refuses is counted so.
func TestInstrumentEdgeSets(t *testing.T) {
	set := ratelimit.SetRequest{Members: []ratelimit.PolicyID{"api", "login"}, Cost: 1}
	denied := ratelimit.Decision{PolicyID: "login", Limit: 5, RetryAfter: time.Second}
	m := New()
	port := m.InstrumentEdge(&setPort{out: ratelimit.Evaluated{Decision: denied, Members: []ratelimit.Decision{{PolicyID: "api", Allowed: true}, denied}}}, []ratelimit.PolicyID{"api", "login"})
	got := port.EvaluateSet(context.Background(), set)
	assert.Equal(t, ratelimit.PolicyID("login"), ratelimit.PolicyOf(got), "the inner outcome unchanged")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.outcomes.WithLabelValues("login", "evaluated", "none", "denied")))
	assert.Equal(t, 1, testutil.CollectAndCount(m.outcomes), "one series: the set is counted once")
	assert.Equal(t, 0.0, testutil.ToFloat64(m.inFlight))

	m = New()
	port = m.InstrumentEdge(fixed(ratelimit.Incompatible{PolicyID: "api", Category: ratelimit.CategoryProgramFault}), []ratelimit.PolicyID{"api", "login"})
	got = port.EvaluateSet(context.Background(), set)
	assert.False(t, ratelimit.Admitted(got))
	assert.Equal(t, ratelimit.CategoryProgramFault, ratelimit.CategoryOf(got))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.outcomes.WithLabelValues("api", "incompatible", "program_fault", "fail_closed")))
}

// refundPort refunds 3 units every time.
type refundPort struct{ ratelimittest.Fake }

func (*refundPort) Refund(context.Context, ratelimit.Request, ratelimit.Receipt) ratelimit.Outcome {
	return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Refunded: 3}}
}

func TestInstrumentEdgeRefunds(t *testing.T) {
	m := New()
	port := m.InstrumentEdge(&refundPort{}, []ratelimit.PolicyID{"api"})
	for range 2 {
		out := port.Refund(context.Background(), req("api"), ratelimit.NewReceipt("api", 1, 3, 1, ratelimit.GlobalRedis))
		assert.Equal(t, int64(3), out.(ratelimit.Evaluated).Decision.Refunded)
	}
	assert.Equal(t, 2.0, testutil.ToFloat64(m.refunds.WithLabelValues("api", "evaluated")))
	assert.Equal(t, 6.0, testutil.ToFloat64(m.refunded.WithLabelValues("api")))
	m = New()
	out := m.InstrumentEdge(fixed(ratelimit.Incompatible{PolicyID: "api", Category: ratelimit.CategoryProgramFault}), []ratelimit.PolicyID{"api"}).Refund(context.Background(), req("api"), ratelimit.Receipt{})
	assert.Equal(t, ratelimit.CategoryProgramFault, ratelimit.CategoryOf(out))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.refunds.WithLabelValues("api", "incompatible")))
}
