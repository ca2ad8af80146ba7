package cores

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/report/svg"
)

// CoresRow is one DUT's cores test at one frame size: its zero-loss rate
// at each CPU count, over the repetitions.
type CoresRow struct {
	DUT   string
	Size  lab.FrameSize
	Cells []*CoresCell // by CPU count, ascending
}

// CoresCell is one DUT at one CPU count.
type CoresCell struct {
	CPUs   int
	Values []float64 // pps, each repetition that found a zero-loss rate
	Median float64   // of Values; NaN without any
	// CPU is each CPU's busy share in the confirmation trial, the mean
	// over the repetitions.
	CPU    []float64
	Errors []string
	// DUTShared: a generator thread ran on the DUT's own CPU (where Open
	// vSwitch's PMD thread forwards).
	DUTShared         bool
	OtherCPU, Seconds float64 // over the repetitions' searches
	reps              int
}

// Cores gathers a run's cores results, DUTs in the run's order.
func Cores(run *lab.Run) []*CoresRow {
	var rows []*CoresRow
	index := map[string]*CoresRow{}
	for _, r := range run.Results {
		var rec Record
		if r.Test != lab.TestCores || r.RecordOf(&rec) != nil {
			continue
		}
		k := r.DUT + "|" + string(rec.FrameSize)
		row := index[k]
		if row == nil {
			row = &CoresRow{DUT: r.DUT, Size: rec.FrameSize}
			index[k] = row
			rows = append(rows, row)
		}
		i := slices.IndexFunc(row.Cells, func(c *CoresCell) bool { return c.CPUs == rec.CPUs })
		if i < 0 {
			row.Cells = append(row.Cells, &CoresCell{CPUs: rec.CPUs})
			i = len(row.Cells) - 1
		}
		c := row.Cells[i]
		c.reps++
		if r.Error != "" {
			c.Errors = append(c.Errors, r.Error)
		} else {
			c.Values = append(c.Values, r.Value)
		}
		if len(c.CPU) < len(r.CPU) {
			c.CPU = append(c.CPU, make([]float64, len(r.CPU)-len(c.CPU))...)
		}
		for j, v := range r.CPU {
			c.CPU[j] += v
		}
		c.DUTShared = c.DUTShared || rec.DUTShared
		c.OtherCPU += rec.OtherCPU
		c.Seconds += rec.Seconds
	}
	for _, row := range rows {
		slices.SortFunc(row.Cells, func(a, b *CoresCell) int { return a.CPUs - b.CPUs })
		for _, c := range row.Cells {
			c.Median = math.NaN()
			if len(c.Values) > 0 {
				c.Median = lab.Median(c.Values)
			}
			for j := range c.CPU {
				c.CPU[j] /= float64(c.reps)
			}
		}
	}
	slices.SortStableFunc(rows, func(a, b *CoresRow) int { return lab.DUTOrder(run, a.DUT) - lab.DUTOrder(run, b.DUT) })
	return rows
}

// base is the cell the row's factors are over: the fewest CPUs.
func (r *CoresRow) base() *CoresCell { return r.Cells[0] }

// Scaling is a cell's median over the row's fewest CPUs' (NaN if either
// has no figure).
func (r *CoresRow) Scaling(c *CoresCell) float64 {
	b := r.base().Median
	if b <= 0 || math.IsNaN(b) {
		return math.NaN()
	}
	return c.Median / b
}

func (r *CoresRow) name(sizes int) string {
	if sizes > 1 {
		return r.DUT + " " + r.Size.Label()
	}
	return r.DUT
}

func cpusText(n int) string {
	if n == 1 {
		return "1 CPU"
	}
	return fmt.Sprintf("%d CPUs", n)
}

func factorText(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v)
}

func (c *CoresCell) figure() string {
	if len(c.Values) == 0 {
		return "no figure"
	}
	return lab.Figure(c.Median, "pps")
}

// coresRowOf is the row of dut at size, nil if none.
func coresRowOf(rows []*CoresRow, dut string, size lab.FrameSize) *CoresRow {
	for _, r := range rows {
		if r.DUT == dut && r.Size == size {
			return r
		}
	}
	return nil
}

// cellAt is the row's cell at n CPUs, nil if none.
func (r *CoresRow) cellAt(n int) *CoresCell {
	if r == nil {
		return nil
	}
	for _, c := range r.Cells {
		if c.CPUs == n {
			return c
		}
	}
	return nil
}

// vsText is a cell's median over the same count's of another DUT's row.
func vsText(c *CoresCell, other *CoresRow) string {
	o := other.cellAt(c.CPUs)
	if o == nil || len(o.Values) == 0 || len(c.Values) == 0 || o.Median <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", c.Median/o.Median)
}

func coresSizes(rows []*CoresRow) int {
	var sizes []lab.FrameSize
	for _, r := range rows {
		if !slices.Contains(sizes, r.Size) {
			sizes = append(sizes, r.Size)
		}
	}
	return len(sizes)
}

// coresDetail is the table of every DUT at every count: the median, its
// factor over the fewest CPUs, against direct and the floor at the same
// count, each CPU's load, and every repetition.
func coresDetail(rows []*CoresRow) (head []string, cells [][]string) {
	head = []string{"DUT", "CPUS", "MEDIAN", "VS " + strings.ToUpper(cpusText(rows[0].base().CPUs))}
	sizes := coresSizes(rows)
	var bases []string // the DUTs the others are compared with at the same count, if measured
	for _, b := range []string{"direct", "floor"} {
		if slices.ContainsFunc(rows, func(r *CoresRow) bool { return r.DUT == b }) {
			bases = append(bases, b)
			head = append(head, "VS "+strings.ToUpper(b))
		}
	}
	head = append(head, "CPU BUSY", "ALL REPETITIONS")
	for _, r := range rows {
		for _, c := range r.Cells {
			var all []string
			for _, v := range c.Values {
				all = append(all, lab.Figure(v, "pps"))
			}
			if n := len(c.Errors); n > 0 {
				all = append(all, fmt.Sprintf("%d without a zero-loss rate", n))
			}
			line := []string{r.name(sizes), fmt.Sprint(c.CPUs), c.figure(), factorText(r.Scaling(c))}
			for _, b := range bases {
				line = append(line, vsText(c, coresRowOf(rows, b, r.Size)))
			}
			cells = append(cells, append(line, lab.CPUText(c.CPU), strings.Join(all, " ")))
		}
	}
	return head, cells
}

// coresWarnings are the figures that are missing, the counts at which a
// DUT's own forwarding thread shared a CPU with the generator, and the
// CPU time other processes took.
func coresWarnings(run *lab.Run, rows []*CoresRow) []string {
	var out []string
	sizes := coresSizes(rows)
	for _, r := range rows {
		var shared []string
		for _, c := range r.Cells {
			for _, e := range c.Errors {
				out = append(out, fmt.Sprintf("no figure: %s at %s: %s", r.name(sizes), cpusText(c.CPUs), lab.FirstLine(e)))
			}
			if c.DUTShared && lab.CapsOf(r.DUT).OwnThread {
				shared = append(shared, fmt.Sprint(c.CPUs))
			}
			if n := lab.OthersNote(c.OtherCPU, c.Seconds, run.Machine.CPUs); n != "" {
				out = append(out, fmt.Sprintf("note: %s at %s: %s", r.name(sizes), cpusText(c.CPUs), n))
			}
		}
		if len(shared) > 0 {
			out = append(out, fmt.Sprintf("note: %s at %s CPUs: its forwarding thread (the PMD, one, on the DUT's CPU) shared that CPU with a generator thread: not a figure of more cores forwarding",
				r.name(sizes), strings.Join(shared, ", ")))
		}
	}
	return out
}

func coresHeadline(rows []*CoresRow) string {
	return fmt.Sprintf("cores: zero-loss throughput (RFC 2544 search) with one generator thread and one flow on each of N CPUs, each CPU forwarding its own frames; medians over the repetitions, the factor over %s, the ratios to direct and the floor at the same count, each CPU's busy share in the confirmation trial (mean over the repetitions)",
		cpusText(rows[0].base().CPUs))
}

func terminalCores(w io.Writer, run *lab.Run, rows []*CoresRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", coresHeadline(rows))
	head, cells := coresDetail(rows)
	lab.TerminalRows(w, head, cells, coresWarnings(run, rows))
}

func markdownCores(b *bytes.Buffer, dir string, run *lab.Run, rows []*CoresRow) error {
	if len(rows) == 0 {
		return nil
	}
	b.WriteString("\n## Cores\n\n")
	var counts []int
	for _, r := range rows {
		for _, c := range r.Cells {
			if !slices.Contains(counts, c.CPUs) {
				counts = append(counts, c.CPUs)
			}
		}
	}
	slices.Sort(counts)
	sizes := coresSizes(rows)
	fmt.Fprintf(b, "Zero-loss throughput (the RFC 2544 search, medians over the repetitions) with one generator thread and one flow on each of N CPUs; a veth delivers on the sending CPU, so each CPU forwards its own thread's frames. "+
		"In brackets, the factor over %s: N.00x at N CPUs is perfect scaling.\n\n", cpusText(counts[0]))
	head := []string{"DUT"}
	for _, n := range counts {
		head = append(head, cpusText(n))
	}
	var matrix [][]string
	for _, r := range rows {
		line := []string{r.name(sizes)}
		for _, n := range counts {
			c := r.cellAt(n)
			switch {
			case c == nil:
				line = append(line, "-")
			case len(c.Values) == 0:
				line = append(line, "no figure")
			default:
				cell := fmt.Sprintf("%s (%s)", lab.Figure(c.Median, "pps"), factorText(r.Scaling(c)))
				if c.DUTShared && lab.CapsOf(r.DUT).OwnThread {
					cell += ", PMD shares a CPU"
				}
				line = append(line, cell)
			}
		}
		matrix = append(matrix, line)
	}
	lab.MarkdownRows(b, head, matrix, nil)
	b.WriteString("\nEvery figure, with each CPU's busy share in the confirmation trial (from /proc/stat; the mean over the repetitions) and the ratios to direct and to the floor at the same count:\n\n")
	dh, cells := coresDetail(rows)
	for i := range dh {
		dh[i] = strings.ToLower(dh[i])
	}
	lab.MarkdownRows(b, dh, cells, coresWarnings(run, rows))
	charts, err := coresCharts(dir, rows)
	if err != nil {
		return err
	}
	lab.EmbedCharts(b, charts)
	return nil
}

// coresCharts draw the zero-loss rate against the CPU count, a line per
// DUT (the repetitions' spread as error bars), and the factor over the
// fewest CPUs against the count, with perfect scaling dashed.
func coresCharts(dir string, rows []*CoresRow) ([]lab.Chart, error) {
	var out []lab.Chart
	var ticks []float64
	for _, r := range rows {
		for _, c := range r.Cells {
			if !slices.Contains(ticks, float64(c.CPUs)) {
				ticks = append(ticks, float64(c.CPUs))
			}
		}
	}
	slices.Sort(ticks)
	sizes := coresSizes(rows)
	tput := svg.LineChart{Title: "Cores: zero-loss throughput against the CPUs forwarding", XLabel: "CPUs (one generator thread and flow each)", YLabel: "frames/s",
		XTicks: ticks, XUnit: svg.Plain}
	scale := svg.LineChart{Title: fmt.Sprintf("Cores: throughput as a factor of %s's", cpusText(int(ticks[0]))), XLabel: "CPUs (one generator thread and flow each)", YLabel: "factor",
		XTicks: ticks, XUnit: svg.Plain, Unit: svg.Plain}
	for _, r := range rows {
		t := svg.Series{Name: r.name(sizes)}
		f := svg.Series{Name: r.name(sizes)}
		for _, c := range r.Cells {
			p := svg.Point{X: float64(c.CPUs), Y: c.Median}
			if len(c.Values) > 1 {
				p.YLo, p.YHi = slices.Min(c.Values), slices.Max(c.Values)
			}
			t.Points = append(t.Points, p)
			f.Points = append(f.Points, svg.Point{X: float64(c.CPUs), Y: r.Scaling(c)})
		}
		tput.Series = append(tput.Series, t)
		scale.Series = append(scale.Series, f)
	}
	perfect := svg.Series{Name: "perfect scaling", Dashed: true}
	for _, x := range ticks {
		perfect.Points = append(perfect.Points, svg.Point{X: x, Y: x / ticks[0]})
	}
	scale.Series = append(scale.Series, perfect)
	for _, c := range []struct {
		file string
		c    svg.LineChart
	}{{"cores-throughput.svg", tput}, {"cores-scaling.svg", scale}} {
		if err := lab.SaveChart(dir, c.file, c.c.Title, c.c, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Section is the cores kind's section for the terminal; its Markdown, with
// charts, is SectionIn's (ChartReporter).
func (Kind) Section(run *lab.Run) (terminal, markdown string) {
	var t strings.Builder
	terminalCores(&t, run, Cores(run))
	return t.String(), ""
}

// SectionIn is the cores section of report.md, its charts written into dir.
func (Kind) SectionIn(dir string, run *lab.Run) (string, error) {
	var b bytes.Buffer
	err := markdownCores(&b, dir, run, Cores(run))
	return b.String(), err
}
