package lab

// The report's frame: the figures, tables, rows and charts every kind's
// section is made of (Reporter).

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/trestle/trestle/internal/lab/report/svg"
	"github.com/trestle/trestle/internal/lab/stat"
)

// What a kind's report section (Reporter) and internal/lab/report write
// alike: figures in their units, plain tables, charts embedded in
// report.md.

// Figure formats a value in its unit for people.
func Figure(v float64, unit string) string {
	switch unit {
	case "pps":
		return svg.SI(v) + "pps"
	case "bit/s":
		return fmt.Sprintf("%.2f Gbit/s", v/1e9)
	case "ns":
		return time.Duration(v).String()
	case "addresses/s":
		return svg.SI(v) + "/s"
	case "% lost":
		return fmt.Sprintf("%.3f%%", v)
	case "ms":
		return fmt.Sprintf("%.3f ms", v)
	case UnitOfH2:
		return fmt.Sprintf("%.3f%s", v, unit)
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + " " + unit
}

// FirstLine is s up to its first newline.
func FirstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// CPUText is "cpu0 98%, cpu1 12%".
func CPUText(cpu []float64) string {
	var parts []string
	for i, c := range cpu {
		parts = append(parts, fmt.Sprintf("cpu%d %.0f%%", i, 100*c))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// LossGoalText is a share of frames lost as a percentage ("0" for none).
func LossGoalText(v float64) string {
	if v == 0 {
		return "0"
	}
	return strconv.FormatFloat(100*v, 'g', -1, 64) + "%"
}

// FramesText names a frame size's frames: "64-byte frames", "IMIX frames".
func FramesText(size string) string {
	if size == "imix" {
		return "IMIX frames"
	}
	return size + "-byte frames"
}

// SafeName is s with every character but letters, digits and '-' made
// '-', for a file name.
func SafeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, s)
}

// Table is a plain text table for the terminal: columns two spaces apart,
// the last one not padded.
type Table struct{ rows [][]string }

// NewTable is a table with its head row.
func NewTable(head ...string) *Table { return &Table{rows: [][]string{head}} }

// Add adds a row.
func (t *Table) Add(cells ...string) { t.rows = append(t.rows, cells) }

// Write writes the table.
func (t *Table) Write(w io.Writer) {
	width := make([]int, len(t.rows[0]))
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, r := range t.rows {
		var b strings.Builder
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c + strings.Repeat(" ", width[i]-len([]rune(c))+2))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// Chart is a chart written for report.md; Notes are lines written below
// it (why a line has a gap).
type Chart struct {
	Title, File string
	Notes       []string
}

// EmbedCharts writes charts into a section as images, after a blank
// line; nothing when there are none.
func EmbedCharts(b *bytes.Buffer, charts []Chart) {
	if len(charts) == 0 {
		return
	}
	b.WriteString("\n")
	for _, c := range charts {
		fmt.Fprintf(b, "![%s](%s)\n\n", c.Title, c.File)
	}
}

// ResultRows makes a row of each result that row takes (it returns nil for the
// others), DUTs in the run's order.
func ResultRows[R comparable](run *Run, row func(Result) R, dut func(R) string) []R {
	var rows []R
	var none R
	for _, r := range run.Results {
		if x := row(r); x != none {
			rows = append(rows, x)
		}
	}
	slices.SortStableFunc(rows, func(a, b R) int { return DUTOrder(run, dut(a)) - DUTOrder(run, dut(b)) })
	return rows
}

// DUTOrder is name's place among the run's DUTs (after them all: not one of
// them).
func DUTOrder(run *Run, name string) int {
	if i := slices.Index(run.DUTs, name); i >= 0 {
		return i
	}
	return len(run.DUTs)
}

// MetText is a goal's verdict.
func MetText(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// KiBText is a size in KiB, written in MiB.
func KiBText(v uint64) string { return fmt.Sprintf("%.1f MiB", float64(v)/1024) }

// TerminalRows writes a table and the warnings under it.
func TerminalRows(w io.Writer, head []string, rows [][]string, warnings []string) {
	tw := NewTable(head...)
	for _, r := range rows {
		tw.Add(r...)
	}
	tw.Write(w)
	for _, line := range warnings {
		fmt.Fprintln(w, line)
	}
}

// MarkdownRows writes a Markdown table and the warnings under it, in bold.
func MarkdownRows(b *bytes.Buffer, head []string, rows [][]string, warnings []string) {
	fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, r := range rows {
		fmt.Fprintf(b, "| %s |\n", strings.Join(r, " | "))
	}
	if len(warnings) > 0 {
		b.WriteString("\n")
		for _, w := range warnings {
			fmt.Fprintf(b, "- **%s**\n", w)
		}
	}
}

// OrNone is s, or "none read" when nothing was read.
func OrNone(s string) string {
	if s == "" {
		return "none read"
	}
	return s
}

// SaveChart writes a chart's SVG into dir.
func SaveChart(dir, name, title string, c svg.LineChart, out *[]Chart) error {
	doc, err := c.SVG()
	if err != nil {
		return fmt.Errorf("chart %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), doc, 0o644); err != nil {
		return err
	}
	*out = append(*out, Chart{Title: title, File: name})
	return nil
}

// CountText is a frame count: exact (they are counted exactly, and 0 is the goal).
func CountText(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprint(int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

// SpreadText is a figure over repetitions: its median with its least and
// most, "812 (640..990)"; one figure when they read the same, "-" for none.
func SpreadText(v []float64, text func(float64) string) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	if text(lo) == text(hi) {
		return text(lo)
	}
	return fmt.Sprintf("%s (%s..%s)", text(Median(v)), text(lo), text(hi))
}

// TableSection is a kind's section as its table with goals under it: for
// the terminal, intro then the table and the goals indented; for
// report.md, the heading and about, the table, the goals as a list.
func TableSection(intro, heading, about string, head []string, rows [][]string, goals []string) (terminal, md string) {
	var t strings.Builder
	t.WriteString("\n" + intro + "\n")
	tw := tabwriter.NewWriter(&t, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(head, "\t")))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
	for _, g := range goals {
		t.WriteString("  " + g + "\n")
	}
	var m strings.Builder
	m.WriteString("\n## " + heading + "\n\n" + about + "\n\n")
	m.WriteString("| " + strings.Join(head, " | ") + " |\n|" + strings.Repeat("---|", len(head)) + "\n")
	for _, r := range rows {
		m.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	if len(goals) > 0 {
		m.WriteString("\n")
		for _, g := range goals {
			m.WriteString("- " + g + "\n")
		}
	}
	m.WriteString("\n")
	return t.String(), m.String()
}

func NsText(v float64) string { return time.Duration(v).Round(100 * time.Nanosecond).String() }

// SortedKeys is for printing settings in a stable order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// OthersNote says how much of the machine other processes took while a
// stream of secs ran, if it was more than a twentieth of its CPUs ("":
// less, or unknown).
func OthersNote(cpu, secs float64, cpus int) string {
	if cpus <= 0 || secs <= 0 || cpu <= 0.05*secs*float64(cpus) {
		return ""
	}
	return fmt.Sprintf("other processes on the machine used %.1f CPU-seconds of its %d CPUs' %.0f (%.0f%%): its figures are a shared machine's",
		cpu, cpus, secs*float64(cpus), 100*cpu/(secs*float64(cpus)))
}

// DUTRecords are one DUT's records of a kind that records one result a
// repetition (Result.Record): the records over its repetitions, its
// results' errors, and why it was not measured, if a record says so.
type DUTRecords[R any] struct {
	DUT        string
	Recs       []R
	Errors     []string
	Unmeasured string
}

// RecordsByDUT are run's records of test, a DUTRecords a DUT that has
// any, in the run's DUT order; unmeasured is a record's word that its DUT
// was not measured ("": it was), which keeps the record out of Recs.
func RecordsByDUT[R any](run *Run, test string, unmeasured func(R) string) []*DUTRecords[R] {
	var out []*DUTRecords[R]
	for _, d := range run.DUTs {
		rw := &DUTRecords[R]{DUT: d}
		for _, r := range run.Results {
			if r.Test != test || r.DUT != d {
				continue
			}
			var rec R
			if err := r.RecordOf(&rec); err != nil {
				rw.Errors = append(rw.Errors, err.Error())
				continue
			}
			if why := unmeasured(rec); why != "" {
				rw.Unmeasured = why
				continue
			}
			if r.Error != "" {
				rw.Errors = append(rw.Errors, r.Error)
			}
			rw.Recs = append(rw.Recs, rec)
		}
		if len(rw.Recs) > 0 || len(rw.Errors) > 0 || rw.Unmeasured != "" {
			out = append(out, rw)
		}
	}
	return out
}

// Values are f of each record.
func (d *DUTRecords[R]) Values(f func(R) float64) []float64 {
	var v []float64
	for _, rec := range d.Recs {
		v = append(v, f(rec))
	}
	return v
}

// Problems are the report's lines for the DUT's failed results and for a
// DUT not measured.
func (d *DUTRecords[R]) Problems() []string {
	var out []string
	for _, e := range d.Errors {
		out = append(out, fmt.Sprintf("failed: %s: %s", d.DUT, FirstLine(e)))
	}
	if d.Unmeasured != "" {
		out = append(out, "not measured: "+d.Unmeasured)
	}
	return out
}

// MinistatLine is ministat's summary of a DUT's figure over its
// repetitions, in plain figures: N, Min, Max, Median, Avg, Stddev; false
// with fewer than 3 values.
func MinistatLine(dut, figure string, v []float64) (string, bool) {
	s, err := stat.Summarize(stat.Set{Name: dut, Values: v})
	if err != nil {
		return "", false
	}
	n := CountText
	return fmt.Sprintf("%s %s: N %d  Min %s  Max %s  Median %s  Avg %s  Stddev %s", dut, figure, s.N, n(s.Min), n(s.Max), n(s.Median), n(s.Avg), n(s.Stddev)), true
}
