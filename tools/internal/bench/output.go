package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Output file names inside the output directory.
const (
	ResultsFile = "results.json"
	ChartFile   = "throughput.png"
)

// Outputs are where WriteOutputs puts results.json, the chart and the
// regenerated document. DocIn is read (the committed document with its
// markers); DocOut is written (the same path in a full run).
type Outputs struct {
	Dir    string
	DocIn  string
	DocOut string
}

// WriteOutputs writes results.json and the charts into o.Dir and the
// regenerated document to o.DocOut, then checks what it wrote.
func WriteOutputs(res *Results, o Outputs) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encode results: %w", err)
	}
	data = append(data, '\n')
	chart, err := RenderChart(res)
	if err != nil {
		return err
	}
	floodChart, err := RenderFloodChart(res)
	if err != nil {
		return err
	}
	src, err := os.ReadFile(o.DocIn)
	if err != nil {
		return fmt.Errorf("bench: read %s: %w", o.DocIn, err)
	}
	doc, err := RenderDoc(src, res)
	if err != nil {
		return err
	}
	if err := ValidateOutputs(res, data, chart, doc); err != nil {
		return err
	}
	if err := validatePNG(FloodChartFile, floodChart); err != nil {
		return err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return fmt.Errorf("bench: output dir: %w", err)
	}
	for path, b := range map[string][]byte{
		filepath.Join(o.Dir, ResultsFile):    data,
		filepath.Join(o.Dir, ChartFile):      chart,
		filepath.Join(o.Dir, FloodChartFile): floodChart,
		o.DocOut:                             doc,
	} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return fmt.Errorf("bench: write %s: %w", path, err)
		}
	}
	return nil
}

// ReadResults loads a results.json written by WriteOutputs.
func ReadResults(path string) (*Results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench: read %s: %w", path, err)
	}
	var res Results
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("bench: decode %s: %w", path, err)
	}
	if res.Schema != SchemaVersion {
		return nil, fmt.Errorf("bench: %s: schema %q, want %q", path, res.Schema, SchemaVersion)
	}
	return &res, nil
}

// MergeLease puts ph, a lease phase run alone (`make bench-lease`), into
// the results.json of an earlier `make bench` in o.Dir, recomputes the
// targets, checks the whole, and writes results.json and the document's
// targets and lease sections (the other sections and the charts derive
// from measurements that did not change, and are left as they are).
func MergeLease(ph *LeasePhase, o Outputs) (*Results, error) {
	path := filepath.Join(o.Dir, ResultsFile)
	res, err := ReadResults(path)
	if err != nil {
		return nil, fmt.Errorf("%w (make bench-lease adds its phase to the results of a full make bench)", err)
	}
	if res.Mode != ph.Settings.Mode {
		return nil, fmt.Errorf("bench: %s is a %s run; the lease phase ran in %s mode", path, res.Mode, ph.Settings.Mode)
	}
	res.Lease = ph
	res.Recompute()
	if err := Validate(res); err != nil {
		return nil, fmt.Errorf("bench: %s with the new lease phase: %w", path, err)
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("bench: encode results: %w", err)
	}
	data = append(data, '\n')
	src, err := os.ReadFile(o.DocIn)
	if err != nil {
		return nil, fmt.Errorf("bench: read %s: %w", o.DocIn, err)
	}
	doc, err := renderDocSections(src, res, []string{"targets", "lease"})
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"targets", "lease"} {
		if body, ok := SectionBody(doc, name); !ok || body == "" {
			return nil, fmt.Errorf("bench: docs/performance.md section %q is empty or missing", name)
		}
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return nil, fmt.Errorf("bench: write %s: %w", path, err)
	}
	if err := os.WriteFile(o.DocOut, doc, 0o644); err != nil {
		return nil, fmt.Errorf("bench: write %s: %w", o.DocOut, err)
	}
	return res, nil
}
