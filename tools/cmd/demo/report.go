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
   "maxClockRegression": "2s", "failurePolicy": "fail-closed",
   "routes": ["GET %s"]},
  {"id": "login", "revision": 1, "algorithm": "fixed_window",
   "limit": 5, "window": "1m", "maxCost": 1, "cleanupGrace": "1m",
   "maxClockRegression": "2s", "failurePolicy": "fail-closed",
   "routes": ["POST /api/v1/login"]}
]}
`, o.limit, o.window.String(), demoPath)
}

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

func printPhase2(w io.Writer, r loadResult) {
	fmt.Fprintf(w, "\nPhase 2: redis-server stopped, %d requests\n\n", r.total.requests)
	printCounts(w, r, []countRow{
		{"allowed (200)", func(c counts) int { return c.allowed }},
		{"denied (429)", func(c counts) int { return c.denied }},
		{"fail-closed (503)", func(c counts) int { return c.failClosed }},
		{"other / errors", func(c counts) int { return c.other + c.errors }},
	})
	fmt.Fprintln(w, "\n  Without its coordination store the limiter refuses rather than letting unlimited traffic\n"+
		"  through; /healthz stays 200 and /readyz turns 503.")
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
	if outage.total.requests == 0 || outage.total.failClosed != outage.total.requests {
		errs = append(errs, fmt.Errorf("phase 2: %d of %d requests failed closed (503), want all", outage.total.failClosed, outage.total.requests))
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
