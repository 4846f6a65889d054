package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// LeaseSummary is the median over repetitions of one limiter in one
// scenario at one concurrency; the leased (holding) limiter's row also
// carries its ratios to the others, paired by repetition (0 elsewhere).
type LeaseSummary struct {
	Scenario    string `json:"scenario"`
	Limiter     string `json:"limiter"`
	Concurrency int    `json:"concurrency"`
	Reps        int    `json:"reps"`
	// AdmittedPerSec and DecisionsPerSec (admitted and denied); the hot
	// scenario's throughput is the first, the nearly spent one's the
	// second.
	AdmittedPerSec  float64 `json:"admittedPerSec"`
	DecisionsPerSec float64 `json:"decisionsPerSec"`
	P50Micros       float64 `json:"p50Micros"`
	P99Micros       float64 `json:"p99Micros"`
	// Admitted and Denied per run.
	Admitted float64 `json:"admitted"`
	Denied   float64 `json:"denied"`
	// CommandsPerAdmitted and ScriptCallsPerAdmitted: Redis commands
	// (inner script commands included) and round trips per admitted
	// decision; CommandsPerDecision per decision of either kind.
	CommandsPerAdmitted    float64 `json:"commandsPerAdmitted"`
	ScriptCallsPerAdmitted float64 `json:"scriptCallsPerAdmitted"`
	CommandsPerDecision    float64 `json:"commandsPerDecision"`
	// Reserved: the leased limiter's reservations per run.
	Reserved float64 `json:"reserved,omitempty"`
	// OpsVsRedisRate and P99VsRedisRate (hot), OpsVsUnleased and
	// P99VsUnleased (every scenario): the leased (or, in the holds
	// scenario, the holding) limiter's throughput and p99 over the
	// other's in the same repetition, median.
	OpsVsRedisRate float64 `json:"opsVsRedisRate,omitempty"`
	P99VsRedisRate float64 `json:"p99VsRedisRate,omitempty"`
	OpsVsUnleased  float64 `json:"opsVsUnleased,omitempty"`
	P99VsUnleased  float64 `json:"p99VsUnleased,omitempty"`
}

// leaseOps is a run's throughput: admitted decisions per second on the
// hot subject (every one is admitted), decisions of either kind per
// second on the nearly spent one (most are denied).
func leaseOps(r LeaseRun) float64 {
	if r.Scenario == LeaseScenarioNearly {
		return r.DecisionsPerSec
	}
	return r.AdmittedPerSec
}

// summarizeLease takes the medians per scenario, concurrency and
// limiter, in the phase's order, and the leased limiter's paired ratios.
func summarizeLease(runs []LeaseRun) []LeaseSummary {
	type key struct {
		scenario, limiter string
		c                 int
	}
	groups := map[key][]LeaseRun{}
	var order []key
	for _, r := range runs {
		k := key{r.Scenario, r.Limiter, r.Concurrency}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	rank := func(k key) int {
		names, _ := leaseOrder(k.scenario)
		i := slices.Index(names, k.limiter)
		if i < 0 {
			i = len(names)
		}
		return i
	}
	slices.SortStableFunc(order, func(a, b key) int {
		if a.scenario != b.scenario {
			_, ra := leaseOrder(a.scenario)
			_, rb := leaseOrder(b.scenario)
			return ra - rb
		}
		if a.c != b.c {
			return a.c - b.c
		}
		return rank(a) - rank(b)
	})
	// byRep is limiter's metric f per repetition in scenario at c, in
	// repetition order, for pairing.
	byRep := func(scenario, limiter string, c int, f func(LeaseRun) float64) map[int]float64 {
		out := map[int]float64{}
		for _, r := range groups[key{scenario, limiter, c}] {
			out[r.Rep] = f(r)
		}
		return out
	}
	paired := func(k key, other string, f func(LeaseRun) float64) float64 {
		a, b := byRep(k.scenario, k.limiter, k.c, f), byRep(k.scenario, other, k.c, f)
		var vs []float64
		for rep, x := range a {
			if y, ok := b[rep]; ok && y > 0 {
				vs = append(vs, x/y)
			}
		}
		return median(vs)
	}
	p99 := func(r LeaseRun) float64 { return r.P99Micros }
	out := make([]LeaseSummary, 0, len(order))
	for _, k := range order {
		rs := groups[k]
		col := func(f func(LeaseRun) float64) float64 {
			vs := make([]float64, len(rs))
			for i, r := range rs {
				vs[i] = f(r)
			}
			return median(vs)
		}
		s := LeaseSummary{
			Scenario: k.scenario, Limiter: k.limiter, Concurrency: k.c, Reps: len(rs),
			AdmittedPerSec:         col(func(r LeaseRun) float64 { return r.AdmittedPerSec }),
			DecisionsPerSec:        col(func(r LeaseRun) float64 { return r.DecisionsPerSec }),
			P50Micros:              col(func(r LeaseRun) float64 { return r.P50Micros }),
			P99Micros:              col(p99),
			Admitted:               col(func(r LeaseRun) float64 { return float64(r.Admitted) }),
			Denied:                 col(func(r LeaseRun) float64 { return float64(r.Denied) }),
			CommandsPerAdmitted:    col(func(r LeaseRun) float64 { return perAdmitted(r.RedisCommands, r.Admitted) }),
			ScriptCallsPerAdmitted: col(func(r LeaseRun) float64 { return perAdmitted(r.ScriptCalls, r.Admitted) }),
			CommandsPerDecision:    col(func(r LeaseRun) float64 { return perAdmitted(r.RedisCommands, r.Admitted+r.Denied) }),
			Reserved:               col(func(r LeaseRun) float64 { return float64(r.Reserved) }),
		}
		if k.limiter == LeaseLeased || k.limiter == LeaseHolding {
			if k.scenario == LeaseScenarioHot {
				s.OpsVsRedisRate, s.P99VsRedisRate = paired(k, FamilyRedisRate, leaseOps), paired(k, FamilyRedisRate, p99)
			}
			s.OpsVsUnleased, s.P99VsUnleased = paired(k, LeaseUnleased, leaseOps), paired(k, LeaseUnleased, p99)
		}
		out = append(out, s)
	}
	return out
}

// leaseSummary returns the summary of limiter in scenario at c.
func (res *Results) leaseSummary(scenario, limiter string, c int) (LeaseSummary, bool) {
	if res.Lease == nil {
		return LeaseSummary{}, false
	}
	for _, s := range res.Lease.Summaries {
		if s.Scenario == scenario && s.Limiter == limiter && s.Concurrency == c {
			return s, true
		}
	}
	return LeaseSummary{}, false
}

// renderLease is the lease section of docs/performance.md.
func renderLease(b *strings.Builder, res *Results) {
	ph := res.Lease
	if ph == nil {
		b.WriteString("Not measured.\n")
		return
	}
	s := ph.Settings
	fmt.Fprintf(b, "Measured %s UTC at commit %s (%s mode), redis-server %s; %d repetitions of %.1f s per run%s after %d untimed calls, the limiters of a repetition back to back in a rotated order; medians, ratios paired by repetition.\n\n",
		s.Started.Format("2006-01-02 15:04"), orDash(s.GitCommit), s.Mode, s.RedisVersion, s.Reps, s.RunSeconds, maxOpsNote(s.MaxOpsPerRun), s.Warmup)
	fmt.Fprintf(b, "**Hot subject**: one subject of a fixed window of %d per %s (never reached: every call admitted) with a lease of %.2f of the limit for %d ms; `provider_leased` is ratelease over redisrate.Provider (a fresh Leaser per run, closed at its end: the units it gives back are counted in the run), `provider` the same provider without it (both pipelined, PipelineMaxBatch %d, the shipped default), redis_rate Allow with Rate = Burst = the same limit per hour. Throughput is admitted decisions per second; Redis commands are INFO commandstats calls from the start of the run until the leases were given back, the scripts' inner commands included.\n\n",
		s.HotLimit, windowText(s.HotWindowSeconds), s.MaxShare, s.TTLMillis, s.PipelineMaxBatch)
	fmt.Fprintf(b, "| c | limiter | admitted/s | p50 | p99 | Redis commands per admitted (script calls) | reservations per run | vs redis_rate: throughput, p99 | vs unleased: throughput, p99 |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range ph.Summaries {
		if x.Scenario != LeaseScenarioHot {
			continue
		}
		reserved, rsv, unl := "-", "-", "-"
		if x.Limiter == LeaseLeased {
			reserved = fmt.Sprintf("%.0f", x.Reserved)
			rsv = ratioText(x.OpsVsRedisRate) + ", " + ratioText(x.P99VsRedisRate)
			unl = ratioText(x.OpsVsUnleased) + ", " + ratioText(x.P99VsUnleased)
		}
		fmt.Fprintf(b, "| %d | %s | %.0f | %.1f µs | %.1f µs | %.5f (%.5f) | %s | %s | %s |\n",
			x.Concurrency, x.Limiter, x.AdmittedPerSec, x.P50Micros, x.P99Micros, x.CommandsPerAdmitted, x.ScriptCallsPerAdmitted, reserved, rsv, unl)
	}
	fmt.Fprintf(b, "\n**Nearly spent budget**: a fresh subject per run of a fixed window of %d per hour with the same lease, charged by one request to %d left before the run, then asked by %d workers: the first %d are admitted, the rest denied. Throughput is decisions (admitted or denied) per second.\n\n",
		s.NearlyLimit, s.NearlyRemaining, s.NearlyConcurrency, s.NearlyRemaining)
	fmt.Fprintf(b, "| limiter | decisions/s | p50 | p99 | admitted / denied per run | Redis commands per decision | reservations per run | vs unleased: throughput, p99 |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range ph.Summaries {
		if x.Scenario != LeaseScenarioNearly {
			continue
		}
		rsv, unl := "-", "-"
		if x.Limiter == LeaseLeased {
			rsv = fmt.Sprintf("%.0f", x.Reserved)
			unl = ratioText(x.OpsVsUnleased) + ", " + ratioText(x.P99VsUnleased)
		}
		fmt.Fprintf(b, "| %s | %.0f | %.1f µs | %.1f µs | %.0f / %.0f | %.3f | %s | %s |\n",
			x.Limiter, x.DecisionsPerSec, x.P50Micros, x.P99Micros, x.Admitted, x.Denied, x.CommandsPerDecision, rsv, unl)
	}
	fmt.Fprintf(b, "\n**Concurrency limit** (ADR 0041): `provider_holding` takes a slot of a concurrency limit of %d (maxHold %d ms, never reached) and gives it back by its receipt, as the edge does around a handler, on the unleased provider and the hot subject; `provider` makes one decision of the hot policy. Throughput is requests per second; what a request under a concurrency limit adds is the release's round trip (after the handler: the client waits for the acquire only).\n\n",
		s.HoldLimit, s.HoldMaxHoldMillis)
	fmt.Fprintf(b, "| c | limiter | requests/s | p50 | p99 | script calls per request | vs one decision: throughput, p99 |\n|---:|---|---:|---:|---:|---:|---:|\n")
	for _, x := range ph.Summaries {
		if x.Scenario != LeaseScenarioHolds {
			continue
		}
		vs := "-"
		if x.Limiter == LeaseHolding {
			vs = ratioText(x.OpsVsUnleased) + ", " + ratioText(x.P99VsUnleased)
		}
		fmt.Fprintf(b, "| %d | %s | %.0f | %.1f µs | %.1f µs | %.2f | %s |\n",
			x.Concurrency, x.Limiter, x.AdmittedPerSec, x.P50Micros, x.P99Micros, x.ScriptCallsPerAdmitted, vs)
	}
	fmt.Fprintf(b, "\n| target | goal | measured | status | where |\n|---|---|---|---|---|\n")
	for _, t := range leaseTargets(res) {
		where := t.Where
		if t.Note != "" {
			where += "; " + t.Note
		}
		fmt.Fprintf(b, "| %s | %s | %s | **%s** | %s |\n", t.Title, t.Goal, formatMeasured(t), t.Status, where)
	}
}

// RenderLease is the lease section for ph alone (the console of `make
// bench-lease`).
func RenderLease(ph *LeasePhase) string {
	var b strings.Builder
	renderLease(&b, &Results{Mode: ph.Settings.Mode, Lease: ph})
	return b.String()
}

// unitCommandsPerAdmitted is the unit of TargetLeaseCommands, printed
// with five decimals (a leased subject's figure is far below 0.01).
const unitCommandsPerAdmitted = "commands/admitted"

// ratioText prints a ratio with three significant digits at least.
func ratioText(x float64) string {
	switch {
	case x >= 10:
		return fmt.Sprintf("%.1fx", x)
	case x >= 0.01 || x == 0:
		return fmt.Sprintf("%.3fx", x)
	default:
		return fmt.Sprintf("%.2gx", x)
	}
}

// windowText names a window of seconds: "hour" for 3600.
func windowText(seconds int64) string {
	if seconds == 3600 {
		return "hour"
	}
	return (time.Duration(seconds) * time.Second).String()
}
