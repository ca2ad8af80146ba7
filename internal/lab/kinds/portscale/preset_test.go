package portscale_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/trestle/trestle/internal/lab"
	_ "github.com/trestle/trestle/internal/lab/kinds/all" // the port-scale preset, which has a pod churn too
	"github.com/trestle/trestle/internal/lab/kinds/portscale"
	"github.com/trestle/trestle/internal/lab/labtest"
)

// TestPortScaleKind: the port-scale kind is registered with its preset and
// its own section; --ports sets its counts, refuses bad ones and any other
// scenario; Prepare refuses a 1-port bridge and the straight path.
func TestPortScaleKind(t *testing.T) {
	if lab.KindOf(lab.TestPortScale) == nil || !lab.OwnSection(lab.TestPortScale) {
		t.Fatalf("port-scale: registered %v, own section %v", lab.KindOf(lab.TestPortScale) != nil, lab.OwnSection(lab.TestPortScale))
	}
	s, ok := lab.Scenarios["port-scale"]
	if !ok || !s.Has(lab.TestPortScale) || !slices.Equal(lab.SpecTexts(s.DUTs), []string{"linux-bridge", "trestle:xdp", "trestle"}) {
		t.Fatalf("port-scale preset: %+v", s)
	}
	if d := s.Describe(); !strings.Contains(d, "Ports:    2,16,64,256,1024 ports on one bridge, 3 of them with sinks") {
		t.Errorf("describe:\n%s", d)
	}
	notes, err := s.PrepareKinds()
	if err != nil || len(notes) != 2 || !strings.Contains(notes[0], "not run") || !strings.Contains(notes[1], "pod-churn") {
		t.Errorf("prepare: %q, %v", notes, err)
	}
	flags := func(args ...string) (lab.Scenario, error) {
		f := pflag.NewFlagSet("lab", pflag.ContinueOnError)
		lab.DeclareFlags(f)
		if err := f.Parse(args); err != nil {
			return lab.Scenario{}, err
		}
		sc := lab.Scenarios["port-scale"]
		err := sc.SetFlags(f)
		return sc, err
	}
	got, err := flags("--ports", "2, 16,64")
	if p, _ := lab.TestOf[portscale.Kind](got); err != nil || !slices.Equal(p.Counts(), []int{2, 16, 64}) {
		t.Errorf("--ports 2,16,64: %v, %v", p.Counts(), err)
	}
	if p, _ := lab.TestOf[portscale.Kind](lab.Scenarios["port-scale"]); !slices.Equal(p.Counts(), portscale.PortScaleDefault) {
		t.Errorf("--ports changed the preset: %v", p.Counts())
	}
	for _, bad := range []string{"1", "2,x", "", "70000", "2,16,2"} {
		if _, err := flags("--ports", bad); err == nil || !strings.Contains(err.Error(), "--ports") {
			t.Errorf("--ports %q: %v, want refused", bad, err)
		}
	}
	f := pflag.NewFlagSet("lab", pflag.ContinueOnError)
	lab.DeclareFlags(f)
	if err := f.Parse([]string{"--ports", "2"}); err != nil {
		t.Fatal(err)
	}
	quick := lab.Scenarios["quick"]
	if err := quick.SetFlags(f); err == nil || !strings.Contains(err.Error(), "port-scale scenario") {
		t.Errorf("--ports on quick: %v", err)
	}
	one := s
	lab.Configure(&one, func(p portscale.Kind) portscale.Kind { p.Ports = []int{1, 2}; return p })
	if _, err := one.PrepareKinds(); err == nil {
		t.Error("a 1-port bridge was not refused")
	}
	direct := s
	direct.DUTs = lab.MustSpecs("direct", "trestle")
	if _, err := direct.PrepareKinds(); err == nil || !strings.Contains(err.Error(), "direct") {
		t.Errorf("the straight path: %v", err)
	}
}

// TestExecutePortScale measures the port-scale kind for real at small
// counts: every DUT forwards at each count it takes, both ways of traffic,
// trestle refuses a count above its limit with the check's reason, and
// every namespace of the counts' topologies is gone after.
func TestExecutePortScale(t *testing.T) {
	labtest.RequireRoot(t)
	sc := lab.Scenarios["port-scale"]
	sc.DUTs, sc.Reps, sc.Timing = lab.MustSpecs("linux-bridge", "trestle:xdp", "trestle"), 1, lab.TinyTiming()
	lab.Configure(&sc, func(p portscale.Kind) portscale.Kind { p.Ports = []int{2, 5, 65535}; return p })
	sc.WithoutTest(lab.TestPodChurn) // TestExecutePodChurn's
	before := labtest.Ours(t)
	run, err := lab.Execute(context.Background(), lab.Config{Scenario: sc, Placement: "shared", Trestle: labtest.TrestleBinary(t), WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		dut     string
		ports   int
		traffic string
	}
	seen := map[key]portscale.Record{}
	for _, r := range run.Results {
		var rec portscale.Record
		if err := r.RecordOf(&rec); err != nil {
			t.Errorf("%s %s: %v (%s)", r.DUT, r.Param, err, r.Error)
			continue
		}
		if r.Error != "" && rec.Refused == "" {
			t.Errorf("%s %s: %s", r.DUT, r.Param, r.Error)
		}
		seen[key{r.DUT, rec.Ports, rec.Traffic}] = rec
	}
	for _, d := range lab.SpecTexts(sc.DUTs) {
		for _, n := range []int{2, 5} {
			for _, traffic := range []string{"unicast", "broadcast"} {
				rec, ok := seen[key{d, n, traffic}]
				if !ok || rec.Rate <= 0 || rec.Refused != "" {
					t.Errorf("%s, %d ports, %s: %+v (recorded %v), want a rate", d, n, traffic, rec, ok)
				}
				if want := min(n-1, portscale.Sinks); traffic == "broadcast" && rec.Sinks != want {
					t.Errorf("%s, %d ports, broadcast counted at %d sinks, want %d", d, n, rec.Sinks, want)
				}
			}
		}
		rec := seen[key{d, 65535, "unicast"}]
		if strings.HasPrefix(d, "trestle") != strings.HasPrefix(rec.Refused, "trestle check: too many ports") || (d == "linux-bridge") != strings.Contains(rec.Refused, "BR_MAX_PORTS") {
			t.Errorf("%s at 65535 ports: %+v, want refused with its reason", d, rec)
		}
	}
	if left := labtest.Ours(t); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
	if term, _ := lab.Sections(run); len(term) != 1 || !strings.Contains(term[0], "not run: trestle check") {
		t.Errorf("section: %q", term)
	}
}
