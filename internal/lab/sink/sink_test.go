package sink

// Datapath table tests: the sink's XDP program is run on crafted frames
// through BPF_PROG_TEST_RUN, and its counters are read back exactly as
// `trestle sink` reads them.

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/frame"
)

func requireBPF(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to load eBPF programs")
	}
}

func monoNs() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

type testFrame struct {
	spec frame.Spec
	seq  uint32
	age  time.Duration // stamped this long before it is run
	// sameTS stamps every frame with the same time, as frames sent on one
	// clock reading are.
	sameTS bool
}

func spec(flow uint16, vlan uint16, v6 bool) frame.Spec {
	s := frame.Spec{
		Dst: net.HardwareAddr{2, 0, 0, 0, 0, 2}, Src: net.HardwareAddr{2, 0, 0, 0, 0, 1},
		SrcIP: net.IPv4(198, 18, 0, 1).To4(), DstIP: net.IPv4(198, 18, 0, 2).To4(),
		SrcPort: 9, DstPort: 9, Flow: flow, VLAN: vlan, IPv6: v6,
	}
	if v6 {
		s.SrcIP, s.DstIP = net.ParseIP("2001:2::1"), net.ParseIP("2001:2::2")
	}
	s.Size = frame.MinSize(vlan != 0, v6)
	return s
}

func seqs(flow uint16, ns ...uint32) []testFrame {
	var out []testFrame
	for _, n := range ns {
		out = append(out, testFrame{spec: spec(flow, 0, false), seq: n, age: time.Millisecond})
	}
	return out
}

// restamped gives frames the age age (negative: sent later than the
// default frames, which are 1ms old) and one send time for all of them.
func restamped(fs []testFrame, age time.Duration) []testFrame {
	for i := range fs {
		fs[i].age = age
		fs[i].sameTS = true
	}
	return fs
}

func run(t *testing.T, s *Sink, frames []testFrame, raw ...[]byte) {
	t.Helper()
	now := monoNs()
	for _, tf := range frames {
		f, l, err := frame.Build(tf.spec)
		if err != nil {
			t.Fatal(err)
		}
		// Frames were sent in sequence order, 1ns apart, unless restamped;
		// a copy has its original's time.
		ts := now - uint64(tf.age) + uint64(tf.seq)
		if tf.sameTS {
			ts = now - uint64(tf.age)
		}
		frame.Stamp(f, l, tf.seq, ts)
		raw = append(raw, f)
	}
	for _, f := range raw {
		ret, err := s.objs.TrestleSink.Run(&ebpf.RunOptions{Data: f})
		if err != nil {
			t.Fatalf("run sink: %v", err)
		}
		if ret != 1 { // XDP_DROP
			t.Fatalf("sink returned %d, want XDP_DROP", ret)
		}
	}
}

type want struct {
	packets, received, unsigned, badFlow uint64
	lost                                 int64
	reordered, duplicates                uint64
	flows, runs                          int
	latency                              uint64 // frames in the histogram
}

func check(t *testing.T, s *Sink, w want) Snapshot {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	got := want{snap.Packets, snap.Received, snap.Unsigned, snap.BadFlow, snap.Lost, snap.Reordered, snap.Duplicates, snap.Flows, snap.Runs, 0}
	for _, n := range snap.Hist {
		got.latency += n
	}
	if got != w {
		t.Errorf("got  %+v\nwant %+v", got, w)
	}
	return snap
}

func TestSinkSequences(t *testing.T) {
	requireBPF(t)
	cases := []struct {
		name   string
		frames []testFrame
		raw    [][]byte
		want   want
	}{
		{"in order", seqs(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9),
			nil, want{packets: 10, received: 10, flows: 1, runs: 1, latency: 10}},
		// 6, 7 and 8 never come; 2 and 4 come late, and once more each.
		{"reordered and duplicated", seqs(0, 0, 1, 3, 2, 2, 5, 4, 4, 9),
			nil, want{packets: 9, received: 9, lost: 3, reordered: 2, duplicates: 2, flows: 1, runs: 1, latency: 9}},
		{"starts late: the first ones are lost", seqs(0, 5, 6, 7),
			nil, want{packets: 3, received: 3, lost: 5, flows: 1, runs: 1, latency: 3}},
		// 10 is 90 behind 100, beyond the window of 64: it is counted as
		// late (it fills a gap), since a copy cannot be told apart there.
		{"late beyond the window", seqs(0, 0, 100, 10),
			nil, want{packets: 3, received: 3, lost: 98, reordered: 1, flows: 1, runs: 1, latency: 3}},
		{"the window edge is exact", seqs(0, 0, 63, 0, 1),
			nil, want{packets: 4, received: 4, lost: 61, reordered: 1, duplicates: 1, flows: 1, runs: 1, latency: 4}},
		{"flows are apart", append(seqs(0, 0, 1, 2), seqs(1, 0, 2)...),
			nil, want{packets: 5, received: 5, lost: 1, flows: 2, runs: 1, latency: 5}},
		// A second run of the generator starts again at 0, later: the
		// counts carry on, nothing is taken for late or duplicated.
		{"a new run", append(seqs(0, 0, 1, 2, 3), restamped(seqs(0, 0, 2), -time.Millisecond)...),
			nil, want{packets: 6, received: 6, lost: 1, flows: 1, runs: 2, latency: 6}},
		// Sent in one burst with one timestamp, and reordered: not a new run.
		{"one timestamp, reordered", restamped(seqs(0, 0, 2, 1), 0),
			nil, want{packets: 3, received: 3, reordered: 1, flows: 1, runs: 1, latency: 3}},
		{"flow id beyond the table", seqs(7, 0, 1),
			nil, want{packets: 2, badFlow: 2}},
		{"frames without the test header", nil,
			[][]byte{
				make([]byte, 60), // type 0
				{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06}, // a runt ARP
			}, want{packets: 2, unsigned: 2}},
		{"VLAN and IPv6", []testFrame{
			{spec: spec(0, 10, false), seq: 0}, {spec: spec(0, 0, true), seq: 1}, {spec: spec(0, 20, true), seq: 2},
		}, nil, want{packets: 3, received: 3, flows: 1, runs: 1, latency: 3}},
	}
	for _, locked := range []bool{false, true} {
		for _, c := range cases {
			name := c.name
			if locked {
				name += " (locked)"
			}
			t.Run(name, func(t *testing.T) {
				s, err := load(Options{MaxFlows: 4}, locked)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				run(t, s, c.frames, c.raw...)
				check(t, s, c.want)
			})
		}
	}
}

func TestSinkTruncatedHeader(t *testing.T) {
	requireBPF(t)
	s, err := load(Options{MaxFlows: 4}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, l, err := frame.Build(spec(0, 0, false))
	if err != nil {
		t.Fatal(err)
	}
	run(t, s, nil, f[:l.Test+8]) // the test header cut in half
	check(t, s, want{packets: 1, unsigned: 1})
}

func TestSinkLatency(t *testing.T) {
	requireBPF(t)
	s, err := load(Options{MaxFlows: 4}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var fs []testFrame
	for i := range 100 {
		// 90 frames 1ms old, 9 of 10ms, 1 of 100ms.
		age := time.Millisecond
		switch {
		case i == 99:
			age = 100 * time.Millisecond
		case i >= 90:
			age = 10 * time.Millisecond
		}
		fs = append(fs, testFrame{spec: spec(0, 0, false), seq: uint32(i), age: age})
	}
	// Each frame is built first and stamped just before it runs, and the
	// time from its stamp to the run's end is what its reading may carry
	// beyond its age: on a loaded machine the runs of a hundred frames
	// take tens of milliseconds, and one of them may be preempted.
	var slack time.Duration // the most any run took
	for _, tf := range fs {
		f, l, err := frame.Build(tf.spec)
		if err != nil {
			t.Fatal(err)
		}
		t0 := monoNs()
		frame.Stamp(f, l, tf.seq, t0-uint64(tf.age)+uint64(tf.seq))
		if ret, err := s.objs.TrestleSink.Run(&ebpf.RunOptions{Data: f}); err != nil || ret != 1 {
			t.Fatalf("run sink: %d, %v (want XDP_DROP)", ret, err)
		}
		slack = max(slack, time.Duration(monoNs()-t0))
	}
	snap := check(t, s, want{packets: 100, received: 100, flows: 1, runs: 1, latency: 100})
	l := Summarize(snap.Hist)
	t.Logf("latency %+v, each run's time beyond the age at most %v", l, slack)
	// Each reading is the stamped age plus the time its run took (a
	// frame held up that long may move a percentile to it), within the
	// histogram's 6.25% resolution.
	within := func(name string, got, lo time.Duration) {
		if got < lo*15/16 || got > (lo+slack)*17/16 {
			t.Errorf("%s = %v, want %v to %v", name, got, lo*15/16, (lo+slack)*17/16)
		}
	}
	within("min", l.Min, time.Millisecond)
	within("p50", l.P50, time.Millisecond)
	within("p90", l.P90, time.Millisecond)
	within("p99", l.P99, 10*time.Millisecond)
	within("p99.9", l.P999, 100*time.Millisecond)
	within("max", l.Max, 100*time.Millisecond)
	if !(l.Min <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
		t.Errorf("percentiles out of order: %+v", l)
	}
}

func TestSinkLatencySample(t *testing.T) {
	requireBPF(t)
	s, err := load(Options{MaxFlows: 4, LatencyEvery: 4}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Sampled by sequence number: 0, 4 and 8 of flow 0, 4 of flow 1.
	run(t, s, append(seqs(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9), seqs(1, 3, 4)...))
	check(t, s, want{packets: 12, received: 12, lost: 3, flows: 2, runs: 1, latency: 4})
}

func TestSinkReset(t *testing.T) {
	requireBPF(t)
	s, err := load(Options{MaxFlows: 4}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run(t, s, seqs(0, 0, 1, 3), make([]byte, 60))
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	check(t, s, want{})
	// A new run starts at 0 again and is not taken for duplicates.
	run(t, s, seqs(0, 0, 1, 2))
	check(t, s, want{packets: 3, received: 3, flows: 1, runs: 1, latency: 3})
}

func TestBucketsRoundTrip(t *testing.T) {
	for _, ns := range []uint64{0, 1, 15, 16, 17, 31, 32, 1000, 123456, 1 << 40} {
		b := Bucket(ns)
		lo, hi := BucketRange(b)
		if ns < lo || ns > hi {
			t.Errorf("%d ns: bucket %d holds %d..%d", ns, b, lo, hi)
		}
		if ns >= 16 && float64(hi-lo+1) > float64(lo)/16+1 {
			t.Errorf("%d ns: bucket %d is %d..%d, wider than 1/16", ns, b, lo, hi)
		}
	}
}

// BenchmarkSinkProgram is the sink program's cost per frame, run through
// BPF_PROG_TEST_RUN on one 60-byte test frame (go test -bench SinkProgram
// -run ^$ ./internal/lab/sink, as root). The kernel's loop adds a few ns a run.
func BenchmarkSinkProgram(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to load eBPF programs")
	}
	for _, c := range []struct {
		name   string
		locked bool
		every  int
	}{
		{"unlocked/latency-every-1", false, 1},
		{"locked/latency-every-1", true, 1},
		{"unlocked/latency-every-64", false, 64},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := load(Options{MaxFlows: 4, LatencyEvery: c.every}, c.locked)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			f, l, err := frame.Build(spec(0, 0, false))
			if err != nil {
				b.Fatal(err)
			}
			// Sequence 1: not a sample when sampling 1 in 64. (Every run
			// after the first is a duplicate, which costs the same.)
			frame.Stamp(f, l, 1, monoNs())
			b.ResetTimer()
			_, per, err := s.objs.TrestleSink.Benchmark(f, b.N, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(per.Nanoseconds()), "ns/frame")
		})
	}
}
