package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
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
	for _, want := range []string{"throughput 64B", "trestle:xdp vs linux-bridge: +177", "failed: ovs, repetition 1: it broke"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("terminal output lacks %q:\n%s", want, out.String())
		}
	}
	dir := t.TempDir()
	if err := Write(dir, fakeRun()); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| throughput 64B | trestle:xdp | 2Mpps | 0.45 |", "Difference at 95.0% confidence", "throughput-size.svg"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
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
