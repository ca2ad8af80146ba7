package report

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/report/svg"
)

// filterPoint is where a DUT stands among the filter's figures: its DUT
// without filter knobs, and its rules.
type filterPoint struct {
	base string      // "trestle:xdp", "linux-bridge:nft"
	f    *lab.Filter // nil: no filter knob, and not linux-bridge:nft
	nft  bool        // the Linux bridge with nftables
}

func pointOf(dut string) filterPoint {
	base, f := lab.FilterOf(dut)
	p := filterPoint{base: base, f: f, nft: strings.HasPrefix(base, "linux-bridge:nft")}
	if p.nft && f == nil {
		p.f = &lab.Filter{All: true} // linux-bridge:nft's one accepting rule is @filter's
	}
	return p
}

func (p filterPoint) trestle() bool { return lab.CapsOf(p.base).Subject }

// offs are the DUTs that are p's DUT with its filter off, the first found
// the one: for the Linux bridge, rules=0 (no table) or the plain bridge.
func (p filterPoint) offs() []string {
	if p.nft {
		return []string{"linux-bridge:nft@rules=0", "linux-bridge"}
	}
	return []string{p.base, p.base + "@rules=0"}
}

// peer is the Linux bridge with p's rules in nftables ("" for DUTs other
// than trestle's).
func (p filterPoint) peer() string {
	switch {
	case !p.trestle():
		return ""
	case p.f.Off():
		return "linux-bridge:nft@rules=0"
	case p.f.All:
		return "linux-bridge:nft"
	}
	return "linux-bridge:nft@" + p.f.Knobs()
}

// rulesText is p's rules for the table's RULES column.
func (p filterPoint) rulesText() string {
	switch {
	case p.f.Off():
		return "off"
	case p.f.All:
		return "1, pass all"
	case p.f.State:
		return fmt.Sprintf("%d, keep state", p.f.Rules)
	}
	return strconv.Itoa(p.f.Rules)
}

// seriesName is the line of p's DUT in the charts against the rule count:
// its DUT, and whether it keeps state.
func (p filterPoint) seriesName() string {
	if p.f != nil && p.f.State {
		return p.base + ", keep state"
	}
	return p.base
}

// hasFilter says whether a DUT spec has a filter knob: its figures are
// the filter table's, not a variant table's.
func hasFilter(dut string) bool {
	_, f := lab.FilterOf(dut)
	return f != nil
}

// FilterRow is a DUT in a group with trestle's filter on: its median
// against the same DUT with its filter off (VsOff), and for trestle
// against the Linux bridge with the same rules in nftables (VsPeer), the
// ratios of the medians measured in the same run.
type FilterRow struct {
	Group           *Group
	Row             *Row
	Rules           string
	Off, Peer       *Row // nil: not in the run, or the row is the filter off
	VsOff, VsPeer   float64
	CmpOff, CmpPeer *Comparison
}

// Filters lists, in each group where a DUT has a filter variant on
// (@rules=N with N above 0, @filter), every DUT with a filter (and
// linux-bridge:nft) and those DUTs with their filter off, in the group's
// order. A run of linux-bridge:nft and the plain bridge alone has none.
func Filters(groups []*Group, cs []Comparison) []FilterRow {
	var out []FilterRow
	for _, g := range groups {
		if variantOnly(g) {
			continue
		}
		by := map[string]*Row{}
		for _, r := range g.Rows {
			by[r.DUT] = r
		}
		find := func(names ...string) *Row {
			for _, n := range names {
				if r := by[n]; r != nil {
					return r
				}
			}
			return nil
		}
		in := map[*Row]bool{}
		on := false
		for _, r := range g.Rows {
			p := pointOf(r.DUT)
			if p.f == nil {
				continue
			}
			on = on || hasFilter(r.DUT) && !p.f.Off()
			in[r] = true
			if off := find(p.offs()...); off != nil {
				in[off] = true
			}
		}
		if !on {
			continue
		}
		for _, r := range g.Rows {
			if !in[r] {
				continue
			}
			p := pointOf(r.DUT)
			fr := FilterRow{Group: g, Row: r, Rules: p.rulesText(), Peer: find(p.peer())}
			if !p.f.Off() {
				fr.Off = find(p.offs()...)
			}
			fr.VsOff, fr.CmpOff = ratio(r, fr.Off), findComparison(cs, r, fr.Off)
			fr.VsPeer, fr.CmpPeer = ratio(r, fr.Peer), findComparison(cs, r, fr.Peer)
			out = append(out, fr)
		}
	}
	return out
}

// filterSkipped are the run's skipped DUTs with a filter, in DUT order.
func filterSkipped(run *lab.Run) []string {
	skipped := skippedUnits(run)
	var out []string
	for _, d := range run.DUTs {
		if skipped[d] != "" && hasFilter(d) {
			out = append(out, d)
		}
	}
	return out
}

const filterTitle = "Filter: each DUT against itself with the filter off, and trestle against the Linux bridge with the same rules in nftables"

// filterCells are a row's cells after TEST: rules, DUT, median, against
// the filter off, ministat, against nftables, ministat.
func filterCells(fr FilterRow) []string {
	vsOff, vsPeer := "-", "-"
	if fr.VsOff > 0 {
		vsOff = fmt.Sprintf("%.3f", fr.VsOff)
	}
	if fr.VsPeer > 0 {
		vsPeer = fmt.Sprintf("%.2fx", fr.VsPeer)
	}
	offVerdict, peerVerdict := "-", "-"
	if fr.Off != nil {
		offVerdict = shortVerdict(fr.CmpOff, fr.Row, fr.Off)
	}
	if fr.Peer != nil {
		peerVerdict = shortVerdict(fr.CmpPeer, fr.Row, fr.Peer)
	}
	return []string{fr.Rules, fr.Row.DUT, medianText(fr.Row), vsOff, offVerdict, vsPeer, peerVerdict}
}

// terminalFilters writes the filter table.
func terminalFilters(w io.Writer, run *lab.Run, groups []*Group, cs []Comparison) {
	frs := Filters(groups, cs)
	if len(frs) == 0 {
		return
	}
	skipped := filterSkipped(run)
	note := ""
	if len(skipped) > 0 {
		note = "; unavailable: see skipped, below"
	}
	fmt.Fprintf(w, "\n%s (medians%s):\n", filterTitle, note)
	tw := lab.NewTable("TEST", "RULES", "DUT", "MEDIAN", "VS FILTER OFF", "MINISTAT (95%)", "VS NFTABLES, SAME RULES", "MINISTAT (95%)")
	for _, fr := range frs {
		tw.Add(append([]string{fr.Group.Key()}, filterCells(fr)...)...)
	}
	for _, d := range skipped {
		tw.Add("-", pointOf(d).rulesText(), d, "unavailable", "-", "-", "-", "-")
	}
	tw.Write(w)
}

// markdownFilters is terminalFilters for report.md.
func markdownFilters(b *bytes.Buffer, run *lab.Run, groups []*Group, cs []Comparison) {
	frs := Filters(groups, cs)
	if len(frs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## %s\n\n", filterTitle)
	b.WriteString("Medians over the repetitions, measured in the same run. The filter off is trestle without a filter stage and the Linux bridge without an nftables table; " +
		"`rules=N` is N rules every test frame crosses, the one that passes it last, default block (`trestle lab --help`). The verdicts are ministat's Student's t at 95% confidence.\n\n")
	b.WriteString("| test | rules | DUT | median | vs filter off | ministat | vs nftables, same rules | ministat |\n|---|---|---|---|---|---|---|---|\n")
	for _, fr := range frs {
		fmt.Fprintf(b, "| %s | %s |\n", fr.Group.Key(), strings.Join(filterCells(fr), " | "))
	}
	for _, d := range filterSkipped(run) {
		fmt.Fprintf(b, "| - | %s | %s | unavailable (see %s under Settings) | - | - | - | - |\n", pointOf(d).rulesText(), d, d)
	}
}

// filterCharts draws, for each group in which DUTs were measured at two
// or more rule counts, the median against the rule count, one line for
// each DUT with and without keep-state (the filter off the first point
// of both), and the same relative to each DUT's filter off. It returns
// the tests it drew.
func filterCharts(run *lab.Run, groups []*Group, save func(name, title string, doc []byte, err error) error) (map[string]bool, error) {
	drawn := map[string]bool{}
	for _, g := range groups {
		type series struct {
			name string
			pts  []svg.Point
			off  *Row
		}
		var order []string
		lines := map[string]*series{}
		counts := map[float64]bool{}
		by := map[string]*Row{}
		for _, r := range g.Rows {
			by[r.DUT] = r
		}
		for _, r := range g.Rows {
			p := pointOf(r.DUT)
			if p.f == nil || p.f.All || p.f.Rules == 0 || len(r.Values) == 0 {
				continue
			}
			name := p.seriesName()
			s := lines[name]
			if s == nil {
				s = &series{name: name}
				for _, o := range p.offs() {
					if off := by[o]; off != nil && len(off.Values) > 0 && s.off == nil {
						s.off = off
						s.pts = append(s.pts, withSpread(0, off))
						counts[0] = true
					}
				}
				lines[name] = s
				order = append(order, name)
			}
			s.pts = append(s.pts, withSpread(float64(p.f.Rules), r))
			counts[float64(p.f.Rules)] = true
		}
		if len(counts) < 2 {
			continue
		}
		// The series in the run's DUT order, by their first DUT.
		first := func(name string) int {
			for i, d := range run.DUTs {
				if pointOf(d).seriesName() == name {
					return i
				}
			}
			return len(run.DUTs)
		}
		sort.SliceStable(order, func(i, j int) bool { return first(order[i]) < first(order[j]) })
		var ticks []float64
		for c := range counts {
			ticks = append(ticks, c)
		}
		slices.Sort(ticks)
		label := subject(g.Test, g.Param)
		const xLabel = "rules, the matching one last, default block (0: the filter off)"
		unit := g.Rows[0].Unit
		if unit == "pps" {
			unit = "frames per second"
		}
		abs := svg.LineChart{Title: label + ", against the number of rules", XLabel: xLabel, YLabel: unit,
			XTicks: ticks, XCategorical: true, XUnit: svg.Plain, LogY: true}
		rel := svg.LineChart{Title: label + ", against the number of rules, relative to the filter off", XLabel: xLabel, YLabel: "median / its median with the filter off",
			XTicks: ticks, XCategorical: true, XUnit: svg.Plain}
		for _, name := range order {
			s := lines[name]
			slices.SortFunc(s.pts, func(a, b svg.Point) int { return cmp.Compare(a.X, b.X) })
			abs.Series = append(abs.Series, svg.Series{Name: name, Points: s.pts})
			if s.off == nil || s.off.Median == 0 {
				continue
			}
			rs := svg.Series{Name: name}
			for _, p := range s.pts {
				rs.Points = append(rs.Points, svg.Point{X: p.X, Y: p.Y / s.off.Median, YLo: p.YLo / s.off.Median, YHi: p.YHi / s.off.Median})
			}
			rel.Series = append(rel.Series, rs)
		}
		doc, err := abs.SVG()
		if err := save(fmt.Sprintf("filter-%s-%s.svg", lab.SafeName(g.Test), lab.SafeName(g.Param)), abs.Title, doc, err); err != nil {
			return drawn, err
		}
		if len(rel.Series) > 0 {
			doc, err := rel.SVG()
			if err := save(fmt.Sprintf("filter-relative-%s-%s.svg", lab.SafeName(g.Test), lab.SafeName(g.Param)), rel.Title, doc, err); err != nil {
				return drawn, err
			}
		}
		drawn[g.Test] = true
	}
	return drawn, nil
}
