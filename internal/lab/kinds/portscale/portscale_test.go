package portscale

import (
	"context"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/labtest"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// TestTakesPorts: trestle says itself, through `trestle check`, whether it
// takes a count; the Linux bridge stops at the kernel's 1024.
func TestTakesPorts(t *testing.T) {
	env := &lab.Env{Trestle: labtest.TrestleBinary(t), WorkDir: t.TempDir()}
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
		why, err := takesPorts(ctx, lab.MustSpecs(c.dut)[0], env, c.n)
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
	res := func(dut string, n int, traffic string, rate float64) lab.Result {
		r := lab.Result{DUT: dut, Test: TestPortScale, Param: portScaleParam(n, traffic), Unit: "frames/s", Value: rate}
		if err := r.SetRecord(Record{Ports: n, Traffic: traffic, Sinks: 1, Rate: rate}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	refused := func(dut string, n int) lab.Result {
		r := lab.Result{DUT: dut, Test: TestPortScale, Param: portScaleParam(n, "unicast"), Error: "trestle check: too many ports"}
		if err := r.SetRecord(Record{Ports: n, Traffic: "unicast", Refused: "trestle check: too many ports"}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	run := &lab.Run{DUTs: []string{"linux-bridge", "trestle:xdp"}, Results: []lab.Result{
		res("linux-bridge", 2, "unicast", 1e6), res("linux-bridge", 2, "broadcast", 500e3),
		res("linux-bridge", 64, "unicast", 0.9e6), res("linux-bridge", 64, "broadcast", 100e3),
		res("trestle:xdp", 64, "unicast", 2.9e6), res("trestle:xdp", 64, "broadcast", 150e3),
		res("trestle:xdp", 64, "unicast", 2.8e6), res("trestle:xdp", 64, "broadcast", 130e3),
		res("trestle:xdp", 2, "unicast", 3e6), res("trestle:xdp", 2, "broadcast", 1e6),
		refused("trestle:xdp", 256),
		{DUT: "trestle:xdp", Test: TestPortScale, Param: portScaleParam(16, "unicast"), Error: "set up trestle:xdp: no"},
	}}
	term, md := labtest.Section(t, run)
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
		if !strings.Contains(term, want) {
			t.Errorf("terminal lacks %q:\n%s", want, term)
		}
	}
	for _, want := range []string{"## Port scale", "| trestle:xdp | 64 | 2.85 Mpps | 0.95x | 140.0 kpps | 0.14x | 1.40x | 2 |", "| trestle:xdp | 256 | - | - | - | - | - | 0 (not run: trestle check: too many ports) |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if term, md := lab.Sections(&lab.Run{DUTs: []string{"direct"}, Results: []lab.Result{{DUT: "direct", Test: lab.TestThroughput, Value: 1}}}); term != nil || md != nil {
		t.Errorf("a run without port-scale results has sections: %q %q", term, md)
	}
}
