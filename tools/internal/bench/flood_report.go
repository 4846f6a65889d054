package bench

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// summarizeFlood takes the medians per limiter; the p99 ratio is paired
// by repetition.
func summarizeFlood(runs []FloodRun) []FloodSummary {
	var out []FloodSummary
	for _, name := range floodOrder {
		pick := func(phase string, f func(FloodRun) float64) []float64 {
			var vs []float64
			for _, r := range runs {
				if r.Limiter == name && r.Phase == phase {
					vs = append(vs, f(r))
				}
			}
			return vs
		}
		deniedPerSec := pick(FloodPhaseFlood, func(r FloodRun) float64 { return r.DeniedPerSec })
		if len(deniedPerSec) == 0 {
			continue
		}
		alone := pick(FloodPhaseWell, func(r FloodRun) float64 { return r.WellP99Micros })
		flooded := pick(FloodPhaseMixed, func(r FloodRun) float64 { return r.WellP99Micros })
		var ratios []float64
		for k := range min(len(alone), len(flooded)) {
			if alone[k] > 0 {
				ratios = append(ratios, flooded[k]/alone[k])
			}
		}
		out = append(out, FloodSummary{
			Limiter:      name,
			DeniedPerSec: median(deniedPerSec),
			CommandsPerDenied: median(pick(FloodPhaseFlood, func(r FloodRun) float64 {
				if r.Denied == 0 {
					return 0
				}
				return float64(r.RedisCommands) / float64(r.Denied)
			})),
			ScriptCallsPerDenied: median(pick(FloodPhaseFlood, func(r FloodRun) float64 {
				if r.Denied == 0 {
					return 0
				}
				return float64(r.ScriptCalls) / float64(r.Denied)
			})),
			ServerCPUPerSec:      median(pick(FloodPhaseFlood, func(r FloodRun) float64 { return r.ServerCPUPerSec })),
			WellP99Micros:        median(alone),
			WellP99MicrosFlooded: median(flooded),
			WellP99Ratio:         median(ratios),
		})
	}
	return out
}

// floodSummary returns the summary of limiter.
func (res *Results) floodSummary(limiter string) (FloodSummary, bool) {
	for _, s := range res.FloodSummaries {
		if s.Limiter == limiter {
			return s, true
		}
	}
	return FloodSummary{}, false
}

// validateFlood checks the flood's runs: every repetition of every
// limiter in every phase, every flooding call denied, every well-behaved
// call admitted.
func validateFlood(res *Results) []error {
	var errs []error
	if want := res.Settings.Reps * len(floodOrder) * 3; len(res.Flood) != want {
		errs = append(errs, fmt.Errorf("bench: results: %d flood runs, want %d", len(res.Flood), want))
	}
	for _, r := range res.Flood {
		hot, well := r.Phase != FloodPhaseWell, r.Phase != FloodPhaseFlood
		if r.Errors != 0 || r.Seconds <= 0 || (hot && r.Denied < 1) || (well && (r.Admitted < 1 || r.WellP99Micros <= 0)) {
			errs = append(errs, fmt.Errorf("bench: results: flood run %s %s rep %d: errors %d %v, denied %d, admitted %d, p99 %.1f", r.Limiter, r.Phase, r.Rep, r.Errors, r.ErrorSamples, r.Denied, r.Admitted, r.WellP99Micros))
		}
	}
	if len(res.FloodSummaries) != len(floodOrder) {
		errs = append(errs, errors.New("bench: results: flood summaries missing"))
	}
	return errs
}

// floodTargets judges the flood (issue 24 item 3) on the provider with
// the denial cache.
func floodTargets(res *Results) []Target {
	cached, ok := res.floodSummary(FloodCached)
	ratio := func(peer string) (float64, string, bool) {
		p, pok := res.floodSummary(peer)
		if !ok || !pok || p.DeniedPerSec <= 0 {
			return 0, "", false
		}
		return cached.DeniedPerSec / p.DeniedPerSec, fmt.Sprintf("%.0f vs %.0f denied/s (medians)", cached.DeniedPerSec, p.DeniedPerSec), true
	}
	var ts []Target
	ts = append(ts, judged(Target{ID: TargetFloodCommands, Title: "Issue 24: Redis commands per denied request of the flooding subject (denial cache)", Goal: "<= 0.01", Op: "<=", Threshold: 0.01, Unit: "commands"},
		cached.CommandsPerDenied, "flood alone", ok))
	v, w, found := ratio(FamilyRedisRate)
	ts = append(ts, judged(Target{ID: TargetFloodVsRedisRate, Title: "Issue 24: denial throughput on the flood vs redis_rate", Goal: ">= 10x", Op: ">=", Threshold: 10, Unit: "x"}, v, w, found))
	v, w, found = ratio(FamilyUlule)
	ts = append(ts, judged(Target{ID: TargetFloodVsUlule, Title: "Issue 24: denial throughput on the flood vs ulule", Goal: ">= 10x", Op: ">=", Threshold: 10, Unit: "x"}, v, w, found))
	ts = append(ts, judged(Target{ID: TargetFloodWellP99, Title: "Issue 24: p99 of the well-behaved subjects during the flood vs without it (denial cache)", Goal: "<= 1.2x", Op: "<=", Threshold: 1.2, Unit: "x"},
		cached.WellP99Ratio, fmt.Sprintf("%.1f µs flooded vs %.1f µs alone (medians; ratio paired by repetition)", cached.WellP99MicrosFlooded, cached.WellP99Micros), ok))
	return ts
}

// renderFlood is the flood section of docs/performance.md.
func renderFlood(b *strings.Builder, res *Results) {
	fmt.Fprintf(b, "One subject over its limit (token bucket, %d per hour, spent first) hammered by %d workers, beside %d well-behaved subjects asked round robin by %d workers; each limiter over its own client; medians of %d repetitions of %.1f s per phase: the flood alone (closed loop: the limiter's ceiling), the well-behaved subjects alone, both (the flood offered at %d requests/s, the same for every limiter; one slower than that runs behind).\n\n",
		floodLimit, floodConcurrency, floodWellBehaved, floodWellWorkers, res.Settings.Reps, res.Settings.RunSeconds, floodOfferedRate)
	fmt.Fprintf(b, "![The flood: denials per second, and the well-behaved p99 alone and during the flood](%s)\n\n", FloodChartDocPath)
	fmt.Fprintf(b, "| limiter | denied/s (flood alone) | Redis commands per denied (script calls; inner commands included) | redis-server CPU (s/s) during the flood | well-behaved p99 alone | during the flood | ratio |\n|---|---|---|---|---|---|---|\n")
	rr, rrOK := res.floodSummary(FamilyRedisRate)
	for _, s := range res.FloodSummaries {
		cpu := fmt.Sprintf("%.3f", s.ServerCPUPerSec)
		if rrOK && rr.ServerCPUPerSec > 0 {
			cpu += fmt.Sprintf(" (%.2fx redis_rate's)", s.ServerCPUPerSec/rr.ServerCPUPerSec)
		}
		fmt.Fprintf(b, "| %s | %.0f | %.4f (%.4f) | %s | %.1f µs | %.1f µs | %.2fx |\n",
			s.Limiter, s.DeniedPerSec, s.ScriptCallsPerDenied, s.CommandsPerDenied, cpu, s.WellP99Micros, s.WellP99MicrosFlooded, s.WellP99Ratio)
	}
}

// FloodChartFile is the flood's chart inside the output directory, and
// FloodChartDocPath how docs/performance.md links it.
const (
	FloodChartFile    = "flood.png"
	FloodChartDocPath = "../bench/flood.png"
)

// RenderFloodChart draws the flood's two figures per limiter as bars:
// denials per second of the flood alone and the well-behaved subjects'
// p99 alone and during the flood.
func RenderFloodChart(res *Results) ([]byte, error) {
	if len(res.FloodSummaries) == 0 {
		return nil, errors.New("bench: flood chart: no flood summaries")
	}
	var denied, alone, flooded plotter.Values
	var names []string
	for _, s := range res.FloodSummaries {
		names = append(names, s.Limiter)
		denied = append(denied, s.DeniedPerSec)
		alone = append(alone, s.WellP99Micros/1000)
		flooded = append(flooded, s.WellP99MicrosFlooded/1000)
	}
	width := vg.Points(18)
	left := plot.New()
	left.Title.Text = fmt.Sprintf("Flood alone: denials per second (one subject, %d workers)", floodConcurrency)
	left.Y.Label.Text = "denied requests per second (median)"
	bars, err := plotter.NewBarChart(denied, width)
	if err != nil {
		return nil, fmt.Errorf("bench: flood chart: %w", err)
	}
	bars.Color = colorToken
	left.Add(bars, plotter.NewGrid())
	left.NominalX(names...)

	right := plot.New()
	right.Title.Text = fmt.Sprintf("Well-behaved p99, alone and beside a flood of %d req/s", floodOfferedRate)
	right.Y.Label.Text = "p99 latency, ms (median)"
	a, err := plotter.NewBarChart(alone, width)
	if err != nil {
		return nil, fmt.Errorf("bench: flood chart: %w", err)
	}
	f, err := plotter.NewBarChart(flooded, width)
	if err != nil {
		return nil, fmt.Errorf("bench: flood chart: %w", err)
	}
	a.Color, f.Color = colorFixed, colorUlule
	a.Offset, f.Offset = -width/2, width/2
	right.Add(a, f, plotter.NewGrid())
	right.Legend.Add("alone", a)
	right.Legend.Add("during the flood", f)
	right.Legend.Top = true
	right.NominalX(names...)

	img := vgimg.New(12*vg.Inch, 5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadY: vg.Points(10), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4)}
	left.Draw(tiles.At(dc, 0, 0))
	right.Draw(tiles.At(dc, 1, 0))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("bench: flood chart png: %w", err)
	}
	return buf.Bytes(), nil
}
