package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/kinds/loadlatency"
	"github.com/trestle/trestle/internal/lab/sink"
)

// pdrRun is a run both ways with NDR and PDR from each search, and
// latency under load at 10, 50 and 90% of the PDR.
func pdrRun() *lab.Run {
	run := &lab.Run{Scenario: "router-pps", Title: "a test", DUTs: []string{"direct", "floor", "trestle:xdp"}, Reps: 3,
		Sizes: []lab.FrameSize{"64"}, Timing: lab.DefaultTiming, Bidirectional: true}
	ndr := map[string][]float64{"direct": {4e6, 4.2e6, 4.4e6}, "floor": {2e6, 2.1e6, 2.2e6}, "trestle:xdp": {1.8e6, 1.9e6, 2e6}}
	pdr := map[string][]float64{"direct": {5e6, 5.2e6, 5.4e6}, "floor": {2.5e6, 2.6e6, 2.7e6}, "trestle:xdp": {2.2e6, 2.34e6, 2.4e6}}
	for rep := 1; rep <= 3; rep++ {
		for _, d := range run.DUTs {
			n, p := ndr[d][rep-1], pdr[d][rep-1]
			sr := &lab.SearchResult{Throughput: n, PDR: p, Config: lab.DefaultSearch}
			run.Results = append(run.Results, lab.Result{DUT: d, Rep: rep, Test: lab.TestThroughput, Param: "64", Value: n, Unit: "pps",
				Search: sr, Directions: []float64{n / 2, n / 2}, PDRDirections: []float64{p / 2, p / 2}})
			for i, share := range lab.CSITLoadShares {
				l := &sink.Latency{Count: 1000, P50: time.Duration(1000 * (i + 1)), P90: 2000, P99: time.Duration(5000 * (i + 1)), P999: 9000, Max: 20000}
				run.Results = append(run.Results, lab.Result{DUT: d, Rep: rep, Test: lab.TestLoadLatency, Param: "64@" + []string{"10", "50", "90"}[i] + "%",
					Value: float64(l.P50), Unit: "ns", Latency: l, Note: "x% of the PDR, 1 Mpps",
					Trials: []lab.TrialResult{{Requested: share * p, Offered: share * p, Latency: l}}})
			}
		}
	}
	return run
}

func TestPDRColumns(t *testing.T) {
	run := pdrRun()
	groups := Groups(run)
	if len(groups) != 1 {
		t.Fatalf("%d groups, want throughput 64B only (latency-load has its own table)", len(groups))
	}
	for _, r := range groups[0].Rows {
		want := map[string][3]float64{"direct": {5.2e6, 1, 2}, "floor": {2.6e6, 0.5, 1}, "trestle:xdp": {2.34e6, 0.45, 0.9}}[r.DUT]
		if r.PDRMedian != want[0] || !near(r.PDRRatio, want[1]) || !near(r.PDRVsFloor, want[2]) {
			t.Errorf("%s: PDR %v, %v vs direct, %v vs floor; want %v", r.DUT, r.PDRMedian, r.PDRRatio, r.PDRVsFloor, want)
		}
	}
	var b bytes.Buffer
	Terminal(&b, run)
	out := b.String()
	lacks(t, "the table", out, "PDR VS DIRECT", "PDR VS FLOOR", "EACH DIRECTION AT THE NDR", "2.34Mpps", "0.45", "0.90", "h1→h2 950kpps, h2→h1 950kpps",
		"MEDIAN is the NDR (0), PDR the median rate at 0.5% lost", "latency under load", "64B 90% of PDR", "15µs")
	_, md := writeReport(t, run)
	lacks(t, "report.md", md, "| PDR | PDR vs direct | PDR vs floor | each direction at the NDR |", "| 2.34Mpps | 0.45 | 0.90 |",
		"## Latency under load", "| 64B 50% of PDR | trestle:xdp |", "latency-load-64-p50.svg", "latency-load-64-p99.svg", "both directions' frames together", "NDR and PDR from one search")
	// ministat on the PDRs too, apart from the NDRs': trestle:xdp's PDRs
	// against direct's are 0.45x.
	lacks(t, "the table", out, "PDR, trestle:xdp vs direct: 0.45x")
	lacks(t, "report.md", md, "### throughput 64B (pps)", "### throughput 64B, PDR (pps)", "- PDR, trestle:xdp vs floor: 0.90x")

	// Where every PDR is its NDR (no loss up to the generator's rate),
	// the PDRs' verdicts would repeat the NDRs': there are none.
	for i := range run.Results {
		if sr := run.Results[i].Search; sr != nil {
			sr.PDR = sr.Throughput
		}
	}
	b.Reset()
	Terminal(&b, run)
	_, md = writeReport(t, run)
	lacks(t, "the table", b.String(), "trestle:xdp vs floor: 0.90x")
	if strings.Contains(b.String(), "PDR, trestle:xdp") || strings.Contains(md, ", PDR (pps)") {
		t.Errorf("ministat on PDRs that are the NDRs:\n%s", b.String())
	}
}

// TestPDRSizeChart: with frame sizes to draw, the PDR has a chart against
// the size beside the NDR's, and a DUT whose search found no PDR at a
// size is a gap in it, not a point at 0.
func TestPDRSizeChart(t *testing.T) {
	run := pdrRun()
	run.Sizes = []lab.FrameSize{"64", "1518"}
	for _, r := range slices.Clone(run.Results) {
		if r.Test != lab.TestThroughput {
			continue
		}
		sr := *r.Search
		sr.Throughput, sr.PDR = r.Value/10, sr.PDR/10
		if r.DUT == "trestle:xdp" {
			sr.PDR = 0
		}
		r.Param, r.Value, r.Search = "1518", sr.Throughput, &sr
		run.Results = append(run.Results, r)
	}
	dir, md := writeReport(t, run)
	lacks(t, "report.md", md, "![Throughput against frame size](throughput-size.svg)", "![PDR against frame size (at most 0.5% lost)](pdr-size.svg)")
	svg, err := os.ReadFile(filepath.Join(dir, "pdr-size.svg"))
	if err != nil {
		t.Fatal(err)
	}
	// Both ways: the line rate is the sum of the two directions'. trestle's
	// PDR is a point at 64 bytes and a gap at 1518; one repetition's
	// point has no error bar.
	lacks(t, "pdr-size.svg", string(svg), "10 GbE line rate, both ways", "trestle:xdp: 64, 2.34M", "floor: 1.518k, 260k")
	if strings.Contains(string(svg), "trestle:xdp: 1.518k") {
		t.Errorf("pdr-size.svg draws trestle's missing PDR at 1518 bytes:\n%s", svg)
	}

	// A run whose searches looked for no PDR draws none.
	for i := range run.Results {
		if sr := run.Results[i].Search; sr != nil {
			c := *sr
			c.Config.PDRLoss = 0
			run.Results[i].Search = &c
		}
	}
	dir, md = writeReport(t, run)
	if strings.Contains(md, "pdr-size.svg") {
		t.Errorf("a PDR chart with no PDR looked for:\n%s", md)
	}
	if _, err := os.Stat(filepath.Join(dir, "pdr-size.svg")); err == nil {
		t.Error("pdr-size.svg written with no PDR looked for")
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestPDRMissing: a search that found no PDR says "none"; a result from
// before PDRs (no config for one) has no PDR column at all.
func TestPDRMissing(t *testing.T) {
	run := pdrRun()
	for i := range run.Results {
		r := &run.Results[i]
		if r.DUT == "trestle:xdp" && r.Search != nil {
			r.Search.PDR = 0
		}
	}
	var b bytes.Buffer
	Terminal(&b, run)
	lacks(t, "the table", b.String(), "none")

	old := fakeRun()
	b.Reset()
	Terminal(&b, old)
	if strings.Contains(b.String(), "PDR") || strings.Contains(b.String(), "EACH DIRECTION") {
		t.Errorf("a run with no PDR has PDR columns:\n%s", b.String())
	}
}

// TestOldReportLoads: a report JSON from before the PDR (no pdr fields)
// still loads and reports as before.
func TestOldReportLoads(t *testing.T) {
	matches, _ := filepath.Glob("../../../docs/lab/router-pps.json")
	if len(matches) == 0 {
		t.Skip("no saved router-pps run")
	}
	b, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	var run lab.Run
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	Terminal(&out, &run)
	if strings.Contains(out.String(), "PDR") || !strings.Contains(out.String(), "throughput 64B") {
		t.Errorf("an old run's table:\n%s", out.String())
	}
	if _, err := os.Stat(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	writeReport(t, &run)
}

// A stream is marked "(of X asked)" when its generator did not hold the
// rate by the run's own rule (lab.SearchConfig.Held, the rule of the
// search and of the latency notes): 1.5% short is held at the default
// 2%, 10% short is not.
func TestLoadLatencyShort(t *testing.T) {
	run := pdrRun()
	for i := range run.Results {
		r := &run.Results[i]
		if r.Test != lab.TestLoadLatency || r.Param != "64@90%" {
			continue
		}
		tr := &r.Trials[0]
		switch r.DUT {
		case "trestle:xdp":
			tr.Offered = tr.Requested * 0.985
		case "floor":
			tr.Offered = tr.Requested * 0.9
		}
	}
	for _, row := range loadlatency.LoadLatencies(run) {
		want := row.DUT == "floor" && row.Share == 0.9
		if row.Short != want {
			t.Errorf("%s at %.0f%%: short %v, want %v (offered %.0f of %.0f)", row.DUT, 100*row.Share, row.Short, want, row.Offered, row.Requested)
		}
		if got := strings.Contains(strings.Join(row.Cells(), " "), "asked)"); got != want {
			t.Errorf("%s at %.0f%%: marked %v, want %v", row.DUT, 100*row.Share, got, want)
		}
	}
}

// A run of units by frame size (rfc2544) says so in its report's header.
func TestReportSaysBySize(t *testing.T) {
	run := pdrRun()
	_, md := writeReport(t, run)
	lacks(t, "report.md", md, "DUT order rotated each repetition")
	run.Units = []lab.UnitRecord{{DUT: "floor", Rep: 1, Size: "64"}}
	_, md = writeReport(t, run)
	lacks(t, "report.md", md, "a unit per DUT and frame size, the DUT order rotated each size and repetition")
}
