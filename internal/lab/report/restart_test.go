package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/kinds/restart"
)

// restartRun is a restart run in two repetitions: the Linux bridge's
// streams with no event, trestle's events (one of which flooded), and Open
// vSwitch's, which lose frames.
func restartRun() *lab.Run {
	run := &lab.Run{Scenario: "restart", Title: "restarts", DUTs: []string{"linux-bridge", "trestle:xdp", "ovs"}, Reps: 2, Timing: lab.DefaultTiming}
	add := func(dut string, rep int, kind string, watched bool, evs ...lab.RestartEvent) {
		for i := range evs {
			evs[i].Kind, evs[i].Index = kind, i+1
			evs[i].Sent = 1000
		}
		rec := &restart.Record{Kind: kind, What: "what " + kind + " does", RatePPS: 500e3, Load: 0.5, Throughput: 1e6, Watched: watched, Events: evs}
		run.Results = append(run.Results, lab.Result{DUT: dut, Rep: rep, Test: lab.TestThroughput, Param: "64", Value: 1e6, Unit: "pps"})
		var lost, flooded []float64
		for _, e := range evs {
			lost, flooded = append(lost, float64(e.Lost)), append(flooded, float64(e.Flooded))
		}
		r := lab.Result{DUT: dut, Rep: rep, Test: lab.TestRestart, Param: kind, Unit: "frames", PerEvent: lost}
		if err := r.SetRecord(rec); err != nil {
			panic(err)
		}
		run.Results = append(run.Results, r,
			lab.Result{DUT: dut, Rep: rep, Test: restart.TestRestartFlooded, Param: kind, Unit: "frames", PerEvent: flooded})
	}
	for rep := 1; rep <= 2; rep++ {
		add("linux-bridge", rep, lab.EventNone, true, lab.RestartEvent{}, lab.RestartEvent{})
		add("trestle:xdp", rep, lab.EventSIGKILL, true, lab.RestartEvent{BackMs: 100}, lab.RestartEvent{BackMs: 300, Flooded: 3 * uint64(rep-1)})
		add("ovs", rep, lab.EventSIGKILL, true, lab.RestartEvent{BackMs: 1000, Lost: 500, Flooded: 200}, lab.RestartEvent{BackMs: 2000, Lost: 700, Flooded: 100})
	}
	return run
}

func TestRestartTable(t *testing.T) {
	run := restartRun()
	for _, g := range Groups(run) {
		if isRestart(g.Test) {
			t.Errorf("group %s: restart results belong in their own table", g.Key())
		}
	}
	rows := restart.Restarts(run)
	if len(rows) != 3 || rows[0].DUT != "linux-bridge" || rows[1].DUT != "trestle:xdp" || rows[2].DUT != "ovs" {
		t.Fatalf("rows: %+v", rows)
	}
	// Both repetitions' events, pooled.
	tr := rows[1].Sum
	if tr.Events != 4 || tr.LostMax != 0 || tr.FloodedMax != 3 || tr.FloodedTotal != 3 || tr.BackMedian.Milliseconds() != 200 {
		t.Errorf("trestle:xdp sigkill: %+v", tr)
	}
	if o := rows[2].Sum; o.LostMax != 700 || o.LostMedian != 600 || o.LostTotal != 2400 || o.FloodedMax != 200 {
		t.Errorf("ovs sigkill: %+v", o)
	}
	var out bytes.Buffer
	Terminal(&out, run)
	text := out.String()
	lacks(t, "terminal output", text,
		"throughput 64B",
		"linux-bridge  none     4       0          0       0      0             0       0      - (no daemon)",
		"trestle:xdp   sigkill  4       0          0       0      3             0       3      200ms",
		"ovs           sigkill  4       700        600     2400   200           150     600    1.5s",
		"warning: trestle:xdp sigkill: frames lost or flooded in 1 of 4 events (#2 lost 0 flooded 3)",
		"linux-bridge none: what none does",
	)
	if strings.Contains(text, "restart sigkill") || strings.Contains(text, "warning: ovs") {
		t.Errorf("restart results in the generic table, or a peer's losses as a warning:\n%s", text)
	}
	_, md := writeReport(t, run)
	lacks(t, "report.md", md,
		"## Restarts",
		"| trestle:xdp | sigkill | 4 | 0 | 0 | 0 | 3 | 0 | 3 | 200ms | 500kpps (50% of its throughput), 1k frames an event |",
		"- ovs sigkill: 500/200 1s, 700/100 2s, 500/200 1s, 700/100 2s",
		"- trestle:xdp, sigkill: what sigkill does")
}

func isRestart(test string) bool {
	return test == lab.TestRestart || test == restart.TestRestartFlooded
}
