package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/lab/stat"
)

func (e *env) statCmd() *cobra.Command {
	var (
		column, width                   int
		delims                          string
		level                           float64
		noPlot, summaryOnly, sep, quiet bool
	)
	c := &cobra.Command{
		Use:   "stat [flags] [FILE...]",
		Short: "Compare benchmark results with Student's t, as ministat(1) does",
		Long: `Compare sets of measurements and say whether they really differ.

This is ministat(1), the statistics tool of FreeBSD (Debian package
'ministat'), re-implemented: same input, same output, byte for byte, and
ministat's flags, but for three whose letters trestle's other commands
use: ministat's -c is --confidence, -n --summary-only and -w --width. Each FILE holds one data set, one number per line ('#' starts a
comment); with no FILE, or with "-", the set is read from standard input.
The first file is the baseline; every other file is compared with it. Up
to 7 files, of at least 3 values each.

Example, five runs before and five after a change:

  $ trestle stat before.txt after.txt
  x before.txt
  + after.txt
  +--------------------------------------------------------------------------+
  |x   x x  x    x                                  +  +    +     +         +|
  | |____MA____|                                    |_______M_A________|     |
  +--------------------------------------------------------------------------+
      N           Min           Max        Median           Avg        Stddev
  x   5          9.41          9.58          9.49         9.492   0.063796552
  +   5         10.02         10.31         10.11        10.136    0.11696153
  Difference at 95.0% confidence
  	0.644 +/- 0.137396
  	6.78466% +/- 1.44749%
  	(Student's t, pooled s = 0.0942072)

The plot is a histogram along one axis: each column covers a range of
values and the points that fall in it stack up, x for the first set, + for
the second (* where both have points, then % # @ O). Under it, |____|
spans each set's average plus and minus one standard deviation, A marks
the average and M the median. The table gives each set's size, extremes,
median, average and standard deviation (divided by n-1).

The last block is Student's t test of each set against the first, at the
confidence level of --confidence (95% by default). "Difference at 95.0% confidence"
means the averages differ at that level. Its lines are: the difference of
the averages (this set minus the first) +/- the half-width of its
confidence interval, so above after - before is 0.644 +/- 0.137, between
0.507 and 0.781 with 95% confidence; the same as a percentage of the first
set's average; and the pooled standard deviation of the two sets. "No
difference proven at 95.0% confidence" means the interval includes zero:
these measurements cannot tell the sets apart. That does not prove them
equal; more runs may show a smaller difference. A lower --confidence makes
a difference easier to claim and the claim weaker.`,
		Example: `  trestle stat --confidence 99 before.txt after.txt   # stricter: 99% confidence
  trestle stat -C 3 -d , runs.csv                      # third comma-separated field
  trestle stat --summary-only a.txt b.txt c.txt        # summary table only
  some-benchmark | trestle stat                 # one set from standard input`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if column <= 0 {
				return usagef("--column %d: column numbers start at 1", column)
			}
			if cmd.Flags().Changed("delimiters") && delims == "" {
				return usagef("--delimiters: an empty string separates nothing")
			}
			if !slices.Contains(stat.Levels, level) {
				return usagef("--confidence %g: one of 80, 90, 95, 98, 99 or 99.5", level)
			}
			if len(args) > stat.MaxSets {
				return &usageError{cmd: cmd, err: fmt.Errorf("%d files: %w", len(args), stat.ErrTooManySets)}
			}
			o := stat.Options{Level: level, NoPlot: noPlot, SummaryOnly: summaryOnly, Separate: sep, Quiet: quiet, Width: e.statWidth()}
			if cmd.Flags().Changed("width") {
				if width < 2 {
					return usagef("--width %d: the plot needs a width of at least 2", width)
				}
				o.Width = width
			}
			if len(args) == 0 {
				args = []string{"-"}
			}
			ro := stat.ReadOptions{Column: column, Delimiters: delims}
			sets := make([]stat.Set, 0, len(args))
			for _, a := range args {
				var s stat.Set
				var err error
				if a == "-" {
					s, err = stat.Read(cmd.InOrStdin(), stat.StdinName, ro)
				} else {
					s, err = stat.ReadFile(a, ro)
				}
				if err != nil {
					return err
				}
				sets = append(sets, s)
			}
			return stat.Render(e.stdout, sets, o)
		},
	}
	f := c.Flags()
	f.IntVarP(&column, "column", "C", 1, "field of each line to read, from 1")
	f.StringVarP(&delims, "delimiters", "d", stat.DefaultDelimiters, "bytes that separate fields (any run of them is one separator)")
	f.Float64Var(&level, "confidence", stat.DefaultLevel, "confidence level of Student's t test: 80, 90, 95, 98, 99 or 99.5")
	f.BoolVarP(&noPlot, "no-plot", "A", false, "leave out the plot, keep the statistics and the comparisons")
	f.BoolVar(&summaryOnly, "summary-only", false, "print the summary table only: no plot, no comparisons")
	f.BoolVarP(&quiet, "quiet", "q", false, "leave out the legend and the table header (as FreeBSD's ministat -q)")
	f.BoolVarP(&sep, "separate", "s", false, "give each set its own average/median/stddev line in the plot")
	// No default here: an unset -w means the terminal's width, as ministat.
	f.IntVar(&width, "width", 0, "width of the plot (default: the terminal's less 2, or $COLUMNS, or 74 when not a terminal)")
	return c
}

// statWidth is ministat's default plot width: $COLUMNS or the terminal's
// width less 2 when standard output is a terminal, otherwise 74.
func (e *env) statWidth() int {
	f, ok := e.stdout.(*os.File)
	if !ok || !isTerminal(f) {
		return stat.DefaultWidth
	}
	if c := e.getenv("COLUMNS"); c != "" {
		if n, err := strconv.Atoi(c); err == nil && n >= 2 {
			return n
		}
		return stat.DefaultWidth
	}
	if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 3 {
		return int(ws.Col) - 2
	}
	return stat.DefaultWidth
}
