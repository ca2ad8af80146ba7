package gen

import (
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/frame"
)

func TestShare(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		k    int
		want []uint64
	}{
		{10, 3, []uint64{4, 3, 3}},
		{2, 4, []uint64{1, 1, 0, 0}},
		{0, 2, []uint64{0, 0}},
	} {
		var sum uint64
		for i := range c.k {
			got := share(c.n, c.k, i)
			sum += got
			if got != c.want[i] {
				t.Errorf("share(%d, %d, %d) = %d, want %d", c.n, c.k, i, got, c.want[i])
			}
		}
		if sum != c.n {
			t.Errorf("share(%d, %d, *) adds up to %d", c.n, c.k, sum)
		}
	}
}

func TestDefaults(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 2}
	for _, c := range []struct {
		name string
		o    Options
		bad  bool
	}{
		{"minimal", Options{DstMAC: mac}, false},
		{"no destination", Options{}, true},
		{"mode", Options{DstMAC: mac, Mode: "fast"}, true},
		{"negative rate", Options{DstMAC: mac, Rate: -1}, true},
		{"too many flows", Options{DstMAC: mac, Flows: 70000}, true},
		{"batch", Options{DstMAC: mac, Batch: 300}, true},
		{"clock", Options{DstMAC: mac, ClockEvery: 2000}, true},
	} {
		err := c.o.defaults()
		if (err != nil) != c.bad {
			t.Errorf("%s: err %v, want error %v", c.name, err, c.bad)
		}
	}
	o := Options{DstMAC: mac, CPUs: []int{0, 1}}
	if err := o.defaults(); err != nil || o.Flows != 2 || o.ClockEvery != 16 || o.Batch != 64 || o.Mix.Sizes[0] != 60 {
		t.Errorf("defaults: %v %+v", err, o)
	}
}

// BenchmarkGenProgram is the generator program's cost per frame, run through
// BPF_PROG_TEST_RUN without live frames (the XDP_TX goes nowhere), unpaced,
// with the clock read for every frame and for one in 16 (go test -bench
// GenProgram -run ^$ ./internal/gen, as root).
func BenchmarkGenProgram(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to load eBPF programs")
	}
	for _, every := range []int{1, 16} {
		for _, mix := range []frame.Mix{{Sizes: []int{60}, Weights: []int{1}}, frame.IMIX} {
			b.Run(fmt.Sprintf("%s/clock-every-%d", mix, every), func(b *testing.B) {
				o := Options{DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, ClockEvery: every, Mix: mix}
				if err := o.defaults(); err != nil {
					b.Fatal(err)
				}
				specs, err := flowSpecs(&o, net.HardwareAddr{2, 0, 0, 0, 0, 1})
				if err != nil {
					b.Fatal(err)
				}
				g, data, err := loadLive(&o, specs)
				if err != nil {
					b.Fatal(err)
				}
				defer g.objs.Close()
				ncpu, _ := ebpf.PossibleCPU()
				for cpu := range min(ncpu, int(tbpf.GenTrGenLimitsTR_GEN_MAX_CPUS)) {
					st := tbpf.GenTrGenCpu{FlowStep: 1, Nflows: 1}
					if err := g.objs.Cpus.Put(uint32(cpu), &st); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				ret, per, err := g.objs.TrestleGen.Benchmark(data, b.N, nil)
				if err != nil {
					b.Fatal(err)
				}
				if ret != 3 { // XDP_TX
					b.Fatalf("generator returned %d, want XDP_TX", ret)
				}
				b.ReportMetric(float64(per.Nanoseconds()), "ns/frame")
			})
		}
	}
}
