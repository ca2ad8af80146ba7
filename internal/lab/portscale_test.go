package lab

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestPortScaleKind: the port-scale kind is registered with its preset and
// its own section; --ports sets its counts, refuses bad ones and any other
// scenario; Prepare refuses a 1-port bridge and the straight path.
func TestPortScaleKind(t *testing.T) {
	if KindOf(TestPortScale) == nil || !OwnSection(TestPortScale) {
		t.Fatalf("port-scale: registered %v, own section %v", KindOf(TestPortScale) != nil, OwnSection(TestPortScale))
	}
	s, ok := Scenarios["port-scale"]
	if !ok || !s.has(TestPortScale) || !slices.Equal(SpecTexts(s.DUTs), []string{"linux-bridge", "trestle:xdp", "trestle"}) {
		t.Fatalf("port-scale preset: %+v", s)
	}
	if d := s.Describe(); !strings.Contains(d, "Ports:    2,16,64,256,1024 ports on one bridge, 3 of them with sinks") {
		t.Errorf("describe:\n%s", d)
	}
	notes, err := s.PrepareKinds()
	if err != nil || len(notes) != 2 || !strings.Contains(notes[0], "not run") || !strings.Contains(notes[1], "pod-churn") {
		t.Errorf("prepare: %q, %v", notes, err)
	}
	flags := func(args ...string) (Scenario, error) {
		f := pflag.NewFlagSet("lab", pflag.ContinueOnError)
		DeclareFlags(f)
		if err := f.Parse(args); err != nil {
			return Scenario{}, err
		}
		sc := Scenarios["port-scale"]
		err := sc.SetFlags(f)
		return sc, err
	}
	got, err := flags("--ports", "2, 16,64")
	if p, _ := TestOf[PortScaleTest](got); err != nil || !slices.Equal(p.counts(), []int{2, 16, 64}) {
		t.Errorf("--ports 2,16,64: %v, %v", p.counts(), err)
	}
	if p, _ := TestOf[PortScaleTest](Scenarios["port-scale"]); !slices.Equal(p.counts(), PortScaleDefault) {
		t.Errorf("--ports changed the preset: %v", p.counts())
	}
	for _, bad := range []string{"1", "2,x", "", "70000", "2,16,2"} {
		if _, err := flags("--ports", bad); err == nil || !strings.Contains(err.Error(), "--ports") {
			t.Errorf("--ports %q: %v, want refused", bad, err)
		}
	}
	f := pflag.NewFlagSet("lab", pflag.ContinueOnError)
	DeclareFlags(f)
	if err := f.Parse([]string{"--ports", "2"}); err != nil {
		t.Fatal(err)
	}
	quick := Scenarios["quick"]
	if err := quick.SetFlags(f); err == nil || !strings.Contains(err.Error(), "port-scale scenario") {
		t.Errorf("--ports on quick: %v", err)
	}
	one := s
	Configure(&one, func(p PortScaleTest) PortScaleTest { p.Ports = []int{1, 2}; return p })
	if _, err := one.PrepareKinds(); err == nil {
		t.Error("a 1-port bridge was not refused")
	}
	direct := s
	direct.DUTs = MustSpecs("direct", "trestle")
	if _, err := direct.PrepareKinds(); err == nil || !strings.Contains(err.Error(), "direct") {
		t.Errorf("the straight path: %v", err)
	}
}

// TestTakesPorts: trestle says itself, through `trestle check`, whether it
// takes a count; the Linux bridge stops at the kernel's 1024.
func TestTakesPorts(t *testing.T) {
	env := &Env{Trestle: trestleBinary(t), WorkDir: t.TempDir()}
	ctx := context.Background()
	for _, c := range []struct {
		dut  string
		n    int
		want string
	}{
		{"trestle:xdp", 2, ""},
		{"trestle", 16, ""},
		{"trestle:tc", 65535, "trestle check: too many ports in one bridge: at most"},
		{"linux-bridge", 1023, ""},
		{"linux-bridge", 1024, "the Linux bridge takes at most 1023 ports"},
		{"ovs", 4096, ""},
	} {
		why, err := takesPorts(ctx, MustSpecs(c.dut)[0], env, c.n)
		if err != nil || (c.want == "") != (why == "") || !strings.HasPrefix(why, c.want) {
			t.Errorf("%s with %d ports: %q, %v; want %q", c.dut, c.n, why, err, c.want)
		}
	}
}

// TestPortScaleSection: the port-scale table from recorded results:
// medians over the repetitions, each count against the DUT's first, the
// broadcast against the Linux bridge's, a refused count with its reason,
// a failed one counted apart, the goals; the records survive the JSON.
func TestPortScaleSection(t *testing.T) {
	res := func(dut string, n int, traffic string, rate float64) Result {
		r := Result{DUT: dut, Test: TestPortScale, Param: portScaleParam(n, traffic), Unit: "frames/s", Value: rate}
		if err := r.SetRecord(PortScaleRecord{Ports: n, Traffic: traffic, Sinks: 1, Rate: rate}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	refused := func(dut string, n int) Result {
		r := Result{DUT: dut, Test: TestPortScale, Param: portScaleParam(n, "unicast"), Error: "trestle check: too many ports"}
		if err := r.SetRecord(PortScaleRecord{Ports: n, Traffic: "unicast", Refused: "trestle check: too many ports"}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	run := &Run{DUTs: []string{"linux-bridge", "trestle:xdp"}, Results: []Result{
		res("linux-bridge", 2, "unicast", 1e6), res("linux-bridge", 2, "broadcast", 500e3),
		res("linux-bridge", 64, "unicast", 0.9e6), res("linux-bridge", 64, "broadcast", 100e3),
		res("trestle:xdp", 64, "unicast", 2.9e6), res("trestle:xdp", 64, "broadcast", 150e3),
		res("trestle:xdp", 64, "unicast", 2.8e6), res("trestle:xdp", 64, "broadcast", 130e3),
		res("trestle:xdp", 2, "unicast", 3e6), res("trestle:xdp", 2, "broadcast", 1e6),
		refused("trestle:xdp", 256),
		{DUT: "trestle:xdp", Test: TestPortScale, Param: portScaleParam(16, "unicast"), Error: "set up trestle:xdp: no"},
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
		"linux-bridge  2      1.00 Mpps   1.00x    500.0 kpps  1.00x    -                         1\n",
		"linux-bridge  64     900.0 kpps  0.90x    100.0 kpps  0.20x    -                         1\n",
		"trestle:xdp   2      3.00 Mpps   1.00x    1.00 Mpps   1.00x    2.00x                     1\n",
		"trestle:xdp   16     -           -        -           -        -                         0 (1 failed: set up trestle:xdp: no)\n",
		"trestle:xdp   64     2.85 Mpps   0.95x    140.0 kpps  0.14x    1.40x                     2\n",
		"trestle:xdp   256    -           -        -           -        -                         0 (not run: trestle check: too many ports)\n",
		"linux-bridge: unicast at 64 ports 0.90x of 2 ports (goal: within 5%): fail",
		"trestle:xdp: unicast at 64 ports 0.95x of 2 ports (goal: within 5%): pass",
		"trestle:xdp: broadcast no worse than the Linux bridge's at every count both ran: pass",
	} {
		if !strings.Contains(term[0], want) {
			t.Errorf("terminal lacks %q:\n%s", want, term[0])
		}
	}
	for _, want := range []string{"## Port scale", "| trestle:xdp | 64 | 2.85 Mpps | 0.95x | 140.0 kpps | 0.14x | 1.40x | 2 |", "| trestle:xdp | 256 | - | - | - | - | - | 0 (not run: trestle check: too many ports) |"} {
		if !strings.Contains(md[0], want) {
			t.Errorf("report.md lacks %q:\n%s", want, md[0])
		}
	}
	if term, md := Sections(&Run{DUTs: []string{"direct"}, Results: []Result{{DUT: "direct", Test: TestThroughput, Value: 1}}}); term != nil || md != nil {
		t.Errorf("a run without port-scale results has sections: %q %q", term, md)
	}
}

// TestExecutePortScale measures the port-scale kind for real at small
// counts: every DUT forwards at each count it takes, both ways of traffic,
// trestle refuses a count above its limit with the check's reason, and
// every namespace of the counts' topologies is gone after.
func TestExecutePortScale(t *testing.T) {
	requireRoot(t)
	sc := Scenarios["port-scale"]
	sc.DUTs, sc.Reps, sc.Timing = MustSpecs("linux-bridge", "trestle:xdp", "trestle"), 1, TinyTiming()
	Configure(&sc, func(p PortScaleTest) PortScaleTest { p.Ports = []int{2, 5, 65535}; return p })
	sc.WithoutTest(TestPodChurn) // TestExecutePodChurn's
	before := ours(t, runPrefix)
	run, err := Execute(context.Background(), Config{Scenario: sc, Placement: "shared", Trestle: trestleBinary(t), WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		dut     string
		ports   int
		traffic string
	}
	seen := map[key]PortScaleRecord{}
	for _, r := range run.Results {
		var rec PortScaleRecord
		if err := r.RecordOf(&rec); err != nil {
			t.Errorf("%s %s: %v (%s)", r.DUT, r.Param, err, r.Error)
			continue
		}
		if r.Error != "" && rec.Refused == "" {
			t.Errorf("%s %s: %s", r.DUT, r.Param, r.Error)
		}
		seen[key{r.DUT, rec.Ports, rec.Traffic}] = rec
	}
	for _, d := range SpecTexts(sc.DUTs) {
		for _, n := range []int{2, 5} {
			for _, traffic := range []string{"unicast", "broadcast"} {
				rec, ok := seen[key{d, n, traffic}]
				if !ok || rec.Rate <= 0 || rec.Refused != "" {
					t.Errorf("%s, %d ports, %s: %+v (recorded %v), want a rate", d, n, traffic, rec, ok)
				}
				if want := min(n-1, portScaleSinks); traffic == "broadcast" && rec.Sinks != want {
					t.Errorf("%s, %d ports, broadcast counted at %d sinks, want %d", d, n, rec.Sinks, want)
				}
			}
		}
		rec := seen[key{d, 65535, "unicast"}]
		if strings.HasPrefix(d, "trestle") != strings.HasPrefix(rec.Refused, "trestle check: too many ports") || (d == "linux-bridge") != strings.Contains(rec.Refused, "BR_MAX_PORTS") {
			t.Errorf("%s at 65535 ports: %+v, want refused with its reason", d, rec)
		}
	}
	if left := ours(t, runPrefix); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
	if term, _ := Sections(run); len(term) != 1 || !strings.Contains(term[0], "not run: trestle check") {
		t.Errorf("section: %q", term)
	}
}
