package bench

import (
	"errors"
	"fmt"
	"strings"
)

// Target IDs of issue 37 item 5 (the lease phase).
const (
	TargetLeaseCommands       = "i37-lease-redis-commands-per-admitted"
	TargetLeaseVsRedisRate    = "i37-lease-throughput-vs-redis_rate-c1-c64"
	TargetLeaseP99VsRedisRate = "i37-lease-p99-vs-redis_rate"
	TargetLeaseNearlyOps      = "i37-lease-nearly-spent-throughput-vs-unleased"
	TargetLeaseNearlyP99      = "i37-lease-nearly-spent-p99-vs-unleased"
)

// leaseTargetIDs are the lease targets, in order.
var leaseTargetIDs = []string{TargetLeaseCommands, TargetLeaseVsRedisRate, TargetLeaseP99VsRedisRate, TargetLeaseNearlyOps, TargetLeaseNearlyP99}

// leaseTargets judges the lease phase (issue 37 item 5), each on its
// worst cell: Redis commands per admitted request of the leased provider
// (every concurrency), its throughput over redis_rate's at c=1 and c=64,
// its p99 over redis_rate's (every concurrency), and on the nearly spent
// subject its throughput and p99 over the unleased provider's.
func leaseTargets(res *Results) []Target {
	var cs []int
	if res.Lease != nil {
		cs = res.Lease.Settings.Concurrency
	}
	// worst is the worst value of f over the leased hot rows at want
	// (every concurrency when nil), with every value for where; found is
	// false when one of them was not measured.
	worst := func(want []int, f func(LeaseSummary) float64, higherIsWorse bool, format func(float64) string) (v float64, where string, found bool) {
		if want == nil {
			want = cs
		}
		at := 0
		var all []string
		for _, c := range want {
			s, ok := res.leaseSummary(LeaseScenarioHot, LeaseLeased, c)
			if !ok {
				return 0, "", false
			}
			x := f(s)
			all = append(all, fmt.Sprintf("c=%d %s", c, format(x)))
			if !found || (higherIsWorse && x > v) || (!higherIsWorse && x < v) {
				v, at, found = x, c, true
			}
		}
		if !found {
			return 0, "", false
		}
		return v, fmt.Sprintf("worst: c=%d; %s", at, strings.Join(all, ", ")), true
	}
	var ts []Target
	add := func(t Target, measured float64, where string, found bool) {
		ts = append(ts, judged(t, measured, where, found))
	}
	v, w, ok := worst(nil, func(s LeaseSummary) float64 { return s.CommandsPerAdmitted }, true, func(x float64) string { return fmt.Sprintf("%.5f", x) })
	var unleased []string
	for _, c := range cs {
		if u, uok := res.leaseSummary(LeaseScenarioHot, LeaseUnleased, c); uok {
			unleased = append(unleased, fmt.Sprintf("c=%d %.2f", c, u.CommandsPerAdmitted))
		}
	}
	note := ""
	if len(unleased) > 0 {
		note = "unleased provider: " + strings.Join(unleased, ", ")
	}
	add(Target{ID: TargetLeaseCommands, Title: "Issue 37: Redis commands per admitted request of a hot leased subject (inner script commands included)", Goal: "<= 0.02", Op: "<=", Threshold: 0.02, Unit: unitCommandsPerAdmitted, Note: note}, v, w, ok)
	v, w, ok = worst([]int{1, 64}, func(s LeaseSummary) float64 { return s.OpsVsRedisRate }, false, ratioText)
	add(Target{ID: TargetLeaseVsRedisRate, Title: "Issue 37: leased throughput vs redis_rate Allow on a hot subject at c=1 and c=64", Goal: ">= 20x", Op: ">=", Threshold: 20, Unit: "x"}, v, w, ok)
	v, w, ok = worst(nil, func(s LeaseSummary) float64 { return s.P99VsRedisRate }, true, ratioText)
	add(Target{ID: TargetLeaseP99VsRedisRate, Title: "Issue 37: leased p99 vs redis_rate's on a hot subject, every concurrency", Goal: "<= 1.0x", Op: "<=", Threshold: 1, Unit: "x"}, v, w, ok)

	n, nok := res.leaseSummary(LeaseScenarioNearly, LeaseLeased, leaseNearlyConcurrency)
	u, uok := res.leaseSummary(LeaseScenarioNearly, LeaseUnleased, leaseNearlyConcurrency)
	nw := fmt.Sprintf("c=%d: %.0f vs %.0f decisions/s, p99 %.1f vs %.1f µs (medians; ratios paired by repetition)", leaseNearlyConcurrency, n.DecisionsPerSec, u.DecisionsPerSec, n.P99Micros, u.P99Micros)
	add(Target{ID: TargetLeaseNearlyOps, Title: "Issue 37: nearly spent budget, leased throughput vs unleased", Goal: ">= 0.9x (no worse, within noise)", Op: ">=", Threshold: 0.9, Unit: "x"}, n.OpsVsUnleased, nw, nok && uok)
	add(Target{ID: TargetLeaseNearlyP99, Title: "Issue 37: nearly spent budget, leased p99 vs unleased", Goal: "<= 1.1x", Op: "<=", Threshold: 1.1, Unit: "x"}, n.P99VsUnleased, nw, nok && uok)
	return ts
}

// validateLease checks the lease phase's shape: its settings, a run per
// repetition of every limiter of each scenario, every hot call admitted,
// the nearly spent budget never exceeded and most of its calls denied,
// every request under the concurrency limit admitted with its acquire
// and release, and a summary per cell. It does not judge the numbers.
func validateLease(res *Results) []error {
	ph := res.Lease
	if ph == nil {
		return []error{errors.New("bench: results: the lease phase is missing")}
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("bench: results: lease: "+format, args...))
	}
	s := ph.Settings
	if s.Mode != res.Mode || s.Reps < 1 || len(s.Concurrency) == 0 || s.RunSeconds <= 0 || s.NearlyRemaining < 1 ||
		s.NearlyRemaining >= s.NearlyLimit || s.NearlyConcurrency < 1 || s.HotLimit < 1 || !(s.MaxShare > 0 && s.MaxShare <= 1) ||
		s.TTLMillis < 1 || s.RedisVersion == "" || !s.Finished.After(s.Started) || s.HoldLimit < 1 || s.HoldMaxHoldMillis < 1 {
		bad("settings implausible: %+v (results mode %q)", s, res.Mode)
	}
	type key struct {
		scenario, limiter string
		c, rep            int
	}
	seen := map[key]int{}
	for _, r := range ph.Runs {
		seen[key{r.Scenario, r.Limiter, r.Concurrency, r.Rep}]++
		where := fmt.Sprintf("%s %s c=%d rep %d", r.Scenario, r.Limiter, r.Concurrency, r.Rep)
		if r.Errors != 0 || r.Seconds <= 0 || r.Admitted+r.Denied < 1 || r.P50Micros <= 0 || r.P50Micros > r.P99Micros || r.RedisCommands < r.ScriptCalls {
			bad("run %s: errors %d %v, %.3f s, %d admitted, %d denied, p50 %.1f p99 %.1f, commands %d, script calls %d",
				where, r.Errors, r.ErrorSamples, r.Seconds, r.Admitted, r.Denied, r.P50Micros, r.P99Micros, r.RedisCommands, r.ScriptCalls)
		}
		switch r.Scenario {
		case LeaseScenarioHot:
			if r.Denied != 0 || r.Admitted < 1 {
				bad("run %s: %d admitted, %d denied on a subject that never reaches its limit", where, r.Admitted, r.Denied)
			}
			if r.Limiter == LeaseLeased && r.Local < 1 {
				bad("run %s: no admission answered from a lease", where)
			}
			if r.Limiter != LeaseLeased && r.ScriptCalls < r.Admitted {
				bad("run %s: %d script calls for %d decisions", where, r.ScriptCalls, r.Admitted)
			}
		case LeaseScenarioNearly:
			if r.Admitted > s.NearlyRemaining || r.Denied <= r.Admitted {
				bad("run %s: %d admitted of %d left, %d denied (the budget must hold and most calls be denied)", where, r.Admitted, s.NearlyRemaining, r.Denied)
			}
		case LeaseScenarioHolds:
			calls := int64(1) // per request: a decision, or an acquire and a release
			if r.Limiter == LeaseHolding {
				calls = 2
			}
			if r.Denied != 0 || r.Admitted < 1 || r.ScriptCalls < calls*r.Admitted {
				bad("run %s: %d admitted, %d denied, %d script calls (want every request admitted, %d calls each)", where, r.Admitted, r.Denied, r.ScriptCalls, calls)
			}
		default:
			bad("run %s: unknown scenario", where)
		}
	}
	want := 0
	for rep := range s.Reps {
		for _, c := range s.Concurrency {
			for _, name := range leaseHotOrder {
				want++
				if seen[key{LeaseScenarioHot, name, c, rep}] != 1 {
					bad("run hot %s c=%d rep %d missing or repeated", name, c, rep)
				}
			}
		}
		for _, name := range leaseNearlyOrder {
			want++
			if seen[key{LeaseScenarioNearly, name, s.NearlyConcurrency, rep}] != 1 {
				bad("run nearly-spent %s c=%d rep %d missing or repeated", name, s.NearlyConcurrency, rep)
			}
		}
		for _, c := range s.Concurrency {
			for _, name := range leaseHoldsOrder {
				want++
				if seen[key{LeaseScenarioHolds, name, c, rep}] != 1 {
					bad("run concurrency %s c=%d rep %d missing or repeated", name, c, rep)
				}
			}
		}
	}
	if len(ph.Runs) != want {
		bad("%d runs, want %d", len(ph.Runs), want)
	}
	if n := (len(leaseHotOrder)+len(leaseHoldsOrder))*len(s.Concurrency) + len(leaseNearlyOrder); len(ph.Summaries) != n {
		bad("%d summaries, want %d", len(ph.Summaries), n)
	}
	for _, x := range ph.Summaries {
		if x.Reps != s.Reps || leaseOps(LeaseRun{Scenario: x.Scenario, AdmittedPerSec: x.AdmittedPerSec, DecisionsPerSec: x.DecisionsPerSec}) <= 0 || x.P99Micros <= 0 {
			bad("summary %s %s c=%d incomplete: %+v", x.Scenario, x.Limiter, x.Concurrency, x)
		}
	}
	return errs
}

// ValidateLease checks a lease phase run alone (`make bench-lease`):
// its shape and its targets.
func ValidateLease(ph *LeasePhase) error {
	res := &Results{Mode: ph.Settings.Mode, Lease: ph}
	errs := validateLease(res)
	for _, t := range leaseTargets(res) {
		if t.Status != StatusMet && t.Status != StatusMissed {
			errs = append(errs, fmt.Errorf("bench: lease: target %s: status %q", t.ID, t.Status))
		}
	}
	return errors.Join(errs...)
}
