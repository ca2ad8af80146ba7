package soak

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/report/svg"
	"github.com/trestle/trestle/internal/lab/sink"
)

// SoakRow is one DUT's soak in one repetition.
type SoakRow struct {
	DUT   string
	Rep   int
	Rec   *Record
	Sum   SoakSummary
	Error string
	CPUs  int // the machine's
}

// Soaks gathers a run's soak records, DUTs in the run's order.
func Soaks(run *lab.Run) []*SoakRow {
	return lab.ResultRows(run, func(r lab.Result) *SoakRow {
		var rec Record
		if r.Test != lab.TestSoak || r.RecordOf(&rec) != nil {
			return nil
		}
		return &SoakRow{DUT: r.DUT, Rep: r.Rep, Rec: &rec, Sum: SummarizeSoak(&rec), Error: r.Error, CPUs: run.Machine.CPUs}
	}, func(r *SoakRow) string { return r.DUT })
}

func (r *SoakRow) name() string {
	if r.Rep > 1 {
		return fmt.Sprintf("%s (rep %d)", r.DUT, r.Rep)
	}
	return r.DUT
}

func driftText(d Drift, f func(float64) string) string {
	t := fmt.Sprintf("%s → %s", f(d.First), f(d.Last))
	if !d.OK {
		t += " (drifted)"
	}
	return t
}

func (r *SoakRow) cells() []string {
	s, rec := r.Sum, r.Rec
	stream := fmt.Sprintf("%s (%.0f%% of %s), %s", lab.Figure(rec.RatePPS, "pps"), 100*rec.Load, lab.Figure(rec.Throughput, "pps"), (time.Duration(rec.Elapsed * float64(time.Second))).Round(time.Second))
	lat := []string{"-", "-", "-"}
	for _, d := range s.Latency {
		switch d.Name {
		case "p50":
			lat[0] = driftText(d, lab.NsText)
		case "p99":
			lat[1] = driftText(d, lab.NsText)
		case "p99.9":
			lat[2] = fmt.Sprintf("%s → %s", lab.NsText(d.First), lab.NsText(d.Last))
		}
	}
	mem := "no daemon"
	if s.Memory != nil {
		mem = fmt.Sprintf("%s (most %s, %+.0f KiB/min)", driftText(*s.Memory, func(v float64) string { return lab.KiBText(uint64(v)) }), lab.KiBText(uint64(s.Memory.Max)), s.MemorySlop)
	}
	maps := "-"
	if len(s.Maps) > 0 {
		var moved []string
		for _, m := range s.Maps {
			if !m.OK {
				moved = append(moved, fmt.Sprintf("%s %.0f..%.0f", m.Name, m.Min, m.Max))
			}
		}
		maps = fmt.Sprintf("%d flat", len(s.Maps))
		if len(moved) > 0 {
			maps = strings.Join(moved, ", ")
		}
	}
	goal := lab.MetText(s.GoalMet)
	if r.Error != "" {
		goal = "failed"
	}
	return []string{r.name(), stream, fmt.Sprint(s.Lost), fmt.Sprint(s.Windows), lat[0], lat[1], lat[2], mem, maps, goal}
}

var soakHead = []string{"DUT", "STREAM", "LOST", "WINDOWS", "P50 FIRST → LAST", "P99 FIRST → LAST", "P99.9", "DAEMON RSS FIRST → LAST", "MAPS", "GOALS"}

func terminalSoaks(w io.Writer, rows []*SoakRow) {
	if len(rows) == 0 {
		return
	}
	rec := rows[0].Rec
	fmt.Fprintf(w, "\nsoak: %s frames in %d flows at %.0f%% of the zero-loss rate, windows of %v (goals: 0 lost, latency stable, memory and maps flat):\n",
		rec.FrameSize.Label(), rec.Flows, 100*rec.Load, time.Duration(rec.WindowSeconds*float64(time.Second)))
	lab.TerminalRows(w, soakHead, soakCells(rows), soakWarnings(rows))
}

func soakCells(rows []*SoakRow) [][]string {
	var cells [][]string
	for _, r := range rows {
		cells = append(cells, r.cells())
	}
	return cells
}

func soakWarnings(rows []*SoakRow) []string {
	var out []string
	for _, r := range rows {
		if r.Error != "" {
			out = append(out, fmt.Sprintf("failed: %s: %s", r.DUT, lab.FirstLine(r.Error)))
			continue
		}
		var cpu, secs float64
		for _, w := range r.Rec.Windows {
			cpu, secs = cpu+w.OtherCPU, secs+w.To-w.From
		}
		if n := lab.OthersNote(cpu, secs, r.CPUs); n != "" {
			out = append(out, fmt.Sprintf("note: %s: %s", r.DUT, n))
		}
		s := r.Sum
		var bad []string
		if s.Lost > 0 {
			bad = append(bad, fmt.Sprintf("%d frames lost", s.Lost))
		}
		if !s.Stable {
			bad = append(bad, "latency not stable from the first window to the last")
		}
		if !s.Flat {
			bad = append(bad, "memory or a map grew")
		}
		if len(bad) > 0 && lab.CapsOf(r.DUT).Subject {
			out = append(out, fmt.Sprintf("warning: %s: %s", r.DUT, strings.Join(bad, "; ")))
		}
	}
	return out
}

func markdownSoaks(b *bytes.Buffer, dir string, rows []*SoakRow) error {
	if len(rows) == 0 {
		return nil
	}
	b.WriteString("\n## Soak\n\n")
	fmt.Fprintf(b, "One stream per DUT at a share of its zero-loss rate (NDR, found first with the same frames), read in windows (the notes above say how). "+
		"Goals: 0 frames lost; p50, p90 and p99 of the last window within %.0f%% (or %v) of the first's (p99.9 and the maximum are shown, not judged: a window holds a handful of frames beyond them); "+
		"the daemon's resident memory grown by at most %.0f%% (or %d MiB) and no map holding more entries than at its first sample.\n\n",
		100*LatencyDrift, LatencySlack, 100*MemoryDrift, MemorySlack>>10)
	lab.MarkdownRows(b, []string{"DUT", "stream", "lost", "windows", "p50 first → last", "p99 first → last", "p99.9 first → last", "daemon RSS first → last", "maps", "goals"},
		soakCells(rows), soakWarnings(rows))
	for _, r := range rows {
		rec := r.Rec
		fmt.Fprintf(b, "\n### %s, window by window\n\n", r.name())
		fmt.Fprintf(b, "%d frames sent at %s, %d received, %d lost, %d reordered, %d duplicated; %d flows (UDP source ports %s)",
			rec.Sent, lab.Figure(rec.Offered, "pps"), rec.Received, rec.Lost, rec.Reordered, rec.Duplicated, rec.Flows, rec.SrcPorts)
		if rec.Daemon != "" {
			fmt.Fprintf(b, "; memory of %s", rec.Daemon)
		}
		for _, k := range lab.SortedKeys(rec.Unmeasured) {
			fmt.Fprintf(b, "; %s not measured: %s", k, rec.Unmeasured[k])
		}
		b.WriteString(".\n\n| window | rate | sequence gaps | p50 | p90 | p99 | p99.9 | max | CPU busy | other processes' CPU |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, w := range rec.Windows {
			l := w.Latency
			if l == nil {
				l = &sink.Latency{}
			}
			fmt.Fprintf(b, "| %.0f-%.0f s | %s | %d | %v | %v | %v | %v | %v | %s | %.1f s |\n", w.From, w.To, lab.Figure(w.RatePPS, "pps"), w.Gaps, l.P50, l.P90, l.P99, l.P999, l.Max, lab.CPUText(w.CPU), w.OtherCPU)
		}
		var counted, fixed []string
		for _, m := range rec.Maps {
			if m.Entries >= 0 {
				counted = append(counted, fmt.Sprintf("%s (%s, %d of %d)", m.Name, m.Type, m.Entries, m.MaxEntries))
			} else {
				fixed = append(fixed, fmt.Sprintf("%s (%s, %d)", m.Name, m.Type, m.MaxEntries))
			}
		}
		if len(rec.Maps) > 0 {
			fmt.Fprintf(b, "\nMaps of the programs on its ports, at the start: counted in every sample: %s; fixed size: %s.\n", lab.OrNone(strings.Join(counted, ", ")), lab.OrNone(strings.Join(fixed, ", ")))
		}
		for _, m := range r.Sum.Maps {
			fmt.Fprintf(b, "- %s: %.0f at the first sample, %.0f at the last, %.0f..%.0f in all\n", m.Name, m.First, m.Last, m.Min, m.Max)
		}
	}
	charts, err := soakCharts(dir, rows)
	if err != nil {
		return err
	}
	lab.EmbedCharts(b, charts)
	return nil
}

// soakCharts draw over the soak, for every DUT: latency percentiles per
// window, the daemon's memory, and the entries of the counted maps.
func soakCharts(dir string, rows []*SoakRow) ([]lab.Chart, error) {
	var out []lab.Chart
	lat := svg.LineChart{Title: "Soak: latency per window (p50, p99, p99.9)", XLabel: "minutes into the stream", YLabel: "one-way latency", XUnit: svg.Plain,
		Unit: func(v float64) string { return lab.NsText(v) }}
	mem := svg.LineChart{Title: "Soak: the daemon's resident memory", XLabel: "minutes into the stream", YLabel: "MiB", XUnit: svg.Plain}
	maps := svg.LineChart{Title: "Soak: entries of the learning table and of every hash map on the DUT's ports", XLabel: "minutes into the stream", YLabel: "entries", XUnit: svg.Plain}
	for _, r := range rows {
		for _, p := range []struct {
			name string
			of   func(*sink.Latency) time.Duration
		}{{"p50", func(l *sink.Latency) time.Duration { return l.P50 }}, {"p99", func(l *sink.Latency) time.Duration { return l.P99 }}, {"p99.9", func(l *sink.Latency) time.Duration { return l.P999 }}} {
			s := svg.Series{Name: r.name() + " " + p.name}
			for _, w := range r.Rec.Windows {
				if w.Latency != nil {
					s.Points = append(s.Points, svg.Point{X: w.To / 60, Y: float64(p.of(w.Latency))})
				}
			}
			if len(s.Points) > 0 {
				lat.Series = append(lat.Series, s)
			}
		}
		m := svg.Series{Name: r.name()}
		series := map[string]*svg.Series{}
		var names []string
		for _, p := range r.Rec.Samples {
			if p.RSSKiB > 0 {
				m.Points = append(m.Points, svg.Point{X: p.T / 60, Y: float64(p.RSSKiB) / 1024})
			}
			add := func(name string, v int) {
				if series[name] == nil {
					series[name] = &svg.Series{Name: r.name() + " " + name}
					names = append(names, name)
				}
				series[name].Points = append(series[name].Points, svg.Point{X: p.T / 60, Y: float64(v)})
			}
			if p.Learned >= 0 {
				add("learned", p.Learned)
			}
			for _, k := range lab.SortedKeys(p.Maps) {
				add(k, p.Maps[k])
			}
		}
		if len(m.Points) > 0 {
			mem.Series = append(mem.Series, m)
		}
		for _, n := range names {
			maps.Series = append(maps.Series, *series[n])
		}
	}
	for _, c := range []struct {
		file string
		c    svg.LineChart
	}{{"soak-latency.svg", lat}, {"soak-memory.svg", mem}, {"soak-maps.svg", maps}} {
		if len(c.c.Series) == 0 {
			continue
		}
		if err := lab.SaveChart(dir, c.file, c.c.Title, c.c, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Section is the soak kind's section for the terminal; its Markdown, with
// charts, is SectionIn's (ChartReporter).
func (Kind) Section(run *lab.Run) (terminal, markdown string) {
	var t strings.Builder
	terminalSoaks(&t, Soaks(run))
	return t.String(), ""
}

// SectionIn is the soak section of report.md, its charts written into dir.
func (Kind) SectionIn(dir string, run *lab.Run) (string, error) {
	var b bytes.Buffer
	err := markdownSoaks(&b, dir, Soaks(run))
	return b.String(), err
}
