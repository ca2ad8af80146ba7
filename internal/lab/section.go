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
