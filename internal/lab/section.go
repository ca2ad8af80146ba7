package lab

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
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
