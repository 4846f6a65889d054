package bench

import (
	"bytes"
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// chartSeries is one line of the chart.
type chartSeries struct {
	name   string
	points plotter.XYs
	dashed bool
	color  color.Color
}

// Chart colours: one per algorithm (provider solid, bare dashed), one per
// peer.
var (
	colorFixed   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorSliding = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colorToken   = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colorRate    = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	colorUlule   = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colorTrivial = color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
	colorPiped   = color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}
	colorPipedFW = color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}
	colorGCRA    = color.RGBA{R: 0xbc, G: 0xbd, B: 0x22, A: 0xff}
	colorPipedGC = color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}
	colorPipedSW = color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
	colorCeiling = color.RGBA{A: 0xff}
)

func chartColor(name string) color.Color {
	switch name {
	case providerName("fixed_window"), bareName("fixed_window"):
		return colorFixed
	case providerName("sliding_window_counter"), bareName("sliding_window_counter"):
		return colorSliding
	case providerName("token_bucket"), bareName("token_bucket"):
		return colorToken
	case pipelinedName:
		return colorPiped
	case pipelinedFixedName:
		return colorPipedFW
	case pipelinedSlidingName:
		return colorPipedSW
	case gcraName, bareName("gcra"):
		return colorGCRA
	case pipelinedGCRAName:
		return colorPipedGC
	case FamilyRedisRate:
		return colorRate
	case FamilyUlule:
		return colorUlule
	case FamilyTrivial:
		return colorTrivial
	}
	return colorCeiling
}

// RenderChart draws throughput (median ops/s) against concurrency for every
// limiter over the distinct subjects, plus redis-benchmark's trivial EVAL,
// as a PNG.
func RenderChart(res *Results) ([]byte, error) {
	var series []chartSeries
	maxY := 0.0
	for _, name := range limiterOrder(res) {
		s := chartSeries{name: name, dashed: len(name) > len(FamilyBare) && name[:len(FamilyBare)] == FamilyBare, color: chartColor(name)}
		for _, c := range res.Settings.Concurrency {
			if x, ok := res.cell(name, c, SubjectsDistinct); ok {
				s.points = append(s.points, plotter.XY{X: float64(c), Y: x.OpsPerSec})
				maxY = max(maxY, x.OpsPerSec)
			}
		}
		series = append(series, s)
	}
	if len(res.RedisBenchmark.Cells) > 0 {
		s := chartSeries{name: "redis-benchmark EVAL \"return 1\" (C client)", dashed: true, color: colorCeiling}
		for _, c := range res.RedisBenchmark.Cells {
			s.points = append(s.points, plotter.XY{X: float64(c.Concurrency), Y: c.OpsPerSec})
			maxY = max(maxY, c.OpsPerSec)
		}
		series = append(series, s)
	}
	if len(series) == 0 {
		return nil, fmt.Errorf("bench: chart: no data")
	}

	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput vs concurrency (%d distinct subjects, redis %s, %d CPUs)", res.Settings.DistinctSubjects, res.Machine.RedisVersion, res.Machine.NumCPU)
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = "concurrent callers"
	p.Y.Label.Text = "decisions per second (median)"
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, c := range res.Settings.Concurrency {
		ticks = append(ticks, plot.Tick{Value: float64(c), Label: fmt.Sprint(c)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = 0, maxY*1.05
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs = vg.Points(-4)
	p.Legend.YOffs = vg.Points(4)
	for _, s := range series {
		line, points, err := plotter.NewLinePoints(s.points)
		if err != nil {
			return nil, fmt.Errorf("bench: chart %s: %w", s.name, err)
		}
		line.Color, points.Color = s.color, s.color
		line.Width = vg.Points(1.5)
		if s.dashed {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			points.Shape = draw.BoxGlyph{}
		} else {
			points.Shape = draw.CircleGlyph{}
		}
		p.Add(line, points)
		p.Legend.Add(s.name, line, points)
	}
	img := vgimg.New(9*vg.Inch, 6*vg.Inch)
	dc := draw.New(img)
	p.Draw(dc)
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("bench: chart png: %w", err)
	}
	return buf.Bytes(), nil
}
