package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tech-log/tech-log-backend/tools/internal/bench"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	root := fs.String("root", "", "repository root holding go.work (default: found from the working directory)")
	smoke := fs.Bool("smoke", false, "a few hundred operations per phase; outputs to a temporary directory unless -out is set")
	out := fs.String("out", "", "directory for results.json and throughput.png (default <root>/bench; smoke: a temporary directory)")
	docPath := fs.String("doc", "", "document with the generated sections (default <root>/docs/performance.md)")
	from := fs.String("from", "", "re-render the chart and the document from this results.json without measuring")
	keep := fs.Bool("keep", false, "smoke: keep the temporary output directory")
	reps := fs.Int("reps", 0, "override the repetitions per cell")
	duration := fs.Duration("duration", 0, "override the duration of one run")
	profile := fs.Duration("profile", -1, "override the duration of the client CPU profile (0: none)")
	ceiling := fs.Int("ceiling", 0, "instead of the suite: the one-caller ceiling (floor script, bare EvalSha, provider, vs redis_rate) with this many repetitions, printed as a table; writes no file")
	lease := fs.Int("lease", 0, "instead of the suite: the lease phase alone with this many repetitions, put into the results.json of an earlier full run (-out) and the document's targets and lease sections; -smoke: writes nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		*root = r
	}
	abs, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	*root = abs
	if *docPath == "" {
		*docPath = filepath.Join(*root, "docs", "performance.md")
	}
	o := bench.Outputs{Dir: *out, DocIn: *docPath, DocOut: *docPath}
	if *ceiling != 0 {
		return runCeiling(*root, *smoke, *ceiling, *duration)
	}
	if *lease != 0 {
		return runLease(*root, *smoke, *lease, *duration, o)
	}

	var res *bench.Results
	if *from != "" {
		r, err := bench.ReadResults(*from)
		if err != nil {
			return err
		}
		r.Recompute()
		res = r
		if o.Dir == "" {
			o.Dir = filepath.Dir(*from)
		}
	} else {
		cfg := bench.FullConfig(*root)
		if *smoke {
			cfg = bench.SmokeConfig(*root)
		}
		if *reps > 0 {
			cfg.Reps = *reps
		}
		if *duration > 0 {
			cfg.RunDuration = *duration
		}
		if *profile >= 0 {
			cfg.ProfileDuration = *profile
		}
		cfg.Log = os.Stdout
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		start := time.Now()
		r, err := bench.Run(ctx, cfg)
		if err != nil {
			return err
		}
		res = r
		fmt.Printf("== measured in %s\n", time.Since(start).Round(time.Second))
	}
	if err := bench.Validate(res); err != nil {
		if *from == "" {
			if path, derr := dumpResults(res); derr == nil {
				err = fmt.Errorf("%w\n(the invalid results are in %s)", err, path)
			}
		}
		return fmt.Errorf("results fail validation: %w", err)
	}
	if res.Mode == bench.ModeSmoke && o.Dir == "" {
		dir, err := os.MkdirTemp("", "tlb-bench-smoke-")
		if err != nil {
			return err
		}
		if !*keep {
			defer os.RemoveAll(dir)
		}
		o.Dir = dir
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(*root, "bench")
	}
	if res.Mode == bench.ModeSmoke && o.DocOut == filepath.Join(*root, "docs", "performance.md") {
		o.DocOut = filepath.Join(o.Dir, "performance.md") // never overwrite the published report
	}
	if err := bench.WriteOutputs(res, o); err != nil {
		return err
	}
	if err := bench.PrintSummary(os.Stdout, res); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s, %s and %s\n", filepath.Join(o.Dir, bench.ResultsFile), filepath.Join(o.Dir, bench.ChartFile), o.DocOut)
	if res.Mode == bench.ModeSmoke {
		fmt.Println("smoke mode: output shape validated; the numbers mean nothing")
		if *out == "" && !*keep {
			fmt.Println("(the temporary output directory is removed on exit; -keep keeps it)")
		}
	}
	return nil
}

// runCeiling runs bench.Ceiling with reps repetitions (smoke: the smoke
// configuration's subjects and run length) and prints its table.
func runCeiling(root string, smoke bool, reps int, duration time.Duration) error {
	cfg := bench.FullConfig(root)
	if smoke {
		cfg = bench.SmokeConfig(root)
	}
	if duration > 0 {
		cfg.RunDuration = duration
	}
	cfg.Log = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := bench.Ceiling(ctx, cfg, reps)
	if err != nil {
		return err
	}
	fmt.Println()
	return bench.WriteCeiling(os.Stdout, rows, reps)
}

// runLease runs bench.Lease with reps repetitions (smoke: the smoke
// configuration, at most its repetitions), validates it and prints its
// section; in full mode it then puts it into o.Dir's results.json
// (default <root>/bench) and the document.
func runLease(root string, smoke bool, reps int, duration time.Duration, o bench.Outputs) error {
	cfg := bench.FullConfig(root)
	if smoke {
		cfg = bench.SmokeConfig(root)
		reps = min(reps, cfg.Reps)
	}
	if duration > 0 {
		cfg.RunDuration = duration
	}
	cfg.Log = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	ph, err := bench.Lease(ctx, cfg, reps)
	if err != nil {
		return err
	}
	fmt.Printf("== measured in %s\n\n%s\n", time.Since(start).Round(time.Second), bench.RenderLease(ph))
	if err := bench.ValidateLease(ph); err != nil {
		return fmt.Errorf("the lease phase fails validation: %w", err)
	}
	if smoke {
		fmt.Println("smoke mode: the lease phase's shape validated; nothing written, the numbers mean nothing")
		return nil
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(root, "bench")
	}
	if _, err := bench.MergeLease(ph, o); err != nil {
		return err
	}
	fmt.Printf("wrote the lease phase into %s and the targets and lease sections of %s\n", filepath.Join(o.Dir, bench.ResultsFile), o.DocOut)
	return nil
}

// dumpResults writes results that failed validation to a temporary file,
// for inspection.
func dumpResults(res *bench.Results) (string, error) {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "tlb-bench-invalid-*.json")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}

// findRoot walks up from the working directory to the directory holding
// go.work.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory: pass -root")
		}
		dir = parent
	}
}
