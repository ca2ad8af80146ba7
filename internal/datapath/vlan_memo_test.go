package datapath

import (
	"bytes"
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// The decision memo (bpf/lib/memo.h) in a VLAN-aware bridge: a stream from
// the access port to the trunk and back is sent from the memo after its
// second frame, tagged, untagged and counted (on its ports and in its
// VLAN) exactly as the pipeline does it; a frame whose outer tag is of
// another kind than the memo's is decided by the pipeline; a priority tag
// keeps its priority; and a change of the trunk's VLANs voids the memo.
func TestVLANDecisionMemo(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 0)
		r.run(3, tagged(bcast, macB, 10)) // B on the trunk, VLAN 10
		r.run(1, ipv4(bcast, macA))       // A on the access port of VLAN 10

		// stream sends the frame in from slot 3 times, each leaving as want
		// (xdp; tc keeps a pushed tag in metadata), and checks what each
		// port and VLAN 10 counted.
		stream := func(what string, slot, outSlot int, in, want []byte) {
			t.Helper()
			rx, tx, v := r.stats(slot).C, r.stats(outSlot).C, r.vlanStats(10).C
			for i := 0; i < 3; i++ {
				verdict, out := r.runOut(slot, in)
				r.wantVerdict(verdict, m.redirect, what)
				if m.name == "xdp" && !bytes.Equal(out, want) {
					t.Fatalf("%s, frame %d: left as\n%x\nwant\n%x", what, i+1, out, want)
				}
			}
			if got := r.fwdMemoIngress(); got != r.port[slot] {
				t.Errorf("%s: the decision memo names ingress %d, want %d", what, got, r.port[slot])
			}
			rx2, tx2, v2 := r.stats(slot).C, r.stats(outSlot).C, r.vlanStats(10).C
			n, inB, outB := uint64(3), uint64(3*len(in)), uint64(3*len(want))
			if rx2[tbpf.RxPackets]-rx[tbpf.RxPackets] != n || rx2[tbpf.RxBytes]-rx[tbpf.RxBytes] != inB {
				t.Errorf("%s: ingress rx +%d packets +%d bytes, want +%d +%d", what,
					rx2[tbpf.RxPackets]-rx[tbpf.RxPackets], rx2[tbpf.RxBytes]-rx[tbpf.RxBytes], n, inB)
			}
			if tx2[tbpf.TxPackets]-tx[tbpf.TxPackets] != n || tx2[tbpf.TxBytes]-tx[tbpf.TxBytes] != outB {
				t.Errorf("%s: egress tx +%d packets +%d bytes, want +%d +%d", what,
					tx2[tbpf.TxPackets]-tx[tbpf.TxPackets], tx2[tbpf.TxBytes]-tx[tbpf.TxBytes], n, outB)
			}
			if v2[tbpf.VLANRxPackets]-v[tbpf.VLANRxPackets] != n || v2[tbpf.VLANRxBytes]-v[tbpf.VLANRxBytes] != inB ||
				v2[tbpf.VLANTxPackets]-v[tbpf.VLANTxPackets] != n || v2[tbpf.VLANTxBytes]-v[tbpf.VLANTxBytes] != outB {
				t.Errorf("%s: VLAN 10 counted %v, then %v: want rx +%d (%d bytes), tx +%d (%d bytes)", what, v, v2, n, inB, n, outB)
			}
		}
		in := ipv4(macB, macA)
		stream("access to trunk", 1, 3, in, addTag(in, 10))
		// An 802.1ad frame from A: the same VLAN, but the memo's key has
		// an untagged frame; the pipeline's C-tag goes outside the S-tag.
		in = tagTCI(macB, macA, 0x88a8, 100)
		stream("802.1ad, access to trunk", 1, 3, in, addTag(in, 10))
		in = tagged(macA, macB, 10)
		stream("trunk to access", 3, 1, in, untag(in))

		// The memo holds B to A tagged 10 from the trunk: B to A with an
		// S-tag of VID 10 instead is untagged there, and the trunk has no
		// native VLAN.
		n := r.drops(3, tbpf.TrestleTrDropReasonTR_DROP_VLAN_UNTAGGED)
		r.wantVerdict(r.run(3, tagTCI(macA, macB, 0x88a8, 10)), m.drop, "S-tag 10 on the trunk after a memo of C-tag 10")
		if r.drops(3, tbpf.TrestleTrDropReasonTR_DROP_VLAN_UNTAGGED) != n+1 {
			t.Errorf("S-tag 10 on the trunk: not dropped as vlan_untagged")
		}

		// Priority tags: each keeps its own priority on the trunk, never
		// the one of a memo made from another.
		for _, pcp := range []uint16{5, 5, 3, 0} {
			in = tagTCI(macB, macA, 0x8100, pcp<<13)
			verdict, out := r.runOut(1, in)
			r.wantVerdict(verdict, m.redirect, "priority-tagged")
			if want := tagTCI(macB, macA, 0x8100, pcp<<13|10); m.name == "xdp" && !bytes.Equal(out, want) {
				t.Errorf("priority %d to the trunk: left as\n%x\nwant\n%x", pcp, out, want)
			}
		}
		in = ipv4(macB, macA)
		stream("access to trunk, after priority tags", 1, 3, in, addTag(in, 10))

		// The trunk stops carrying VLAN 10: the next frame from A to B is
		// dropped, not sent from the memo.
		tr := PortInfo{Ifindex: r.port[3], Bridge: 1, Slot: 3, Trunk: true, VLANs: []uint16{20}}
		r.setPort(tr)
		n = r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_VLAN_EGRESS)
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.drop, "to a trunk that no longer carries VLAN 10")
		if r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_VLAN_EGRESS) != n+1 {
			t.Errorf("to a trunk without VLAN 10: not dropped as vlan_egress")
		}
	})
}
