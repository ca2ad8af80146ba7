package datapath

import (
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Mirrors through BPF_PROG_TEST_RUN: the rig's port 3 is the span port of
// port 1's mirror. (Delivery itself, which a test run does not carry out
// at XDP, is tested end to end in cmd/trestle's TestMirror.)

// mirrorRig mirrors what port 1 receives (in) and sends (out) to port 3.
func mirrorRig(t testing.TB, m tmode, in, out bool) *rig {
	r := newRig(t, m, 1024, [4]uint32{})
	span := PortInfo{Ifindex: r.port[3], Bridge: 1, Slot: 3, Span: true}
	p1 := PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1, MirrorIn: in, MirrorOut: out, MirrorTo: r.port[3], MirrorToSlot: 3}
	p2 := PortInfo{Ifindex: r.port[2], Bridge: 1, Slot: 2}
	r.setPort(span)
	r.setPort(p1)
	r.setPort(p2)
	if err := r.ns.Do(func() error {
		return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: []PortInfo{p1, p2},
			Mirror: true, Reach: []PortInfo{p1, p2, span}})
	}); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMirrorCounts(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := mirrorRig(t, m, true, false)
		r.run(2, ipv4(bcast, macB)) // B on port 2
		r.run(1, ipv4(macB, macA))  // A on port 1, to B: mirrored in
		r.run(2, ipv4(macA, macB))  // to A: not mirrored (direction in)
		r.wantVerdict(r.run(3, ipv4(macA, macC)), m.drop, "from the span port")
		if got := r.drops(3, tbpf.TrestleTrDropReasonTR_DROP_SPAN); got != 1 {
			t.Errorf("span_ingress drops %d, want 1", got)
		}
		if _, ok := r.lookup(macC); ok {
			t.Errorf("a source on the span port was learned")
		}
		if m.name == "tc" {
			// tc clones as it goes: the span port's copies are counted.
			if s := r.stats(3); s.C[tbpf.TxPackets] != 1 {
				t.Errorf("span port sent %d, want 1 (the frame port 1 received)", s.C[tbpf.TxPackets])
			}
		}
	})
}

// BenchmarkMirror: a known-unicast frame from a mirrored port against the
// same frame in a bridge without mirrors (BenchmarkPipeline's 7-forward).
func BenchmarkMirror(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			r := mirrorRig(b, m, true, true)
			r.run(2, ipv4(bcast, macB))
			r.run(1, ipv4(bcast, macA))
			b.ResetTimer()
			per := r.bench(1, ipv4(macB, macA), b.N)
			b.ReportMetric(float64(per.Nanoseconds()), "ns/frame")
		})
	}
}

// TestMirrorReach: a walk that chose every port of its bridge's reach but
// the ingress (the way out and the span port of a 3-port bridge, or a
// flood) is sent in xdp over the reach flood set, which runs no devmap
// program, and its copies are counted by the walk, as tc counts its own;
// a walk that chose fewer goes the general way, and no port it did not
// choose is counted.
func TestMirrorReach(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := mirrorRig(t, m, true, false)
		r.wantVerdict(r.run(2, ipv4(bcast, macB)), m.redirect, "B's broadcast") // to p1 alone
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.redirect, "A to B, mirrored in")
		for slot, want := range map[int]uint64{1: 1, 2: 1, 3: 1} {
			if s := r.stats(slot); s.C[tbpf.TxPackets] != want {
				t.Errorf("3 ports: port %d tx %d, want %d", slot, s.C[tbpf.TxPackets], want)
			}
		}

		// A fourth port in the bridge (slot 4): A to B is the way out and
		// the span port, not every port but the ingress.
		p1 := PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1, MirrorIn: true, MirrorTo: r.port[3], MirrorToSlot: 3}
		p2 := PortInfo{Ifindex: r.port[2], Bridge: 1, Slot: 2}
		p4 := PortInfo{Ifindex: r.port[0], Bridge: 1, Slot: 4}
		span := PortInfo{Ifindex: r.port[3], Bridge: 1, Slot: 3, Span: true}
		r.setPort(p4)
		setBridge := func(b BridgeInfo) {
			t.Helper()
			if err := r.ns.Do(func() error { return r.dp.SetBridge(b) }); err != nil {
				t.Fatal(err)
			}
		}
		setBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: []PortInfo{p1, p2, p4}, Mirror: true,
			Reach: []PortInfo{p1, p2, p4, span}})
		var reach tbpf.Reach
		if err := r.dp.objs.Reaches.Lookup(uint32(1), &reach); err != nil {
			t.Fatal(err)
		}
		if reach.N != 4 || reach.Sel != [tbpf.SelWords]uint64{1<<1 | 1<<2 | 1<<3 | 1<<4} {
			t.Errorf("reach %+v, want slots 1-4", reach)
		}
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.redirect, "A to B, 4 ports")
		if s := r.stats(4); s.C[tbpf.TxPackets] != 0 {
			t.Errorf("port 4 got a copy of a frame to B: tx %d", s.C[tbpf.TxPackets])
		}
		if m.name == "tc" {
			for slot, want := range map[int]uint64{2: 2, 3: 2} {
				if s := r.stats(slot); s.C[tbpf.TxPackets] != want {
					t.Errorf("4 ports: port %d tx %d, want %d", slot, s.C[tbpf.TxPackets], want)
				}
			}
		}
		// A flood from A: every port but the ingress, the span port too.
		before := map[int]uint64{}
		for _, slot := range []int{2, 3, 4} {
			before[slot] = r.stats(slot).C[tbpf.TxPackets]
		}
		r.wantVerdict(r.run(1, ipv4(macC, macA)), m.redirect, "A to C (unknown), 4 ports")
		for _, slot := range []int{2, 3, 4} {
			if s := r.stats(slot); s.C[tbpf.TxPackets] != before[slot]+1 {
				t.Errorf("flood: port %d tx %d, want %d", slot, s.C[tbpf.TxPackets], before[slot]+1)
			}
		}

		// Without the mirror the bridge has no reach left.
		p1.MirrorIn, p1.MirrorTo, p1.MirrorToSlot = false, 0, 0
		r.setPort(p1)
		setBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: []PortInfo{p1, p2, p4}})
		if err := r.dp.objs.Reaches.Lookup(uint32(1), &reach); err != nil {
			t.Fatal(err)
		}
		if reach != (tbpf.Reach{}) {
			t.Errorf("reach %+v after the mirror went, want none", reach)
		}
		if _, ok := r.dp.reachFloods[1]; ok {
			t.Errorf("the reach flood set outlived the mirror")
		}
	})
}

// TestMirrorBothWays: port 1 mirrored in and out to one span port of a
// 3-port bridge. Each frame's copies are the way out and the span port,
// once (xdp finds them without the walk for a forward, over the reach
// flood set), counted alike in both modes.
func TestMirrorBothWays(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := mirrorRig(t, m, true, true)
		r.wantVerdict(r.run(2, ipv4(bcast, macB)), m.redirect, "B's broadcast") // p1, mirrored out
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.redirect, "A to B")         // p2, mirrored in
		r.wantVerdict(r.run(2, ipv4(macA, macB)), m.redirect, "B to A")         // p1, mirrored out
		for slot, want := range map[int]uint64{1: 2, 2: 1, 3: 3} {
			if s := r.stats(slot); s.C[tbpf.TxPackets] != want {
				t.Errorf("port %d tx %d, want %d", slot, s.C[tbpf.TxPackets], want)
			}
		}
	})
}
