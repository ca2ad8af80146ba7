package lab_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/trestle/trestle/internal/lab"
	_ "github.com/trestle/trestle/internal/lab/kinds/all"
	"github.com/trestle/trestle/internal/lab/kinds/table"
	"github.com/trestle/trestle/internal/lab/kinds/tcp"
	"github.com/trestle/trestle/internal/lab/kinds/throughput"
)

// tinyScenario is a 2-host scenario of 64-byte throughput and iperf3 TCP
// with one stream, one repetition each, at tinyTiming.
func tinyScenario(duts []string, chain ...int) Scenario {
	if len(chain) == 0 {
		chain = []int{1}
	}
	return Scenario{Name: "test", DUTs: MustSpecs(duts...), Hosts: 2, Chain: chain, Sizes: []FrameSize{"64"},
		Tests: []Kind{throughput.Kind{}, tcp.Kind{Streams: []int{1}}}, IperfTime: time.Second, Reps: 1, Timing: TinyTiming()}
}

// execute runs sc with trestle bin and returns its record and each
// figure by DUT, chain length and test; a result with an error fails t.
func execute(t *testing.T, sc Scenario, bin string) (*Run, map[string]map[int]map[string]float64) {
	t.Helper()
	run, err := Execute(context.Background(), Config{Scenario: sc, Placement: "shared", Trestle: bin, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[int]map[string]float64{}
	for _, r := range run.Results {
		if r.Error != "" {
			t.Errorf("%s x%d %s: %s", r.DUT, r.Chain, r.Test, r.Error)
			continue
		}
		if got[r.DUT] == nil {
			got[r.DUT] = map[int]map[string]float64{}
		}
		if got[r.DUT][r.Chain] == nil {
			got[r.DUT][r.Chain] = map[string]float64{}
		}
		got[r.DUT][r.Chain][r.Test] = r.Value
	}
	t.Logf("%v", got)
	return run, got
}

// runUnits runs sc with trestle bin and checks every unit: measured (each
// of sc's tests with a figure above 0), or skipped as unavailable for the
// reason allowed[dut]; check, if not nil, looks further at each measured
// unit. Nothing may be left behind. It returns the units by DUT.
func runUnits(t *testing.T, bin string, sc Scenario, allowed map[string]string, check func(dut string, u UnitRecord, f map[string]float64)) map[string]UnitRecord {
	t.Helper()
	before := Ours(t, RunPrefix)
	run, got := execute(t, sc, bin)
	units := map[string]UnitRecord{}
	for _, u := range run.Units {
		units[u.DUT] = u
	}
	for _, d := range SpecTexts(sc.DUTs) {
		u := units[d]
		if u.Skipped != "" {
			if why, ok := allowed[d]; !ok || !strings.Contains(u.Skipped, ErrUnavailable.Error()) || !strings.Contains(u.Skipped, why) {
				t.Errorf("%s skipped: %s", d, u.Skipped)
			} else {
				t.Logf("%s unavailable, as it may be: %s", d, u.Skipped)
			}
			continue
		}
		f := Single(got[d])
		for _, test := range sc.TestNames() {
			if f[test] <= 0 {
				t.Errorf("%s: %s %v, want above 0", d, test, f[test])
			}
		}
		if check != nil {
			check(d, u, f)
		}
	}
	if left := Ours(t, RunPrefix); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
	return units
}

// checkVariantScenario checks the preset name that measures each DUT of
// families without and with the variant knob: all there, every DUT
// parses, every goal is measured, the default run takes less than limit,
// and its --help says each of helps.
func checkVariantScenario(t *testing.T, name, knob string, families []string, limit time.Duration, helps ...string) Scenario {
	t.Helper()
	s, ok := Scenarios[name]
	if !ok || s.Unavailable != "" {
		t.Fatalf("%s: %+v", name, s)
	}
	for _, d := range SpecTexts(s.DUTs) {
		if _, err := ParseDUT(d); err != nil {
			t.Errorf("DUT %s: %v", d, err)
		}
	}
	for _, d := range families {
		if !slices.Contains(SpecTexts(s.DUTs), d) || !slices.Contains(SpecTexts(s.DUTs), d+"@"+knob) {
			t.Errorf("%s and %s@%s not both in %v", d, d, knob, s.DUTs)
		}
	}
	for _, g := range s.Goals {
		test := g.Test
		if test == TestSpan {
			test = TestThroughput // span comes with each mirrored throughput
		}
		if !slices.Contains(SpecTexts(s.DUTs), g.DUT) || g.Base != "" && !slices.Contains(SpecTexts(s.DUTs), g.Base) || !s.Has(test) {
			t.Errorf("goal %s: not measured by the scenario", g)
		}
	}
	help := s.Describe()
	for _, want := range append([]string{"Goals"}, helps...) {
		if !strings.Contains(help, want) {
			t.Errorf("Describe lacks %q:\n%s", want, help)
		}
	}
	// The estimate is rough (searches vary), but it must not promise
	// much more than it says.
	var total time.Duration
	for _, u := range Plan(s) {
		total += EstimateUnit(s, u)
	}
	if total > limit {
		t.Errorf("estimated %v for the default run", total)
	}
	return s
}

// TestExecute runs a small scenario for real: every DUT forwards, the
// figures are there, and nothing is left behind, also when a DUT fails.
// Open vSwitch's run is TestExecuteOVS.
func TestExecute(t *testing.T) {
	RequireRoot(t)
	sc := executeForwards(t, TrestleBinary(t), "direct", "linux-bridge", "trestle:xdp", "trestle:tc")

	// A DUT that fails to start: the unit is recorded as failed, the run
	// goes on, and its namespaces are gone too.
	before := Ours(t, RunPrefix)
	sc.DUTs = MustSpecs("trestle", "direct")
	run, err := Execute(context.Background(), Config{Scenario: sc, Placement: "shared", Trestle: "/nonexistent/trestle", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	failed := false
	for _, r := range run.Results {
		if r.DUT == "trestle" && r.Error != "" {
			failed = true
		}
	}
	if !failed {
		t.Errorf("a trestle DUT without a binary did not fail: %+v", run.Results)
	}
	if left := Ours(t, RunPrefix); len(left) != len(before) {
		t.Errorf("namespaces left after a failed unit: %v", left)
	}
}

// TestExecuteOVS is TestExecute through Open vSwitch, whose userspace
// datapath loses most frames on a busy machine: make test runs it in its
// timed phase, beside nothing (TEST_TIMED), and the other DUTs' runs
// beside the rest.
func TestExecuteOVS(t *testing.T) {
	RequireRoot(t)
	if err := OVSAvailable(); err != nil {
		t.Skip(err)
	}
	executeForwards(t, "", "ovs")
}

// executeForwards runs tinyScenario through duts with trestle bin: each
// forwards frames and TCP, and nothing is left behind. It returns the
// scenario.
func executeForwards(t *testing.T, bin string, duts ...string) Scenario {
	t.Helper()
	sc := tinyScenario(duts)
	before := Ours(t, RunPrefix)
	_, got := execute(t, sc, bin)
	for _, d := range duts {
		if f := Single(got[d]); f[TestThroughput] <= 0 || f[TestTCP] <= 0 {
			t.Errorf("%s: throughput %v pps, TCP %v bit/s; want both above 0", d, f[TestThroughput], f[TestTCP])
		}
	}
	if left := Ours(t, RunPrefix); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
	return sc
}

// TestExecuteCancelled: Ctrl-C in the middle of a trial leaves nothing.
func TestExecuteCancelled(t *testing.T) {
	RequireRoot(t)
	sc := Scenario{Name: "test", DUTs: MustSpecs("linux-bridge"), Hosts: 2, Chain: []int{1}, Sizes: []FrameSize{"64"},
		Tests: TestsOf(TestThroughput), Reps: 1, Timing: DefaultTiming}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	before := Ours(t, RunPrefix)
	_, err := Execute(ctx, Config{Scenario: sc, Placement: "shared", WorkDir: t.TempDir()})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want the context's", err)
	}
	if left := Ours(t, RunPrefix); len(left) != len(before) {
		t.Errorf("namespaces left after cancel: %v", left)
	}
}

// TestTableCheck: the fdb-scale test fills each learning DUT's table, checks
// with a third host that every address is held (a frame to each reaches h2,
// none is flooded to h3), and says so in the result.
func TestTableCheck(t *testing.T) {
	RequireRoot(t)
	bin := TrestleBinary(t)
	duts := []string{"linux-bridge", "trestle:xdp"}
	sc := Scenario{Name: "test", DUTs: MustSpecs(duts...), Hosts: 3, Chain: []int{1}, Sizes: []FrameSize{"64"},
		Tests: []Kind{table.Kind{Sizes: []int{2000}}}, Reps: 1, Timing: TinyTiming()}
	run, err := Execute(context.Background(), Config{Scenario: sc, Placement: "shared", Trestle: bin, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range run.Results {
		if r.Test != table.TestTable {
			continue
		}
		seen[r.DUT]++
		if r.Error != "" || r.Value <= 0 {
			t.Errorf("%s %s: %v pps, error %q", r.DUT, r.Param, r.Value, r.Error)
		}
		if r.Table == nil || !r.Table.Held() || r.Table.Addresses != 2000 {
			t.Errorf("%s %s: table check %+v, want all 2000 held", r.DUT, r.Param, r.Table)
		} else if !strings.HasPrefix(r.Note, "held all 2000 addresses") {
			t.Errorf("%s %s: note %q does not report the check", r.DUT, r.Param, r.Note)
		}
	}
	for _, d := range duts {
		if seen[d] != 2 {
			t.Errorf("%s: %d table results, want 2 (to h2, spread)", d, seen[d])
		}
	}
}
