package loadlatency

// Latency under load (issue 16, CSIT's way): after each throughput search,
// a stream at 10, 50 and 90% of the PDR, 1 frame in 64 timed by the sink.

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/report/svg"
	"github.com/trestle/trestle/internal/lab/sink"
)

// LoadLatencyRow is one DUT's streams at one frame size and share of its
// PDR, over the repetitions: each percentile the median of the
// repetitions'.
type LoadLatencyRow struct {
	DUT   string
	Size  lab.FrameSize
	Share float64 // of the PDR (or the NDR: Of)
	Of    string  // "PDR" or "NDR"
	// Requested and Offered are the stream's rates, medians; Short: the
	// generator did not hold the rate asked (SearchConfig.Held).
	Requested, Offered float64
	Short              bool
	P50, P90, P99      float64 // ns
	P999, Max          float64
	Timed              float64 // frames the sink timed, median
	Lost               int64   // over every repetition
	Reps               int
	Errors             []string
}

// percentiles are the figures of a LoadLatencyRow, in the tables' order.
var percentiles = []struct {
	name string
	of   func(*sink.Latency) time.Duration
	in   func(*LoadLatencyRow) *float64
}{
	{"p50", func(l *sink.Latency) time.Duration { return l.P50 }, func(r *LoadLatencyRow) *float64 { return &r.P50 }},
	{"p90", func(l *sink.Latency) time.Duration { return l.P90 }, func(r *LoadLatencyRow) *float64 { return &r.P90 }},
	{"p99", func(l *sink.Latency) time.Duration { return l.P99 }, func(r *LoadLatencyRow) *float64 { return &r.P99 }},
	{"p99.9", func(l *sink.Latency) time.Duration { return l.P999 }, func(r *LoadLatencyRow) *float64 { return &r.P999 }},
	{"max", func(l *sink.Latency) time.Duration { return l.Max }, func(r *LoadLatencyRow) *float64 { return &r.Max }},
}

// LoadLatencies gathers a run's latency-load results: by frame size, then
// share, then DUT in the run's order.
func LoadLatencies(run *lab.Run) []*LoadLatencyRow {
	type key struct {
		dut, param string
	}
	by := map[key][]lab.Result{}
	var keys []key
	for _, r := range run.Results {
		if r.Test != lab.TestLoadLatency {
			continue
		}
		k := key{r.DUT, r.Param}
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], r)
	}
	var out []*LoadLatencyRow
	for _, k := range keys {
		size, pct, _ := strings.Cut(k.param, "@")
		share, _ := strconv.ParseFloat(strings.TrimSuffix(pct, "%"), 64)
		row := &LoadLatencyRow{DUT: k.dut, Size: lab.FrameSize(size), Share: share / 100, Of: "PDR"}
		var req, off, timed []float64
		lats := map[string][]float64{}
		for _, r := range by[k] {
			if strings.Contains(r.Note, "of the NDR") {
				row.Of = "NDR"
			}
			if len(r.Trials) > 0 {
				tr := r.Trials[0]
				req, off = append(req, tr.Requested), append(off, tr.Offered)
				row.Lost += max(tr.Lost, 0)
			}
			if r.Error != "" || r.Latency == nil {
				if r.Error != "" {
					row.Errors = append(row.Errors, r.Error)
				}
				continue
			}
			row.Reps++
			timed = append(timed, float64(r.Latency.Count))
			for _, p := range percentiles {
				lats[p.name] = append(lats[p.name], float64(p.of(r.Latency)))
			}
		}
		row.Requested, row.Offered, row.Timed = lab.Median(req), lab.Median(off), lab.Median(timed)
		row.Short = !run.Timing.Search.Held(row.Requested, row.Offered)
		for _, p := range percentiles {
			*p.in(row) = lab.Median(lats[p.name])
		}
		out = append(out, row)
	}
	order := func(d string) int {
		if i := slices.Index(run.DUTs, d); i >= 0 {
			return i
		}
		return len(run.DUTs)
	}
	sizes := func(s lab.FrameSize) int {
		if i := slices.Index(run.Sizes, s); i >= 0 {
			return i
		}
		return len(run.Sizes)
	}
	slices.SortStableFunc(out, func(a, b *LoadLatencyRow) int {
		if c := sizes(a.Size) - sizes(b.Size); c != 0 {
			return c
		}
		if a.Share != b.Share {
			return int(math.Copysign(1, a.Share-b.Share))
		}
		return order(a.DUT) - order(b.DUT)
	})
	return out
}

// Cells are the row's figures for the tables: the load, the rate, the
// percentiles and the frames lost.
func (r *LoadLatencyRow) Cells() []string {
	load := fmt.Sprintf("%s %.0f%% of %s", r.Size.Label(), 100*r.Share, r.Of)
	if r.Reps == 0 {
		why := "no figure"
		if len(r.Errors) > 0 {
			why = lab.FirstLine(r.Errors[0])
		}
		return []string{load, r.DUT, "-", "-", "-", "-", "-", "-", "-", "-", why}
	}
	rate := lab.Figure(r.Offered, "pps")
	if r.Short {
		// The generator fell behind the rate asked.
		rate += fmt.Sprintf(" (of %s asked)", lab.Figure(r.Requested, "pps"))
	}
	cells := []string{load, r.DUT, rate}
	for _, p := range percentiles {
		cells = append(cells, lab.NsText(*p.in(r)))
	}
	cells = append(cells, strconv.FormatFloat(r.Timed, 'f', 0, 64))
	lost := strconv.FormatInt(r.Lost, 10)
	if len(r.Errors) > 0 {
		lost += fmt.Sprintf(" (%d failed: %s)", len(r.Errors), lab.FirstLine(r.Errors[0]))
	}
	return append(cells, lost)
}

var loadLatencyHead = []string{"LOAD", "DUT", "RATE", "P50", "P90", "P99", "P99.9", "MAX", "TIMED", "LOST"}

func loadLatencyAbout(run *lab.Run, rows []*LoadLatencyRow) string {
	both := ""
	if run.Bidirectional {
		both = ", both directions' frames together"
	}
	return fmt.Sprintf("latency under load (CSIT's way: after each search, a stream of its frames at a share of the PDR just found; one-way latency, the generator's stamp to the sink%s; "+
		"medians over %s of each percentile and of the frames the sink TIMED (1 in 64); LOST is over all of them)", both, repsText(rows))
}

func repsText(rows []*LoadLatencyRow) string {
	n := 0
	for _, r := range rows {
		n = max(n, r.Reps+len(r.Errors))
	}
	if n == 1 {
		return "the 1 repetition"
	}
	return fmt.Sprintf("the %d repetitions", n)
}

func terminalLoadLatency(w io.Writer, run *lab.Run) {
	rows := LoadLatencies(run)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", loadLatencyAbout(run, rows))
	tw := lab.NewTable(loadLatencyHead...)
	for _, r := range rows {
		tw.Add(r.Cells()...)
	}
	tw.Write(w)
}

// markdownLoadLatency writes the table and, per frame size, charts of
// p50 and of p99 against the load.
func markdownLoadLatency(b *bytes.Buffer, dir string, run *lab.Run) error {
	rows := LoadLatencies(run)
	if len(rows) == 0 {
		return nil
	}
	about := loadLatencyAbout(run, rows)
	fmt.Fprintf(b, "\n## Latency under load\n\n%s.\n\n", strings.ToUpper(about[:1])+about[1:])
	head := make([]string, len(loadLatencyHead))
	for i, h := range loadLatencyHead {
		head[i] = strings.ToLower(h)
		if h == "DUT" {
			head[i] = h
		}
	}
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|" + strings.Repeat("---|", len(head)) + "\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %s |\n", strings.Join(r.Cells(), " | "))
	}
	charts, err := loadLatencyCharts(dir, rows)
	if err != nil {
		return err
	}
	lab.EmbedCharts(b, charts)
	return nil
}

// loadLatencyCharts draw, for each frame size, every DUT's p50 against
// the share of the PDR, and its p99 in a second chart, on log scales; the
// DUTs keep their colours from one chart to the other, and a DUT with no
// figure at a share has a gap there.
func loadLatencyCharts(dir string, rows []*LoadLatencyRow) ([]lab.Chart, error) {
	var out []lab.Chart
	var sizes []lab.FrameSize
	for _, r := range rows {
		if !slices.Contains(sizes, r.Size) {
			sizes = append(sizes, r.Size)
		}
	}
	for _, size := range sizes {
		var duts []string
		var shares []float64
		for _, r := range rows {
			if r.Size != size {
				continue
			}
			if !slices.Contains(duts, r.DUT) {
				duts = append(duts, r.DUT)
			}
			if !slices.Contains(shares, 100*r.Share) {
				shares = append(shares, 100*r.Share)
			}
		}
		slices.Sort(shares)
		frames := lab.FramesText(string(size))
		for _, p := range []struct {
			name string
			of   func(*LoadLatencyRow) float64
		}{{"p50", func(r *LoadLatencyRow) float64 { return r.P50 }}, {"p99", func(r *LoadLatencyRow) float64 { return r.P99 }}} {
			c := svg.LineChart{Title: fmt.Sprintf("Latency under load, %s: %s", frames, p.name),
				XLabel: "load, % of the PDR", YLabel: "one-way latency, " + p.name, XTicks: shares, XCategorical: true, XUnit: svg.Plain, LogY: true,
				Unit: func(v float64) string { return lab.NsText(v) }}
			for _, d := range duts {
				s := svg.Series{Name: d}
				for _, sh := range shares {
					pt := svg.Point{X: sh, Y: math.NaN()}
					for _, r := range rows {
						if r.Size == size && r.DUT == d && 100*r.Share == sh && r.Reps > 0 {
							pt.Y = p.of(r)
						}
					}
					s.Points = append(s.Points, pt)
				}
				c.Series = append(c.Series, s)
			}
			if err := lab.SaveChart(dir, fmt.Sprintf("latency-load-%s-%s.svg", lab.SafeName(string(size)), p.name), c.Title, c, &out); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// Section is the latency-load kind's section for the terminal; its
// Markdown, with charts, is SectionIn's (ChartReporter).
func (Kind) Section(run *lab.Run) (terminal, markdown string) {
	var t strings.Builder
	terminalLoadLatency(&t, run)
	return t.String(), ""
}

// SectionIn is the latency-load section of report.md, its charts written
// into dir.
func (Kind) SectionIn(dir string, run *lab.Run) (string, error) {
	var b bytes.Buffer
	err := markdownLoadLatency(&b, dir, run)
	return b.String(), err
}
