// Package report turns a lab run (lab.Run) into what people read: a table
// for the terminal, and a Markdown page with SVG charts. Every figure is
// the median over the run's repetitions and, where the run measured the
// straight path or the floor, its ratio to that one's median measured in
// the same run. Every ratio the report gives is one of medians, the
// ministat lines' too; DUTs are compared with ministat's Student's t test
// (internal/lab/stat) at 95% confidence when each has at least three
// repetitions, whose difference and interval are of the means, as
// ministat prints them.
package report

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/report/svg"
	"github.com/trestle/trestle/internal/lab/stat"
)

// Row is the figures of one DUT in one test, over the repetitions.
type Row struct {
	Test   string
	Param  string
	Chain  int
	DUT    string
	Unit   string
	Values []float64 // one per repetition, in repetition order
	Median float64
	Ratio  float64 // to direct's median in the same test and param; 0 if none
	// VsFloor is the ratio to the floor's median in the same test, param
	// and chain length; 0 if none.
	VsFloor float64
	Notes   []string
	Errors  []string
	// CPU is each CPU's busy share during the measurement, the median over
	// the repetitions (the last trial of a search, the whole iperf3 run).
	CPU  []float64
	cpus [][]float64
	// PDR is each repetition's PDR, from the search that gave Values (a
	// throughput search that looked for one: pdrSearched; a repetition
	// whose search found none has no figure here); PDRMedian, PDRRatio
	// and PDRVsFloor are as Median, Ratio and VsFloor, of these.
	PDR                             []float64
	PDRMedian, PDRRatio, PDRVsFloor float64
	pdrSearched                     bool
	// Dirs are each direction's rate at the NDR in a run both ways, one
	// pair (h1 -> h2, h2 -> h1) per repetition.
	Dirs [][]float64
}

// pdrText is the row's PDR median, "-" for a row with none looked for,
// "none" if none was found.
func (r *Row) pdrText() string {
	switch {
	case !r.pdrSearched:
		return "-"
	case len(r.PDR) == 0:
		return "none"
	}
	return lab.Figure(r.PDRMedian, "pps")
}

// dirsText is the medians of each direction's rate at the NDR.
func (r *Row) dirsText() string {
	if len(r.Dirs) == 0 {
		return "-"
	}
	var a, b []float64
	for _, d := range r.Dirs {
		a, b = append(a, d[0]), append(b, d[1])
	}
	return fmt.Sprintf("h1→h2 %s, h2→h1 %s", lab.Figure(lab.Median(a), "pps"), lab.Figure(lab.Median(b), "pps"))
}

// figureCells are the row's cells from its median (med) on, in the
// tables' columns: the ratios to direct (and the floor), the PDR with its
// ratios, each direction's rate, as the run has them.
func (r *Row) figureCells(med string, floor, pdr, dirs bool) []string {
	cells := []string{med, r.ratioText()}
	if floor {
		cells = append(cells, r.floorText())
	}
	if pdr {
		cells = append(cells, r.pdrText(), ratioText(r.PDRRatio))
		if floor {
			cells = append(cells, ratioText(r.PDRVsFloor))
		}
	}
	if dirs {
		cells = append(cells, r.dirsText())
	}
	return cells
}

// hasPDR says whether any row of the groups has a PDR looked for: the
// tables then have its columns.
func hasPDR(groups []*Group) bool {
	for _, g := range groups {
		for _, r := range g.Rows {
			if r.pdrSearched {
				return true
			}
		}
	}
	return false
}

// hasDirs says whether any row has each direction's rate.
func hasDirs(groups []*Group) bool {
	for _, g := range groups {
		for _, r := range g.Rows {
			if len(r.Dirs) > 0 {
				return true
			}
		}
	}
	return false
}

// ratioText is the row's ratio to direct, or "-" without one.
func (r *Row) ratioText() string { return ratioText(r.Ratio) }

// floorText is the row's ratio to the floor, or "-" without one.
func (r *Row) floorText() string { return ratioText(r.VsFloor) }

func ratioText(v float64) string {
	if v > 0 {
		return fmt.Sprintf("%.2f", v)
	}
	return "-"
}

// floorDUT is the floor's name in a run: the bare XDP redirect that no
// XDP bridge can beat on the same topology (see lab's floorDUT).
const floorDUT = "floor"

// floorsOf names the floors a DUT is held against, the first of them that
// the run measured (lab's Spec.Floor): floor@vlan for a DUT with VLANs,
// floor@mirror for a mirrored one, floor:tc and its variants for trestle
// at tc, then (for a run without the tc floors, as every run before them)
// the XDP floor of the same set-up; past these, the floor.
func floorsOf(dut string) []string {
	v, err := lab.ParseSpec(dut)
	if err != nil {
		return nil
	}
	f := v.Floor()
	if xdp := strings.Replace(f, floorDUT+":tc", floorDUT, 1); xdp != f {
		return []string{f, xdp}
	}
	return []string{f}
}

// hasFloor says whether the run measured the floor in any group: the
// tables then have a column of ratios to it.
func hasFloor(groups []*Group) bool {
	for _, g := range groups {
		for _, r := range g.Rows {
			if strings.HasPrefix(r.DUT, floorDUT) && len(r.Values) > 0 {
				return true
			}
		}
	}
	return false
}

// hasFloorTC says whether the run measured the tc floor in any group:
// trestle at tc is then held against it (floorsOf).
func hasFloorTC(groups []*Group) bool {
	for _, g := range groups {
		for _, r := range g.Rows {
			if strings.HasPrefix(r.DUT, floorDUT+":tc") && len(r.Values) > 0 {
				return true
			}
		}
	}
	return false
}

// repetitionsText is every repetition's figure, and the failed ones.
func (r *Row) repetitionsText() string {
	all := valuesText(r.Values, r.Unit)
	if len(r.Errors) > 0 {
		all += fmt.Sprintf(" (%d failed: %s)", len(r.Errors), lab.FirstLine(r.Errors[0]))
	}
	return all
}

// Group is one test and param (and chain length): the rows of every DUT.
type Group struct {
	Test, Param string
	Chain       int
	Rows        []*Row
}

// Key names a group for people: "throughput 64B", "tcp streams=4, chain of 3".
func (g *Group) Key() string {
	k := g.Test + " " + g.Param
	if g.Test == lab.TestThroughput || g.Test == lab.TestFlood || g.Test == lab.TestB2B || g.Test == lab.TestSpan {
		k += "B"
		if g.Param == "imix" {
			k = g.Test + " IMIX"
		}
	}
	if g.Chain > 1 {
		k += fmt.Sprintf(", chain of %d", g.Chain)
	}
	return k
}

// Groups gathers a run's results by test, param and chain, in the order the
// run produced them, each with its DUTs in the run's DUT order.
func Groups(run *lab.Run) []*Group {
	var groups []*Group
	index := map[string]*Group{}
	rows := map[string]*Row{}
	for _, r := range run.Results {
		if r.Test == "unit" || ownSection(r.Test) {
			continue // restart, mac-flood, soak, latency-load, cores and idle results have sections of their own
		}
		chain := r.Chain
		if r.DUT == "direct" {
			chain = -1 // the baseline of every chain length
		}
		gk := fmt.Sprintf("%s|%s|%d", r.Test, r.Param, max(chain, 0))
		g := index[gk]
		if g == nil {
			g = &Group{Test: r.Test, Param: r.Param, Chain: max(chain, 0)}
			index[gk] = g
			groups = append(groups, g)
		}
		rk := gk + "|" + r.DUT
		row := rows[rk]
		if row == nil {
			row = &Row{Test: r.Test, Param: r.Param, Chain: r.Chain, DUT: r.DUT, Unit: r.Unit}
			rows[rk] = row
			g.Rows = append(g.Rows, row)
		}
		if r.Search != nil && r.Search.Config.HasPDR() {
			row.pdrSearched = true
			if r.Search.PDR > 0 {
				row.PDR = append(row.PDR, r.Search.PDR)
			}
		}
		if r.Error != "" {
			row.Errors = append(row.Errors, r.Error)
			continue
		}
		row.Values = append(row.Values, r.Value)
		if len(r.Directions) == 2 {
			row.Dirs = append(row.Dirs, r.Directions)
		}
		if len(r.CPU) > 0 {
			row.cpus = append(row.cpus, r.CPU)
		}
		if r.Note != "" && !slices.Contains(row.Notes, r.Note) {
			row.Notes = append(row.Notes, r.Note)
		}
	}
	// direct was measured once per repetition, on the straight path: it is
	// the baseline of every chain length.
	directs := map[string]*Row{}
	for _, g := range groups {
		for _, row := range g.Rows {
			if row.DUT == "direct" {
				directs[g.Test+"|"+g.Param] = row
			}
		}
	}
	for _, g := range groups {
		if d := directs[g.Test+"|"+g.Param]; d != nil && !slices.Contains(g.Rows, d) {
			g.Rows = append([]*Row{d}, g.Rows...)
		}
		order := func(name string) int {
			if i := slices.Index(run.DUTs, name); i >= 0 {
				return i
			}
			return len(run.DUTs)
		}
		sort.SliceStable(g.Rows, func(i, j int) bool { return order(g.Rows[i].DUT) < order(g.Rows[j].DUT) })
		var base, floor, pdrBase, pdrFloor float64
		for _, row := range g.Rows {
			row.Median = lab.Median(row.Values)
			row.PDRMedian = lab.Median(row.PDR)
			if len(row.cpus) > 0 && row.CPU == nil {
				for c := range row.cpus[0] {
					var v []float64
					for _, cs := range row.cpus {
						if c < len(cs) {
							v = append(v, cs[c])
						}
					}
					row.CPU = append(row.CPU, lab.Median(v))
				}
			}
			switch row.DUT {
			case "direct":
				base, pdrBase = row.Median, row.PDRMedian
			case floorDUT:
				floor, pdrFloor = row.Median, row.PDRMedian
			}
		}
		// A DUT with VLANs or a mirror, or trestle at tc, is held against
		// the floor of the same set-up and mode (floor@vlan, floor@mirror,
		// floor:tc, ...) where the run measured it, else the floor.
		floors := map[string]*Row{}
		for _, row := range g.Rows {
			if strings.HasPrefix(row.DUT, floorDUT) {
				floors[row.DUT] = row
			}
		}
		for _, row := range g.Rows {
			floor, pdrFloor := floor, pdrFloor
			for _, k := range floorsOf(row.DUT) {
				if f := floors[k]; f != nil {
					floor, pdrFloor = f.Median, f.PDRMedian
					break
				}
			}
			if base > 0 && len(row.Values) > 0 {
				row.Ratio = row.Median / base
			}
			if floor > 0 && len(row.Values) > 0 {
				row.VsFloor = row.Median / floor
			}
			if pdrBase > 0 && len(row.PDR) > 0 {
				row.PDRRatio = row.PDRMedian / pdrBase
			}
			if pdrFloor > 0 && len(row.PDR) > 0 {
				row.PDRVsFloor = row.PDRMedian / pdrFloor
			}
		}
	}
	// Drop groups that hold only the baseline copied into other chains.
	var out []*Group
	for _, g := range groups {
		if g.Chain == 0 && len(g.Rows) == 1 && g.Rows[0].DUT == "direct" && hasChains(groups, g) {
			continue
		}
		out = append(out, g)
	}
	return out
}

func hasChains(groups []*Group, g *Group) bool {
	for _, o := range groups {
		if o != g && o.Test == g.Test && o.Param == g.Param {
			return true
		}
	}
	return false
}

// Comparison is ministat's verdict on one DUT against another in a group.
type Comparison struct {
	Group       *Group
	Base, Other *Row
	// PDR: the comparison is of the rows' PDRs, not their Values.
	PDR    bool
	Result stat.Comparison
}

// samePDRs says whether every row of g has its NDRs for PDRs, repetition
// by repetition (no search found a rate with loss within the PDR's goal
// above its NDR): ministat on the PDRs would repeat the NDRs' verdicts.
func samePDRs(g *Group) bool {
	for _, r := range g.Rows {
		if !slices.Equal(r.PDR, r.Values) {
			return false
		}
	}
	return true
}

// figures is the row's values a comparison is of: its Values, or its PDRs.
func (r *Row) figures(pdr bool) []float64 {
	if pdr {
		return r.PDR
	}
	return r.Values
}

// median is the median of r.figures(pdr).
func (r *Row) median(pdr bool) float64 {
	if pdr {
		return r.PDRMedian
	}
	return r.Median
}

// splitDUT is a DUT spec's DUT and its variant's knobs ("" for none).
func splitDUT(dut string) (base, knobs string) {
	base, knobs, _ = strings.Cut(dut, "@")
	return base, knobs
}

// Compare compares, in each group, every trestle DUT against every other
// DUT with the same variant knobs (trestle@vlan against ovs@vlan, trestle
// against ovs), and every variant ("linux-bridge@gso=off") against its
// DUT, where both have at least stat.MinPoints values.
func Compare(groups []*Group) []Comparison {
	var out []Comparison
	for _, g := range groups {
		for _, pdr := range []bool{false, true} {
			if pdr && samePDRs(g) {
				continue // the NDRs' verdicts say it all
			}
			for _, o := range g.Rows {
				if len(o.figures(pdr)) < stat.MinPoints {
					continue
				}
				_, knobs := splitDUT(o.DUT)
				base, _ := variantBase(o.DUT, g.Rows)
				for _, b := range g.Rows {
					if b == o || len(b.figures(pdr)) < stat.MinPoints {
						continue
					}
					_, bKnobs := splitDUT(b.DUT)
					variantOf := knobs != "" && b.DUT == base
					trestle := lab.CapsOf(o.DUT).Subject && knobs == bKnobs &&
						!(lab.CapsOf(b.DUT).Subject && b.DUT > o.DUT)
					if !variantOf && !trestle {
						continue
					}
					bs, err1 := stat.Summarize(stat.Set{Name: b.DUT, Values: b.figures(pdr)})
					os, err2 := stat.Summarize(stat.Set{Name: o.DUT, Values: o.figures(pdr)})
					if err1 != nil || err2 != nil {
						continue
					}
					c, err := stat.Compare(bs, os, 95)
					if err != nil {
						continue
					}
					out = append(out, Comparison{Group: g, Base: b, Other: o, PDR: pdr, Result: c})
				}
			}
		}
	}
	return out
}

func valuesText(vals []float64, unit string) string {
	var parts []string
	for _, v := range vals {
		parts = append(parts, lab.Figure(v, unit))
	}
	return strings.Join(parts, " ")
}

// Terminal writes the table of a run for the terminal.
func Terminal(w io.Writer, run *lab.Run) {
	groups := Groups(run)
	fmt.Fprintf(w, "\n%s — %s\n", run.Scenario, run.Title)
	fmt.Fprintf(w, "%d repetition(s), placement %s, %s, kernel %s, %d CPUs\n", run.Reps, run.Placement, (time.Duration(run.Seconds) * time.Second).String(), run.Machine.Kernel, run.Machine.CPUs)
	floor := hasFloor(groups)
	if len(groups) > 0 {
		pdr, dirs := hasPDR(groups), hasDirs(groups)
		head := []string{"TEST", "DUT", "MEDIAN", "VS DIRECT"}
		what := "MEDIAN over the repetitions; VS DIRECT: the ratio of the medians, measured in the same run"
		if floor {
			head = append(head, "VS FLOOR")
			what = "MEDIAN over the repetitions; VS DIRECT, VS FLOOR: the ratios of the medians, measured in the same run"
		}
		if pdr {
			head = append(head, "PDR", "PDR VS DIRECT")
			if floor {
				head = append(head, "PDR VS FLOOR")
			}
			what += fmt.Sprintf("; throughput: MEDIAN is the NDR (%s), PDR the median rate at %s lost, from the same search, its ratios of medians too", lab.LossGoalText(run.Timing.Search.LossGoal), lab.LossGoalText(run.Timing.Search.PDRLoss))
		}
		if dirs {
			head = append(head, "EACH DIRECTION AT THE NDR")
			what += "; both directions at once: the rates are their sums"
		}
		head = append(head, "ALL REPETITIONS")
		fmt.Fprintln(w, what)
		tw := lab.NewTable(head...)
		for _, g := range groups {
			for _, r := range g.Rows {
				med := lab.Figure(r.Median, r.Unit)
				if len(r.Values) == 0 {
					med = "failed"
				}
				cells := append([]string{g.Key(), r.DUT}, r.figureCells(med, floor, pdr, dirs)...)
				tw.Add(append(cells, r.repetitionsText())...)
			}
		}
		tw.Write(w)
	}
	terminalSections(w, run)
	if cs := Compare(groups); len(cs) > 0 {
		fmt.Fprintf(w, "\n%s:\n", ministatHead)
		for _, c := range cs {
			fmt.Fprintf(w, "  %s: %s\n", c.Group.Key(), verdict(c))
		}
	}
	for _, n := range imixEstimates(groups) {
		fmt.Fprintf(w, "  %s\n", n)
	}
	terminalVariants(w, run, groups, Compare(groups))
	if ps := profiles(run); len(ps) > 0 {
		fmt.Fprintf(w, "\nwhere a frame's time goes (medians; eBPF programs from the kernel's run-time statistics):\n")
		for _, p := range ps {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	for _, r := range run.Results {
		if r.Test == "unit" && r.Error != "" {
			fmt.Fprintf(w, "failed: %s, repetition %d: %s\n", r.DUT, r.Rep, lab.FirstLine(r.Error))
		}
		if r.Table != nil && !r.Table.Held() {
			fmt.Fprintf(w, "warning: %s, repetition %d, %s %s: %s; the figure is for a smaller table\n", r.DUT, r.Rep, r.Test, r.Param, r.Table)
		}
	}
	var skipped []string
	for _, u := range run.Units {
		if u.Skipped != "" && !slices.Contains(skipped, u.DUT+": "+u.Skipped) {
			skipped = append(skipped, u.DUT+": "+u.Skipped)
		}
	}
	for _, s := range skipped {
		fmt.Fprintf(w, "skipped %s\n", s)
	}
}

// ministatHead heads the verdicts: which ratio they give, and what
// ministat's figures are of.
const ministatHead = "ministat, Student's t at 95% confidence (the ratio is of the medians, as in the table; the difference ± its interval is of the means, as ministat prints it)"

// verdict is ministat's verdict on one DUT against another, with the ratio
// of their medians: the table's, so that one run gives one ratio.
func verdict(c Comparison) string {
	r := c.Result
	ratio := "" // none to a median of 0 (a loss figure, say)
	if b := c.Base.median(c.PDR); b != 0 {
		ratio = fmt.Sprintf("%.2fx; ", c.Other.median(c.PDR)/b)
	}
	what := ""
	if c.PDR {
		what = "PDR, "
	}
	if !r.Proven {
		return fmt.Sprintf("%s%s vs %s: %sno difference proven (%+.1f%% ± %.1f%%)", what, c.Other.DUT, c.Base.DUT, ratio, r.Percent, r.PercentInterval)
	}
	return fmt.Sprintf("%s%s vs %s: %s%+.1f%% ± %.1f%%", what, c.Other.DUT, c.Base.DUT, ratio, r.Percent, r.PercentInterval)
}

// imixEstimates puts seed 001's IMIX bandwidth estimate next to each IMIX
// throughput: Bandwidth = PPS × (7×(40+14) + 4×(576+14) + (1500+14)) / 12 × 8,
// and what the measured frames carried (our IMIX frames without FCS).
func imixEstimates(groups []*Group) []string {
	var out []string
	for _, g := range groups {
		if g.Param != "imix" || g.Test != lab.TestThroughput {
			continue
		}
		mean := lab.FrameSize("imix").WireBytes() - 4
		for _, r := range g.Rows {
			if r.Median <= 0 {
				continue
			}
			est := r.Median * (7*(40+14) + 4*(576+14) + (1500 + 14)) / 12 * 8
			out = append(out, fmt.Sprintf("IMIX %s: %s → 001's estimate %.0f Mbit/s; frames sent %.0f Mbit/s (%.1f bytes a frame without FCS)",
				r.DUT, lab.Figure(r.Median, "pps"), est/1e6, r.Median*mean*8/1e6, mean))
		}
	}
	return out
}

// Write writes report.md and its charts into dir.
func Write(dir string, run *lab.Run) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	groups := Groups(run)
	var b bytes.Buffer
	fmt.Fprintf(&b, "# trestle lab: %s\n\n%s.\n\n", run.Scenario, run.Title)
	if run.Seed != "" {
		fmt.Fprintf(&b, "Reproduces the experiment of %s.\n\n", lab.SourceOf(run.Seed))
	}
	fmt.Fprintf(&b, "- Command: `%s`\n", run.Command)
	order := "DUT order rotated each repetition"
	if slices.ContainsFunc(run.Units, func(u lab.UnitRecord) bool { return u.Size != "" }) {
		order = "a unit per DUT and frame size, the DUT order rotated each size and repetition"
	}
	fmt.Fprintf(&b, "- Started %s, took %s; %d repetition(s), %s\n", run.Started.UTC().Format(time.RFC3339), (time.Duration(run.Seconds) * time.Second).String(), run.Reps, order)
	m := run.Machine
	fmt.Fprintf(&b, "- Machine: kernel %s, %d CPUs (%s), %.0f GiB; trestle %s\n", m.Kernel, m.CPUs, m.CPUModel, m.MemoryGB, m.Commit)
	fmt.Fprintf(&b, "- Placement: %s\n", run.Placement)
	t := run.Timing
	fmt.Fprintf(&b, "- RFC 2544 trials: search %v, confirmation %v, settle %v after learning frames, drain %v; loss goal %g, resolution %g%%\n",
		t.Search.Trial, t.Search.Confirm, t.Settle, t.Drain, t.Search.LossGoal, 100*t.Search.Resolution)
	if t.Search.HasPDR() {
		fmt.Fprintf(&b, "- NDR and PDR from one search (CSIT's MLRsearch): the NDR loses at most %s of the frames, the PDR at most %s; the short trials bracket both, each trial counting for both, then full-length trials confirm each (the throughput test; other searches look for the NDR only)\n",
			lab.LossGoalText(t.Search.LossGoal), lab.LossGoalText(t.Search.PDRLoss))
	}
	for _, n := range run.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if len(groups) > 0 {
		floor := hasFloor(groups)
		b.WriteString("\n## Results\n\nMedians over the repetitions; ")
		if floor {
			b.WriteString("the ratios are of the medians, to the straight veth path (`direct`, one veth hop fewer than any bridge) and to the floor (`floor`, a bare XDP redirect from one port to the other on the bridge's own topology: the fastest any XDP bridge can be there")
			if hasFloorTC(groups) {
				b.WriteString("; trestle at tc against `floor:tc`, a bare tc redirect, the fastest any tc bridge can be there")
			}
			b.WriteString("), both measured in the same run; ")
		} else {
			b.WriteString("the ratio is of the medians, to the straight veth path (`direct`) measured in the same run; ")
		}
		b.WriteString("CPU busy is each CPU's share of non-idle time during the measurement (from /proc/stat: the last trial of a search, the whole iperf3 run).\n\n")
		pdr, dirs := hasPDR(groups), hasDirs(groups)
		if pdr {
			fmt.Fprintf(&b, "For throughput the median is the NDR (%s lost) and the PDR (%s lost) comes from the same search, with its ratios of medians the same way. ", lab.LossGoalText(run.Timing.Search.LossGoal), lab.LossGoalText(run.Timing.Search.PDRLoss))
		}
		if dirs {
			b.WriteString("Both directions ran at once: the rates are their sums, and each direction's rate in the trial that gave the NDR is beside them (medians). ")
		}
		head := []string{"test", "DUT", "median", "vs direct"}
		if floor {
			head = append(head, "vs floor")
		}
		if pdr {
			head = append(head, "PDR", "PDR vs direct")
			if floor {
				head = append(head, "PDR vs floor")
			}
		}
		if dirs {
			head = append(head, "each direction at the NDR")
		}
		head = append(head, "CPU busy", "repetitions")
		b.WriteString("\n\n| " + strings.Join(head, " | ") + " |\n|" + strings.Repeat("---|", len(head)) + "\n")
		for _, g := range groups {
			for _, r := range g.Rows {
				all := r.repetitionsText()
				if len(r.Notes) > 0 {
					all += " — " + strings.Join(r.Notes, "; ")
				}
				cells := append([]string{g.Key(), r.DUT}, r.figureCells(lab.Figure(r.Median, r.Unit), floor, pdr, dirs)...)
				cells = append(cells, lab.CPUText(r.CPU), all)
				fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
			}
		}
	}
	if err := markdownSections(&b, dir, run); err != nil {
		return err
	}
	if est := imixEstimates(groups); len(est) > 0 {
		b.WriteString("\nIMIX bandwidth, the router benchmark guide's formula next to what was sent:\n\n")
		for _, e := range est {
			fmt.Fprintf(&b, "- %s\n", e)
		}
	}
	if ps := profiles(run); len(ps) > 0 {
		b.WriteString("\nWhere a frame's time goes, from an unpaced trial with the kernel's BPF run-time statistics on (medians over the repetitions; the measuring cost is the drop in rate against a plain trial just before):\n\n")
		for _, p := range ps {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	markdownVariants(&b, run, groups, Compare(groups))
	charts, err := writeCharts(dir, run, groups)
	if err != nil {
		return err
	}
	if len(charts) > 0 {
		b.WriteString("\n## Charts\n\n")
		for _, c := range charts {
			fmt.Fprintf(&b, "![%s](%s)\n\n", c.Title, c.File)
			if len(c.Notes) > 0 {
				b.WriteString("Gaps in the lines above, where a DUT has no figure:\n\n")
				for _, n := range c.Notes {
					fmt.Fprintf(&b, "- %s\n", n)
				}
				b.WriteString("\n")
			}
		}
	}
	if cs := Compare(groups); len(cs) > 0 {
		b.WriteString("## Statistics\n\nministat's Student's t test at 95% confidence (`trestle stat` gives the same output as ministat). Each verdict gives the ratio of the medians, as the results table does, then ministat's difference ± its interval, which are of the means:\n\n")
		for _, g := range groups {
			for _, pdr := range []bool{false, true} {
				if pdr && samePDRs(g) {
					continue
				}
				var sets []stat.Set
				for _, r := range g.Rows {
					if len(r.figures(pdr)) >= stat.MinPoints {
						sets = append(sets, stat.Set{Name: r.DUT, Values: r.figures(pdr)})
					}
				}
				if len(sets) < 2 || len(sets) > stat.MaxSets {
					continue
				}
				// The trestle sets first: ministat compares each set with the first.
				sort.SliceStable(sets, func(i, j int) bool {
					return lab.CapsOf(sets[i].Name).Subject && !lab.CapsOf(sets[j].Name).Subject
				})
				var out bytes.Buffer
				if err := stat.Render(&out, sets, stat.Options{}); err != nil {
					continue
				}
				what := g.Key()
				if pdr {
					what += ", PDR"
				}
				fmt.Fprintf(&b, "### %s (%s)\n\n", what, g.Rows[0].Unit)
				for _, c := range cs {
					if c.Group == g && c.PDR == pdr {
						fmt.Fprintf(&b, "- %s\n", verdict(c))
					}
				}
				fmt.Fprintf(&b, "\n```\n%s```\n\n", out.String())
			}
		}
	}
	b.WriteString("## Settings\n\n")
	for _, u := range settingsUnits(run) {
		if u.Chain > 1 {
			fmt.Fprintf(&b, "### %s, chain of %d\n\n", u.DUT, u.Chain)
		} else {
			fmt.Fprintf(&b, "### %s\n\n", u.DUT)
		}
		if u.Skipped != "" {
			fmt.Fprintf(&b, "Skipped: %s\n\n", u.Skipped)
			continue
		}
		p := u.Placement
		fmt.Fprintf(&b, "- placement %s: generator on CPU %d, DUT threads on CPU %d, sinks on CPU %d", p.Mode, p.GenCPU, p.DUTCPU, p.SinkCPU)
		if len(p.GenCPUs) > 0 {
			fmt.Fprintf(&b, " (cores: the generator's threads on CPUs %s, the first N at N CPUs, each CPU forwarding and sinking its own frames)", strings.Trim(fmt.Sprint(p.GenCPUs), "[]"))
		}
		for _, name := range lab.SortedKeys(p.Threads) {
			fmt.Fprintf(&b, "; %s on CPU %d", name, p.Threads[name])
		}
		b.WriteString("\n")
		for _, k := range lab.SortedKeys(u.Settings) {
			v := u.Settings[k]
			if strings.Contains(v, "\n") {
				fmt.Fprintf(&b, "- %s:\n\n```\n%s```\n", k, v)
				continue
			}
			fmt.Fprintf(&b, "- %s: %s\n", k, v)
		}
		for _, k := range lab.SortedKeys(u.Offloads) {
			var on []string
			for _, f := range lab.SortedKeys(u.Offloads[k]) {
				on = append(on, fmt.Sprintf("%s %s", f, onOff(u.Offloads[k][f])))
			}
			fmt.Fprintf(&b, "- offloads %s: %s\n", k, strings.Join(on, ", "))
		}
		b.WriteString("\n")
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), b.Bytes(), 0o644)
}

// settingsUnits are the units whose settings the report lists: each DUT's
// first, and where it ran chains, its unit of the longest chain too (how
// its bridges were joined, which one bridge does not show).
func settingsUnits(run *lab.Run) []lab.UnitRecord {
	var firsts []int
	longest := map[string]int{}
	seen := map[string]bool{}
	for i, u := range run.Units {
		if !seen[u.DUT] {
			seen[u.DUT] = true
			firsts = append(firsts, i)
		}
		if j, ok := longest[u.DUT]; u.Chain > 1 && (!ok || u.Chain > run.Units[j].Chain) {
			longest[u.DUT] = i
		}
	}
	var out []lab.UnitRecord
	for _, i := range firsts {
		out = append(out, run.Units[i])
		if j, ok := longest[run.Units[i].DUT]; ok && j != i {
			out = append(out, run.Units[j])
		}
	}
	return out
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// subject is what a chart of a test and param shows, for its title:
// "Throughput, 64-byte frames", "iperf3 TCP, 1 stream".
func subject(test, param string) string {
	switch test {
	case lab.TestThroughput:
		return "Throughput, " + lab.FramesText(param)
	case lab.TestFlood:
		return "Broadcast throughput, " + lab.FramesText(param)
	case lab.TestTCP:
		if n, ok := strings.CutPrefix(param, "streams="); ok {
			if n == "1" {
				return "iperf3 TCP, 1 stream"
			}
			return "iperf3 TCP, " + n + " streams"
		}
		return "iperf3 TCP, " + param
	case lab.TestUDP:
		return "iperf3 UDP, " + param
	}
	return test + ", " + param
}

// chainLines are the lines of the charts of one test against chain length.
type chainLines struct {
	series []svg.Series
	unit   string
	one    map[string]float64 // each line's median with one bridge, by name
	gaps   []string           // why a line has no point at a length
}

// chainSeries is a line per DUT (direct aside: it has no bridges) of test
// and param against chain length, with a point at every length the run
// measured. A DUT with no figure at a length has a gap there, not a point
// at 0, and a note that says why: the figure's error (no zero-loss rate,
// say), the unit's skip or failure, or that it was not measured.
func chainSeries(run *lab.Run, groups []*Group, test, param string) chainLines {
	cl := chainLines{one: map[string]float64{}}
	rows := map[string]map[int]*Row{}
	var duts []string
	var lengths []int
	for _, g := range groups {
		if g.Test != test || g.Param != param {
			continue
		}
		n := max(g.Chain, 1)
		if !slices.Contains(lengths, n) {
			lengths = append(lengths, n)
		}
		for _, r := range g.Rows {
			if r.DUT == "direct" {
				continue
			}
			if rows[r.DUT] == nil {
				rows[r.DUT] = map[int]*Row{}
				duts = append(duts, r.DUT)
			}
			rows[r.DUT][n] = r
			cl.unit = r.Unit
		}
	}
	slices.Sort(lengths)
	for _, d := range duts {
		s := svg.Series{Name: chainLabel(run, d)}
		for _, n := range lengths {
			r := rows[d][n]
			if r != nil && len(r.Values) > 0 {
				s.Points = append(s.Points, withSpread(float64(n), r))
				if n == 1 {
					cl.one[s.Name] = r.Median
				}
				continue
			}
			s.Points = append(s.Points, svg.Point{X: float64(n), Y: math.NaN()})
			cl.gaps = append(cl.gaps, fmt.Sprintf("%s, %s: %s", d, bridges(n), noFigure(run, r, d, n)))
		}
		cl.series = append(cl.series, s)
	}
	return cl
}

func bridges(n int) string {
	if n == 1 {
		return "1 bridge"
	}
	return fmt.Sprintf("%d bridges", n)
}

// noFigure says why a DUT has no figure in a chain of n bridges: its row's
// errors (r may be nil), else its unit's skip or failure.
func noFigure(run *lab.Run, r *Row, dut string, n int) string {
	if r != nil && len(r.Errors) > 0 {
		return lab.FirstLine(r.Errors[0])
	}
	for _, u := range run.Units {
		if u.DUT == dut && max(u.Chain, 1) == n && u.Skipped != "" {
			return "skipped: " + lab.FirstLine(u.Skipped)
		}
	}
	for _, res := range run.Results {
		if res.DUT == dut && max(res.Chain, 1) == n && res.Test == "unit" && res.Error != "" {
			return "failed: " + lab.FirstLine(res.Error)
		}
	}
	return "not measured"
}

// writeCharts draws what the run has data for: throughput against frame
// size, against chain length, loss against offered load, and bars of every
// other figure per DUT.
func writeCharts(dir string, run *lab.Run, groups []*Group) ([]lab.Chart, error) {
	var out []lab.Chart
	save := func(name, title string, doc []byte, err error) error {
		if err != nil {
			return fmt.Errorf("chart %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), doc, 0o644); err != nil {
			return err
		}
		out = append(out, lab.Chart{Title: title, File: name})
		return nil
	}
	// Throughput against frame size, with 10 GbE's line rate for scale.
	var sizes []float64
	for _, s := range run.Sizes {
		if n, err := strconv.Atoi(string(s)); err == nil {
			sizes = append(sizes, float64(n))
		}
	}
	if len(sizes) > 1 {
		// The NDR's chart, and the PDR's where the searches looked for
		// one: the DUTs in the same order in both, so each keeps its
		// colour, and a DUT with no PDR a gap in the second.
		ndr, pdr := map[string]*svg.Series{}, map[string]*svg.Series{}
		var names []string
		anyPDR := false
		for _, g := range groups {
			n, err := strconv.Atoi(g.Param)
			if g.Test != lab.TestThroughput || err != nil || g.Chain > 1 {
				continue
			}
			for _, r := range g.Rows {
				if ndr[r.DUT] == nil {
					ndr[r.DUT], pdr[r.DUT] = &svg.Series{Name: r.DUT}, &svg.Series{Name: r.DUT}
					names = append(names, r.DUT)
				}
				ndr[r.DUT].Points = append(ndr[r.DUT].Points, withSpread(float64(n), r))
				pdr[r.DUT].Points = append(pdr[r.DUT].Points, spreadPoint(float64(n), r.PDR, r.PDRMedian))
				anyPDR = anyPDR || r.pdrSearched
			}
		}
		// Both ways, the rates are sums: a full-duplex link carries its
		// line rate in each direction.
		line, ways := svg.Series{Name: "10 GbE line rate", Dashed: true}, 1.0
		if run.Bidirectional {
			line.Name, ways = "10 GbE line rate, both ways", 2
		}
		for _, s := range sizes {
			line.Points = append(line.Points, svg.Point{X: s, Y: ways * 10e9 / ((s + 20) * 8)})
		}
		draw := func(file, title string, series map[string]*svg.Series) error {
			c := svg.LineChart{Title: title, XLabel: "frame size, bytes", YLabel: "frames per second",
				XTicks: sizes, XCategorical: true, XUnit: svg.Plain, LogY: true, Series: []svg.Series{line}}
			for _, n := range names {
				c.Series = append(c.Series, *series[n])
			}
			doc, err := c.SVG()
			return save(file, strings.TrimSuffix(title, " (RFC 2544, zero loss)"), doc, err)
		}
		if err := draw("throughput-size.svg", "Throughput against frame size (RFC 2544, zero loss)", ndr); err != nil {
			return out, err
		}
		if anyPDR {
			title := fmt.Sprintf("PDR against frame size (at most %s lost)", lab.LossGoalText(run.Timing.Search.PDRLoss))
			if err := draw("pdr-size.svg", title, pdr); err != nil {
				return out, err
			}
		}
	}
	// Against chain length.
	chains := map[string]bool{}
	for _, g := range groups {
		if g.Chain > 1 {
			chains[g.Test+"|"+g.Param] = true
		}
	}
	for _, key := range lab.SortedKeys(chains) {
		test, param, _ := strings.Cut(key, "|")
		cs := chainSeries(run, groups, test, param)
		label := subject(test, param)
		c := svg.LineChart{Title: label + ", against chain length", XLabel: "bridges in a row", YLabel: cs.unit, XUnit: svg.Plain}
		// Seed 003's view: each DUT against its own one-bridge figure.
		rel := svg.LineChart{Title: label + ", against chain length, relative to one bridge", XLabel: "bridges in a row", YLabel: "median / its median with one bridge", XUnit: svg.Plain}
		for _, s := range cs.series {
			c.Series = append(c.Series, s)
			if one := cs.one[s.Name]; one > 0 {
				r := svg.Series{Name: s.Name}
				for _, p := range s.Points {
					r.Points = append(r.Points, svg.Point{X: p.X, Y: p.Y / one, YLo: p.YLo / one, YHi: p.YHi / one})
				}
				rel.Series = append(rel.Series, r)
			}
		}
		doc, err := c.SVG()
		if err := save(fmt.Sprintf("chain-%s-%s.svg", test, lab.SafeName(param)), c.Title, doc, err); err != nil {
			return out, err
		}
		if len(rel.Series) > 0 {
			doc, err := rel.SVG()
			if err := save(fmt.Sprintf("chain-relative-%s-%s.svg", test, lab.SafeName(param)), rel.Title, doc, err); err != nil {
				return out, err
			}
		}
		// The gaps are in both charts: say why once, below the pair.
		out[len(out)-1].Notes = cs.gaps
	}
	// Loss against offered load, from the loss-curve trials.
	lossBy := map[string]map[string][]svg.Point{}
	for _, r := range run.Results {
		if r.Test != lab.TestLoss || len(r.Trials) == 0 {
			continue
		}
		size, _, _ := strings.Cut(r.Param, "@")
		if lossBy[size] == nil {
			lossBy[size] = map[string][]svg.Point{}
		}
		tr := r.Trials[0]
		lossBy[size][r.DUT] = append(lossBy[size][r.DUT], svg.Point{X: tr.Offered, Y: 100 * tr.LossRatio})
	}
	for _, size := range lab.SortedKeys(lossBy) {
		c := svg.LineChart{Title: fmt.Sprintf("Frame loss against offered load, %s (RFC 2544 26.3)", strings.TrimPrefix(subject(lab.TestThroughput, size), "Throughput, ")), XLabel: "offered, frames per second", YLabel: "frames lost, %"}
		for _, d := range run.DUTs {
			if pts, ok := lossBy[size][d]; ok {
				c.Series = append(c.Series, svg.Series{Name: d, Points: pts})
			}
		}
		doc, err := c.SVG()
		if err := save(fmt.Sprintf("loss-%s.svg", lab.SafeName(size)), c.Title, doc, err); err != nil {
			return out, err
		}
	}
	// Against the number of filter rules.
	filtered, err := filterCharts(run, groups, save)
	if err != nil {
		return out, err
	}
	// Bars: every test and param, DUTs side by side (chains have their lines).
	type barKey struct{ test, unit string }
	bars := map[barKey][]*Group{}
	var keys []barKey
	for _, g := range groups {
		if g.Chain > 1 || g.Test == lab.TestLoss || g.Test == lab.TestLatency || len(chains) > 0 {
			continue
		}
		k := barKey{g.Test, g.Rows[0].Unit}
		if _, ok := bars[k]; !ok {
			keys = append(keys, k)
		}
		bars[k] = append(bars[k], g)
	}
	for _, k := range keys {
		gs := bars[k]
		if len(sizes) > 1 && k.test == lab.TestThroughput || filtered[k.test] {
			continue // a line chart has them
		}
		title := map[string]string{lab.TestThroughput: "Zero-loss throughput", lab.TestFlood: "Broadcast throughput to every other port",
			lab.TestTCP: "iperf3 TCP", lab.TestUDP: "iperf3 UDP", lab.TestB2B: "Back-to-back burst", lab.TestCache: "Address caching capacity", lab.TestLearn: "Address learning rate",
			lab.TestSpan: "The span host's frames at the throughput rate, as a share of h2's,"}[k.test]
		if title == "" {
			title = k.test
		}
		c := svg.BarChart{Title: title + " by DUT (median; whiskers: min and max)", YLabel: k.unit, XLabel: "DUT"}
		var duts []string
		for _, g := range gs {
			for _, r := range g.Rows {
				if !slices.Contains(duts, r.DUT) {
					duts = append(duts, r.DUT)
				}
			}
		}
		c.Categories = duts
		for _, g := range gs {
			name := g.Param
			if g.Test == lab.TestThroughput || g.Test == lab.TestFlood || g.Test == lab.TestB2B || g.Test == lab.TestSpan {
				name = lab.FrameSize(g.Param).Label()
			}
			s := svg.Series{Name: name, Points: make([]svg.Point, len(duts))}
			for i, d := range duts {
				s.Points[i] = svg.Point{Y: math.NaN()}
				for _, r := range g.Rows {
					if r.DUT == d && len(r.Values) > 0 {
						s.Points[i] = withSpread(0, r)
					}
				}
			}
			c.Series = append(c.Series, s)
			if pdr := pdrSeries(g, duts, name); pdr != nil {
				c.Series[len(c.Series)-1].Name = name + " NDR"
				c.Series = append(c.Series, *pdr)
				c.Title = "Throughput, NDR and PDR, by DUT (median; whiskers: min and max)"
			}
		}
		doc, err := c.SVG()
		if err := save(fmt.Sprintf("%s.svg", lab.SafeName(k.test)), c.Title, doc, err); err != nil {
			return out, err
		}
	}
	return out, nil
}

// chainLabel is a DUT's name in the charts against chain length, with how
// its bridges were joined where its name does not say (trestle's default,
// patch ports, against the others' veth pairs): as its units of chains
// record it (a unit of a chain with settings but no join recorded is from
// a run before the lab recorded joins, when trestle's were veth pairs), or
// else as its spec means it.
func chainLabel(run *lab.Run, dut string) string {
	v, err := lab.ParseSpec(dut)
	if err != nil || v.Join() != "" || dut == "direct" {
		return dut
	}
	for _, u := range run.Units {
		if u.DUT != dut || u.Chain < 2 || len(u.Settings) == 0 {
			continue
		}
		if strings.HasPrefix(u.Settings["bridges joined by"], "patch ports") {
			return dut + " (patch ports)"
		}
		return dut + " (veth pairs)"
	}
	if v.Patched() {
		return dut + " (patch ports)"
	}
	return dut + " (veth pairs)"
}

// pdrSeries is the bars of the group's PDR beside its NDR's (named name),
// in the order of duts; nil if the group's search looked for none.
func pdrSeries(g *Group, duts []string, name string) *svg.Series {
	any := false
	s := svg.Series{Name: name + " PDR", Points: make([]svg.Point, len(duts))}
	for i, d := range duts {
		s.Points[i] = svg.Point{Y: math.NaN()}
		for _, r := range g.Rows {
			if r.DUT != d || !r.pdrSearched {
				continue
			}
			any = true
			s.Points[i] = spreadPoint(0, r.PDR, r.PDRMedian)
		}
	}
	if !any {
		return nil
	}
	return &s
}

// withSpread is r's median at x with its range as the error bar; a row
// with no figure is a NaN, which a chart leaves as a gap, not a 0.
func withSpread(x float64, r *Row) svg.Point { return spreadPoint(x, r.Values, r.Median) }

// spreadPoint is median at x with the range of vals as the error bar
// (none for one value); NaN, a gap, for no values.
func spreadPoint(x float64, vals []float64, median float64) svg.Point {
	if len(vals) == 0 {
		return svg.Point{X: x, Y: math.NaN()}
	}
	p := svg.Point{X: x, Y: median}
	if len(vals) > 1 {
		p.YLo, p.YHi = slices.Min(vals), slices.Max(vals)
	}
	return p
}

// profiles summarizes the Profile of every throughput result, per DUT and
// frame size: medians over the repetitions.
func profiles(run *lab.Run) []string {
	type key struct{ dut, param string }
	by := map[key][]*lab.Profile{}
	var keys []key
	for i := range run.Results {
		r := &run.Results[i]
		if r.Profile == nil {
			continue
		}
		k := key{r.DUT, r.Param}
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], r.Profile)
	}
	var out []string
	for _, k := range keys {
		ps := by[k]
		med := func(f func(*lab.Profile) float64) float64 {
			var v []float64
			for _, p := range ps {
				v = append(v, f(p))
			}
			return lab.Median(v)
		}
		frame := med(func(p *lab.Profile) float64 { return p.FrameNs })
		g := med(func(p *lab.Profile) float64 { return p.GenNs })
		d := med(func(p *lab.Profile) float64 { return p.DUTNs })
		s := med(func(p *lab.Profile) float64 { return p.SinkNs })
		line := fmt.Sprintf("%s %s: %.0f ns a frame at %s: generator %.0f ns, DUT programs %.0f ns, sink %.0f ns, the rest (kernel: veth, redirects, NAPI%s) %.0f ns; measuring cost %.1f%% of the rate",
			k.dut, lab.FrameSize(k.param).Label(), frame, lab.Figure(1e9/frame, "pps"), g, d, s, map[bool]string{true: ", the DUT's own work", false: ""}[d == 0 && k.dut != "direct"],
			frame-g-d-s, 100*med(func(p *lab.Profile) float64 { return p.Overhead }))
		if len(ps[0].DUTPrograms) > 0 {
			line += " [" + strings.Join(ps[0].DUTPrograms, "; ") + "]"
		}
		out = append(out, line)
	}
	return out
}
