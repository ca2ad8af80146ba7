package report

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/stat"
)

// VariantRow is a variant of a DUT against the DUT in one group: what the
// variant's one change costs, as the ratio of the medians measured in the
// same run, and ministat's verdict on the repetitions. For the @vlan
// variant it is the VLAN cost: tagged/untagged.
type VariantRow struct {
	Group         *Group
	Knobs         string // "vlan", "gso=off"
	DUT           string // the DUT without the variant
	Base, Variant *Row   // Base nil: the run did not measure the DUT without it
	Ratio         float64
	Cmp           *Comparison // nil with fewer than stat.MinPoints repetitions
}

// Variants pairs every variant in each group with its DUT, in the group's
// order.
func Variants(groups []*Group, cs []Comparison) []VariantRow {
	var out []VariantRow
	for _, g := range groups {
		if variantOnly(g) {
			continue
		}
		for _, v := range g.Rows {
			_, knobs := splitDUT(v.DUT)
			if knobs == "" || hasFilter(v.DUT) {
				continue // a filter's figures are in the filter table
			}
			base, knobs := variantBase(v.DUT, g.Rows)
			vr := VariantRow{Group: g, Knobs: knobs, DUT: base, Variant: v}
			for _, b := range g.Rows {
				if b.DUT == base {
					vr.Base = b
				}
			}
			vr.Ratio = ratio(vr.Variant, vr.Base)
			vr.Cmp = findComparison(cs, v, vr.Base)
			out = append(out, vr)
		}
	}
	return out
}

// variantBase is the DUT a variant changes, and the knob it changes it
// by: for a variant of several knobs, the row that has every knob but one
// ("trestle:xdp@mirror" for "trestle:xdp@mirror,bin=old": a build measured
// against the one before it, both mirrored), where the group has one;
// else the DUT without knobs ("trestle:xdp" for "trestle:xdp@vlan"), which
// baseText says was not in the run if the group has no row of it. A
// filter's variants are set against the DUT without knobs.
func variantBase(dut string, rows []*Row) (base, knobs string) {
	name, all := splitDUT(dut)
	has := func(d string) bool {
		return slices.ContainsFunc(rows, func(r *Row) bool { return r.DUT == d })
	}
	if hasFilter(dut) {
		return name, all // the filter table sets each rule set against the filter off
	}
	ks := strings.Split(all, ",")
	for i := range ks {
		rest := slices.Concat(ks[:i], ks[i+1:])
		if b := name + "@" + strings.Join(rest, ","); len(rest) > 0 && has(b) {
			return b, ks[i]
		}
	}
	return name, all
}

// PeerRow is a trestle DUT against another DUT with the same variant
// (trestle:xdp@vlan against ovs@vlan): the ratio of their medians.
type PeerRow struct {
	Group          *Group
	Trestle, Other *Row
	Ratio          float64
	Cmp            *Comparison
}

// Peers lists, in each group, every trestle variant against each DUT
// that is not trestle's with the same variant knobs.
func Peers(groups []*Group, cs []Comparison) []PeerRow {
	var out []PeerRow
	for _, g := range groups {
		if variantOnly(g) {
			continue
		}
		for _, t := range g.Rows {
			_, knobs := splitDUT(t.DUT)
			if knobs == "" || !lab.CapsOf(t.DUT).Subject || hasFilter(t.DUT) {
				continue
			}
			for _, o := range g.Rows {
				if _, ok := splitDUT(o.DUT); ok != knobs || lab.CapsOf(o.DUT).Subject {
					continue
				}
				out = append(out, PeerRow{Group: g, Trestle: t, Other: o, Ratio: ratio(t, o), Cmp: findComparison(cs, t, o)})
			}
		}
	}
	return out
}

// variantOnly says whether g's test is a figure of a variant alone, which
// its DUT without the variant has no figure of to compare with: the span
// host's share of h2's frames exists only with a mirror.
func variantOnly(g *Group) bool { return g.Test == lab.TestSpan }

// GoalResult is a scenario's goal against what the run measured.
type GoalResult struct {
	Goal lab.Goal
	// Ratio is the ratio of the medians, or for a goal with no Base the
	// DUT's median itself; 0: not measured (Missing says why).
	Ratio float64
	Met   bool
	Cmp   *Comparison
	// Missing names the DUT that has no figure in the goal's test.
	Missing string
}

// Goals checks the run's goals: met when the ratio of the medians is at
// least the goal's; ministat's verdict says how sure that is.
func Goals(run *lab.Run, groups []*Group, cs []Comparison) []GoalResult {
	var out []GoalResult
	for _, goal := range run.Goals {
		gr := GoalResult{Goal: goal}
		var dut, base *Row
		for _, g := range groups {
			if g.Test != goal.Test || g.Param != goal.Param {
				continue
			}
			for _, r := range g.Rows {
				// direct's row is in every chain's group: its own chain is 0.
				c := max(g.Chain, 1)
				if r.DUT == goal.DUT && c == max(goal.Chain, 1) {
					dut = r
				}
				if r.DUT == goal.Base && c == max(goal.BaseChain, 1) {
					base = r
				}
			}
		}
		switch {
		case dut == nil || len(dut.Values) == 0:
			gr.Missing = goal.DUT
		case goal.Base == "":
			gr.Ratio = dut.Median
			gr.Met = gr.Ratio >= goal.Min
		case base == nil || len(base.Values) == 0:
			gr.Missing = goal.Base
		default:
			gr.Ratio = ratio(dut, base)
			gr.Met = gr.Ratio >= goal.Min
			gr.Cmp = findComparison(cs, dut, base)
		}
		out = append(out, gr)
	}
	return out
}

func ratio(a, b *Row) float64 {
	if a == nil || b == nil || len(a.Values) == 0 || len(b.Values) == 0 || b.Median == 0 {
		return 0
	}
	return a.Median / b.Median
}

// findComparison is ministat's verdict on other against base: Compare's,
// or, for a pair Compare does not make that way round, one made here.
func findComparison(cs []Comparison, other, base *Row) *Comparison {
	if other == nil || base == nil {
		return nil
	}
	for i := range cs {
		if c := &cs[i]; c.Other == other && c.Base == base && !c.PDR {
			return c
		}
	}
	if len(other.Values) < stat.MinPoints || len(base.Values) < stat.MinPoints {
		return nil
	}
	bs, err1 := stat.Summarize(stat.Set{Name: base.DUT, Values: base.Values})
	os, err2 := stat.Summarize(stat.Set{Name: other.DUT, Values: other.Values})
	if err1 != nil || err2 != nil {
		return nil
	}
	r, err := stat.Compare(bs, os, 95)
	if err != nil {
		return nil
	}
	return &Comparison{Base: base, Other: other, Result: r}
}

// shortVerdict is ministat's verdict without the DUT names.
func shortVerdict(c *Comparison, other, base *Row) string {
	if c == nil {
		n := 0
		if other != nil && base != nil {
			n = min(len(other.Values), len(base.Values))
		}
		if n < stat.MinPoints {
			return fmt.Sprintf("no verdict: %d repetition(s), ministat needs %d", n, stat.MinPoints)
		}
		return "no verdict"
	}
	r := c.Result
	if !r.Proven {
		return fmt.Sprintf("no difference proven (%+.1f%% ± %.1f%%)", r.Percent, r.PercentInterval)
	}
	return fmt.Sprintf("%+.1f%% ± %.1f%%", r.Percent, r.PercentInterval)
}

// variantTitle heads a variant's table; the @vlan variant's is the VLAN
// cost, with its columns named for what differs.
func variantTitle(knobs string) (title, without, with, ratio string) {
	switch knobs {
	case "vlan":
		return "VLAN cost: each DUT with VLANs (@vlan: access port and trunk, tagged frames) against it without", "UNTAGGED", "TAGGED", "TAGGED/UNTAGGED"
	case "veth":
		return "Bridges joined by veth pairs (@veth) against each DUT's default join (trestle's: its patch ports)", "DEFAULT JOIN", "VETH PAIRS", "VETH/DEFAULT"
	case "patch":
		return "Bridges joined by the DUT's patch ports (@patch) against each DUT's default join (Open vSwitch's: veth pairs)", "DEFAULT JOIN", "PATCH PORTS", "PATCH/DEFAULT"
	case "mirror":
		return "Mirror cost: each DUT with h1's port mirrored both ways to a span port (@mirror) against it without", "UNMIRRORED", "MIRRORED", "MIRRORED/UNMIRRORED"
	case "suppress":
		return "Neighbour suppression's cost: each DUT with its bridge answering ARP and neighbour solicitations (@suppress) against it without", "WITHOUT", "SUPPRESSING", "SUPPRESSING/WITHOUT"
	case "capture":
		return "Capture cost: trestle with `trestle capture` running on h1's port (@capture) against it with none", "NO CAPTURE", "CAPTURING", "CAPTURING/NONE"
	}
	return "Variant @" + knobs + " against its DUT", "WITHOUT", "WITH", "WITH/WITHOUT"
}

// skippedUnits maps the DUTs the run skipped to why.
func skippedUnits(run *lab.Run) map[string]string {
	out := map[string]string{}
	for _, u := range run.Units {
		if u.Skipped != "" {
			out[u.DUT] = u.Skipped
		}
	}
	return out
}

// variantKnobs lists the knobs of the variant rows (variantBase's: a
// variant of a variant is listed by the one knob it adds), in the order
// the rows come (the run's DUT order within each group), then those of the
// run's variant DUTs with no row (skipped), so that their tables say so.
func variantKnobs(run *lab.Run, vrs []VariantRow) []string {
	var out []string
	for _, vr := range vrs {
		if !slices.Contains(out, vr.Knobs) {
			out = append(out, vr.Knobs)
		}
	}
	for _, d := range run.DUTs {
		_, k := splitDUT(d)
		measured := slices.ContainsFunc(vrs, func(vr VariantRow) bool { return vr.Variant.DUT == d })
		if k != "" && !hasFilter(d) && !measured && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// terminalVariants writes the variant tables, trestle against its peers
// with the same variant, and the goals.
func terminalVariants(w io.Writer, run *lab.Run, groups []*Group, cs []Comparison) {
	vrs := Variants(groups, cs)
	skipped := skippedUnits(run)
	for _, knobs := range variantKnobs(run, vrs) {
		title, without, with, rt := variantTitle(knobs)
		tw := lab.NewTable("TEST", "DUT", without, with, rt, "MINISTAT (95%)")
		rows := 0
		for _, vr := range vrs {
			if vr.Knobs != knobs {
				continue
			}
			rows++
			base, r := baseText(vr, skipped), "-"
			if vr.Ratio > 0 {
				r = fmt.Sprintf("%.3f", vr.Ratio)
			}
			tw.Add(vr.Group.Key(), vr.DUT, base, medianText(vr.Variant), r, shortVerdict(vr.Cmp, vr.Variant, vr.Base))
		}
		for _, d := range run.DUTs {
			if base, k := splitDUT(d); k == knobs && skipped[d] != "" {
				rows++
				tw.Add("-", base, "-", "unavailable (see skipped, below)", "-", "-")
			}
		}
		if rows == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s (medians):\n", title)
		tw.Write(w)
	}
	if prs := Peers(groups, cs); len(prs) > 0 {
		fmt.Fprintf(w, "\ntrestle against the others with the same variant (medians):\n")
		tw := lab.NewTable("TEST", "DUTS", "RATIO", "MINISTAT (95%)")
		for _, p := range prs {
			r := "-"
			if p.Ratio > 0 {
				r = fmt.Sprintf("%.2fx", p.Ratio)
			}
			tw.Add(p.Group.Key(), p.Trestle.DUT+" / "+p.Other.DUT, r, shortVerdict(p.Cmp, p.Trestle, p.Other))
		}
		tw.Write(w)
	}
	terminalFilters(w, run, groups, cs)
	if gs := Goals(run, groups, cs); len(gs) > 0 {
		fmt.Fprintf(w, "\ngoals:\n")
		for _, g := range gs {
			fmt.Fprintf(w, "  %s\n", goalText(g))
		}
	}
}

// baseText is the median of a variant's DUT without the variant, or why
// there is none: the DUT was not measured, or not here (a trestle build
// without patch ports has no patched chain to measure the @veth variant
// against).
func baseText(vr VariantRow, skipped map[string]string) string {
	switch {
	case vr.Base != nil:
		return medianText(vr.Base)
	case skipped[vr.DUT] != "":
		return "unavailable (skipped)"
	}
	return "not in this run"
}

func medianText(r *Row) string {
	if r == nil || len(r.Values) == 0 {
		return "failed"
	}
	return lab.Figure(r.Median, r.Unit)
}

func goalText(g GoalResult) string {
	if g.Missing != "" {
		return fmt.Sprintf("not measured: %s (%s has no figure)", g.Goal, g.Missing)
	}
	word := "met"
	if !g.Met {
		word = "NOT met"
	}
	if g.Goal.Base == "" {
		return fmt.Sprintf("%s: %s: median %s", word, g.Goal, lab.Figure(g.Ratio, g.Goal.Unit))
	}
	return fmt.Sprintf("%s: %s: %.3fx; ministat: %s", word, g.Goal, g.Ratio, shortVerdictFor(g))
}

func shortVerdictFor(g GoalResult) string {
	if g.Cmp == nil {
		return "no verdict (fewer than 3 repetitions each)"
	}
	return shortVerdict(g.Cmp, g.Cmp.Other, g.Cmp.Base)
}

// markdownVariants is terminalVariants for report.md.
func markdownVariants(b *bytes.Buffer, run *lab.Run, groups []*Group, cs []Comparison) {
	vrs := Variants(groups, cs)
	skipped := skippedUnits(run)
	for _, knobs := range variantKnobs(run, vrs) {
		title, without, with, rt := variantTitle(knobs)
		var lines []string
		for _, vr := range vrs {
			if vr.Knobs != knobs {
				continue
			}
			base, r := baseText(vr, skipped), "-"
			if vr.Ratio > 0 {
				r = fmt.Sprintf("%.3f", vr.Ratio)
			}
			lines = append(lines, fmt.Sprintf("| %s | %s | %s | %s | %s | %s |", vr.Group.Key(), vr.DUT, base, medianText(vr.Variant), r, shortVerdict(vr.Cmp, vr.Variant, vr.Base)))
		}
		for _, d := range run.DUTs {
			if base, k := splitDUT(d); k == knobs && skipped[d] != "" {
				lines = append(lines, fmt.Sprintf("| - | %s | - | unavailable (see %s under Settings) | - | - |", base, d))
			}
		}
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n## %s\n\nMedians over the repetitions, measured in the same run; the verdict is ministat's Student's t at 95%% confidence.\n\n", title)
		fmt.Fprintf(b, "| test | DUT | %s | %s | %s | ministat |\n|---|---|---|---|---|---|\n", strings.ToLower(without), strings.ToLower(with), strings.ToLower(rt))
		b.WriteString(strings.Join(lines, "\n") + "\n")
	}
	if prs := Peers(groups, cs); len(prs) > 0 {
		b.WriteString("\n## trestle against the others with the same variant\n\n| test | DUTs | ratio of medians | ministat |\n|---|---|---|---|\n")
		for _, p := range prs {
			r := "-"
			if p.Ratio > 0 {
				r = fmt.Sprintf("%.2fx", p.Ratio)
			}
			fmt.Fprintf(b, "| %s | %s / %s | %s | %s |\n", p.Group.Key(), p.Trestle.DUT, p.Other.DUT, r, shortVerdict(p.Cmp, p.Trestle, p.Other))
		}
	}
	markdownFilters(b, run, groups, cs)
	if gs := Goals(run, groups, cs); len(gs) > 0 {
		b.WriteString("\n## Goals\n\n")
		for _, g := range gs {
			fmt.Fprintf(b, "- %s\n", goalText(g))
		}
	}
}
