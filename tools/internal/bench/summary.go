package bench

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// PrintSummary writes the console table of `make bench`: the targets, then
// the throughput ratios.
func PrintSummary(w io.Writer, res *Results) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nTARGET\tGOAL\tMEASURED\tSTATUS\tWHERE\n")
	for _, t := range res.Targets {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Title, t.Goal, formatMeasured(t), t.Status, t.Where)
	}
	fmt.Fprintf(tw, "\nCOMPARISON\tA\tSUBJECTS")
	for _, c := range res.Settings.Concurrency {
		fmt.Fprintf(tw, "\tc=%d", c)
	}
	fmt.Fprintln(tw)
	type rk struct{ name, a, subjects string }
	seen := map[rk]bool{}
	for _, x := range res.Comparisons {
		k := rk{x.Name, x.A, x.Subjects}
		if seen[k] || x.Kind != KindRatio {
			continue
		}
		seen[k] = true
		fmt.Fprintf(tw, "%s\t%s\t%s", k.name, k.a, k.subjects)
		for _, c := range res.Settings.Concurrency {
			i := slices.IndexFunc(res.Comparisons, func(y Comparison) bool {
				return y.Name == k.name && y.A == k.a && y.Subjects == k.subjects && y.Concurrency == c
			})
			if i < 0 {
				fmt.Fprintf(tw, "\t-")
			} else {
				fmt.Fprintf(tw, "\t%.3f", res.Comparisons[i].Median)
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
