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
