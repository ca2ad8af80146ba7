package restart

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/report/svg"
)

// RestartRow is one DUT's events of one kind, over every repetition. Its
// figures are per event, not per repetition: medians of repetitions and
// ratios to the straight path say nothing of a restart, and the goal (none
// lost, none flooded) is about every single event.
type RestartRow struct {
	DUT, Kind string
	What      string  // what an event did to the DUT
	Rate      float64 // the stream's rate (the first repetition's)
	Load      float64 // of the measured throughput; 0: a fixed rate
	Watched   bool    // a third host counted the floods
	Events    []lab.RestartEvent
	Sum       EventSummary
	Errors    []string
}

// Restarts gathers a run's restart results: one row per DUT and event
// kind, DUTs in the run's order, kinds in the order they ran.
func Restarts(run *lab.Run) []*RestartRow {
	var rows []*RestartRow
	index := map[string]*RestartRow{}
	for _, r := range run.Results {
		if r.Test != lab.TestRestart || len(r.Record) == 0 {
			continue
		}
		var rec Record
		if err := r.RecordOf(&rec); err != nil {
			continue
		}
		k := r.DUT + "|" + r.Param
		row := index[k]
		if row == nil {
			row = &RestartRow{DUT: r.DUT, Kind: r.Param, What: rec.What, Rate: rec.RatePPS, Load: rec.Load, Watched: rec.Watched}
			index[k] = row
			rows = append(rows, row)
		}
		row.Events = append(row.Events, rec.Events...)
		if r.Error != "" {
			row.Errors = append(row.Errors, r.Error)
		}
	}
	order := func(name string) int {
		if i := slices.Index(run.DUTs, name); i >= 0 {
			return i
		}
		return len(run.DUTs)
	}
	slices.SortStableFunc(rows, func(a, b *RestartRow) int { return order(a.DUT) - order(b.DUT) })
	for _, row := range rows {
		row.Sum = Summarize(row.Events)
	}
	return rows
}

// cells are a row's figures as the terminal and the Markdown table show them.
func (r *RestartRow) cells() []string {
	s := r.Sum
	flood := []string{"-", "-", "-"}
	if r.Watched {
		flood = []string{lab.CountText(float64(s.FloodedMax)), lab.CountText(s.FloodedMedian), lab.CountText(float64(s.FloodedTotal))}
	}
	back := "- (no daemon)"
	if s.BackMedian > 0 {
		back = s.BackMedian.Round(time.Millisecond).String()
	} else if r.Kind != lab.EventNone {
		back = "-"
	}
	stream := fmt.Sprintf("%s, %s frames an event", lab.Figure(r.Rate, "pps"), svg.SI(s.SentMedian))
	if r.Load > 0 {
		stream = fmt.Sprintf("%s (%.0f%% of its throughput), %s frames an event", lab.Figure(r.Rate, "pps"), 100*r.Load, svg.SI(s.SentMedian))
	}
	return append([]string{r.DUT, r.Kind, fmt.Sprint(s.Events),
		lab.CountText(float64(s.LostMax)), lab.CountText(s.LostMedian), lab.CountText(float64(s.LostTotal))},
		append(flood, back, stream)...)
}

var restartHead = []string{"DUT", "EVENT", "EVENTS", "LOST: MAX", "MEDIAN", "TOTAL", "FLOODED: MAX", "MEDIAN", "TOTAL", "BACK AFTER", "STREAM"}

func terminalRestarts(w io.Writer, rows []*RestartRow) {
	fmt.Fprintf(w, "\nframes lost and flooded to h3 per event (each event has its own stream; back after: the median, signal to the daemon answering):\n")
	tw := lab.NewTable(restartHead...)
	for _, r := range rows {
		tw.Add(r.cells()...)
	}
	tw.Write(w)
	for _, r := range rows {
		if r.Kind == lab.EventUpgrade || r.Kind == lab.EventNone {
			fmt.Fprintf(w, "  %s %s: %s\n", r.DUT, r.Kind, r.What)
		}
	}
	for _, line := range restartWarnings(rows) {
		fmt.Fprintf(w, "%s\n", line)
	}
}

// restartWarnings are the events that fell short of the goal in a DUT
// that sets it (trestle; a DUT with no daemon is the reference), and the
// kinds that failed.
func restartWarnings(rows []*RestartRow) []string {
	var out []string
	for _, r := range rows {
		for _, e := range r.Errors {
			out = append(out, fmt.Sprintf("failed: %s %s: %s", r.DUT, r.Kind, lab.FirstLine(e)))
		}
		if !lab.CapsOf(r.DUT).Subject && r.Kind != lab.EventNone {
			continue // a peer's losses are the finding, not a warning
		}
		var bad []string
		for _, e := range r.Events {
			if e.Lost > 0 || e.Flooded > 0 {
				bad = append(bad, fmt.Sprintf("#%d lost %d flooded %d", e.Index, e.Lost, e.Flooded))
			}
		}
		if len(bad) > 0 {
			out = append(out, fmt.Sprintf("warning: %s %s: frames lost or flooded in %d of %d events (%s): the goal is none; the JSON keeps the daemons' logs of each",
				r.DUT, r.Kind, len(bad), len(r.Events), strings.Join(bad, ", ")))
		}
	}
	return out
}

func markdownRestarts(b *bytes.Buffer, rows []*RestartRow) {
	b.WriteString("\n## Restarts\n\n")
	b.WriteString("Frames lost and frames flooded to h3 per event, each event with a stream of its own from h1 to h2 " +
		"(the notes above say how): the most in one event, the median and the total over the events. " +
		"The goal is 0 and 0 in every event. Back after is the median time from the signal to the new daemon answering with every port up.\n\n")
	b.WriteString("| DUT | event | events | lost per event: max | median | total | flooded per event: max | median | total | back after | stream |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %s |\n", strings.Join(r.cells(), " | "))
	}
	if ws := restartWarnings(rows); len(ws) > 0 {
		b.WriteString("\n")
		for _, w := range ws {
			fmt.Fprintf(b, "- **%s**\n", w)
		}
	}
	b.WriteString("\nWhat an event did:\n\n")
	for _, r := range rows {
		fmt.Fprintf(b, "- %s, %s: %s\n", r.DUT, r.Kind, r.What)
	}
	b.WriteString("\nEvery event, in order (frames lost / flooded to h3, and when the daemon was back):\n\n")
	for _, r := range rows {
		var parts []string
		for _, e := range r.Events {
			p := fmt.Sprintf("%d/%d", e.Lost, e.Flooded)
			if !r.Watched {
				p = fmt.Sprint(e.Lost)
			}
			if e.BackMs > 0 {
				p += fmt.Sprintf(" %v", time.Duration(e.BackMs*float64(time.Millisecond)).Round(time.Millisecond))
			}
			if e.Note != "" {
				p += " (" + e.Note + ")"
			}
			parts = append(parts, p)
		}
		fmt.Fprintf(b, "- %s %s: %s\n", r.DUT, r.Kind, strings.Join(parts, ", "))
	}
}

// Section is the restart kind's report section: the events' losses and
// floods by DUT (Reporter).
func (Kind) Section(run *lab.Run) (terminal, markdown string) {
	rows := Restarts(run)
	if len(rows) == 0 {
		return "", ""
	}
	var t strings.Builder
	terminalRestarts(&t, rows)
	var m bytes.Buffer
	markdownRestarts(&m, rows)
	return t.String(), m.String()
}

// Twins: the frames flooded in each event are results of their own, in
// the restart section too.
func (Kind) Twins() []string { return []string{TestRestartFlooded} }
