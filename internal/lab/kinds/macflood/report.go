package macflood

// The mac-flood test has tables and charts of its own: its figures are a
// stream's behaviour over time, not medians to compare with the straight
// path.

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/report/svg"
)

// FloodRow is one DUT's mac-flood test in one repetition.
type FloodRow struct {
	DUT   string
	Rep   int
	Rec   *Record
	Sum   FloodSummary
	Error string
	CPUs  int // the machine's
}

// Floods gathers a run's mac-flood records, DUTs in the run's order.
func Floods(run *lab.Run) []*FloodRow {
	return lab.ResultRows(run, func(r lab.Result) *FloodRow {
		var rec Record
		if r.Test != lab.TestMACFlood || r.RecordOf(&rec) != nil {
			return nil
		}
		return &FloodRow{DUT: r.DUT, Rep: r.Rep, Rec: &rec, Sum: SummarizeFlood(&rec), Error: r.Error, CPUs: run.Machine.CPUs}
	}, func(r *FloodRow) string { return r.DUT })
}

// cells are a row's figures as the terminal and the Markdown table show them.
func (r *FloodRow) cells() []string {
	s, rec := r.Sum, r.Rec
	name := r.DUT
	if r.Rep > 1 {
		name = fmt.Sprintf("%s (rep %d)", r.DUT, r.Rep)
	}
	stream := fmt.Sprintf("%s (%.0f%% of %s)", lab.Figure(rec.RatePPS, "pps"), 100*rec.Load, lab.Figure(rec.Throughput, "pps"))
	if rec.Load == 0 {
		stream = lab.Figure(rec.RatePPS, "pps")
	}
	lost := fmt.Sprintf("%d (without: %d)", s.Lost, s.StreamLostWithoutFlood)
	rate := fmt.Sprintf("%.3f (%s / %s)", s.Ratio, lab.Figure(s.FloodRate, "pps"), lab.Figure(s.BaseRate, "pps"))
	table := "unmeasurable"
	if s.MaxLearned >= 0 {
		table = fmt.Sprintf("%d of %d", s.MaxLearned, rec.MaxEntries)
		if s.Above {
			table += " ABOVE"
		}
	}
	statics := fmt.Sprintf("%d of %d", s.StaticsKept, s.Statics)
	if s.Statics == 0 {
		statics = "-"
	}
	side := "-"
	if s.SideBase != nil && s.SideFlood != nil {
		side = fmt.Sprintf("%s / %s", sideText(s.SideBase), sideText(s.SideFlood))
	}
	mem := "no daemon"
	if rec.Daemon != "" && s.RSSMax > 0 {
		mem = fmt.Sprintf("%s / %s / %s", lab.KiBText(s.RSSBefore), lab.KiBText(s.RSSMax), lab.KiBText(s.RSSAfter))
	}
	flood := fmt.Sprintf("%s / %s", lab.Figure(rec.Flood.FloodOffered, "pps"), svg.SI(float64(rec.Flood.FloodDelivered)))
	goal := lab.MetText(s.GoalMet)
	if r.Error != "" {
		goal = "failed"
	}
	newcomer, ngoal := newcomerText(s.Newcomer), "-"
	if s.Newcomer != nil {
		ngoal = lab.MetText(s.NewcomerMet)
	}
	return []string{name, stream, lost, rate, fmt.Sprint(rec.Flood.Flooded), table, statics, side, mem, flood, goal, newcomer, ngoal}
}

// newcomerText is the newcomer's delivery, entry and loss: the time to
// each, or what it never did.
func newcomerText(n *Newcomer) string {
	if n == nil {
		return "-"
	}
	delivered, learned := "never delivered", "not learned"
	if n.Delivered {
		delivered = fmt.Sprintf("%.1f ms", n.DeliveredMs)
		if n.DeliveredMs < 1 {
			delivered = fmt.Sprintf("%.0f µs", 1000*n.DeliveredMs)
		}
	}
	switch {
	case n.Learned:
		learned = fmt.Sprintf("%.0f ms", n.LearnedMs)
	case n.Reads == 0:
		learned = "unread"
	}
	return fmt.Sprintf("%s / %s / %d of %d", delivered, learned, n.Lost, n.Sent)
}

func sideText(s *SideLearn) string {
	if s.Learned < s.Addresses {
		return fmt.Sprintf("%d of %d", s.Learned, s.Addresses)
	}
	return fmt.Sprintf("all in %.0f ms", s.Millis)
}

var floodHead = []string{"DUT", "STREAM", "LOST", "RATE WITH/WITHOUT FLOOD", "FLOODED TO H3", "MOST LEARNED", "STATICS KEPT", "BRIDGE B LEARNED (WITHOUT / WITH)", "DAEMON RSS (BEFORE / MOST / AFTER)", "FLOOD (RATE / AT H4)", "GOAL", "NEWCOMER (DELIVERED / LEARNED / LOST)", "NEWCOMER GOAL"}

func terminalFloods(w io.Writer, rows []*FloodRow) {
	if len(rows) == 0 {
		return
	}
	rec := rows[0].Rec
	fmt.Fprintf(w, "\nmac-flood: the stream h1 -> h2 alone and while h3 floods from %d random sources for %.0fs (goal: 0 lost and %.0f%% of its rate); "+
		"a newcomer on h4's port streams to h1 during the flood (goal: delivered within %v and learned within %v of its first frame, the stream at 0 lost):\n",
		rec.Sources, rec.FloodSeconds, 100*FloodMinRatio, NewcomerDeliverGoal, NewcomerLearnGoal)
	var cells [][]string
	for _, r := range rows {
		cells = append(cells, r.cells())
	}
	lab.TerminalRows(w, floodHead, cells, floodWarnings(rows))
}

// floodWarnings are the failures and what fell short in trestle (a
// peer's shortfall is its finding).
func floodWarnings(rows []*FloodRow) []string {
	var out []string
	for _, r := range rows {
		if r.Error != "" {
			out = append(out, fmt.Sprintf("failed: %s: %s", r.DUT, lab.FirstLine(r.Error)))
		}
		for _, w := range []FloodWindow{r.Rec.Base, r.Rec.Flood} {
			if n := lab.OthersNote(w.OtherCPU, w.Seconds, r.CPUs); n != "" {
				out = append(out, fmt.Sprintf("note: %s, the stream %s: %s", r.DUT, map[bool]string{false: "without the flood", true: "with the flood"}[w.Flood], n))
			}
		}
		if !lab.CapsOf(r.DUT).Subject {
			continue
		}
		s := r.Sum
		var bad []string
		if !s.GoalMet {
			bad = append(bad, fmt.Sprintf("the stream lost %d frames and kept %.1f%% of its rate", s.Lost, 100*s.Ratio))
		}
		if s.Above {
			bad = append(bad, fmt.Sprintf("the table held %d learned addresses, above its %d", s.MaxLearned, r.Rec.MaxEntries))
		}
		if s.StaticsKept < s.Statics {
			bad = append(bad, fmt.Sprintf("%d of %d static entries kept", s.StaticsKept, s.Statics))
		}
		if s.SideFlood != nil && s.SideFlood.Learned < s.SideFlood.Addresses {
			bad = append(bad, "the second bridge did not learn all its addresses under the flood")
		}
		if s.Newcomer != nil && !s.NewcomerMet {
			bad = append(bad, "the newcomer missed its goal: "+newcomerText(s.Newcomer)+" (delivered / learned / lost)")
		}
		if len(bad) > 0 {
			out = append(out, fmt.Sprintf("warning: %s: %s", r.DUT, strings.Join(bad, "; ")))
		}
	}
	return out
}

func markdownFloods(b *bytes.Buffer, dir string, run *lab.Run, rows []*FloodRow) error {
	if len(rows) == 0 {
		return nil
	}
	rec := rows[0].Rec
	fmt.Fprintf(b, "\n## MAC flood\n\n")
	fmt.Fprintf(b, "The stream from h1 to h2 ran twice through each DUT for %.0f s: alone, then while h3 sent 64-byte frames to h4 from %d random source addresses at its generator's full rate for %.0f s "+
		"(the notes above say how). The stream's rate is a share of the DUT's own zero-loss throughput, measured first: at that share its path has CPU to spare on this machine, "+
		"so that what the flood costs it is the DUT's doing, not two generators sharing the CPUs. "+
		"Goal: the stream loses 0 frames with the flood and keeps at least %.0f%% of its rate (distinct frames h2 received a second, with the flood against without). "+
		"During the flood a newcomer, an address that never sent, starts a stream of %d frames a second from h4's port to h1, %v into the flood (at most a third of it), until the flood ends: "+
		"the time from its first frame sent to its first frame at h1 (both on the BPF clock), from its first frame sent to the end of the table read that found its entry on h4's port "+
		"(the table read every %v), and its frames lost. Its goal: delivered within %v, learned within %v, with the stream at 0 lost.\n\n",
		rows[0].Rec.Base.Seconds, rec.Sources, rec.FloodSeconds, 100*FloodMinRatio, newcomerPPS, newcomerAfter, newcomerPoll, NewcomerDeliverGoal, NewcomerLearnGoal)
	var cells [][]string
	for _, r := range rows {
		cells = append(cells, r.cells())
	}
	lab.MarkdownRows(b, []string{"DUT", "stream", "lost with the flood", "rate with / without", "flooded to h3", "most learned (of the limit)", "static entries kept",
		"bridge B learned 1000 addresses, without / with", "daemon RSS before / most / after", "flood rate / frames at h4", "goal", "newcomer: delivered / learned / lost of sent", "newcomer goal"}, cells, floodWarnings(rows))
	b.WriteString("\nEach DUT's table and what could not be measured:\n\n")
	for _, r := range rows {
		rec := r.Rec
		fmt.Fprintf(b, "- %s: table limit: %s", r.DUT, lab.OrNone(rec.TableLimit))
		if rec.SideLimit != "" && rec.SideLimit != rec.TableLimit {
			fmt.Fprintf(b, "; bridge B: %s", rec.SideLimit)
		}
		if rec.Daemon != "" {
			fmt.Fprintf(b, "; memory: %s", rec.Daemon)
		}
		if n := lastSample(rec.Flood.Samples); n != nil && n.Evicted > 0 {
			fmt.Fprintf(b, "; entries evicted by the end of the flood: %d", n.Evicted)
		}
		fmt.Fprintf(b, "; flood frames that reached h1 or h2: %d", rec.Flood.FloodLeaked)
		for _, k := range lab.SortedKeys(rec.Unmeasured) {
			fmt.Fprintf(b, "; %s not measured: %s", k, rec.Unmeasured[k])
		}
		for _, c := range rec.Statics {
			if !c.Before || !c.After {
				fmt.Fprintf(b, "; static %s on %s: before %v, after %v %s", c.MAC, c.Port, c.Before, c.After, c.Found)
			}
		}
		for _, w := range []FloodWindow{rec.Base, rec.Flood} {
			if w.Side != nil {
				fmt.Fprintf(b, "; bridge B %s: %d of %d in %.0f ms, %d table reads, the last %.0f ms",
					map[bool]string{false: "without the flood", true: "with it"}[w.Flood], w.Side.Learned, w.Side.Addresses, w.Side.Millis, w.Side.Reads, w.Side.ReadMs)
			}
			if n := w.Newcomer; n != nil {
				fmt.Fprintf(b, "; newcomer %s on %s from %.1f s into the flood: %d table reads", n.MAC, n.Port, n.StartS, n.Reads)
				if n.Reads > 0 {
					fmt.Fprintf(b, ", the last %.0f ms", n.ReadMs)
				}
				if n.Found != "" {
					fmt.Fprintf(b, ", its address %s", n.Found)
				}
				if n.Note != "" {
					fmt.Fprintf(b, ", %s", n.Note)
				}
			}
			if w.Note != "" {
				fmt.Fprintf(b, "; %s", w.Note)
			}
			if len(w.CPU) > 0 {
				fmt.Fprintf(b, "; CPU busy %s: %s, other processes' %.1f CPU-s", map[bool]string{false: "without the flood", true: "with it"}[w.Flood], lab.CPUText(w.CPU), w.OtherCPU)
			}
		}
		if r.Error != "" {
			fmt.Fprintf(b, "; failed: %s", lab.FirstLine(r.Error))
		}
		b.WriteString("\n")
	}
	b.WriteString("\nBridge B's times run from the first of its 1000 learning frames to the end of the table read that found them all, so they hold that read, " +
		"which is a dump of the DUT's whole table (trestle's shared map holds the flooded bridge's entries too), and the lab's own share of CPUs that both generators keep busy. " +
		"A daemon's memory holds what it takes to answer the lab's reading of the table once a second (trestle's `show` counts the entries by reading the whole table: " +
		"65,536 of them under the flood). Where the forwarding is done matters on 2 CPUs: the kernel bridge's and trestle's run in the softirq of the CPU that sent the frame, " +
		"so the stream's path is on the generator's CPU and the flood's on the other; Open vSwitch's userspace datapath forwards both in its PMD thread, " +
		"on the DUT's CPU, which the flood's generator shares: there the stream competes with the flood for one thread.\n")
	charts, err := floodCharts(dir, run, rows)
	if err != nil {
		return err
	}
	lab.EmbedCharts(b, charts)
	return nil
}

func lastSample(s []FloodSample) *FloodSample {
	if len(s) == 0 {
		return nil
	}
	return &s[len(s)-1]
}

// floodCharts draw, over the stream with the flood: the flooded bridge's
// learned addresses against its limit, the stream's rate as a share of its
// rate without the flood, and the daemons' memory.
func floodCharts(dir string, run *lab.Run, rows []*FloodRow) ([]lab.Chart, error) {
	var out []lab.Chart
	table := svg.LineChart{Title: "MAC flood: learned addresses of the flooded bridge", XLabel: "seconds into the stream", YLabel: "learned addresses", XUnit: svg.Plain}
	rate := svg.LineChart{Title: "MAC flood: the stream's rate at h2, as a share of its rate without the flood", XLabel: "seconds into the stream", YLabel: "rate / rate without the flood", XUnit: svg.Plain}
	mem := svg.LineChart{Title: "MAC flood: the daemon's resident memory", XLabel: "seconds into the stream", YLabel: "MiB", XUnit: svg.Plain}
	limits := map[int]bool{}
	for _, r := range rows {
		name := r.DUT
		if r.Rep > 1 {
			name = fmt.Sprintf("%s rep %d", r.DUT, r.Rep)
		}
		var tp, rp, mp []svg.Point
		for _, p := range r.Rec.Flood.Samples {
			if p.Learned >= 0 {
				tp = append(tp, svg.Point{X: p.T, Y: float64(p.Learned)})
			}
			// The sampler reads on through the drain (and while bridge B
			// is read): the rate is the stream's only while it runs.
			if r.Sum.BaseRate > 0 && p.T <= r.Rec.Flood.Seconds+0.25 {
				rp = append(rp, svg.Point{X: p.T, Y: p.StreamPPS / r.Sum.BaseRate})
			}
			if p.RSSKiB > 0 {
				mp = append(mp, svg.Point{X: p.T, Y: float64(p.RSSKiB) / 1024})
			}
		}
		if len(tp) > 0 {
			table.Series = append(table.Series, svg.Series{Name: name, Points: tp})
			limits[r.Rec.MaxEntries] = true
		}
		if len(rp) > 0 {
			rate.Series = append(rate.Series, svg.Series{Name: name, Points: rp})
		}
		if len(mp) > 0 {
			mem.Series = append(mem.Series, svg.Series{Name: name, Points: mp})
		}
	}
	span := floodSpan(rows)
	for n := range limits {
		if n > 0 {
			table.Series = append(table.Series, svg.Series{Name: fmt.Sprintf("limit %d", n), Dashed: true, Points: []svg.Point{{X: 0, Y: float64(n)}, {X: span, Y: float64(n)}}})
		}
	}
	if len(rate.Series) > 0 {
		rate.Series = append(rate.Series, svg.Series{Name: fmt.Sprintf("goal %.0f%%", 100*FloodMinRatio), Dashed: true,
			Points: []svg.Point{{X: 0, Y: FloodMinRatio}, {X: span, Y: FloodMinRatio}}})
	}
	for _, c := range []struct {
		file string
		c    svg.LineChart
	}{{"macflood-table.svg", table}, {"macflood-rate.svg", rate}, {"macflood-memory.svg", mem}} {
		if len(c.c.Series) == 0 {
			continue
		}
		if err := lab.SaveChart(dir, c.file, c.c.Title, c.c, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// floodSpan is the longest stream's last sample, in seconds.
func floodSpan(rows []*FloodRow) float64 {
	span := 1.0
	for _, r := range rows {
		if p := lastSample(r.Rec.Flood.Samples); p != nil {
			span = math.Max(span, p.T)
		}
	}
	return span
}

// Section is the mac-flood kind's section for the terminal; its Markdown,
// with charts, is SectionIn's (ChartReporter).
func (Kind) Section(run *lab.Run) (terminal, markdown string) {
	var t strings.Builder
	terminalFloods(&t, Floods(run))
	return t.String(), ""
}

// SectionIn is the mac-flood section of report.md, its charts written
// into dir.
func (Kind) SectionIn(dir string, run *lab.Run) (string, error) {
	var b bytes.Buffer
	err := markdownFloods(&b, dir, run, Floods(run))
	return b.String(), err
}
