package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/kinds/cores"
)

// coresRun is a cores run on 2 CPUs, 2 repetitions: direct and trestle
// scale, the Linux bridge finds no zero-loss rate once at 2 CPUs, Open
// vSwitch's PMD shares its CPU at 2.
func coresRun() *lab.Run {
	run := &lab.Run{Scenario: "cores", Title: "Cores", DUTs: []string{"direct", "trestle:xdp", "linux-bridge", "ovs"}, Reps: 2, Timing: lab.DefaultTiming, Sizes: []lab.FrameSize{"64"},
		Machine: lab.Machine{CPUs: 2}}
	add := func(dut string, rep, n int, pps float64, errText string) {
		r := lab.Result{DUT: dut, Rep: rep, Chain: 1, Test: lab.TestCores, Param: "64 cpus=" + string(rune('0'+n)), Value: pps, Unit: "pps", Error: errText,
			CPU: []float64{1, 0.5 * float64(n)}}
		rec := cores.Record{FrameSize: "64", CPUs: n, GenCPUs: []int{0, 1}[:n], Flows: n, Queues: 2, DUTCPU: 1, DUTShared: n == 2, Seconds: 20}
		if len(run.Results) == 0 {
			// Someone else's work took 10 of the 40 CPU-seconds of direct at 1 CPU.
			rec.OtherCPU = 10
		}
		if err := r.SetRecord(rec); err != nil {
			panic(err)
		}
		run.Results = append(run.Results, r)
	}
	for rep := 1; rep <= 2; rep++ {
		f := float64(rep) * 0.1e6 // the repetitions differ a little
		add("direct", rep, 1, 5e6+f, "")
		add("direct", rep, 2, 9e6+f, "")
		add("trestle:xdp", rep, 1, 3e6+f, "")
		add("trestle:xdp", rep, 2, 6e6+f, "")
		add("linux-bridge", rep, 1, 1e6, "")
		if rep == 1 {
			add("linux-bridge", rep, 2, 0, "no zero-loss rate: no rate passed down to 1000 pps")
		} else {
			add("linux-bridge", rep, 2, 1.8e6, "")
		}
		add("ovs", rep, 1, 0.5e6, "")
		add("ovs", rep, 2, 0.4e6, "")
	}
	return run
}

func TestCoresRows(t *testing.T) {
	rows := cores.Cores(coresRun())
	if len(rows) != 4 || rows[0].DUT != "direct" || rows[3].DUT != "ovs" {
		t.Fatalf("rows: %+v", rows)
	}
	tr := rows[1]
	if len(tr.Cells) != 2 || tr.Cells[0].CPUs != 1 || tr.Cells[0].Median != 3.15e6 || tr.Cells[1].Median != 6.15e6 {
		t.Fatalf("trestle:xdp: %+v %+v", tr.Cells[0], tr.Cells[1])
	}
	if f := tr.Scaling(tr.Cells[1]); math.Abs(f-6.15/3.15) > 1e-9 {
		t.Errorf("trestle:xdp scaling %v", f)
	}
	if c := tr.Cells[1]; len(c.CPU) != 2 || c.CPU[1] != 1 || !c.DUTShared {
		t.Errorf("trestle:xdp at 2 CPUs: %+v", c)
	}
	lb := rows[2].Cells[1]
	if len(lb.Values) != 1 || len(lb.Errors) != 1 || lb.Median != 1.8e6 {
		t.Errorf("linux-bridge at 2 CPUs: %+v", lb)
	}
}

func TestCoresReport(t *testing.T) {
	run := coresRun()
	var term bytes.Buffer
	Terminal(&term, run)
	out := term.String()
	lacks(t, "terminal", out,
		"cores: zero-loss throughput",
		"trestle:xdp   2     6.15Mpps  1.95x     0.67       cpu0 100%, cpu1 100%",
		"cpu0 100%, cpu1 100%",
		"no figure: linux-bridge at 2 CPUs: no zero-loss rate",
		"note: ovs at 2 CPUs: its forwarding thread (the PMD, one, on the DUT's CPU) shared that CPU",
		"note: direct at 1 CPU: other processes on the machine used 10.0 CPU-seconds",
	)
	if strings.Contains(out, "cores 64 cpus") || strings.Contains(out, "note: trestle:xdp at 2 CPUs: its forwarding thread") {
		t.Errorf("cores figures in the generic table, or trestle's idle daemon taken for a forwarding thread:\n%s", out)
	}
	dir := t.TempDir()
	if err := Write(dir, run); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	lacks(t, "report.md", string(md),
		"## Cores",
		"| DUT | 1 CPU | 2 CPUs |",
		"| trestle:xdp | 3.15Mpps (1.00x) | 6.15Mpps (1.95x) |",
		"| ovs | 500kpps (1.00x) | 400kpps (0.80x), PMD shares a CPU |",
		"![Cores: zero-loss throughput against the CPUs forwarding](cores-throughput.svg)",
		"![Cores: throughput as a factor of 1 CPU's](cores-scaling.svg)",
	)
	scaling, err := os.ReadFile(filepath.Join(dir, "cores-scaling.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(scaling), "perfect scaling") || !strings.Contains(string(scaling), "linux-bridge") {
		t.Errorf("the scaling chart lacks its lines")
	}
}
