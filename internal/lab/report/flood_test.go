package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/kinds/macflood"
	"github.com/trestle/trestle/internal/lab/kinds/soak"
	"github.com/trestle/trestle/internal/lab/sink"
)

// floodRun is a mac-flood run: trestle keeps its stream and its table,
// the Linux bridge (no daemon) too, Open vSwitch loses frames and evicts.
func floodRun() *lab.Run {
	run := &lab.Run{Scenario: "mac-flood", Title: "MAC flood", DUTs: []string{"trestle:xdp", "linux-bridge", "ovs"}, Reps: 1, Timing: lab.DefaultTiming, Sizes: []lab.FrameSize{"64"},
		Machine: lab.Machine{CPUs: 2}}
	samples := func(learned []int, rss uint64, pps float64) []macflood.FloodSample {
		var out []macflood.FloodSample
		for i, n := range learned {
			s := macflood.FloodSample{T: float64(i + 1), Flooding: i > 0 && i < len(learned)-1, Learned: n, StreamPPS: pps}
			if rss > 0 {
				s.RSSKiB = rss + uint64(1024*i)
			}
			out = append(out, s)
		}
		return out
	}
	var otherCPU float64
	add := func(dut string, tput float64, lost int64, ratio float64, learned []int, rss uint64, kept int, daemon string) {
		rate := tput / 2
		rec := &macflood.Record{FrameSize: "64", RatePPS: rate, Throughput: tput, Load: 0.5, Sources: 1000000, FloodSeconds: 30, MaxEntries: 65536,
			TableLimit: "limit of " + dut, Daemon: daemon, Unmeasured: map[string]string{},
			Base: macflood.FloodWindow{Sent: 1000, RatePPS: rate, Seconds: 32, Samples: samples([]int{4, 4, 4}, rss, rate),
				Side: &macflood.SideLearn{Addresses: 1000, Learned: 1000, Millis: 30}},
			Flood: macflood.FloodWindow{Flood: true, Sent: 1000, Lost: lost, RatePPS: rate * ratio, Seconds: 32, FloodOffered: 2e6, FloodDelivered: 123456,
				Samples: samples(learned, rss, rate*ratio), Side: &macflood.SideLearn{Addresses: 1000, Learned: 1000, Millis: 250}},
		}
		for i := 0; i < 4; i++ {
			rec.Statics = append(rec.Statics, macflood.StaticCheck{MAC: "0e:5a:00:00:00:0" + string(rune('1'+i)), Port: "p2", Before: true, After: i < kept})
		}
		if daemon == "" {
			rec.Unmeasured["memory"] = "no daemon"
		}
		rec.Flood.OtherCPU = otherCPU
		r := lab.Result{DUT: dut, Rep: 1, Test: lab.TestMACFlood, Param: "lost", Value: float64(lost), Unit: "frames"}
		if err := r.SetRecord(rec); err != nil {
			panic(err)
		}
		run.Results = append(run.Results,
			lab.Result{DUT: dut, Rep: 1, Test: lab.TestThroughput, Param: "64", Value: tput, Unit: "pps"}, r,
			lab.Result{DUT: dut, Rep: 1, Test: lab.TestMACFlood, Param: "rate", Value: ratio, Unit: "ratio"})
	}
	add("trestle:xdp", 3e6, 0, 0.99, []int{4, 65536, 65536, 65536}, 30000, 4, "trestle (pid 1)")
	// Someone else's work took 16 of the 64 CPU-seconds of the Linux
	// bridge's stream with the flood.
	otherCPU = 16
	add("linux-bridge", 6e5, 0, 1, []int{4, 65536, 65536, 65536}, 0, 4, "")
	otherCPU = 0
	add("ovs", 5e5, 864599, 0.4, []int{4, 28670, 65532, 65532}, 480000, 3, "ovs-vswitchd (pid 2)")
	return run
}

func TestFloodReport(t *testing.T) {
	run := floodRun()
	for _, g := range Groups(run) {
		if isStream(g.Test) {
			t.Errorf("group %s: mac-flood results belong in their own table", g.Key())
		}
	}
	rows := macflood.Floods(run)
	if len(rows) != 3 || rows[0].DUT != "trestle:xdp" || rows[2].DUT != "ovs" {
		t.Fatalf("rows: %+v", rows)
	}
	if !rows[0].Sum.GoalMet || rows[2].Sum.GoalMet || rows[2].Sum.StaticsKept != 3 {
		t.Errorf("summaries: %+v / %+v", rows[0].Sum, rows[2].Sum)
	}
	var out bytes.Buffer
	Terminal(&out, run)
	text := out.String()
	lacks(t, "terminal", text, "mac-flood: the stream h1 -> h2 alone and while h3 floods from 1000000 random sources for 30s (goal: 0 lost and 90% of its rate)",
		"1.5Mpps (50% of 3Mpps)", "0 (without: 0)", "0.990 (1.48Mpps / 1.5Mpps)", "65536 of 65536", "4 of 4", "all in 30 ms / all in 250 ms",
		"31.3 MiB / 32.3 MiB / 32.3 MiB", "no daemon", "864599 (without: 0)", "0.400", "3 of 4", "NOT met")
	lacks(t, "terminal", text, "note: linux-bridge, the stream with the flood: other processes on the machine used 16.0 CPU-seconds of its 2 CPUs' 64 (25%): its figures are a shared machine's")
	if strings.Contains(text, "warning: ovs") || strings.Contains(text, "warning: trestle") || strings.Count(text, "note: ") != 1 {
		t.Errorf("a peer's shortfall or a goal met is a warning:\n%s", text)
	}

	// trestle falling short is a warning.
	editFlood(t, &run.Results[1], func(rec *macflood.Record) { rec.Flood.Lost = 7 })
	out.Reset()
	Terminal(&out, run)
	lacks(t, "terminal", out.String(), "warning: trestle:xdp: the stream lost 7 frames and kept 99.0% of its rate")
	editFlood(t, &run.Results[1], func(rec *macflood.Record) { rec.Flood.Lost = 0 })

	dir := t.TempDir()
	if err := Write(dir, run); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	lacks(t, "report.md", string(md), "## MAC flood", "| trestle:xdp | 1.5Mpps (50% of 3Mpps) |", "table limit: limit of ovs", "memory not measured: no daemon",
		"static 0e:5a:00:00:00:04 on p2: before true, after false", "bridge B with it: 1000 of 1000 in 250 ms",
		"![MAC flood: learned addresses of the flooded bridge](macflood-table.svg)", "macflood-rate.svg", "macflood-memory.svg")
	for _, f := range []string{"macflood-table.svg", "macflood-rate.svg", "macflood-memory.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("%s: %v", f, err)
		}
	}
	table, _ := os.ReadFile(filepath.Join(dir, "macflood-table.svg"))
	mem, _ := os.ReadFile(filepath.Join(dir, "macflood-memory.svg"))
	if !bytes.Contains(table, []byte("limit 65536")) || bytes.Contains(mem, []byte("linux-bridge")) {
		t.Errorf("the table chart lacks its limit, or the memory chart has a DUT without a daemon")
	}
}

// editFlood changes the mac-flood record of r.
func editFlood(t *testing.T, r *lab.Result, edit func(*macflood.Record)) {
	t.Helper()
	var rec macflood.Record
	if err := r.RecordOf(&rec); err != nil {
		t.Fatal(err)
	}
	edit(&rec)
	if err := r.SetRecord(&rec); err != nil {
		t.Fatal(err)
	}
}

// soakRun is a soak of trestle (flat and stable) and of a DUT whose
// latency and memory grow.
func soakRun() *lab.Run {
	run := &lab.Run{Scenario: "soak", Title: "Soak", DUTs: []string{"trestle:xdp", "trestle"}, Reps: 1, Timing: lab.DefaultTiming, Sizes: []lab.FrameSize{"imix"},
		Machine: lab.Machine{CPUs: 2}}
	add := func(dut string, grow float64) {
		rec := &soak.Record{FrameSize: "imix", Flows: 1000, SrcPorts: "1024-2023", RatePPS: 2e6, Throughput: 2.2e6, Load: 0.9, Seconds: 180, WindowSeconds: 60, SampleSeconds: 10,
			Sent: 360e6, Received: 360e6, Offered: 2e6, Elapsed: 180, Daemon: "trestle (pid 3)",
			Maps: []lab.MapSize{{Name: "fdb", Type: "Hash", MaxEntries: 66560, Entries: 2}, {Name: "stats", Type: "PerCPUArray", MaxEntries: 256, Entries: -1}}}
		for i := 0; i < 3; i++ {
			l := sink.Latency{Count: 1000, P50: time.Duration(17000 * (1 + grow*float64(i))), P90: 18000, P99: time.Duration(29000 * (1 + grow*float64(i))), P999: 36000, Max: 60000}
			rec.Windows = append(rec.Windows, soak.SoakWindow{From: float64(60 * i), To: float64(60 * (i + 1)), Received: 120e6, RatePPS: 2e6, Latency: &l, OtherCPU: 30 * grow})
		}
		for i := 0; i <= 18; i++ {
			rec.Samples = append(rec.Samples, soak.SoakSample{T: float64(10 * i), RSSKiB: uint64(34000 * (1 + grow*float64(i))), Learned: 2, Maps: map[string]int{"fdb (id 7)": 2}})
		}
		r := lab.Result{DUT: dut, Rep: 1, Test: lab.TestSoak, Param: "imix", Value: 0, Unit: "frames"}
		if err := r.SetRecord(rec); err != nil {
			panic(err)
		}
		run.Results = append(run.Results,
			lab.Result{DUT: dut, Rep: 1, Test: lab.TestThroughput, Param: "imix", Value: 2.2e6, Unit: "pps"}, r)
	}
	add("trestle:xdp", 0)
	add("trestle", 0.5)
	return run
}

func TestSoakReport(t *testing.T) {
	run := soakRun()
	for _, g := range Groups(run) {
		if isStream(g.Test) {
			t.Errorf("group %s: soak results belong in their own table", g.Key())
		}
	}
	rows := soak.Soaks(run)
	if len(rows) != 2 || !rows[0].Sum.GoalMet || rows[1].Sum.GoalMet {
		t.Fatalf("rows: %+v", rows)
	}
	var out bytes.Buffer
	Terminal(&out, run)
	lacks(t, "terminal", out.String(), "soak: IMIX frames in 1000 flows at 90% of the zero-loss rate, windows of 1m0s",
		"2Mpps (90% of 2.2Mpps), 3m0s", "17µs → 17µs", "29µs → 29µs", "33.2 MiB → 33.2 MiB (most 33.2 MiB, +0 KiB/min)", "2 flat", "met",
		"17µs → 34µs (drifted)", "NOT met", "note: trestle: other processes on the machine used 45.0 CPU-seconds of its 2 CPUs' 360 (12%)", "warning: trestle: latency not stable from the first window to the last; memory or a map grew")
	dir := t.TempDir()
	if err := Write(dir, run); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	lacks(t, "report.md", string(md), "## Soak", "### trestle:xdp, window by window", "| 0-60 s | 2Mpps | 0 | 17µs | 18µs | 29µs | 36µs | 60µs | - | 0.0 s |",
		"counted in every sample: fdb (Hash, 2 of 66560); fixed size: stats (PerCPUArray, 256)", "- fdb (id 7): 2 at the first sample, 2 at the last, 2..2 in all",
		"![Soak: latency per window (p50, p99, p99.9)](soak-latency.svg)", "soak-memory.svg", "soak-maps.svg")
	for _, f := range []string{"soak-latency.svg", "soak-memory.svg", "soak-maps.svg"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// isStream says whether test is a kind whose results are streams of a
// section of their own (mac-flood, soak).
func isStream(test string) bool { return test == lab.TestMACFlood || test == lab.TestSoak }
