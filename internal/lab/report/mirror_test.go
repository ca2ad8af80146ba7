package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/lab"
)

// mirrorRun is a mirror run of 3 repetitions: trestle:xdp mirrored keeps
// 0.7x its rate and its span host every frame; trestle's default mode
// mirrored keeps 0.5x and its span host 99% of h2's frames; the Linux
// bridge mirrored keeps 0.6x; trestle:xdp@capture was unavailable.
func mirrorRun() *lab.Run {
	run := &lab.Run{Scenario: "mirror", Title: "mirrors", Reps: 3, Sizes: []lab.FrameSize{"64"}, Timing: lab.DefaultTiming,
		DUTs:  []string{"floor@mirror", "trestle:xdp", "trestle:xdp@mirror", "trestle:xdp@capture", "trestle", "trestle@mirror", "linux-bridge", "linux-bridge@mirror"},
		Goals: lab.Scenarios["mirror"].Goals}
	tput := map[string]float64{"floor@mirror": 2.2e6, "trestle:xdp": 3e6, "trestle:xdp@mirror": 2.1e6, "trestle": 1e6, "trestle@mirror": 0.5e6, "linux-bridge": 1e6, "linux-bridge@mirror": 0.6e6}
	span := map[string]float64{"trestle:xdp@mirror": 100, "trestle@mirror": 99, "linux-bridge@mirror": 100}
	for rep := 1; rep <= 3; rep++ {
		for _, d := range run.DUTs {
			if d == "trestle:xdp@capture" {
				run.Units = append(run.Units, lab.UnitRecord{DUT: d, Rep: rep, Skipped: "DUT not available here: this trestle has no capture command"})
				continue
			}
			wobble := 1 + 0.01*float64(rep-2)
			run.Results = append(run.Results, lab.Result{DUT: d, Rep: rep, Test: lab.TestThroughput, Param: "64", Value: tput[d] * wobble, Unit: "pps"})
			if s, ok := span[d]; ok {
				run.Results = append(run.Results, lab.Result{DUT: d, Rep: rep, Test: lab.TestSpan, Param: "64", Value: s, Unit: lab.UnitOfH2})
			}
			run.Units = append(run.Units, lab.UnitRecord{DUT: d, Rep: rep})
		}
	}
	return run
}

// TestMirrorReport: the mirror cost is a variant table with ministat's
// verdict; span is a group of the mirrored DUTs only, in no variant or peer
// table; its goals are figures of their own (no base), met at 100%.
func TestMirrorReport(t *testing.T) {
	run := mirrorRun()
	groups := Groups(run)
	cs := Compare(groups)
	for _, vr := range Variants(groups, cs) {
		if vr.Group.Test == lab.TestSpan {
			t.Errorf("a variant row in the span group: %s", vr.Variant.DUT)
		}
	}
	for _, p := range Peers(groups, cs) {
		if p.Group.Test == lab.TestSpan {
			t.Errorf("a peer row in the span group: %s / %s", p.Trestle.DUT, p.Other.DUT)
		}
	}
	want := map[string]bool{"trestle:xdp@mirror at least 0.9x floor@mirror": true, "trestle@mirror at least 0.6x": false,
		"span 64B: trestle:xdp@mirror": true, "span 64B: trestle@mirror": false}
	gs := Goals(run, groups, cs)
	if len(gs) != len(want) {
		t.Fatalf("%d goals, want %d", len(gs), len(want))
	}
	for _, g := range gs {
		for k, met := range want {
			if strings.Contains(g.Goal.String(), k) && g.Met != met {
				t.Errorf("%s: met %v (%v), want %v", g.Goal, g.Met, g.Ratio, met)
			}
		}
	}
	var b bytes.Buffer
	Terminal(&b, run)
	out := b.String()
	lacks(t, "terminal", out,
		"span 64B", "100.000% of h2's", "99.000% of h2's",
		"Mirror cost: each DUT with h1's port mirrored", "MIRRORED/UNMIRRORED",
		"met: span 64B: trestle:xdp@mirror at least 100% of h2's: no loss on the span port at the rate found, xdp mode: median 100.000% of h2's",
		"NOT met: span 64B: trestle@mirror at least 100% of h2's",
		"met: throughput 64B: trestle:xdp@mirror at least 0.9x floor@mirror",
		"Capture cost", "unavailable")
	_, md := writeReport(t, run)
	lacks(t, "report.md", md, "## Mirror cost", "## Goals", "span.svg")
}
