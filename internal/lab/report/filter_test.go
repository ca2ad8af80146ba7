package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/lab"
)

// filterScaleRun is a filter-scale run of 3 repetitions: trestle:xdp at
// 3 Mpps with the filter off, losing 2% a decade of rules (5% more keeping
// state); the Linux bridge at 0.9 Mpps with no table, halving a decade;
// the Linux bridge keeping state unavailable (no bridge conntrack).
func filterScaleRun() *lab.Run {
	s := lab.Scenarios["filter-scale"]
	run := &lab.Run{Scenario: s.Name, Title: s.Title, Reps: 3, Sizes: s.Sizes, Timing: lab.DefaultTiming, DUTs: lab.SpecTexts(s.DUTs), Goals: s.Goals}
	rate := func(d string) (float64, bool) {
		base, f := lab.FilterOf(d)
		n := 0.0
		if f != nil && f.Rules > 0 {
			n = 1 + math.Log10(float64(f.Rules))
		}
		switch {
		case base == "linux-bridge:nft" && f.State:
			return 0, false
		case base == "linux-bridge:nft":
			return 0.9e6 * math.Pow(0.5, n), true
		case f != nil && f.State:
			return 3e6 * (1 - 0.02*n) * 0.95, true
		}
		return 3e6 * (1 - 0.02*n), true
	}
	for rep := 1; rep <= 3; rep++ {
		for _, d := range run.DUTs {
			v, ok := rate(d)
			if !ok {
				run.Units = append(run.Units, lab.UnitRecord{DUT: d, Rep: rep, Skipped: "DUT not available here: keep state is not measurable on this kernel's Linux bridge"})
				continue
			}
			wobble := 1 + 0.01*float64(rep-2)
			run.Results = append(run.Results, lab.Result{DUT: d, Rep: rep, Test: lab.TestThroughput, Param: "64", Value: v * wobble, Unit: "pps"})
			run.Units = append(run.Units, lab.UnitRecord{DUT: d, Rep: rep})
		}
	}
	return run
}

// TestFilterScaleReport: one filter table (no variant or peer tables for
// the rule counts), each rate against its filter off and against nftables
// with the same rules; goals from the data; the charts against the rule
// count in place of the bars.
func TestFilterScaleReport(t *testing.T) {
	run := filterScaleRun()
	groups := Groups(run)
	cs := Compare(groups)
	if vr := Variants(groups, cs); len(vr) != 0 {
		t.Errorf("variant rows for rule counts: %s ...", vr[0].Variant.DUT)
	}
	if pr := Peers(groups, cs); len(pr) != 0 {
		t.Errorf("peer rows for rule counts: %s / %s ...", pr[0].Trestle.DUT, pr[0].Other.DUT)
	}
	frs := Filters(groups, cs)
	if len(frs) != 14 { // 9 trestle:xdp, 5 linux-bridge:nft
		t.Errorf("%d filter rows, want 14", len(frs))
	}
	byDUT := map[string]FilterRow{}
	for _, fr := range frs {
		byDUT[fr.Row.DUT] = fr
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for dut, want := range map[string]struct {
		rules         string
		vsOff, vsPeer float64
	}{
		"trestle:xdp":                 {"off", 0, 3 / 0.9},
		"trestle:xdp@rules=100":       {"100", 0.94, 3 * 0.94 / (0.9 * 0.125)},
		"trestle:xdp@rules=100,state": {"100, keep state", 0.94 * 0.95, 0},
		"linux-bridge:nft@rules=0":    {"off", 0, 0},
		"linux-bridge:nft@rules=1000": {"1000", 0.0625, 0},
	} {
		fr, ok := byDUT[dut]
		if !ok || fr.Rules != want.rules || !near(fr.VsOff, want.vsOff) || !near(fr.VsPeer, want.vsPeer) {
			t.Errorf("%s: %+v (rules %q, vs off %v, vs nft %v), want %+v", dut, ok, fr.Rules, fr.VsOff, fr.VsPeer, want)
		}
	}
	if fr := byDUT["trestle:xdp@rules=100"]; fr.CmpOff == nil || fr.CmpPeer == nil {
		t.Errorf("no ministat verdicts: %+v", fr)
	}
	met := map[string]bool{}
	for _, g := range Goals(run, groups, cs) {
		met[g.Goal.DUT+" / "+g.Goal.Base] = g.Met
		if strings.Contains(g.Goal.Base, "state") && g.Missing != "linux-bridge:nft@rules=1,state" && g.Missing == "" {
			t.Errorf("%s: measured without its base", g.Goal)
		}
	}
	for k, want := range map[string]bool{
		"trestle:xdp@rules=100 / trestle:xdp":                  true, // 0.94
		"trestle:xdp@rules=100,state / trestle:xdp":            true, // 0.893
		"trestle:xdp / linux-bridge:nft@rules=0":               true, // 3.33
		"trestle:xdp@rules=1 / linux-bridge:nft@rules=1":       true, // 6.5
		"trestle:xdp@rules=1000 / linux-bridge:nft@rules=1000": true,
	} {
		if got, ok := met[k]; !ok || got != want {
			t.Errorf("goal %s: met %v (%v), want %v", k, got, ok, want)
		}
	}

	var b bytes.Buffer
	Terminal(&b, run)
	out := b.String()
	lacks(t, "terminal", squash(out), "Filter: each DUT against itself with the filter off", "VS NFTABLES, SAME RULES",
		"throughput 64B 100, keep state trestle:xdp@rules=100,state 2.68Mpps 0.893 -10.7% ± 2.1% - -",
		"throughput 64B 1000 trestle:xdp@rules=1000 2.76Mpps 0.920 -8.0% ± 2.2% 49.07x +4806.7% ± 78.7%",
		"- 10, keep state linux-bridge:nft@rules=10,state unavailable - - - -",
		"met: throughput 64B: trestle:xdp@rules=100 at least 0.8x trestle:xdp",
		"not measured: throughput 64B: trestle:xdp@rules=10,state at least 3x linux-bridge:nft@rules=10,state")
	for _, no := range []string{"Variant @rules", "trestle against the others with the same variant"} {
		if strings.Contains(out, no) {
			t.Errorf("terminal has %q:\n%s", no, out)
		}
	}
	dir, md := writeReport(t, run)
	lacks(t, "report.md", md, "## Filter: each DUT", "| throughput 64B | 1000 | linux-bridge:nft@rules=1000 |", "filter-throughput-64.svg", "filter-relative-throughput-64.svg", "## Goals")
	if _, err := os.Stat(filepath.Join(dir, "throughput.svg")); err == nil {
		t.Errorf("a bar chart of %d DUTs besides the lines against the rule count", len(run.DUTs))
	}
	svgDoc, err := os.ReadFile(filepath.Join(dir, "filter-throughput-64.svg"))
	if err != nil {
		t.Fatal(err)
	}
	lacks(t, "chart", string(svgDoc), "trestle:xdp, keep state", "linux-bridge:nft", ">1000<")
}

// TestFilterVebReport: veb-vs-bridge's trestle@filter against trestle and
// against linux-bridge:nft (the same one rule); linux-bridge:nft against
// the plain Linux bridge; no variant table for @filter.
func TestFilterVebReport(t *testing.T) {
	run := &lab.Run{Scenario: "veb-vs-bridge", Reps: 3, Timing: lab.DefaultTiming,
		DUTs: []string{"direct", "linux-bridge", "linux-bridge:nft", "trestle", "trestle@filter", "ovs"}}
	flood := map[string]float64{"linux-bridge": 270e3, "linux-bridge:nft": 258e3, "trestle": 400e3, "trestle@filter": 380e3, "ovs": 230e3}
	for rep := 1; rep <= 3; rep++ {
		for _, d := range run.DUTs {
			if v, ok := flood[d]; ok {
				run.Results = append(run.Results, lab.Result{DUT: d, Rep: rep, Test: lab.TestFlood, Param: "64", Value: v * (1 + 0.01*float64(rep-2)), Unit: "pps"})
			}
			run.Results = append(run.Results, lab.Result{DUT: d, Rep: rep, Test: lab.TestTCP, Param: "streams=1", Value: 20e9, Unit: "bit/s"})
		}
	}
	groups := Groups(run)
	cs := Compare(groups)
	if len(Variants(groups, cs)) != 0 {
		t.Errorf("a variant table for @filter")
	}
	got := map[string]FilterRow{}
	for _, fr := range Filters(groups, cs) {
		if fr.Group.Test == lab.TestFlood {
			got[fr.Row.DUT] = fr
		}
	}
	if len(got) != 4 {
		t.Errorf("flood rows %v, want linux-bridge, linux-bridge:nft, trestle, trestle@filter", got)
	}
	if fr := got["trestle@filter"]; fr.Rules != "1, pass all" || fr.Off == nil || fr.Off.DUT != "trestle" || fr.Peer == nil || fr.Peer.DUT != "linux-bridge:nft" || math.Abs(fr.VsOff-0.95) > 1e-9 {
		t.Errorf("trestle@filter: %+v", fr)
	}
	if fr := got["linux-bridge:nft"]; fr.Off == nil || fr.Off.DUT != "linux-bridge" || fr.Peer != nil {
		t.Errorf("linux-bridge:nft: %+v", fr)
	}
	var b bytes.Buffer
	Terminal(&b, run)
	lacks(t, "terminal", squash(b.String()), "flood 64B 1, pass all trestle@filter 380kpps 0.950", "1.47x")
}

// squash is text with every run of blanks one space, for matching table
// rows whatever their columns' widths.
func squash(text string) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}

// TestFilterTableWithout: the Linux bridge's rules are in the table when
// trestle's could not be measured; a run of linux-bridge:nft and the plain
// bridge alone (veb-vs-bridge before trestle had a filter) has none.
func TestFilterTableWithout(t *testing.T) {
	run := filterScaleRun()
	var kept []lab.Result
	for _, r := range run.Results {
		if _, f := lab.FilterOf(r.DUT); !strings.HasPrefix(r.DUT, "trestle") || f == nil {
			kept = append(kept, r)
		}
	}
	run.Results = kept
	groups := Groups(run)
	if n := len(Filters(groups, Compare(groups))); n != 5 { // linux-bridge:nft at 0..1000
		t.Errorf("%d rows without trestle's rules, want 5", n)
	}
	old := &lab.Run{DUTs: []string{"linux-bridge", "linux-bridge:nft"}, Reps: 1}
	for _, d := range old.DUTs {
		old.Results = append(old.Results, lab.Result{DUT: d, Rep: 1, Test: lab.TestFlood, Param: "64", Value: 1e5, Unit: "pps"})
	}
	groups = Groups(old)
	if frs := Filters(groups, Compare(groups)); len(frs) != 0 {
		t.Errorf("a filter table for linux-bridge:nft alone: %d rows", len(frs))
	}
}
