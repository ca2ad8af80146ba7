package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/lab"
)

// chainRun is a chain run of 1, 3 and 9 bridges: trestle:xdp joined by
// its patch ports loses 5% over 9 bridges, joined by veth pairs 60%; Open
// vSwitch joined by patch ports keeps its (low) rate, the Linux bridge
// joined by veth pairs loses 70%; direct is measured once.
func chainRun() *lab.Run {
	run := &lab.Run{Scenario: "chain", Title: "chains", Reps: 1, Sizes: []lab.FrameSize{"64"}, Timing: lab.DefaultTiming,
		DUTs:  []string{"direct", "linux-bridge", "trestle:xdp", "trestle:xdp@veth", "ovs@patch"},
		Goals: lab.Scenarios["chain"].Goals}
	vals := map[string]map[int]float64{
		"linux-bridge":     {1: 1.0e6, 3: 0.6e6, 9: 0.3e6},
		"trestle:xdp":      {1: 3.0e6, 3: 2.95e6, 9: 2.85e6},
		"trestle:xdp@veth": {1: 3.0e6, 3: 2.0e6, 9: 1.2e6},
		"ovs@patch":        {1: 0.5e6, 3: 0.5e6, 9: 0.49e6},
	}
	run.Results = append(run.Results, lab.Result{DUT: "direct", Rep: 1, Test: lab.TestThroughput, Param: "64", Value: 6e6, Unit: "pps"})
	run.Units = append(run.Units, lab.UnitRecord{DUT: "direct", Rep: 1})
	for _, d := range run.DUTs[1:] {
		for _, c := range []int{1, 3, 9} {
			run.Results = append(run.Results, lab.Result{DUT: d, Rep: 1, Chain: c, Test: lab.TestThroughput, Param: "64", Value: vals[d][c], Unit: "pps"})
			u := lab.UnitRecord{DUT: d, Rep: 1, Chain: c, Settings: map[string]string{"binary": d}}
			if c > 1 {
				u.Settings["bridges joined by"] = "veth pairs"
				if d == "trestle:xdp" || d == "ovs@patch" {
					u.Settings["bridges joined by"] = "patch ports, no veth pairs between bridges: br1:p1-2 <-> br2:p2-1"
				}
			}
			run.Units = append(run.Units, u)
		}
	}
	return run
}

func TestChainReport(t *testing.T) {
	run := chainRun()
	dir, md := writeReport(t, run)
	lacks(t, "report.md", md,
		"| throughput 64B, chain of 9 | trestle:xdp | 2.85Mpps | 0.47 |",
		"## Bridges joined by veth pairs (@veth) against each DUT's default join (trestle's: its patch ports)",
		"| default join | veth pairs | veth/default |",
		"| throughput 64B, chain of 9 | trestle:xdp | 2.85Mpps | 1.2Mpps | 0.421 |",
		"- met: throughput 64B: trestle:xdp x9 at least 0.9x trestle:xdp x1: ",
		"- met: throughput 64B: trestle:xdp x9 at least 5x ovs@patch x9: ",
		"- not measured: tcp streams=1: trestle x9 at least 0.9x trestle x1",
		"![Throughput, 64-byte frames, against chain length](chain-throughput-64.svg)",
		"![Throughput, 64-byte frames, against chain length, relative to one bridge](chain-relative-throughput-64.svg)",
		"### trestle:xdp, chain of 9\n",
		"- bridges joined by: patch ports, no veth pairs between bridges: br1:p1-2 <-> br2:p2-1\n")
	// The charts name how each DUT's bridges were joined, and the relative
	// one divides by each DUT's own one-bridge figure.
	abs, _ := os.ReadFile(filepath.Join(dir, "chain-throughput-64.svg"))
	rel, _ := os.ReadFile(filepath.Join(dir, "chain-relative-throughput-64.svg"))
	for _, want := range []string{"trestle:xdp (patch ports)", "trestle:xdp@veth", "ovs@patch", "linux-bridge (veth pairs)"} {
		if !strings.Contains(string(abs), want) || !strings.Contains(string(rel), want) {
			t.Errorf("a chain chart lacks the series %q", want)
		}
	}
	lacks(t, "the relative chart", string(rel), "trestle:xdp (patch ports): 9, 0.95<", "linux-bridge (veth pairs): 3, 0.6<", "ovs@patch: 1, 1<")
	if strings.Contains(string(abs), ">direct<") {
		t.Error("direct (no bridges) is a line against chain length")
	}
	groups := Groups(run)
	gs := Goals(run, groups, Compare(groups))
	if len(gs) != 3 || !gs[0].Met || gs[0].Ratio != 2.85/3.0 || !gs[2].Met || gs[2].Ratio != 2.85e6/0.49e6 || gs[1].Missing != "trestle" {
		t.Errorf("goals: %+v", gs)
	}

	// A DUT with no zero-loss figure at 9 bridges is a gap in its line,
	// not a point at 0, and the report says why below the charts.
	for i, r := range run.Results {
		if r.DUT == "linux-bridge" && r.Chain == 9 {
			run.Results[i].Value, run.Results[i].Error = 0, "no zero-loss rate: frames lost at every rate tried, down to 10kpps"
		}
	}
	dir, md = writeReport(t, run)
	lacks(t, "report.md", md, "Gaps in the lines above, where a DUT has no figure:\n\n- linux-bridge, 9 bridges: no zero-loss rate: frames lost at every rate tried, down to 10kpps\n")
	for _, f := range []string{"chain-throughput-64.svg", "chain-relative-throughput-64.svg"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		if !strings.Contains(string(b), "linux-bridge (veth pairs): 3,") || strings.Contains(string(b), "linux-bridge (veth pairs): 9,") {
			t.Errorf("%s: linux-bridge has a point at 9 bridges, or none at 3", f)
		}
	}
	if strings.Count(md, "Gaps in the lines above") != 1 {
		t.Errorf("the gaps are said more than once:\n%s", md)
	}

	// A build without patch ports: trestle:xdp's chains are skipped, and
	// the @veth table says its default join was unavailable, not absent.
	var kept []lab.Result
	for _, r := range run.Results {
		if r.DUT != "trestle:xdp" || r.Chain == 1 {
			kept = append(kept, r)
		}
	}
	run.Results = kept
	for i, u := range run.Units {
		if u.DUT == "trestle:xdp" && u.Chain > 1 {
			run.Units[i] = lab.UnitRecord{DUT: u.DUT, Rep: 1, Chain: u.Chain, Skipped: "DUT not available here: it takes no patch ports"}
		}
	}
	_, md = writeReport(t, run)
	lacks(t, "report.md", md, "| throughput 64B, chain of 9 | trestle:xdp | unavailable (skipped) | 1.2Mpps | - |", "| throughput 64B | trestle:xdp | 3Mpps | 3Mpps | 1.000 |",
		"- trestle:xdp, 3 bridges: skipped: DUT not available here: it takes no patch ports\n")
}

// TestChainLabel: a DUT's join as its units recorded it, else as its spec
// means it.
func TestChainLabel(t *testing.T) {
	run := &lab.Run{Units: []lab.UnitRecord{
		{DUT: "trestle", Chain: 3, Settings: map[string]string{"bridges joined by": "veth pairs"}},
		{DUT: "trestle:xdp", Chain: 1, Settings: map[string]string{"config": "..."}},
		{DUT: "trestle:xdp", Chain: 3, Settings: map[string]string{"config": "..."}}, // a run before joins were recorded
		{DUT: "trestle:tc", Chain: 3, Skipped: "DUT not available here"},
		{DUT: "trestle:auto", Chain: 3, Settings: map[string]string{"bridges joined by": "patch ports, no veth pairs between bridges: ..."}},
	}}
	for dut, want := range map[string]string{
		"trestle":      "trestle (veth pairs)",
		"trestle:xdp":  "trestle:xdp (veth pairs)",
		"trestle:tc":   "trestle:tc (patch ports)",
		"trestle:auto": "trestle:auto (patch ports)",
		"trestle@veth": "trestle@veth",
		"ovs":          "ovs (veth pairs)",
		"ovs@patch":    "ovs@patch",
		"linux-bridge": "linux-bridge (veth pairs)",
		"direct":       "direct",
	} {
		if got := chainLabel(run, dut); got != want {
			t.Errorf("%s: %q, want %q", dut, got, want)
		}
	}
}
