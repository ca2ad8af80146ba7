package gen

import (
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/frame"
	labbpf "github.com/trestle/trestle/internal/lab/bpf"
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
		{"random macs", Options{DstMAC: mac, SrcMACs: 1000000, RandomMACs: true}, false},
		{"random macs without a range", Options{DstMAC: mac, RandomMACs: true}, true},
		{"flow base", Options{DstMAC: mac, FlowBase: 65534, Flows: 2}, false},
		{"flow base past 65535", Options{DstMAC: mac, FlowBase: 65535, Flows: 2}, true},
		{"negative flow base", Options{DstMAC: mac, FlowBase: -1}, true},
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
// GenProgram -run ^$ ./internal/lab/gen, as root).
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
				for cpu := range min(ncpu, int(labbpf.GenTrGenLimitsTR_GEN_MAX_CPUS)) {
					st := labbpf.GenTrGenCpu{FlowStep: 1, Nflows: 1}
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

// pinToOneCPU keeps the test's goroutine on one thread and that thread on
// CPU 0 (whose state loadForTest set up as every CPU's) until the test ends.
func pinToOneCPU(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	var was, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		t.Fatal(err)
	}
	one.Set(0)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.SchedSetaffinity(0, &was)
		runtime.UnlockOSThread()
	})
}

// runOnce runs the generator program once (BPF_PROG_TEST_RUN, not live) on
// a fresh copy of the template frame and returns the frame it made.
func runOnce(t *testing.T, g *liveGen, data []byte) []byte {
	t.Helper()
	opts := &ebpf.RunOptions{Data: data, DataOut: make([]byte, len(data)+256)}
	ret, err := g.objs.TrestleGen.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	if ret != 3 { // XDP_TX
		t.Fatalf("generator returned %d, want XDP_TX", ret)
	}
	return opts.DataOut
}

func loadForTest(t *testing.T, o Options) (*liveGen, []byte, []frame.Spec) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to load eBPF programs")
	}
	o.DstMAC = net.HardwareAddr{2, 0, 0, 0, 0, 2}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	specs, err := flowSpecs(&o, net.HardwareAddr{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	g, data, err := loadLive(&o, specs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.objs.Close() })
	ncpu, _ := ebpf.PossibleCPU()
	for cpu := range min(ncpu, int(labbpf.GenTrGenLimitsTR_GEN_MAX_CPUS)) {
		st := labbpf.GenTrGenCpu{FlowStep: 1, Nflows: uint32(len(specs)), MacStep: 1}
		if err := g.objs.Cpus.Put(uint32(cpu), &st); err != nil {
			t.Fatal(err)
		}
	}
	return g, data, specs
}

// TestProgramFrames: the frames the eBPF program writes are, byte for byte,
// what the Go frame builder makes for the same flow, size, sequence number
// and timestamp, with valid checksums, flows and sizes in their order.
func TestProgramFrames(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Options
	}{
		{"ipv4", Options{Flows: 3}},
		{"ipv4 imix", Options{Flows: 2, Mix: frame.IMIX}},
		{"ipv4 vlan imix", Options{Flows: 2, VLAN: 100, Mix: frame.IMIXFor(true, false)}},
		{"ipv6", Options{Flows: 3, IPv6: true}},
		{"ipv6 vlan mix", Options{Flows: 1, IPv6: true, VLAN: 4094, Mix: frame.Mix{Sizes: []int{82, 131, 1518}, Weights: []int{1, 2, 1}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, data, specs := loadForTest(t, c.o)
			// Each CPU keeps its own flow and sequence state: a test that
			// moved to another CPU between two runs would see that
			// CPU's sequence, not the next frame of this one's.
			pinToOneCPU(t)
			mix := c.o.Mix
			if len(mix.Sizes) == 0 {
				mix = frame.Mix{Sizes: []int{frame.MinSize(c.o.VLAN != 0, c.o.IPv6)}, Weights: []int{1}}
			}
			pattern := mix.Pattern()
			seqs := map[uint16]uint32{}
			for k := range 3 * len(pattern) * len(specs) {
				out := runOnce(t, g, data)
				h, ok := frame.Parse(out)
				if !ok {
					t.Fatalf("frame %d: no test header:\n%x", k, out)
				}
				wantFlow := uint16(k % len(specs))
				wantSize := mix.Sizes[pattern[k%len(pattern)]]
				if h.Flow != wantFlow || h.Seq != seqs[h.Flow] || len(out) != wantSize {
					t.Fatalf("frame %d: flow %d seq %d size %d; want flow %d seq %d size %d",
						k, h.Flow, h.Seq, len(out), wantFlow, seqs[wantFlow], wantSize)
				}
				seqs[h.Flow]++
				s := specs[h.Flow]
				s.Size = wantSize
				want, l, err := frame.Build(s)
				if err != nil {
					t.Fatal(err)
				}
				frame.Stamp(want, l, h.Seq, h.TS)
				if string(out) != string(want) {
					t.Fatalf("frame %d differs from frame.Build+Stamp:\n got %x\nwant %x", k, out, want)
				}
			}
		})
	}
}

// TestMACRanges: with address ranges, each frame takes the next source and
// destination address of its range, in the low 24 bits, wrapping.
func TestMACRanges(t *testing.T) {
	g, data, _ := loadForTest(t, Options{SrcMACs: 3, DstMACs: 2})
	pinToOneCPU(t) // the ranges' counters are per CPU: a move between runs skips
	for k := range 7 {
		out := runOnce(t, g, data)
		if out[11] != byte(1+k%3) || out[5] != byte(2+k%2) || out[3] != 0 || out[9] != 0 {
			t.Errorf("frame %d: dst %x src %x; want src ..:%02x dst ..:%02x", k, out[0:6], out[6:12], 1+k%3, 2+k%2)
		}
		if _, ok := frame.Parse(out); !ok {
			t.Errorf("frame %d: no test header", k)
		}
	}
}

// TestBehind: a run with a rate is behind when it sent more than
// BehindTolerance fewer frames than the rate asked for in its time, by
// that share; a run without a rate, or within the tolerance, is not.
func TestBehind(t *testing.T) {
	for _, c := range []struct {
		sent uint64
		secs float64
		rate float64
		want float64
	}{
		{163000 * 6, 6, 200000, 0.185}, // the newcomer's run: 163 kpps of 200
		{200000 * 6, 6, 200000, 0},
		{199000, 1, 200000, 0},     // 0.5% short: within the tolerance
		{197000, 1, 200000, 0.015}, // 1.5% short
		{250000, 1, 200000, 0},     // ahead (a short count run's last gap)
		{163000, 1, 0, 0},          // no rate: as fast as it goes
		{0, 0, 200000, 0},          // nothing sent, no time: nothing to say
		{0, 1, 200000, 1},          // nothing sent in a second
	} {
		s := Stats{Sent: c.sent, Elapsed: time.Duration(c.secs * float64(time.Second)), Rate: c.rate}
		if got := s.Behind(); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%d frames in %vs at %v pps: behind %v, want %v", c.sent, c.secs, c.rate, got, c.want)
		}
	}
}

// TestMACOffsetPermutes: the random order is one-to-one on the 24 bits, so
// a range of a million random sources is a million distinct addresses;
// the plain order is the index itself.
func TestMACOffsetPermutes(t *testing.T) {
	seen := make([]uint64, 1<<24/64)
	near := 0
	for k := uint32(0); k < 1<<24; k++ {
		x := MACOffset(k, true)
		if x >= 1<<24 {
			t.Fatalf("MACOffset(%d) = %#x: beyond 24 bits", k, x)
		}
		if seen[x/64]&(1<<(x%64)) != 0 {
			t.Fatalf("MACOffset(%d) = %#x: taken by an earlier index", k, x)
		}
		seen[x/64] |= 1 << (x % 64)
		if k > 0 && k < 1000000 {
			if d := int64(x) - int64(MACOffset(k-1, true)); d > -256 && d < 256 {
				near++
			}
		}
	}
	// Scattered: consecutive addresses are seldom within 256 of each other
	// (by chance about 1 in 32,000).
	if near > 100 {
		t.Errorf("%d of the first million consecutive offsets are within 256 of each other", near)
	}
	if MACOffset(12345, false) != 12345 {
		t.Errorf("the plain order is not the index")
	}
}

// TestRandomMACRange: the program scatters a source range as MACOffset
// says, vendor bytes untouched, and the destination stays.
func TestRandomMACRange(t *testing.T) {
	const n = 1000000
	g, data, _ := loadForTest(t, Options{SrcMACs: n, RandomMACs: true})
	pinToOneCPU(t)
	srcs := map[string]bool{}
	for k := range 50 {
		out := runOnce(t, g, data)
		// The template's source is 02:00:00:00:00:01.
		want := (1 + MACOffset(uint32(k), true)) & 0xffffff
		got := uint32(out[9])<<16 | uint32(out[10])<<8 | uint32(out[11])
		if got != want || out[6] != 2 || out[7] != 0 || out[8] != 0 {
			t.Fatalf("frame %d: source %x, want 02:00:00 and low bytes %06x", k, out[6:12], want)
		}
		if string(out[0:6]) != string([]byte{2, 0, 0, 0, 0, 2}) {
			t.Fatalf("frame %d: destination %x changed", k, out[0:6])
		}
		srcs[string(out[6:12])] = true
	}
	if len(srcs) != 50 {
		t.Errorf("%d distinct sources in 50 frames", len(srcs))
	}
}

// TestFlowBase: the frames carry the flow ids from the base on, in the
// flows' order, each with its own sequence numbers.
func TestFlowBase(t *testing.T) {
	g, data, _ := loadForTest(t, Options{Flows: 3, FlowBase: 65533})
	pinToOneCPU(t)
	for k := range 9 {
		h, ok := frame.Parse(runOnce(t, g, data))
		if want := uint16(65533 + k%3); !ok || h.Flow != want || h.Seq != uint32(k/3) {
			t.Fatalf("frame %d: %+v (ok %v), want flow %d seq %d", k, h, ok, want, k/3)
		}
	}
}

// TestGroupMACs: with GroupMACs, flow i goes to the i-th group of the
// destination range at that group's MAC (IPv4 and IPv6); a destination
// that is no group is refused.
func TestGroupMACs(t *testing.T) {
	for _, c := range []struct {
		first, last string
		v6          bool
		want        []string
	}{
		{"239.1.1.1", "239.1.1.3", false, []string{"01:00:5e:01:01:01", "01:00:5e:01:01:02", "01:00:5e:01:01:03"}},
		{"ff0e::1:1", "ff0e::1:2", true, []string{"33:33:00:01:00:01", "33:33:00:01:00:02"}},
	} {
		o := Options{DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, Flows: len(c.want), IPv6: c.v6, GroupMACs: true,
			DstIPs: frame.IPRange{First: net.ParseIP(c.first), Last: net.ParseIP(c.last)}}
		if err := o.defaults(); err != nil {
			t.Fatal(err)
		}
		specs, err := flowSpecs(&o, net.HardwareAddr{2, 0, 0, 0, 0, 1})
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range specs {
			if s.Dst.String() != c.want[i] || int(s.Flow) != i {
				t.Errorf("%s: flow %d to %v at %v, want %s", c.first, i, s.DstIP, s.Dst, c.want[i])
			}
		}
	}
	o := Options{DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, Flows: 1, GroupMACs: true}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if _, err := flowSpecs(&o, net.HardwareAddr{2, 0, 0, 0, 0, 1}); err == nil || !strings.Contains(err.Error(), "not a multicast group") {
		t.Errorf("a unicast destination with group MACs: %v", err)
	}
}
