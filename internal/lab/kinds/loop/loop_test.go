package loop

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/labtest"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// TestLoopKind: the loop kind is registered with its preset, has a section
// of its own, and refuses what it cannot run; its flags set its settings
// and refuse a wait the blocks' retry would cut short.
func TestLoopKind(t *testing.T) {
	if lab.KindOf(TestLoop) == nil || !lab.OwnSection(TestLoop) {
		t.Fatalf("loop: registered %v, own section %v", lab.KindOf(TestLoop) != nil, lab.OwnSection(TestLoop))
	}
	s, ok := lab.Scenarios["loop"]
	if !ok || !s.Has(TestLoop) || s.Hosts != 4 || s.Reps < 3 || !s.HasPacketTests() {
		t.Fatalf("loop preset: %+v", s)
	}
	if got := strings.Join(lab.SpecTexts(s.DUTs), ","); got != "trestle:xdp,trestle:tc,linux-bridge" {
		t.Errorf("loop preset's DUTs: %s", got)
	}
	if n := lab.KindOf(TestLoop).Needs(s); !n.Loop || !n.AllHosts || !n.Learning || n.Direct {
		t.Errorf("needs: %+v", n)
	}
	notes, err := s.PrepareKinds()
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "10.0 kpps") || !strings.Contains(notes[0], `loop_retry = "300s"`) {
		t.Errorf("prepare: %q, %v", notes, err)
	}
	for _, c := range []struct {
		edit func(*lab.Scenario)
		want string
	}{
		{func(s *lab.Scenario) { lab.Configure(s, func(k Kind) Kind { k.Rate = 0; return k }) }, "rate 0"},
		{func(s *lab.Scenario) { lab.Configure(s, func(k Kind) Kind { k.Wait = lab.LoopRetry; return k }) }, "below 5m0s"},
		{func(s *lab.Scenario) { s.Hosts = 3 }, "need 4"},
	} {
		bad := s
		c.edit(&bad)
		if _, err := bad.PrepareKinds(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("prepare: %v, want %q", err, c.want)
		}
	}
	flags := func(args ...string) (lab.Scenario, error) {
		f := pflag.NewFlagSet("lab", pflag.ContinueOnError)
		lab.DeclareFlags(f)
		if err := f.Parse(args); err != nil {
			return lab.Scenario{}, err
		}
		sc := s
		return sc, sc.SetFlags(f)
	}
	sc, err := flags("--loop-rate", "2000", "--loop-wait", "4s")
	if k, _ := lab.TestOf[Kind](sc); err != nil || k.Rate != 2000 || k.Wait != 4*time.Second {
		t.Errorf("--loop-rate 2000 --loop-wait 4s: %+v, %v", k, err)
	}
	if k, _ := lab.TestOf[Kind](s); k.Rate != DefaultRate || k.Wait != DefaultWait {
		t.Errorf("the flags changed the preset: %+v", k)
	}
	if _, err := flags("--loop-wait", "10m"); err == nil || !strings.Contains(err.Error(), "--loop-wait 10m0s") {
		t.Errorf("--loop-wait 10m: %v", err)
	}
	if _, err := flags("--loop-rate", "0"); err == nil {
		t.Errorf("--loop-rate 0 taken")
	}
}

// TestLoopSection: the loop table from recorded results: medians with
// the least and most over the repetitions, ministat's summary with 3 or
// more, a loop trestle broke late and a stream that lost frames warned of,
// a peer's figures not, and a DUT with no loop protection said not
// measured; the records survive the run's JSON.
func TestLoopSection(t *testing.T) {
	run := &lab.Run{DUTs: []string{"trestle:xdp", "linux-bridge", "ovs"}}
	add := func(dut string, rep int, rec Record, errText string) {
		r := lab.Result{DUT: dut, Rep: rep, Test: TestLoop, Param: "detect", Unit: "ms", Value: rec.DetectMs, Error: errText}
		if err := r.SetRecord(rec); err != nil {
			t.Fatal(err)
		}
		run.Results = append(run.Results, r)
	}
	broke := func(ms float64, carried uint64, lost int64) Record {
		return Record{Guard: "loop_detect = true, ...", WaitS: 10, Detected: true, DetectMs: ms, Blocked: lab.Blocked{Port: "l2", Why: "loop"},
			Carried: carried, Copies: carried - 2, After: 1, Stream: lab.RestartEvent{Sent: 40000, Lost: lost}}
	}
	add("trestle:xdp", 1, broke(190, 34000, 0), "")
	add("trestle:xdp", 2, broke(3, 300, 0), "")
	add("trestle:xdp", 3, broke(3500, 900000, 12), "")
	stp := broke(500, 68000, 0)
	stp.Guard, stp.Blocked.Why = "the kernel's spanning tree ...", "stp blocking"
	add("linux-bridge", 1, stp, "")
	late := Record{Guard: stp.Guard, WaitS: 10, Carried: 5000000, Stream: lab.RestartEvent{Sent: 130000, Lost: 4000}}
	add("linux-bridge", 2, late, "no port of the loop blocked within 10s: the lab opened it")
	add("ovs", 1, Record{Unmeasured: "ovs has no loop protection the lab can turn on"}, "")

	term, md := labtest.Section(t, run)
	// The table's columns, each gap one space.
	term = regexp.MustCompile(` {2,}`).ReplaceAllString(term, " ")
	lacks(t, "terminal", term, []string{
		"trestle:xdp loop_detect 3 of 3 190 ms (3 ms..3500 ms) 34000 (300..900000) 33998 (298..899998) 1 0 (0..12) 40000\n",
		"linux-bridge STP 1 of 2 500 ms 2534000 (68000..5000000)",
		"ovs none not measured - -",
		"trestle:xdp detect ms: N 3 Min 3 Max 3500 Median 190 Avg 1231 Stddev 1967.2",
		"warning: trestle:xdp: the loop not blocked within 3s in 1 of 3 (#3 3500 ms)",
		"warning: trestle:xdp: the stream lost frames in 1 of 3 loops (#3 12)",
		"failed: linux-bridge: no port of the loop blocked within 10s",
		"not measured: ovs has no loop protection",
	})
	if strings.Contains(term, "warning: linux-bridge") {
		t.Errorf("a peer's figures warned of:\n%s", term)
	}
	lacks(t, "markdown", md, []string{
		"## Loop",
		"| trestle:xdp | loop_detect | 3 of 3 | 190 ms (3 ms..3500 ms) |",
		"- trestle:xdp: 190 ms (l2, loop), 34000, 33998, 1, 0 of 40000; 3 ms (l2, loop)",
		"- linux-bridge: 500 ms (l2, stp blocking), 68000, 67998, 1, 0 of 40000; not within 10s, 5000000, 0, 0, 4000 of 130000",
		"- linux-bridge: the kernel's spanning tree ...",
	})
	if term, md := (Kind{}).Section(&lab.Run{DUTs: []string{"trestle"}}); term != "" || md != "" {
		t.Errorf("a run without loop results has a section: %q %q", term, md)
	}
}

// TestLoopUnguarded: a DUT with no loop protection the lab can turn on
// is not measured (nothing would break its loop): the unit is skipped as
// unavailable, with a result that says why.
func TestLoopUnguarded(t *testing.T) {
	d, err := lab.ParseDUT("direct")
	if err != nil {
		t.Fatal(err)
	}
	var got []lab.Result
	u := &lab.UnitRun{S: lab.Scenarios["loop"], Rig: &lab.Rig{T: &lab.Topo{}, DUT: d}, Base: lab.Result{DUT: "direct", Rep: 1},
		Add: func(r lab.Result) { got = append(got, r) }, Status: func(string) {}, Notef: func(string) {}}
	err = Kind{Rate: DefaultRate, Wait: DefaultWait}.Run(context.Background(), u)
	if !errors.Is(err, lab.ErrUnavailable) || !strings.Contains(err.Error(), "no loop protection") {
		t.Errorf("run: %v, want the DUT unavailable", err)
	}
	var rec Record
	if len(got) != 1 || got[0].RecordOf(&rec) != nil || rec.Unmeasured == "" || rec.Detected {
		t.Errorf("results: %+v", got)
	}
}

// lacks fails t for each of wants that text does not hold.
func lacks(t *testing.T, what, text string, wants []string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}

// TestLoopScenario closes a loop through trestle (xdp) and the Linux
// bridge for real: each blocks a port of it before the lab would open it
// itself, the loop carried the broadcast (h3 got copies) and stops
// carrying once broken, and the run leaves no namespace.
func TestLoopScenario(t *testing.T) {
	labtest.RequireRoot(t)
	bin := labtest.TrestleBinary(t)
	sc := lab.Scenario{Name: "test", DUTs: lab.MustSpecs("trestle:xdp", "linux-bridge"), Hosts: 4, Chain: []int{1}, Sizes: []lab.FrameSize{"64"},
		Tests: []lab.Kind{Kind{Rate: 2000, Wait: 8 * time.Second}}, Reps: 1, Timing: lab.TinyTiming()}
	before := labtest.Ours(t)
	run := labtest.Execute(t, sc, bin)
	seen := map[string]bool{}
	for _, r := range run.Results {
		if r.Test != TestLoop {
			continue
		}
		var rec Record
		if err := r.RecordOf(&rec); err != nil {
			t.Fatal(err)
		}
		seen[r.DUT] = true
		t.Logf("%s: blocked %s (%s) after %.0f ms, the loop carried %d frames, h3 got %d copies, %d after; the stream lost %d of %d",
			r.DUT, rec.Blocked.Port, rec.Blocked.Why, rec.DetectMs, rec.Carried, rec.Copies, rec.After, rec.Stream.Lost, rec.Stream.Sent)
		if !rec.Detected || rec.DetectMs <= 0 && !rec.Blocked.FromEvent || rec.DetectMs >= 8000 {
			t.Errorf("%s: %+v", r.DUT, rec)
		}
		if rec.Carried == 0 || rec.Copies == 0 || rec.Stream.Sent == 0 {
			t.Errorf("%s: the loop carried %d, h3 got %d copies, the stream sent %d: want some of each", r.DUT, rec.Carried, rec.Copies, rec.Stream.Sent)
		}
		// Broken: what still goes in is a probe or a BPDU a second, not a storm.
		if rec.After > 20 {
			t.Errorf("%s: %d frames into the loop in the second after the block, want a few", r.DUT, rec.After)
		}
	}
	for _, d := range lab.SpecTexts(sc.DUTs) {
		if !seen[d] {
			t.Errorf("%s: no loop result", d)
		}
	}
	if left := labtest.Ours(t); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
}
