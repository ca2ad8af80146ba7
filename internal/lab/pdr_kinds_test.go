package lab_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	. "github.com/trestle/trestle/internal/lab"
	_ "github.com/trestle/trestle/internal/lab/kinds/all"
	"github.com/trestle/trestle/internal/lab/kinds/latency"
	"github.com/trestle/trestle/internal/lab/kinds/loadlatency"
	"github.com/trestle/trestle/internal/lab/kinds/throughput"
)

// TestExecuteBidirectional runs the throughput search and the latency
// under load both ways for real: each trial has both directions, each
// direction's frames reach the other end, the rates are the sums, and
// the PDR is there.
func TestExecuteBidirectional(t *testing.T) {
	RequireRoot(t)
	sc := tinyScenario([]string{"direct", "floor", "linux-bridge"})
	sc.Tests = []Kind{throughput.Kind{}, loadlatency.Kind{Shares: CSITLoadShares}, latency.Kind{Fractions: []float64{1}}}
	sc.Bidirectional = true
	sc.Timing.Search.LossGoal, sc.Timing.Search.PDRLoss = 0.01, 0.05
	run, _ := execute(t, sc, "")
	if !run.Bidirectional || !slices.ContainsFunc(run.Notes, func(n string) bool { return strings.HasPrefix(n, "bidirectional: ") }) {
		t.Errorf("the run does not say it went both ways: %v", run.Notes)
	}
	lat := map[string]int{}
	for _, r := range run.Results {
		for _, tr := range r.Trials {
			if len(tr.Directions) != 2 {
				t.Fatalf("%s %s: a trial with %d directions", r.DUT, r.Test, len(tr.Directions))
			}
			var sent uint64
			for _, d := range tr.Directions {
				if d.Sent == 0 || d.Received == 0 {
					t.Errorf("%s %s: %s -> %s sent %d, received %d", r.DUT, r.Test, d.From, d.To, d.Sent, d.Received)
				}
				sent += d.Sent
			}
			if sent != tr.Sent || tr.Directions[0].From != "h1" || tr.Directions[1].From != "h2" {
				t.Errorf("%s %s: directions %+v do not add up to %d sent", r.DUT, r.Test, tr.Directions, tr.Sent)
			}
		}
		switch r.Test {
		case TestThroughput:
			if r.Search == nil || r.Search.PDR < r.Value || len(r.Directions) != 2 || math.Abs(r.Directions[0]+r.Directions[1]-r.Value) > 1e-6*r.Value {
				t.Errorf("%s: NDR %v, directions %v, search %+v", r.DUT, r.Value, r.Directions, r.Search)
			}
		case TestLoadLatency:
			if r.Latency == nil || r.Latency.P50 <= 0 || r.Latency.Max < r.Latency.P999 {
				t.Errorf("%s %s: latency %+v", r.DUT, r.Param, r.Latency)
			}
			lat[r.DUT]++
		case TestLatency:
			// RFC 2544's latency at the NDR: the search's own load, the
			// sinks timing 1 frame in 64, not every frame.
			var got uint64
			for _, d := range r.Trials[0].Directions {
				got += d.Received
			}
			if r.Latency == nil || r.Latency.Count == 0 || r.Latency.Count > got/32 {
				t.Errorf("%s %s: %+v timed of %d frames received, want about 1 in 64", r.DUT, r.Param, r.Latency, got)
			}
			lat[r.DUT+" rfc"]++
		}
	}
	for _, d := range SpecTexts(sc.DUTs) {
		if lat[d+" rfc"] != 1 {
			t.Errorf("%s: %d latency results at 100%% of the NDR, want 1", d, lat[d+" rfc"])
		}
	}
	for _, d := range SpecTexts(sc.DUTs) {
		if lat[d] != len(CSITLoadShares) {
			t.Errorf("%s: %d latency-load results, want %d", d, lat[d], len(CSITLoadShares))
		}
	}
}

// rfc2544 runs a unit per DUT and frame size, the DUTs rotated within each
// size and from size to size, so that the figures compared at a size are
// minutes apart; each unit runs its one size. Other scenarios keep a unit
// per DUT with every size.
func TestPlanBySize(t *testing.T) {
	s := Scenarios["rfc2544"]
	s.DUTs = MustSpecs("floor", "linux-bridge", "trestle:xdp")
	s.Sizes = []FrameSize{"64", "128"}
	s.Reps = 2
	var got []string
	for _, u := range Plan(s) {
		got = append(got, fmt.Sprintf("%d %s %s", u.Rep(), u.Size(), u.DUT()))
		if su := s.ForUnit(u); len(su.Sizes) != 1 || su.Sizes[0] != u.Size() {
			t.Errorf("unit %+v runs sizes %v", u, su.Sizes)
		}
	}
	want := []string{
		"1 64 floor", "1 64 linux-bridge", "1 64 trestle:xdp",
		"1 128 linux-bridge", "1 128 trestle:xdp", "1 128 floor",
		"2 64 linux-bridge", "2 64 trestle:xdp", "2 64 floor",
		"2 128 trestle:xdp", "2 128 floor", "2 128 linux-bridge",
	}
	if !slices.Equal(got, want) {
		t.Errorf("units:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(s.Describe(), "each frame size in turn") {
		t.Errorf("Describe does not say the sizes take turns")
	}
	q := Scenarios["router-pps"]
	for _, u := range Plan(q) {
		if u.Size() != "" || len(q.ForUnit(u).Sizes) != len(q.Sizes) {
			t.Errorf("router-pps unit %+v has a size of its own", u)
		}
	}
}
