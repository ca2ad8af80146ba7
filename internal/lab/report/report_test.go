package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/lab"
)

func fakeRun() *lab.Run {
	run := &lab.Run{Scenario: "test", Title: "a test", DUTs: []string{"direct", "linux-bridge", "trestle:xdp"}, Reps: 3,
		Sizes: []lab.FrameSize{"64", "1518"}, Timing: lab.DefaultTiming}
	vals := map[string][]float64{
		"direct":       {4.4e6, 4.5e6, 4.3e6},
		"linux-bridge": {0.70e6, 0.72e6, 0.74e6},
		"trestle:xdp":  {1.9e6, 2.0e6, 2.1e6},
	}
	for rep := 1; rep <= 3; rep++ {
		for _, d := range run.DUTs {
			for _, size := range []string{"64", "1518"} {
				v := vals[d][rep-1]
				if size == "1518" {
					v /= 10
				}
				run.Results = append(run.Results, lab.Result{DUT: d, Rep: rep, Test: lab.TestThroughput, Param: size, Value: v, Unit: "pps"})
			}
		}
		run.Results = append(run.Results, lab.Result{DUT: "trestle:xdp", Rep: rep, Test: lab.TestTCP, Param: "streams=1", Value: float64(rep) * 1e9, Unit: "bit/s"})
	}
	run.Results = append(run.Results, lab.Result{DUT: "ovs", Rep: 1, Test: "unit", Error: "it broke\nand more"})
	return run
}

// writeReport writes run's report into a new directory and returns the
// directory and report.md, failing t if there are none.
func writeReport(t *testing.T, run *lab.Run) (dir, md string) {
	t.Helper()
	dir = t.TempDir()
	if err := Write(dir, run); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, string(b)
}

// lacks fails t for each of wants that is not in text, named what.
func lacks(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}

func TestGroupsMediansRatios(t *testing.T) {
	groups := Groups(fakeRun())
	if len(groups) != 3 {
		t.Fatalf("%d groups, want 64B, 1518B and tcp", len(groups))
	}
	g := groups[0]
	if g.Key() != "throughput 64B" || len(g.Rows) != 3 {
		t.Fatalf("first group %q with %d rows", g.Key(), len(g.Rows))
	}
	want := map[string][2]float64{"direct": {4.4e6, 1}, "linux-bridge": {0.72e6, 0.72 / 4.4}, "trestle:xdp": {2.0e6, 2.0 / 4.4}}
	for _, r := range g.Rows {
		w := want[r.DUT]
		if r.Median != w[0] || (r.Ratio-w[1]) > 1e-9 || (w[1]-r.Ratio) > 1e-9 {
			t.Errorf("%s: median %v ratio %v, want %v %v", r.DUT, r.Median, r.Ratio, w[0], w[1])
		}
	}
	if tcp := groups[2]; tcp.Rows[0].Ratio != 0 {
		t.Errorf("tcp without direct has ratio %v", tcp.Rows[0].Ratio)
	}
}

func TestCompareUsesMinistat(t *testing.T) {
	cs := Compare(Groups(fakeRun()))
	var found bool
	for _, c := range cs {
		if c.Group.Param == "64" && c.Other.DUT == "trestle:xdp" && c.Base.DUT == "linux-bridge" {
			found = true
			// ministat: (2.0 - 0.72) / 0.72 = +177.8%, proven.
			if !c.Result.Proven || c.Result.Percent < 177 || c.Result.Percent > 178.5 {
				t.Errorf("comparison %+v", c.Result)
			}
		}
		if c.Other.DUT != "trestle:xdp" {
			t.Errorf("compared %s against %s: only trestle is compared with the others", c.Other.DUT, c.Base.DUT)
		}
	}
	if !found {
		t.Error("no trestle:xdp vs linux-bridge comparison")
	}
}

func TestTerminalAndWrite(t *testing.T) {
	var out bytes.Buffer
	Terminal(&out, fakeRun())
	for _, want := range []string{"throughput 64B", "trestle:xdp vs linux-bridge: 2.78x; +177", "failed: ovs, repetition 1: it broke"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("terminal output lacks %q:\n%s", want, out.String())
		}
	}
	dir, md := writeReport(t, fakeRun())
	lacks(t, "report.md", md, "| throughput 64B | trestle:xdp | 2Mpps | 0.45 |", "Difference at 95.0% confidence", "throughput-size.svg")
	svgs, _ := filepath.Glob(filepath.Join(dir, "*.svg"))
	if len(svgs) == 0 {
		t.Fatal("no charts written")
	}
	for _, f := range svgs {
		b, _ := os.ReadFile(f)
		d := xml.NewDecoder(bytes.NewReader(b))
		for {
			if _, err := d.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Errorf("%s: not XML: %v", f, err)
				break
			}
		}
	}
}

// vlanRun is a vlan-overhead run: trestle:xdp loses 3% with VLANs, ovs
// 20%; the Linux bridge with VLANs was unavailable.
func vlanRun() *lab.Run {
	run := &lab.Run{Scenario: "vlan-overhead", Title: "VLANs", Reps: 3, Sizes: []lab.FrameSize{"64"}, Timing: lab.DefaultTiming,
		DUTs:  []string{"floor@vlan", "trestle:xdp", "trestle:xdp@vlan", "ovs", "ovs@vlan", "linux-bridge@vlan"},
		Goals: lab.Scenarios["vlan-overhead"].Goals}
	vals := map[string][]float64{
		"floor@vlan":       {3.00e6, 3.02e6, 2.98e6},
		"trestle:xdp":      {3.00e6, 3.10e6, 3.05e6},
		"trestle:xdp@vlan": {2.94e6, 2.98e6, 2.96e6},
		"ovs":              {500e3, 510e3, 490e3},
		"ovs@vlan":         {400e3, 410e3, 390e3},
	}
	for rep := 1; rep <= 3; rep++ {
		for _, d := range run.DUTs {
			if d == "linux-bridge@vlan" {
				run.Units = append(run.Units, lab.UnitRecord{DUT: d, Rep: rep, Skipped: "DUT not available here: this kernel has no bridge VLAN filtering"})
				continue
			}
			run.Results = append(run.Results, lab.Result{DUT: d, Rep: rep, Test: lab.TestThroughput, Param: "64", Value: vals[d][rep-1], Unit: "pps"})
		}
	}
	return run
}

func TestVLANCost(t *testing.T) {
	run := vlanRun()
	groups := Groups(run)
	cs := Compare(groups)
	vrs := Variants(groups, cs)
	if len(vrs) != 3 {
		t.Fatalf("%d variant rows, want the floor (with no base), trestle:xdp and ovs", len(vrs))
	}
	for _, c := range []struct {
		dut     string
		ratio   float64
		percent float64
		proven  bool
	}{{"trestle:xdp", 2.96 / 3.05, -2.95, true}, {"ovs", 0.8, -20, true}} {
		var vr *VariantRow
		for i := range vrs {
			if vrs[i].DUT == c.dut {
				vr = &vrs[i]
			}
		}
		if vr == nil || vr.Knobs != "vlan" || vr.Base == nil || vr.Base.DUT != c.dut || vr.Variant.DUT != c.dut+"@vlan" {
			t.Fatalf("%s: %+v", c.dut, vr)
		}
		if math.Abs(vr.Ratio-c.ratio) > 1e-9 {
			t.Errorf("%s: ratio %v, want %v", c.dut, vr.Ratio, c.ratio)
		}
		if vr.Cmp == nil || vr.Cmp.Result.Proven != c.proven || math.Abs(vr.Cmp.Result.Percent-c.percent) > 0.1 {
			t.Errorf("%s: ministat %+v, want %+.1f%% proven %v", c.dut, vr.Cmp, c.percent, c.proven)
		}
	}
	// trestle tagged against the VLAN floor and against Open vSwitch tagged.
	prs := Peers(groups, cs)
	if len(prs) != 2 || prs[0].Trestle.DUT != "trestle:xdp@vlan" || prs[0].Other.DUT != "floor@vlan" || math.Abs(prs[0].Ratio-2.96e6/3e6) > 1e-9 ||
		prs[1].Trestle.DUT != "trestle:xdp@vlan" || prs[1].Other.DUT != "ovs@vlan" || math.Abs(prs[1].Ratio-2.96e6/400e3) > 1e-9 || prs[1].Cmp == nil {
		t.Errorf("peers: %+v", prs)
	}
	gs := Goals(run, groups, cs)
	if len(gs) != 3 || !gs[0].Met || !gs[1].Met || !gs[2].Met {
		t.Errorf("goals: %+v", gs)
	}
	// trestle:xdp@vlan is compared with ovs@vlan, not with ovs.
	var peer bool
	for _, c := range cs {
		if c.Other.DUT == "trestle:xdp@vlan" && c.Base.DUT == "ovs" {
			t.Errorf("compared trestle:xdp@vlan with untagged ovs")
		}
		peer = peer || c.Other.DUT == "trestle:xdp@vlan" && c.Base.DUT == "ovs@vlan"
	}
	if !peer {
		t.Error("no ministat comparison of trestle:xdp@vlan with ovs@vlan")
	}

	var out bytes.Buffer
	Terminal(&out, run)
	for _, want := range []string{
		"VLAN cost", "TAGGED/UNTAGGED",
		"throughput 64B trestle:xdp 3.05Mpps 2.96Mpps 0.970 -3.0% ± 2.8%",
		"throughput 64B ovs 500kpps 400kpps 0.800 -20.0% ± 4.5%",
		"- linux-bridge - unavailable",
		"trestle:xdp@vlan / ovs@vlan 7.40x +640.0% ± 9.0%",
		"met: throughput 64B: trestle:xdp@vlan at least 0.95x trestle:xdp", "met: throughput 64B: trestle:xdp@vlan at least 5x ovs@vlan",
		"met: throughput 64B: trestle:xdp@vlan at least 0.98x floor@vlan",
		"skipped linux-bridge@vlan: DUT not available here: this kernel has no bridge VLAN filtering",
	} {
		// Column widths aside.
		if text := strings.Join(strings.Fields(out.String()), " "); !strings.Contains(text, want) {
			t.Errorf("terminal output lacks %q:\n%s", want, out.String())
		}
	}
	_, md := writeReport(t, run)
	lacks(t, "report.md", md,
		"## VLAN cost", "| throughput 64B | trestle:xdp | 3.05Mpps | 2.96Mpps | 0.970 | -3.0% ± 2.8% |",
		"| - | linux-bridge | - | unavailable (see linux-bridge@vlan under Settings) | - | - |",
		"| throughput 64B | trestle:xdp@vlan / ovs@vlan | 7.40x |", "## Goals\n\n- met: ")

	// A cost above 5%: the goal is not met, and says so.
	for i := range run.Results {
		if run.Results[i].DUT == "trestle:xdp@vlan" {
			run.Results[i].Value *= 0.9
		}
	}
	groups = Groups(run)
	if gs := Goals(run, groups, Compare(groups)); gs[0].Met || !strings.HasPrefix(goalText(gs[0]), "NOT met") {
		t.Errorf("a 13%% cost meets the goal: %+v %s", gs[0], goalText(gs[0]))
	}
}

// floorRun is a quick run with the floor, in which trestle's mean is well
// above its median: the ratio of the means to direct would be 0.52, the
// ratio of the medians is 0.45.
func floorRun() *lab.Run {
	run := &lab.Run{Scenario: "quick", Title: "quick", DUTs: []string{"direct", "floor", "trestle:xdp"}, Reps: 3,
		Sizes: []lab.FrameSize{"64"}, Timing: lab.DefaultTiming}
	vals := map[string][]float64{
		"direct":      {4.4e6, 4.5e6, 4.3e6},
		"floor":       {2.8e6, 2.9e6, 3.0e6},
		"trestle:xdp": {1.9e6, 2.0e6, 2.9e6},
	}
	for rep := 1; rep <= 3; rep++ {
		for _, d := range run.DUTs {
			run.Results = append(run.Results, lab.Result{DUT: d, Rep: rep, Test: lab.TestThroughput, Param: "64", Value: vals[d][rep-1], Unit: "pps"})
		}
	}
	return run
}

// TestOneRatio: a run that measured the floor has its ratios beside
// direct's, and the ministat lines give the table's ratio, of the medians,
// and say so; without the floor there is no such column.
func TestOneRatio(t *testing.T) {
	run := floorRun()
	g := Groups(run)[0]
	want := map[string][2]float64{"direct": {1, 4.4 / 2.9}, "floor": {2.9 / 4.4, 1}, "trestle:xdp": {2.0 / 4.4, 2.0 / 2.9}}
	for _, r := range g.Rows {
		if w := want[r.DUT]; math.Abs(r.Ratio-w[0]) > 1e-9 || math.Abs(r.VsFloor-w[1]) > 1e-9 {
			t.Errorf("%s: vs direct %v, vs floor %v; want %v", r.DUT, r.Ratio, r.VsFloor, w)
		}
	}
	var out bytes.Buffer
	Terminal(&out, run)
	term := strings.Join(strings.Fields(out.String()), " ")
	lacks(t, "terminal", term,
		"VS DIRECT, VS FLOOR: the ratios of the medians",
		"TEST DUT MEDIAN VS DIRECT VS FLOOR ALL REPETITIONS",
		"throughput 64B trestle:xdp 2Mpps 0.45 0.69 1.9Mpps 2Mpps 2.9Mpps",
		"throughput 64B floor 2.9Mpps 0.66 1.00",
		"the ratio is of the medians, as in the table; the difference ± its interval is of the means",
		"trestle:xdp vs direct: 0.45x; -48.5%",
		"trestle:xdp vs floor: 0.69x;")
	if strings.Contains(term, "0.52x") {
		t.Errorf("a ministat line gives the ratio of the means:\n%s", out.String())
	}
	_, md := writeReport(t, run)
	lacks(t, "report.md", md,
		"| test | DUT | median | vs direct | vs floor | CPU busy | repetitions |",
		"| throughput 64B | trestle:xdp | 2Mpps | 0.45 | 0.69 | - |",
		"the ratios are of the medians",
		"- trestle:xdp vs direct: 0.45x; -48.5%")

	out.Reset()
	Terminal(&out, fakeRun())
	if strings.Contains(out.String(), "FLOOR") {
		t.Errorf("a run without the floor has a column for it:\n%s", out.String())
	}
	if _, md := writeReport(t, fakeRun()); strings.Contains(md, "vs floor") {
		t.Error("report.md of a run without the floor has a column for it")
	}
}

// TestFloorOfVariant: a DUT with VLANs or a mirror is held against the
// floor of the same set-up when the run measured it (floor@vlan, the bare
// tag push; floor@mirror, the bare broadcast), and against the plain floor
// when it did not.
func TestFloorOfVariant(t *testing.T) {
	run := &lab.Run{Scenario: "vlan-overhead", Title: "vlan-overhead", Reps: 1, Sizes: []lab.FrameSize{"64"}, Timing: lab.DefaultTiming,
		DUTs: []string{"floor", "floor@vlan", "trestle:xdp", "trestle:xdp@vlan", "trestle:xdp@mirror"}}
	vals := map[string]float64{"floor": 4e6, "floor@vlan": 3.6e6, "trestle:xdp": 3.8e6, "trestle:xdp@vlan": 3.4e6, "trestle:xdp@mirror": 1e6}
	for _, d := range run.DUTs {
		run.Results = append(run.Results, lab.Result{DUT: d, Rep: 1, Test: lab.TestThroughput, Param: "64", Value: vals[d], Unit: "pps"})
	}
	want := map[string]float64{"floor": 1, "floor@vlan": 1, "trestle:xdp": 3.8 / 4, "trestle:xdp@vlan": 3.4 / 3.6, "trestle:xdp@mirror": 1.0 / 4}
	for _, r := range Groups(run)[0].Rows {
		if math.Abs(r.VsFloor-want[r.DUT]) > 1e-9 {
			t.Errorf("%s: vs floor %v, want %v", r.DUT, r.VsFloor, want[r.DUT])
		}
	}
}

// TestFloorOfMode: trestle at tc (trestle:tc, and trestle, whose default
// mode is tc on the lab's veths) is held against the tc floor of its
// set-up where the run measured it, else against the XDP floor of the same
// set-up, as every run before the tc floor; the tc floor is its own.
func TestFloorOfMode(t *testing.T) {
	run := &lab.Run{Scenario: "quick", Title: "quick", Reps: 1, Sizes: []lab.FrameSize{"64"}, Timing: lab.DefaultTiming,
		DUTs: []string{"floor", "floor:tc", "floor@vlan", "trestle:xdp", "trestle:tc", "trestle", "trestle:tc@vlan", "linux-bridge"}}
	vals := map[string]float64{"floor": 4e6, "floor:tc": 2e6, "floor@vlan": 3.6e6, "trestle:xdp": 3.8e6, "trestle:tc": 1.8e6, "trestle": 1.6e6,
		"trestle:tc@vlan": 1.2e6, "linux-bridge": 1e6}
	for _, d := range run.DUTs {
		run.Results = append(run.Results, lab.Result{DUT: d, Rep: 1, Test: lab.TestThroughput, Param: "64", Value: vals[d], Unit: "pps"})
	}
	want := map[string]float64{"floor": 1, "floor:tc": 1, "floor@vlan": 1, "trestle:xdp": 3.8 / 4, "trestle:tc": 1.8 / 2, "trestle": 1.6 / 2,
		"trestle:tc@vlan": 1.2 / 3.6, "linux-bridge": 1.0 / 4}
	for _, r := range Groups(run)[0].Rows {
		if math.Abs(r.VsFloor-want[r.DUT]) > 1e-9 {
			t.Errorf("%s: vs floor %v, want %v", r.DUT, r.VsFloor, want[r.DUT])
		}
	}
	_, md := writeReport(t, run)
	lacks(t, "report.md", md, "trestle at tc against `floor:tc`, a bare tc redirect")
}

// TestVariantOfVariant: a build measured against the one before it, both
// with a mirror (trestle:xdp@mirror,bin=old beside trestle:xdp@mirror and
// trestle:xdp), is a variant row of the mirrored DUT by the bin knob, not of
// trestle:xdp by two,
// with ministat's verdict, in a table of its own.
func TestVariantOfVariant(t *testing.T) {
	run := &lab.Run{Scenario: "mirror", Title: "mirror", Reps: 3, Sizes: []lab.FrameSize{"64"}, Timing: lab.DefaultTiming,
		DUTs: []string{"trestle:xdp", "trestle:xdp@mirror", "trestle:xdp@mirror,bin=/tmp/old"}}
	vals := map[string][]float64{
		"trestle:xdp":                     {3.00e6, 3.02e6, 3.01e6},
		"trestle:xdp@mirror":              {1.50e6, 1.52e6, 1.51e6},
		"trestle:xdp@mirror,bin=/tmp/old": {1.40e6, 1.41e6, 1.42e6},
	}
	for rep := 1; rep <= 3; rep++ {
		for _, d := range run.DUTs {
			run.Results = append(run.Results, lab.Result{DUT: d, Rep: rep, Test: lab.TestThroughput, Param: "64", Value: vals[d][rep-1], Unit: "pps"})
		}
	}
	groups := Groups(run)
	cs := Compare(groups)
	vrs := Variants(groups, cs)
	if len(vrs) != 2 {
		t.Fatalf("%d variant rows, want 2: %+v", len(vrs), vrs)
	}
	if vrs[0].DUT != "trestle:xdp" || vrs[0].Knobs != "mirror" || vrs[0].Base == nil {
		t.Errorf("first variant row %+v, want trestle:xdp@mirror against trestle:xdp", vrs[0])
	}
	vr := vrs[1]
	if vr.Variant.DUT != "trestle:xdp@mirror,bin=/tmp/old" || vr.DUT != "trestle:xdp@mirror" || vr.Knobs != "bin=/tmp/old" || vr.Base == nil || vr.Cmp == nil {
		t.Fatalf("variant row %+v, want trestle:xdp@mirror by bin=/tmp/old, compared", vr)
	}
	if math.Abs(vr.Ratio-1.41/1.51) > 1e-9 || !vr.Cmp.Result.Proven {
		t.Errorf("ratio %v, ministat %+v; want %v, proven", vr.Ratio, vr.Cmp.Result, 1.41/1.51)
	}
	var b strings.Builder
	Terminal(&b, run)
	if !strings.Contains(b.String(), "Variant @bin=/tmp/old against its DUT") ||
		!regexp.MustCompile(`trestle:xdp@mirror +1.51Mpps +1.41Mpps +0.934`).MatchString(b.String()) {
		t.Errorf("no table of the build against the other, both mirrored:\n%s", b.String())
	}
}
