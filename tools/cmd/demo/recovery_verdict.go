package main

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// rateLimitFields returns a decision's quota q (RateLimit-Policy: the
// policy's limit for a decision made with Redis, the share for a local
// one) and its reset t in seconds (RateLimit); ok is false when the
// response carries no decision (a 503, a transport error).
func rateLimitFields(r response) (q, t int64, ok bool) {
	if r.err != nil || r.header == nil {
		return 0, 0, false
	}
	q, okQ := sfParam(r.header.Get("RateLimit-Policy"), "q")
	t, okT := sfParam(r.header.Get("RateLimit"), "t")
	return q, t, okQ && okT
}

// sfParam returns the Integer parameter name of a one-Item sf-List such as
// `"demo";r=0;t=17`.
func sfParam(field, name string) (int64, bool) {
	parts := strings.Split(field, ";")
	for _, p := range parts[min(1, len(parts)):] {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && k == name {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// decisionWindow returns the index (start / w since the Unix epoch) of the
// fixed window a decision was made in. Its window ends t seconds after
// the decision, rounded up (docs/http.md), and the decision was made
// between sending and receiving, so the end lies in [sent + t - 1 s,
// got + t]: exactly one window boundary there names the window.
func decisionWindow(r response, w time.Duration) (int64, error) {
	_, t, ok := rateLimitFields(r)
	if !ok {
		return 0, fmt.Errorf("a %d response without RateLimit and RateLimit-Policy fields", r.status)
	}
	const slack = 5 // ms: the clocks are read at different instants
	wms := w.Milliseconds()
	lo := r.sent.UnixMilli() + t*1000 - 1000 - slack
	hi := r.got.UnixMilli() + t*1000 + slack
	first, last := (lo+wms-1)/wms, hi/wms // the boundaries k*w in [lo, hi]
	if first != last {
		return 0, fmt.Errorf("a %d response (t=%d, answered in %v) names %d window ends", r.status, t, r.got.Sub(r.sent), last-first+1)
	}
	return first - 1, nil
}

// windowTally is one window's admissions of the recovery client.
type windowTally struct {
	pre, local, after int
}

// bound is how many admissions after recovery the window allows:
// max(L, U + A) - U - A = max(0, L - U - A).
func (w windowTally) bound(limit int64) int64 {
	return max(0, limit-int64(w.pre)-int64(w.local))
}

// tallyWindows places every admission of res in its window.
func tallyWindows(o options, res *recoveryResult) (map[int64]*windowTally, error) {
	out := map[int64]*windowTally{}
	var errs []error
	add := func(rs []response, f func(*windowTally)) {
		for _, r := range rs {
			if r.err != nil || r.status != http.StatusOK {
				continue
			}
			w, err := decisionWindow(r, o.window)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if out[w] == nil {
				out[w] = &windowTally{}
			}
			f(out[w])
		}
	}
	add(res.pre, func(w *windowTally) { w.pre++ })
	add(res.outage, func(w *windowTally) { w.local++ })
	add(res.after, func(w *windowTally) { w.after++ })
	return out, errors.Join(errs...)
}

// recoveryVerdict checks the recovery claim; an error means it failed.
func recoveryVerdict(o options, res *recoveryResult) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, r := range res.pre {
		if q, _, ok := rateLimitFields(r); r.status != http.StatusOK || !ok || q != o.limit {
			bad("before the outage: %s got %d %v (quota %d), want 200 decided with Redis", recoveryClient, r.status, r.err, q)
		}
	}
	localPerTarget := make([]int, len(res.globalPerTarget))
	for _, r := range res.outage {
		if r.err == nil && r.status == http.StatusOK {
			localPerTarget[r.target]++
		}
	}
	for t, n := range localPerTarget {
		// The bound covers the instances that admitted the subject
		// locally (docs/degraded-mode.md): the demo must be in that case.
		if n == 0 {
			bad("phase 2: instance %s admitted %s locally 0 times, want at least 1", instanceName(t), recoveryClient)
		}
	}
	// Every request after recovery must be decided: a transport error
	// could hide an admission, and the count must be exact.
	for _, r := range res.after {
		switch {
		case r.err != nil:
			bad("phase 3: a request to %s failed (%v): the admission count would not be exact", instanceName(r.target), r.err)
		case r.status != http.StatusOK && r.status != http.StatusTooManyRequests && r.status != http.StatusServiceUnavailable:
			bad("phase 3: %s answered %d, want 200, 429 or 503", instanceName(r.target), r.status)
		}
	}
	for t, n := range res.globalPerTarget {
		if n < hammerGlobal {
			bad("phase 3: instance %s answered %d decisions made with Redis within %v, want %d", instanceName(t), n, hammerMaxTime, hammerGlobal)
		}
	}
	windows, err := tallyWindows(o, res)
	if err != nil {
		errs = append(errs, err)
	}
	for _, k := range sortedWindows(windows) {
		w := windows[k]
		if b := w.bound(o.limit); int64(w.after) > b {
			bad("window %s: %d admitted after recovery, the bound max(L, U+A) allows %d (L %d, U %d, A %d)", windowStart(k, o.window), w.after, b, o.limit, w.pre, w.local)
		}
	}
	switch {
	case res.pendingErr != nil:
		bad("tlb_ratelimit_fallback_pending: %v", res.pendingErr)
	case res.pendingOutage <= 0:
		bad("tlb_ratelimit_fallback_pending was %v at the end of the outage, want the local admissions owed", res.pendingOutage)
	case res.pendingAfter != 0:
		bad("tlb_ratelimit_fallback_pending is %v %v after recovery, want 0", res.pendingAfter, res.pendingWaited.Round(10*time.Millisecond))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("demo check failed (recovery):\n%s", indent(err.Error()))
	}
	return nil
}

func sortedWindows(m map[int64]*windowTally) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func windowStart(k int64, w time.Duration) string {
	return time.UnixMilli(k * w.Milliseconds()).Format("15:04:05")
}
