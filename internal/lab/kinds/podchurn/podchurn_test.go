package podchurn

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/labtest"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// TestPodChurnSection: the churn table from recorded calls: median and
// p99 over every repetition's, the trestle plugin's ADD against the
// bridge plugin's, median and p99 of each verb, with the goal, a failed
// repetition counted apart.
func TestPodChurnSection(t *testing.T) {
	res := func(dut, plugin string, add, del []float64, stopped ...string) lab.Result {
		r := lab.Result{DUT: dut, Test: TestPodChurn, Param: plugin + " plugin", Value: 1000 * lab.Median(add)}
		if err := r.SetRecord(Record{Plugin: plugin, Add: add, Del: del, Stopped: strings.Join(stopped, "")}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	run := &lab.Run{DUTs: []string{"linux-bridge", "trestle:xdp", "trestle:tc", "trestle"}, Results: []lab.Result{
		res("linux-bridge", "bridge", []float64{0.010, 0.020, 0.030}, []float64{0.005, 0.005, 0.006}),
		res("trestle:xdp", "trestle", []float64{0.025, 0.020}, []float64{0.010, 0.012}),
		res("trestle:xdp", "trestle", []float64{0.040, 0.030}, []float64{0.011, 0.013}, "ADD 3 of 3 failed: bridge \"br1\" is full"),
		res("trestle:tc", "trestle", []float64{0.022, 0.030}, []float64{0.005, 0.006}),
		res("trestle", "trestle", []float64{0.040}, []float64{0.010}),
		{DUT: "trestle", Test: TestPodChurn, Error: "cnitool add x: exit status 1: no daemon"},
	}}
	term, md := labtest.Section(t, run)
	for _, want := range []string{
		"linux-bridge  bridge   20.0 ms     30.0 ms  5.0 ms      6.0 ms   -                                     3\n",
		"trestle:xdp   trestle  25.0 ms     40.0 ms  11.0 ms     13.0 ms  1.25x, 1.33x; 2.20x, 2.17x            4 (1 stopped short: ADD 3 of 3 failed: bridge \"br1\" is full)\n",
		"trestle:tc    trestle  22.0 ms     30.0 ms  5.0 ms      6.0 ms   1.10x, 1.00x; 1.00x, 1.00x            2\n",
		"trestle       trestle  40.0 ms     40.0 ms  10.0 ms     10.0 ms  2.00x, 1.33x; 2.00x, 1.67x            1 (1 failed: cnitool add x: exit status 1: no daemon)\n",
		"trestle:xdp: a trestle ADD 1.25x the bridge plugin's (median), 1.33x (p99); a DEL 2.20x, 2.17x (goal: each at most 1.2x): fail",
		"trestle:tc: a trestle ADD 1.10x the bridge plugin's (median), 1.00x (p99); a DEL 1.00x, 1.00x (goal: each at most 1.2x): pass",
		"trestle: a trestle ADD 2.00x the bridge plugin's (median), 1.33x (p99); a DEL 2.00x, 1.67x (goal: each at most 1.2x): fail",
	} {
		if !strings.Contains(term, want) {
			t.Errorf("terminal lacks %q:\n%s", want, term)
		}
	}
	if !strings.Contains(md, "## Pod churn") || !strings.Contains(md, "| trestle:xdp | trestle | 25.0 ms | 40.0 ms | 11.0 ms | 13.0 ms | 1.25x, 1.33x; 2.20x, 2.17x | 4 (1 stopped short: ADD 3 of 3 failed: bridge \"br1\" is full) |") {
		t.Errorf("report.md:\n%s", md)
	}
	if q := lab.Quantile([]float64{5, 1, 4, 2, 3}, 0.99); q != 5 {
		t.Errorf("p99 of 1..5: %v", q)
	}
}

// TestExecutePodChurn churns pods for real: the bridge plugin on the Linux
// bridge and the trestle plugin on trestle, every ADD and DEL timed, and
// nothing left after: no pod namespace, no cached result.
func TestExecutePodChurn(t *testing.T) {
	labtest.RequireRoot(t)
	tools, err := filepath.Abs("../../../../bin/tools")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tools, "cnitool")); err != nil {
		t.Skipf("no cnitool in %s: run scripts/deps.sh tools", tools)
	}
	if _, err := os.Stat(filepath.Join(lab.BridgePluginDir, "bridge")); err != nil {
		t.Skipf("no bridge plugin in %s: install containernetworking-plugins (scripts/deps.sh)", lab.BridgePluginDir)
	}
	// The lab finds the plugin and the tools beside its trestle: a
	// directory of the test's own holds the three (TRESTLE_TEST_CNI is
	// the plugin make test built; else it is built here).
	dir := t.TempDir()
	bin := filepath.Join(dir, "trestle")
	if err := os.Symlink(labtest.TrestleBinary(t), bin); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "cni"), 0o755); err != nil {
		t.Fatal(err)
	}
	if cni := os.Getenv("TRESTLE_TEST_CNI"); cni != "" {
		abs, err := filepath.Abs(cni)
		if err == nil {
			err = os.Symlink(abs, filepath.Join(dir, "cni", "trestle"))
		}
		if err != nil {
			t.Fatal(err)
		}
	} else if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "cni", "trestle"), "github.com/trestle/trestle/cmd/trestle-cni").CombinedOutput(); err != nil {
		t.Fatalf("build the plugin: %v\n%s", err, out)
	}
	if err := os.Symlink(tools, filepath.Join(dir, "tools")); err != nil {
		t.Fatal(err)
	}
	sc := lab.Scenario{Name: "test", DUTs: lab.MustSpecs("direct", "linux-bridge", "trestle:xdp"), Hosts: 2, Chain: []int{1},
		Tests: []lab.Kind{Kind{Pods: 5}}, Reps: 1, Timing: lab.TinyTiming()}
	before := labtest.Ours(t)
	run, err := lab.Execute(context.Background(), lab.Config{Scenario: sc, Placement: "shared", Trestle: bin, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Record{}
	for _, r := range run.Results {
		if r.Test != TestPodChurn {
			continue
		}
		var rec Record
		if err := r.RecordOf(&rec); err != nil {
			t.Errorf("%s: %v (%s)", r.DUT, err, r.Error)
			continue
		}
		got[r.DUT] = rec
	}
	for d, plugin := range map[string]string{"linux-bridge": "bridge", "trestle:xdp": "trestle"} {
		rec := got[d]
		if rec.Plugin != plugin || len(rec.Add) != 5 || len(rec.Del) != 5 {
			t.Errorf("%s: %+v, want 5 ADDs and DELs of the %s plugin", d, rec, plugin)
		}
	}
	if _, ok := got["direct"]; ok {
		t.Error("the straight path churned pods: it has no bridge")
	}
	if left := labtest.Ours(t); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
	cached, _ := filepath.Glob("/var/lib/cni/results/churn-*")
	if len(cached) > 0 {
		t.Errorf("cached results left: %v", cached)
	}
}
