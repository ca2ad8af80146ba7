package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("makes network namespaces: not under -short (make check)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, veth pairs, eBPF programs")
	}
}

// ours lists the namespaces under /run/netns that start with prefix.
func ours(t *testing.T, prefix string) []string {
	t.Helper()
	ents, err := os.ReadDir(netnsDir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		// A prefix that ends in a PID's digit is that process's alone:
		// tl12 is not tl123's.
		if ok && !(prefix != "" && isDigit(prefix[len(prefix)-1]) && rest != "" && isDigit(rest[0])) {
			out = append(out, e.Name())
		}
	}
	return out
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// runPrefix begins the names of the namespaces of this process's lab runs
// (NewNet's Prefix): the tests count their own, not those of another lab
// run on the same machine.
var runPrefix = "tl" + strconv.Itoa(os.Getpid())

// TestTopologyCleanup: a chain topology with a running process goes away
// completely, and so does one whose build failed midway.
func TestTopologyCleanup(t *testing.T) {
	requireRoot(t)
	n := NewNet("t1")
	t.Cleanup(func() { n.Close() })
	topo, err := Build(context.Background(), n, Shape{Hosts: 2, Chain: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(ours(t, n.Prefix+"-")); got != 3 {
		t.Fatalf("%d namespaces, want h1, h2 and dut", got)
	}
	if want := []string{"p1", "c1a", "c1b", "c2a", "c2b", "p2"}; len(topo.DUTPorts()) != len(want) {
		t.Errorf("DUT ports %v, want %v", topo.DUTPorts(), want)
	}
	p, err := topo.Hosts[0].NS.Start("sleep", "600")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if left := ours(t, n.Prefix+"-"); len(left) != 0 {
		t.Errorf("namespaces left after Close: %v", left)
	}
	select {
	case <-p.Done():
	default:
		t.Errorf("process %d still running after Close", p.Cmd.Process.Pid)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	// A build that fails midway: the second veth's name is too long.
	n2 := NewNet("t2")
	t.Cleanup(func() { n2.Close() })
	h1, err := n2.NS("h1")
	if err != nil {
		t.Fatal(err)
	}
	h2, err := n2.NS("h2")
	if err != nil {
		t.Fatal(err)
	}
	if err := n2.Veth(h1, "a0", h2, "b0", VethOpts{}); err != nil {
		t.Fatal(err)
	}
	if err := n2.Veth(h1, "a-name-far-too-long", h2, "b1", VethOpts{}); err == nil {
		t.Fatal("a veth with a 19-character name was created")
	}
	if err := n2.Close(); err != nil {
		t.Fatal(err)
	}
	if left := ours(t, n2.Prefix+"-"); len(left) != 0 {
		t.Errorf("namespaces left after a failed build: %v", left)
	}
}

// TestSweep: namespaces of a run whose process is gone are removed; a live
// run's are not.
func TestSweep(t *testing.T) {
	requireRoot(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := "tl" + strconv.Itoa(cmd.Process.Pid) + "-swept"
	// A scenario's sets carry a tag after the PID (run.go: "u1", "u2", ...).
	deadTagged := "tl" + strconv.Itoa(cmd.Process.Pid) + "u1-swept"
	live := NewNet("sw")
	t.Cleanup(func() {
		live.Close()
		exec.Command("ip", "netns", "del", dead).Run()
		exec.Command("ip", "netns", "del", deadTagged).Run()
	})
	for _, name := range []string{dead, deadTagged} {
		if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	if _, err := live.NS("kept"); err != nil {
		t.Fatal(err)
	}
	gone, err := Sweep()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{dead, deadTagged} {
		if len(ours(t, name)) != 0 || !contains(gone, name) {
			t.Errorf("%s not swept (swept %v)", name, gone)
		}
	}
	if len(ours(t, live.Prefix+"-kept")) != 1 {
		t.Errorf("a live run's namespace was swept")
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// built is trestle as trestleBinary built it, once for the package's
// tests; TestMain removes it.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// trestleBinary is the trestle the lab's DUTs run: TRESTLE_TEST_BIN when
// set (make test sets it to bin/trestle, as for the end-to-end tests),
// else this module's, built on first use. A test that changes the binary
// copies it first.
func trestleBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("TRESTLE_TEST_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatalf("TRESTLE_TEST_BIN: %v", err)
		}
		return abs
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "trestle-lab-bin"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "trestle")
		if out, err := exec.Command("go", "build", "-o", built.bin, "../../cmd/trestle").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("build trestle: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

func tinyTiming() Timing {
	tm := DefaultTiming
	tm.Search.Trial, tm.Search.Confirm = 300*time.Millisecond, 500*time.Millisecond
	tm.Settle, tm.Drain = 50*time.Millisecond, 100*time.Millisecond
	// These tests ask whether each DUT forwards, not whether it loses
	// nothing: Open vSwitch's userspace datapath drops a few frames at
	// most rates here, and a zero-loss search can then find no rate.
	tm.Search.LossGoal = 0.05
	return tm
}

// tinyScenario is a 2-host scenario of 64-byte throughput and iperf3 TCP
// with one stream, one repetition each, at tinyTiming.
func tinyScenario(duts []string, chain ...int) Scenario {
	if len(chain) == 0 {
		chain = []int{1}
	}
	return Scenario{Name: "test", DUTs: MustSpecs(duts...), Hosts: 2, Chain: chain, Sizes: []FrameSize{"64"},
		Tests: []Kind{throughputKind{}, TCPTest{Streams: []int{1}}}, IperfTime: time.Second, Reps: 1, Timing: tinyTiming()}
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
	before := ours(t, runPrefix)
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
		f := single(got[d])
		for _, test := range sc.TestNames() {
			if f[test] <= 0 {
				t.Errorf("%s: %s %v, want above 0", d, test, f[test])
			}
		}
		if check != nil {
			check(d, u, f)
		}
	}
	if left := ours(t, runPrefix); len(left) != len(before) {
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
		if !slices.Contains(SpecTexts(s.DUTs), g.DUT) || g.Base != "" && !slices.Contains(SpecTexts(s.DUTs), g.Base) || !s.has(test) {
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
	for _, u := range plan(s) {
		total += estimate(s, u)
	}
	if total > limit {
		t.Errorf("estimated %v for the default run", total)
	}
	return s
}

// single is a DUT's figures at its one chain length (0 for direct).
func single(byChain map[int]map[string]float64) map[string]float64 {
	for _, f := range byChain {
		return f
	}
	return nil
}

// TestExecute runs a small scenario for real: every DUT forwards, the
// figures are there, and nothing is left behind, also when a DUT fails.
func TestExecute(t *testing.T) {
	requireRoot(t)
	bin := trestleBinary(t)
	duts := []string{"direct", "linux-bridge", "trestle:xdp", "trestle:tc"}
	if OVSAvailable() == nil {
		duts = append(duts, "ovs")
	}
	sc := tinyScenario(duts)
	before := ours(t, runPrefix)
	_, got := execute(t, sc, bin)
	for _, d := range duts {
		if f := single(got[d]); f[TestThroughput] <= 0 || f[TestTCP] <= 0 {
			t.Errorf("%s: throughput %v pps, TCP %v bit/s; want both above 0", d, f[TestThroughput], f[TestTCP])
		}
	}
	if left := ours(t, runPrefix); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}

	// A DUT that fails to start: the unit is recorded as failed, the run
	// goes on, and its namespaces are gone too.
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
	if left := ours(t, runPrefix); len(left) != len(before) {
		t.Errorf("namespaces left after a failed unit: %v", left)
	}
}

// TestExecuteCancelled: Ctrl-C in the middle of a trial leaves nothing.
func TestExecuteCancelled(t *testing.T) {
	requireRoot(t)
	sc := Scenario{Name: "test", DUTs: MustSpecs("linux-bridge"), Hosts: 2, Chain: []int{1}, Sizes: []FrameSize{"64"},
		Tests: TestsOf(TestThroughput), Reps: 1, Timing: DefaultTiming}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	before := ours(t, runPrefix)
	_, err := Execute(ctx, Config{Scenario: sc, Placement: "shared", WorkDir: t.TempDir()})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want the context's", err)
	}
	if left := ours(t, runPrefix); len(left) != len(before) {
		t.Errorf("namespaces left after cancel: %v", left)
	}
}

// TestTableCheck: the fdb-scale test fills each learning DUT's table, checks
// with a third host that every address is held (a frame to each reaches h2,
// none is flooded to h3), and says so in the result.
func TestTableCheck(t *testing.T) {
	requireRoot(t)
	bin := trestleBinary(t)
	duts := []string{"linux-bridge", "trestle:xdp"}
	sc := Scenario{Name: "test", DUTs: MustSpecs(duts...), Hosts: 3, Chain: []int{1}, Sizes: []FrameSize{"64"},
		Tests: []Kind{TableTest{Sizes: []int{2000}}}, Reps: 1, Timing: tinyTiming()}
	run, err := Execute(context.Background(), Config{Scenario: sc, Placement: "shared", Trestle: bin, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range run.Results {
		if r.Test != TestTable {
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

func TestTableCheckText(t *testing.T) {
	held := TableCheck{Addresses: 10, Forwarded: 10}
	if !held.Held() {
		t.Errorf("%+v not held", held)
	}
	for _, c := range []TableCheck{{Addresses: 10, Forwarded: 9}, {Addresses: 10, Forwarded: 10, Flooded: 1}} {
		if c.Held() {
			t.Errorf("%+v held", c)
		}
		if !strings.Contains(c.String(), "did not hold all 10") {
			t.Errorf("%+v: %q", c, c.String())
		}
	}
}

// mustSpec is a DUT spec of a test, which parses.
func mustSpec(text string) Spec { return MustSpecs(text)[0] }
