package lab

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestIdleKind: the idle kind is registered, has its preset, is left out of
// the tables of medians for a section of its own, and refuses nothing.
func TestIdleKind(t *testing.T) {
	if KindOf(TestIdle) == nil || !OwnSection(TestIdle) {
		t.Fatalf("idle: registered %v, own section %v", KindOf(TestIdle) != nil, OwnSection(TestIdle))
	}
	s, ok := Scenarios["idle"]
	if !ok || !s.has(TestIdle) || !slices.Contains(SpecTexts(s.DUTs), "direct") || !s.hasPacketTests() {
		t.Fatalf("idle preset: %+v", s)
	}
	if d := s.Describe(); !strings.Contains(d, "Idle:     3s with no traffic, after 1s to settle") {
		t.Errorf("describe:\n%s", d)
	}
	notes, err := s.prepare()
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "/proc/PID/stat") {
		t.Errorf("prepare: %q, %v", notes, err)
	}
	for _, u := range plan(s) {
		if e := estimate(s, u); e < idleSettle+idleWindow || e > idleSettle+idleWindow+5e9 {
			t.Errorf("%s estimated at %v", u.dut, e)
		}
	}
}

// TestIdleSection: the idle table from recorded results, medians over the
// repetitions, a failed repetition counted apart, a DUT without a daemon
// said so; the record survives the run's JSON.
func TestIdleSection(t *testing.T) {
	res := func(dut string, cpu float64, rss uint64, daemon string, busy ...float64) Result {
		r := Result{DUT: dut, Test: TestIdle, Param: "no traffic", Unit: "% of a CPU", Value: 100 * cpu, CPU: busy}
		if err := r.SetRecord(IdleRecord{Seconds: 3, Daemon: daemon, DaemonCPU: cpu, DaemonRSSKiB: rss, CPUBusy: busy}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	run := &Run{DUTs: []string{"direct", "trestle:xdp", "ovs"}, Results: []Result{
		res("direct", 0, 0, "", 0.02, 0.04),
		res("trestle:xdp", 0.01, 30720, "trestle (pid 7)", 0.02, 0.02),
		res("trestle:xdp", 0.03, 31744, "trestle (pid 9)", 0.04, 0.02),
		res("trestle:xdp", 0.02, 32768, "trestle (pid 11)", 0.02, 0.04),
		res("ovs", 1.0, 102400, "ovs-vswitchd (pid 5)", 1, 0.1),
		{DUT: "ovs", Test: TestIdle, Error: "idle: ovs-vswitchd is not running"},
	}}
	b, err := json.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	var back Run
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	term, md := Sections(&back)
	if len(term) != 1 || len(md) != 1 {
		t.Fatalf("sections: %q %q", term, md)
	}
	for _, want := range []string{
		"idle, no traffic for 3s",
		"direct       none (the kernel's)  -                    -              3.0%                   1",
		"trestle:xdp  trestle              2.0%                 31.0 MiB       3.0%                   3",
		"ovs          ovs-vswitchd         100.0%               100.0 MiB      55.0%                  1 (1 failed: idle: ovs-vswitchd is not running)",
	} {
		if !strings.Contains(term[0], want) {
			t.Errorf("terminal lacks %q:\n%s", want, term[0])
		}
	}
	for _, want := range []string{"## Idle", "| trestle:xdp | trestle | 2.0% | 31.0 MiB | 3.0% | 3 |", "| direct | none (the kernel's) | - | - | 3.0% | 1 |"} {
		if !strings.Contains(md[0], want) {
			t.Errorf("report.md lacks %q:\n%s", want, md[0])
		}
	}
	if term, md := Sections(&Run{DUTs: []string{"direct"}, Results: []Result{{DUT: "direct", Test: TestThroughput, Value: 1}}}); term != nil || md != nil {
		t.Errorf("a run without idle results has sections: %q %q", term, md)
	}
}

// TestExecuteIdle measures the idle kind for real: the straight path and
// the Linux bridge have no daemon, trestle's takes less than a CPU and
// holds memory, and every CPU is read.
func TestExecuteIdle(t *testing.T) {
	requireRoot(t)
	sc := Scenarios["idle"]
	sc.DUTs, sc.Reps = MustSpecs("direct", "linux-bridge", "trestle:xdp"), 1
	run, _ := execute(t, sc, trestleBinary(t))
	cpus, err := readCPU()
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
		if rec.Seconds < idleWindow.Seconds() || len(rec.CPUBusy) != len(cpus.total) {
			t.Errorf("%s: %+v, want %v or more over %d CPUs", r.DUT, rec, idleWindow, len(cpus.total))
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
	if term, _ := Sections(run); len(term) != 1 || !strings.Contains(term[0], "trestle:xdp") {
		t.Errorf("section: %q", term)
	}
}
