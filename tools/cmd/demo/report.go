package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// policyFile is the demo's policy file: the demo policy on the load route
// and the example login policy.
func policyFile(o options) string {
	return fmt.Sprintf(`{"policies": [
  {"id": "demo", "revision": 1, "algorithm": "fixed_window",
   "limit": %d, "window": %q, "maxCost": 1, "cleanupGrace": "30s",
   "maxClockRegression": "2s", %s,
   "routes": ["GET %s"]},
  {"id": "login", "revision": 1, "algorithm": "fixed_window",
   "limit": 5, "window": "1m", "maxCost": 1, "cleanupGrace": "1m",
   "maxClockRegression": "2s", "failurePolicy": "fail-closed",
   "routes": ["POST /api/v1/login"]}
]}
`, o.limit, o.window.String(), demoFailurePolicy(o), demoPath)
}

// demoFailurePolicy is the demo policy's failure policy fields.
func demoFailurePolicy(o options) string {
	if o.fallback {
		return `"failurePolicy": "local-fallback", "fallbackInstances": 2`
	}
	return `"failurePolicy": "fail-closed"`
}

// fallbackShare is each instance's share of the demo limit with -fallback.
func fallbackShare(o options) int64 { return max(1, o.limit/2) }

// windowsTouched is the number of fixed windows of length w (aligned to
// the Unix epoch, as the limiter's are) that [from, to] overlaps.
func windowsTouched(from, to time.Time, w time.Duration) int64 {
	if from.IsZero() || to.Before(from) {
		return 0
	}
	ms := w.Milliseconds()
	return to.UnixMilli()/ms - from.UnixMilli()/ms + 1
}

func printPhase1(w io.Writer, o options, r loadResult) {
	fmt.Fprintf(w, "\nPhase 1: policy \"demo\" = fixed_window, %d requests per client per %v window, counted in Redis for both instances\n", o.limit, o.window)
	fmt.Fprintf(w, "%d requests in %v\n\n", r.total.requests, r.elapsed.Round(10*time.Millisecond))
	printCounts(w, r, []countRow{
		{"requests", func(c counts) int { return c.requests }},
		{"allowed (200)", func(c counts) int { return c.allowed }},
		{"denied (429)", func(c counts) int { return c.denied }},
		{"fail-closed (503)", func(c counts) int { return c.failClosed }},
		{"other status", func(c counts) int { return c.other }},
		{"transport errors", func(c counts) int { return c.errors }},
	})

	fmt.Fprintf(w, "\n  %-18s %8s %8s %16s %12s\n", "client", "allowed", "windows", "limit x windows", "limit holds")
	var allowed, bound int64
	for _, c := range r.perClient {
		n := windowsTouched(c.first, c.last, o.window)
		b := o.limit * n
		allowed += int64(c.counts.allowed)
		bound += b
		fmt.Fprintf(w, "  %-18s %8d %8d %16s %12s\n", c.name, c.counts.allowed, n, fmt.Sprintf("%d x %d = %d", o.limit, n, b), yesNo(int64(c.counts.allowed) <= b))
	}
	fmt.Fprintf(w, "  %-18s %8d %8s %16d %12s\n", "all clients", allowed, "", bound, yesNo(allowed <= bound))
	fmt.Fprintf(w, "\n  \"windows\" counts the %v windows (aligned to the epoch) each client's requests touched.\n"+
		"  Each client's requests alternated between A and B, yet together the instances allowed at most\n"+
		"  %d per client per window: the count lives in Redis, not in either process. Two independent\n"+
		"  per-process limiters would have allowed up to 2 x %d = %d.\n", o.window, o.limit, o.limit, 2*o.limit)
	if s, ok := r.samples[429]; ok {
		fmt.Fprintln(w, "\n  A 429 response carried:")
		printSample(w, s, false)
	}
	fmt.Fprintln(w)
}

func printPhase2(w io.Writer, o options, r loadResult) {
	fmt.Fprintf(w, "\nPhase 2: redis-server stopped, %d requests\n\n", r.total.requests)
	printCounts(w, r, []countRow{
		{"allowed (200)", func(c counts) int { return c.allowed }},
		{"denied (429)", func(c counts) int { return c.denied }},
		{"fail-closed (503)", func(c counts) int { return c.failClosed }},
		{"other / errors", func(c counts) int { return c.other + c.errors }},
	})
	if len(r.categories) > 0 {
		fmt.Fprintf(w, "\n  503 by category: connection %d, circuit_open %d (others %d)\n",
			r.categories["connection"], r.categories["circuit_open"], r.failClosedOther())
	}
	if o.fallback {
		fmt.Fprintf(w, "\n  The demo policy is local-fallback (2 instances): with Redis unreachable each instance\n"+
			"  decided alone on its share, %d per client per %v window (decisions marked local_emergency,\n"+
			"  counted in tlb_ratelimit_fallback_decisions_total); /readyz stays 200. The local admits are\n"+
			"  owed to the global count (tlb_ratelimit_fallback_pending): when Redis returns, each instance's\n"+
			"  next decision made with Redis charges them in the same round trip (phase 3).\n", fallbackShare(o), o.window)
	} else {
		fmt.Fprintln(w, "\n  Without its coordination store the limiter refuses rather than letting unlimited traffic\n"+
			"  through; /healthz stays 200 and /readyz turns 503. After 5 connection failures per instance\n"+
			"  the circuit breaker opens: the rest are refused at once (circuit_open), nothing is sent or dialed.")
	}
	if s, ok := r.samples[503]; ok {
		fmt.Fprintln(w, "\n  A 503 response carried:")
		printSample(w, s, true)
	}
	fmt.Fprintln(w)
}

type countRow struct {
	label string
	f     func(counts) int
}

func printCounts(w io.Writer, r loadResult, rows []countRow) {
	fmt.Fprintf(w, "  %-18s %12s %12s %8s\n", "", "instance A", "instance B", "total")
	for _, row := range rows {
		fmt.Fprintf(w, "  %-18s %12d %12d %8d\n", row.label, row.f(r.perTarget[0]), row.f(r.perTarget[1]), row.f(r.total))
	}
}

func printSample(w io.Writer, s sample, withBody bool) {
	for _, f := range sampleFields {
		if v := s.header.Get(f); v != "" {
			fmt.Fprintf(w, "    %s: %s\n", f, v)
		}
	}
	if withBody && s.body != "" {
		fmt.Fprintf(w, "    body: %s\n", strings.TrimSpace(s.body))
	}
}

// verdict checks what the demo claims; an error means the demo failed.
func verdict(o options, load, outage loadResult) error {
	var errs []error
	for _, c := range load.perClient {
		if b := o.limit * windowsTouched(c.first, c.last, o.window); int64(c.counts.allowed) > b {
			errs = append(errs, fmt.Errorf("%s: %d allowed exceeds limit x windows = %d", c.name, c.counts.allowed, b))
		}
	}
	if load.total.allowed == 0 {
		errs = append(errs, errors.New("phase 1 allowed nothing"))
	}
	if n := load.total.failClosed + load.total.other + load.total.errors; n > 0 {
		errs = append(errs, fmt.Errorf("phase 1: %d responses were neither 200 nor 429", n))
	}
	switch {
	case o.fallback:
		// Local decisions: some admitted, never more than each instance's
		// share per window (one client, two instances).
		bound := int64(0)
		if len(outage.perClient) > 0 {
			c := outage.perClient[0]
			bound = 2 * fallbackShare(o) * windowsTouched(c.first, c.last, o.window)
		}
		if outage.total.allowed == 0 || int64(outage.total.allowed) > bound {
			errs = append(errs, fmt.Errorf("phase 2: %d allowed locally, want 1..%d (2 instances x share %d x windows)", outage.total.allowed, bound, fallbackShare(o)))
		}
	case outage.total.requests == 0 || outage.total.failClosed != outage.total.requests:
		errs = append(errs, fmt.Errorf("phase 2: %d of %d requests failed closed (503), want all", outage.total.failClosed, outage.total.requests))
	case !o.cluster && outage.categories["circuit_open"] == 0:
		errs = append(errs, errors.New("phase 2: no 503 came from the open circuit breaker (circuit_open)"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("demo check failed:\n%s", indent(err.Error()))
	}
	return nil
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// failClosedOther counts the 503s of categories other than connection and
// circuit_open.
func (r loadResult) failClosedOther() int {
	n := 0
	for c, k := range r.categories {
		if c != "connection" && c != "circuit_open" {
			n += k
		}
	}
	return n
}
