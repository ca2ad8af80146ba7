package idle

import (
	"slices"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/labtest"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// TestIdleKind: the idle kind is registered, has its preset, is left out of
// the tables of medians for a section of its own, and refuses nothing.
func TestIdleKind(t *testing.T) {
	if lab.KindOf(TestIdle) == nil || !lab.OwnSection(TestIdle) {
		t.Fatalf("idle: registered %v, own section %v", lab.KindOf(TestIdle) != nil, lab.OwnSection(TestIdle))
	}
	s, ok := lab.Scenarios["idle"]
	if !ok || !s.Has(TestIdle) || !slices.Contains(lab.SpecTexts(s.DUTs), "direct") || !s.HasPacketTests() {
		t.Fatalf("idle preset: %+v", s)
	}
	if d := s.Describe(); !strings.Contains(d, "Idle:     3s with no traffic, after 1s to settle") {
		t.Errorf("describe:\n%s", d)
	}
	notes, err := s.PrepareKinds()
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "/proc/PID/stat") {
		t.Errorf("prepare: %q, %v", notes, err)
	}
	for _, v := range s.DUTs {
		if e := lab.KindOf(TestIdle).Estimate(s, v); e != idleSettle+idleWindow {
			t.Errorf("%s estimated at %v", v, e)
		}
	}
}

// TestIdleSection: the idle table from recorded results, medians over the
// repetitions, a failed repetition counted apart, a DUT without a daemon
// said so; the record survives the run's JSON.
func TestIdleSection(t *testing.T) {
	res := func(dut string, cpu float64, rss uint64, daemon string, busy ...float64) lab.Result {
		r := lab.Result{DUT: dut, Test: TestIdle, Param: "no traffic", Unit: "% of a CPU", Value: 100 * cpu, CPU: busy}
		if err := r.SetRecord(IdleRecord{Seconds: 3, Daemon: daemon, DaemonCPU: cpu, DaemonRSSKiB: rss, CPUBusy: busy}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	run := &lab.Run{DUTs: []string{"direct", "trestle:xdp", "ovs"}, Results: []lab.Result{
		res("direct", 0, 0, "", 0.02, 0.04),
		res("trestle:xdp", 0.01, 30720, "trestle (pid 7)", 0.02, 0.02),
		res("trestle:xdp", 0.03, 31744, "trestle (pid 9)", 0.04, 0.02),
		res("trestle:xdp", 0.02, 32768, "trestle (pid 11)", 0.02, 0.04),
		res("ovs", 1.0, 102400, "ovs-vswitchd (pid 5)", 1, 0.1),
		{DUT: "ovs", Test: TestIdle, Error: "idle: ovs-vswitchd is not running"},
	}}
	term, md := labtest.Section(t, run)
	for _, want := range []string{
		"idle, no traffic for 3s",
		"direct       none (the kernel's)  -                    -              3.0%                   1",
		"trestle:xdp  trestle              2.0%                 31.0 MiB       3.0%                   3",
		"ovs          ovs-vswitchd         100.0%               100.0 MiB      55.0%                  1 (1 failed: idle: ovs-vswitchd is not running)",
	} {
		if !strings.Contains(term, want) {
			t.Errorf("terminal lacks %q:\n%s", want, term)
		}
	}
	for _, want := range []string{"## Idle", "| trestle:xdp | trestle | 2.0% | 31.0 MiB | 3.0% | 3 |", "| direct | none (the kernel's) | - | - | 3.0% | 1 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if term, md := lab.Sections(&lab.Run{DUTs: []string{"direct"}, Results: []lab.Result{{DUT: "direct", Test: lab.TestThroughput, Value: 1}}}); term != nil || md != nil {
		t.Errorf("a run without idle results has sections: %q %q", term, md)
	}
}

// TestExecuteIdle measures the idle kind for real: the straight path and
// the Linux bridge have no daemon, trestle's takes less than a CPU and
// holds memory, and every CPU is read.
func TestExecuteIdle(t *testing.T) {
	labtest.RequireRoot(t)
	sc := lab.Scenarios["idle"]
	sc.DUTs, sc.Reps = lab.MustSpecs("direct", "linux-bridge", "trestle:xdp"), 1
	run := labtest.Execute(t, sc, labtest.TrestleBinary(t))
	cpus, err := lab.ReadCPU()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]IdleRecord{}
	for _, r := range run.Results {
		if r.Test != TestIdle {
			t.Errorf("%s: a %s result", r.DUT, r.Test)
			continue
		}
		var rec IdleRecord
		if err := r.RecordOf(&rec); err != nil {
			t.Fatal(err)
		}
		seen[r.DUT] = rec
		if rec.Seconds < idleWindow.Seconds() || len(rec.CPUBusy) != len(cpus.Total) {
			t.Errorf("%s: %+v, want %v or more over %d CPUs", r.DUT, rec, idleWindow, len(cpus.Total))
		}
	}
	for _, d := range []string{"direct", "linux-bridge"} {
		if rec, ok := seen[d]; !ok || rec.Daemon != "" || rec.DaemonCPU != 0 {
			t.Errorf("%s: %+v (measured %v), want no daemon", d, rec, ok)
		}
	}
	if rec := seen["trestle:xdp"]; !strings.HasPrefix(rec.Daemon, "trestle") || rec.DaemonRSSKiB == 0 || rec.DaemonCPU < 0 || rec.DaemonCPU >= 1 {
		t.Errorf("trestle:xdp: %+v, want its daemon, its memory, and less than a CPU", rec)
	}
	if term, _ := lab.Sections(run); len(term) != 1 || !strings.Contains(term[0], "trestle:xdp") {
		t.Errorf("section: %q", term)
	}
}
