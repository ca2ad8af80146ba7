package lab

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCoresScenario: the preset, its counts, its estimate and its checks,
// without privileges.
func TestCoresScenario(t *testing.T) {
	s := Scenarios["cores"]
	if !s.has(TestCores) || s.Hosts != 2 || len(countsOf(s)) == 0 || countsOf(s)[0] != 1 || !slices.Contains(SpecTexts(s.DUTs), "trestle:xdp") || !slices.Contains(SpecTexts(s.DUTs), "direct") {
		t.Errorf("cores: %+v", s)
	}
	cpus, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Max(countsOf(s)); got != len(cpus) {
		t.Errorf("default counts %v: the largest should be every CPU the process may use (%d)", countsOf(s), len(cpus))
	}
	if err := s.CheckCores("auto"); err != nil {
		t.Error(err)
	}
	for n, want := range map[int][]int{1: {1}, 2: {1, 2}, 6: {1, 2, 4, 6}, 8: {1, 2, 4, 8}} {
		if got := DefaultCoreCounts(n); !slices.Equal(got, want) {
			t.Errorf("DefaultCoreCounts(%d) = %v, want %v", n, got, want)
		}
	}
	for _, c := range []struct {
		counts []int
		want   string
	}{
		{[]int{1, 3}, "3 CPUs asked for, but this machine lets the lab use 2"},
		{[]int{0}, "at least 1"},
		{[]int{1, 1}, "given twice"},
		{nil, "no CPU counts"},
		{[]int{65}, "at most 64 threads"},
	} {
		if err := checkCoreCounts(c.counts, 2); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("checkCoreCounts(%v, 2): %v, want %q", c.counts, err, c.want)
		}
	}
	if err := s.CheckCores("split"); err == nil || !strings.Contains(err.Error(), "split would move the forwarding") {
		t.Errorf("placement split: %v", err)
	}
	bad := s
	setCounts(&bad, []int{len(cpus) + 1})
	if err := bad.CheckCores("auto"); err == nil || !strings.Contains(err.Error(), "CPUs asked for") {
		t.Errorf("a count above the machine's CPUs: %v", err)
	}
	if _, err := coresPlacement(coresOf(bad), "auto"); err == nil {
		t.Errorf("placement for a count above the machine's CPUs")
	}

	// Every veth end gets the largest count's queues, direct's too; other
	// scenarios keep one.
	setCounts(&s, []int{1, 2})
	if q := s.shape(mustSpec("direct"), 0).Queues; q != 2 {
		t.Errorf("direct's queues %d, want 2", q)
	}
	if q := s.shape(mustSpec("trestle:xdp"), 1).Queues; q != 2 {
		t.Errorf("the bridge's queues %d, want 2", q)
	}
	if q := Scenarios["quick"].shape(mustSpec("trestle:xdp"), 1).Queues; q != 0 {
		t.Errorf("quick's queues %d, want 0 (one)", q)
	}
	// Open vSwitch's AF_XDP ports get a socket on every queue.
	tp := &Topo{Shape: Shape{Queues: 2}, Bridges: []Bridge{{Name: "br1", Ports: []string{"p1", "p2"}}}}
	if args := strings.Join(ovsArgs(tp, &Env{DUTCPU: 1}, "afxdp"), " "); strings.Count(args, "options:n_rxq=2") != 2 {
		t.Errorf("ovs-vsctl args lack n_rxq=2 on both ports:\n%s", args)
	}
	tp.Shape.Queues = 0
	if args := strings.Join(ovsArgs(tp, &Env{DUTCPU: 1}, "afxdp"), " "); strings.Contains(args, "n_rxq") {
		t.Errorf("n_rxq with one queue:\n%s", args)
	}

	var total time.Duration
	for _, u := range plan(s) {
		total += estimate(s, u)
	}
	if total < 5*time.Minute || total > 25*time.Minute {
		t.Errorf("cores on 2 CPUs estimated at %v", total)
	}
}

// TestCoresPlacement: the generator's threads on the first CPUs, the DUT's
// own on the one after the largest count, or the last where none is spare;
// the notes say which.
func TestCoresPlacement(t *testing.T) {
	cpus, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	s := Scenarios["cores"]
	setCounts(&s, []int{1})
	p, err := coresPlacement(coresOf(s), "auto")
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != "shared" || !slices.Equal(p.GenCPUs, cpus[:1]) || p.GenCPU != cpus[0] {
		t.Errorf("placement %+v", p)
	}
	if len(cpus) > 1 && p.DUTCPU != cpus[1] {
		t.Errorf("DUT CPU %d, want %d (spare)", p.DUTCPU, cpus[1])
	}
	notes := strings.Join(coresNotes(coresOf(s), p), "\n")
	if len(cpus) > 1 && !strings.Contains(notes, "apart from every generator thread") {
		t.Errorf("notes: %s", notes)
	}
	setCounts(&s, []int{len(cpus)})
	p, err = coresPlacement(coresOf(s), "shared")
	if err != nil {
		t.Fatal(err)
	}
	if p.DUTCPU != cpus[len(cpus)-1] || !strings.Contains(strings.Join(coresNotes(coresOf(s), p), "\n"), "no CPU to spare") {
		t.Errorf("every CPU a generator's: %+v %q", p, coresNotes(coresOf(s), p))
	}
	if got := (TrialSpec{}).genCPUs(p); !slices.Equal(got, []int{p.GenCPU}) {
		t.Errorf("a trial without CPUs runs on %v", got)
	}
}

// TestExecuteCores runs the cores test for real, short: the straight path
// and the floor (no daemon to build) forward at 1 and 2 CPUs, each figure
// with its record, its CPUs and every trial; nothing is left behind.
func TestExecuteCores(t *testing.T) {
	requireRoot(t)
	cpus, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	counts := DefaultCoreCounts(min(len(cpus), 2))
	sc := Scenario{Name: "test", DUTs: MustSpecs("direct", "floor"), Hosts: 2, Chain: []int{1}, Sizes: []FrameSize{"64"}, Tests: []Kind{CoresTest{Counts: counts}},
		Reps: 1, Timing: TinyTiming()}
	before := ours(t, runPrefix)
	run, err := Execute(context.Background(), Config{Scenario: sc, Placement: "auto", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]int{}
	for _, r := range run.Results {
		if r.Error != "" {
			t.Errorf("%s %s %s: %s", r.DUT, r.Test, r.Param, r.Error)
			continue
		}
		c := r.Cores
		if r.Test != TestCores || c == nil {
			t.Errorf("%s: %s %s without a cores record", r.DUT, r.Test, r.Param)
			continue
		}
		t.Logf("%s %s: %.0f pps, CPU busy %v", r.DUT, r.Param, r.Value, r.CPU)
		seen[r.DUT] = append(seen[r.DUT], c.CPUs)
		if r.Value <= 0 || len(r.Trials) == 0 || r.Search == nil || len(r.CPU) < len(cpus) {
			t.Errorf("%s %s: value %v, %d trials, CPU %v", r.DUT, r.Param, r.Value, len(r.Trials), r.CPU)
		}
		if !slices.Equal(c.GenCPUs, cpus[:c.CPUs]) || c.Flows != c.CPUs || c.Queues != slices.Max(counts) || r.Param != coresParam("64", c.CPUs) {
			t.Errorf("%s: record %+v, param %q", r.DUT, c, r.Param)
		}
	}
	for _, d := range SpecTexts(sc.DUTs) {
		if !slices.Equal(seen[d], counts) {
			t.Errorf("%s: figures at %v CPUs, want %v", d, seen[d], counts)
		}
	}
	if run.Placement != "shared" || len(run.Units) != 2 || !slices.Equal(run.Units[0].Placement.GenCPUs, cpus[:slices.Max(counts)]) {
		t.Errorf("placement %s, units %+v", run.Placement, run.Units)
	}
	if !strings.Contains(strings.Join(run.Notes, "\n"), "each of those CPUs also runs the DUT's forwarding") {
		t.Errorf("notes: %q", run.Notes)
	}
	if left := ours(t, runPrefix); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
}

// setCounts sets the CPU counts of s's cores test.
func setCounts(s *Scenario, counts []int) {
	Configure(s, func(k CoresTest) CoresTest { k.Counts = counts; return k })
}

// coresOf is s's cores test; countsOf its CPU counts.
func coresOf(s Scenario) CoresTest {
	k, _ := TestOf[CoresTest](s)
	return k
}

func countsOf(s Scenario) []int { return coresOf(s).Counts }
