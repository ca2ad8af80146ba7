package cores

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/labtest"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// TestCoresScenario: the preset, its counts, its estimate and its checks,
// without privileges.
func TestCoresScenario(t *testing.T) {
	s := lab.Scenarios["cores"]
	if !s.Has(lab.TestCores) || s.Hosts != 2 || len(countsOf(s)) == 0 || countsOf(s)[0] != 1 || !slices.Contains(lab.SpecTexts(s.DUTs), "trestle:xdp") || !slices.Contains(lab.SpecTexts(s.DUTs), "direct") {
		t.Errorf("cores: %+v", s)
	}
	cpus, err := lab.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Max(countsOf(s)); got != len(cpus) {
		t.Errorf("default counts %v: the largest should be every CPU the process may use (%d)", countsOf(s), len(cpus))
	}
	if err := s.CheckPlacement("auto"); err != nil {
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
	if err := s.CheckPlacement("split"); err == nil || !strings.Contains(err.Error(), "split would move the forwarding") {
		t.Errorf("placement split: %v", err)
	}
	bad := s
	setCounts(&bad, []int{len(cpus) + 1})
	if err := bad.CheckPlacement("auto"); err == nil || !strings.Contains(err.Error(), "CPUs asked for") {
		t.Errorf("a count above the machine's CPUs: %v", err)
	}
	if _, err := coresPlacement(coresOf(bad), "auto"); err == nil {
		t.Errorf("placement for a count above the machine's CPUs")
	}

	if total := s.Estimate(); total < 5*time.Minute || total > 25*time.Minute {
		t.Errorf("cores on 2 CPUs estimated at %v", total)
	}
}

// TestCoresPlacement: the generator's threads on the first CPUs, the DUT's
// own on the one after the largest count, or the last where none is spare;
// the notes say which.
func TestCoresPlacement(t *testing.T) {
	cpus, err := lab.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	s := lab.Scenarios["cores"]
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
}

// TestExecuteCores runs the cores test for real, short: the straight path
// and the floor (no daemon to build) forward at 1 and 2 CPUs, each figure
// with its record, its CPUs and every trial; nothing is left behind.
func TestExecuteCores(t *testing.T) {
	labtest.RequireRoot(t)
	cpus, err := lab.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	counts := DefaultCoreCounts(min(len(cpus), 2))
	sc := lab.Scenario{Name: "test", DUTs: lab.MustSpecs("direct", "floor"), Hosts: 2, Chain: []int{1}, Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{Kind{Counts: counts}},
		Reps: 1, Timing: lab.TinyTiming()}
	before := labtest.Ours(t)
	run, err := lab.Execute(context.Background(), lab.Config{Scenario: sc, Placement: "auto", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]int{}
	for _, r := range run.Results {
		if r.Error != "" {
			t.Errorf("%s %s %s: %s", r.DUT, r.Test, r.Param, r.Error)
			continue
		}
		c := &Record{}
		if r.Test != lab.TestCores || r.RecordOf(c) != nil {
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
	for _, d := range lab.SpecTexts(sc.DUTs) {
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
	if left := labtest.Ours(t); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
}

// setCounts sets the CPU counts of s's cores test.
func setCounts(s *lab.Scenario, counts []int) {
	lab.Configure(s, func(k Kind) Kind { k.Counts = counts; return k })
}

// coresOf is s's cores test; countsOf its CPU counts.
func coresOf(s lab.Scenario) Kind {
	k, _ := lab.TestOf[Kind](s)
	return k
}

func countsOf(s lab.Scenario) []int { return coresOf(s).Counts }

// TestOldRecord: a cores result recorded before the registry (its record
// under "cores", as docs/lab/cores.json has it) loads, and its row reads
// its record.
func TestOldRecord(t *testing.T) {
	old := `{"duts": ["direct"], "results": [{"dut": "direct", "rep": 1, "chain": 0, "test": "cores", "param": "64 cpus=1", "value": 3990218.8271477884, "unit": "pps",
	"cpu_busy": [0.998003992015968, 0.1661600810536981],
	"cores": {"frame_size": "64", "cpus": 1, "gen_cpus": [0], "flows": 1, "src_ports": "1024", "queues": 2, "dut_cpu": 1, "dut_cpu_shared": false, "seconds": 13.087278221, "other_cpu_seconds": 0}}]}`
	var run lab.Run
	if err := json.Unmarshal([]byte(old), &run); err != nil {
		t.Fatal(err)
	}
	rows := Cores(&run)
	if len(rows) != 1 || rows[0].Size != "64" || len(rows[0].Cells) != 1 || rows[0].Cells[0].CPUs != 1 || rows[0].Cells[0].Median != 3990218.8271477884 || rows[0].Cells[0].Seconds != 13.087278221 {
		t.Fatalf("rows of an old run: %+v", rows)
	}
}
