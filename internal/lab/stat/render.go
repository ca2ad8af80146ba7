package stat

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// DefaultWidth is ministat's plot width when standard output is not a terminal.
const DefaultWidth = 74

// Options are ministat's output flags.
type Options struct {
	// Width of the plot in columns, without its frame (-w). Zero means
	// DefaultWidth; the plot needs at least 2.
	Width int
	// Level is the confidence level in percent, one of Levels (-c). Zero
	// means DefaultLevel.
	Level float64
	// NoPlot leaves out the plot but keeps the comparisons (-A).
	NoPlot bool
	// SummaryOnly leaves out the plot and the comparisons (-n).
	SummaryOnly bool
	// Separate gives each set its own |___M_A___| line (-s).
	Separate bool
	// Quiet leaves out the legend and the table header (-q of current
	// FreeBSD ministat; Debian's ministat 20150715 has no -q).
	Quiet bool
}

// Render writes ministat's report on sets: the legend ("x name"), the plot,
// the summary table and, for every set after the first, its comparison with
// the first ("Difference at 95.0% confidence" or "No difference proven at
// 95.0% confidence").
func Render(w io.Writer, sets []Set, o Options) error {
	if len(sets) == 0 {
		return errors.New("render: no data sets")
	}
	if len(sets) > MaxSets {
		return fmt.Errorf("render %d sets: %w", len(sets), ErrTooManySets)
	}
	if o.Width == 0 {
		o.Width = DefaultWidth
	}
	if o.Width < 2 {
		return fmt.Errorf("plot width %d: need at least 2 columns", o.Width)
	}
	if o.Level == 0 {
		o.Level = DefaultLevel
	}
	if _, err := levelIndex(o.Level); err != nil {
		return err
	}
	ds := make([]*dataset, len(sets))
	for i, s := range sets {
		d, err := newDataset(s)
		if err != nil {
			return err
		}
		ds[i] = d
	}

	bw := bufio.NewWriter(w)
	if !o.Quiet {
		for i, d := range ds {
			fmt.Fprintf(bw, "%c %s\n", symbols[i+1], d.name)
		}
	}
	if !o.SummaryOnly && !o.NoPlot {
		p := newPlot(o.Width, o.Separate, len(ds))
		for _, d := range ds {
			p.dim(d)
		}
		for i, d := range ds {
			p.add(d, i+1)
		}
		p.dump(bw)
	}
	if !o.Quiet {
		bw.WriteString("    N           Min           Max        Median           Avg        Stddev\n")
	}
	base := ds[0].summary()
	writeVitals(bw, base, 1)
	for i, d := range ds[1:] {
		s := d.summary()
		writeVitals(bw, s, i+2)
		if o.SummaryOnly {
			continue
		}
		c, err := Compare(base, s, o.Level)
		if err != nil {
			return err
		}
		writeComparison(bw, c)
	}
	return bw.Flush()
}

func writeVitals(w *bufio.Writer, s Summary, val int) {
	fmt.Fprintf(w, "%c %3d %s %s %s %s %s\n", symbols[val], s.N,
		cG13(s.Min), cG13(s.Max), cG13(s.Median), cG13(s.Avg), cG13(s.Stddev))
}

func writeComparison(w *bufio.Writer, c Comparison) {
	level := strconv.FormatFloat(c.Level, 'f', 1, 64)
	if !c.Proven {
		fmt.Fprintf(w, "No difference proven at %s%% confidence\n", level)
		return
	}
	fmt.Fprintf(w, "Difference at %s%% confidence\n", level)
	fmt.Fprintf(w, "\t%s +/- %s\n", cG(c.Diff, 6), cG(c.Interval, 6))
	fmt.Fprintf(w, "\t%s%% +/- %s%%\n", cG(c.Percent, 6), cG(c.PercentInterval, 6))
	fmt.Fprintf(w, "\t(Student's t, pooled s = %s)\n", cG(c.PooledS, 6))
}
