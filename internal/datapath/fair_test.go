package datapath

import (
	"net"
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// The fairness of the table (issue 29), through BPF_PROG_TEST_RUN: a port
// that floods new sources fills a bridge's table to its high-water mark
// and no further; a new station on another port is still learned in the
// room left; a full table forwards what it cannot learn; and once the
// control plane deletes entries, the refused station's next frame is
// learned (its memo does not outlive the deletion).
func TestTableFair(t *testing.T) {
	const maxEntries = 32
	high, fair := TableMarks(maxEntries, 3)
	if high != 30 || fair != 10 {
		t.Fatalf("marks of 32 entries over 3 ports: high %d fair %d, want 30 10", high, fair)
	}
	src := func(port, i int) net.HardwareAddr { return net.HardwareAddr{0x0a, 0, 0, 0, byte(port), byte(i)} }
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, maxEntries, [4]uint32{})
		r.addStatic(macA, 3)
		// Port 1 floods 40 new sources: every frame goes on; the table
		// takes them up to the mark.
		for i := 0; i < 40; i++ {
			r.wantVerdict(r.run(1, ipv4(bcast, src(1, i))), m.redirect, "a flooding source")
		}
		s := r.stats(1)
		if s.C[tbpf.Learned] != uint64(high) || s.C[tbpf.UnlearnedFull] != uint64(40-high) || s.C[tbpf.Unlearned] != uint64(40-high) {
			t.Errorf("flooding port: learned %d unlearned_full %d unlearned %d, want %d %d %d",
				s.C[tbpf.Learned], s.C[tbpf.UnlearnedFull], s.C[tbpf.Unlearned], high, 40-high, 40-high)
		}
		r.wantDrops(1, tbpf.TrestleTrDropReasonTR_DROP_TABLE_FULL, 0, "flood")
		r.wantCount(1, high)

		// New stations on ports 2 and 3 take the room above the mark.
		r.wantVerdict(r.run(2, ipv4(bcast, macB)), m.redirect, "a new station on port 2")
		r.wantVerdict(r.run(3, ipv4(bcast, macC)), m.redirect, "a new station on port 3")
		r.wantEntry(macB, 2, false, "new station past the mark")
		r.wantEntry(macC, 3, false, "new station past the mark")
		r.wantCount(0, maxEntries)

		// Full: a third station is forwarded, not learned, not dropped.
		r.wantVerdict(r.run(2, ipv4(bcast, macD)), m.redirect, "a new station, table full")
		r.wantVerdict(r.run(2, ipv4(bcast, macD)), m.redirect, "its second frame")
		r.wantEntry(macD, 0, false, "table full")
		if s := r.stats(2); s.C[tbpf.UnlearnedFull] != 1 || s.C[tbpf.Learned] != 1 {
			t.Errorf("port 2: unlearned_full %d learned %d, want 1 1 (the second frame meets the memo)", s.C[tbpf.UnlearnedFull], s.C[tbpf.Learned])
		}
		r.wantDrops(2, tbpf.TrestleTrDropReasonTR_DROP_TABLE_FULL, 0, "table full")

		// The control plane deletes one of the flooder's: the station's
		// next frame is learned, and the flooder, past the mark with more
		// than its share, still learns nothing.
		r.delEntry(src(1, 0))
		r.wantVerdict(r.run(2, ipv4(bcast, macD)), m.redirect, "the station after a deletion")
		r.wantEntry(macD, 2, false, "after a deletion")
		r.run(1, ipv4(bcast, src(1, 0)))
		r.wantEntry(src(1, 0), 0, false, "the flooder past the mark")
		r.wantEntry(macA, 3, true, "the static entry")
	})
}

// wantCount checks the learned-address count of a port (slot) or, slot 0,
// of the bridge.
func (r *rig) wantCount(slot int, want int) {
	r.t.Helper()
	var n int
	var err error
	if slot == 0 {
		n, err = r.dp.BridgeMACs(1)
	} else {
		n, err = r.dp.PortMACs(uint16(slot))
	}
	if err != nil {
		r.t.Fatal(err)
	}
	if n != want {
		r.t.Errorf("slot %d (0: the bridge): %d learned addresses, want %d", slot, n, want)
	}
}

// The fair share holds on a VLAN-aware bridge too (the builds with the VLAN
// stage): a port flooding sources in its VLAN stops at the mark, a new
// station in another VLAN is learned, and a full table forwards.
func TestTableFairVLAN(t *testing.T) {
	const maxEntries = 32
	high, _ := TableMarks(maxEntries, 3)
	src := func(port, i int) net.HardwareAddr { return net.HardwareAddr{0x0a, 0, 0, 0, byte(port), byte(i)} }
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 10)
		err := r.ns.Do(func() error {
			ports := []PortInfo{
				{Ifindex: r.port[1], Bridge: 1, Slot: 1, PVID: 10},
				{Ifindex: r.port[2], Bridge: 1, Slot: 2, PVID: 20},
				{Ifindex: r.port[3], Bridge: 1, Slot: 3, PVID: 10, Trunk: true, VLANs: []uint16{10, 20}},
			}
			return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: maxEntries, Ports: ports, VLANAware: true, VLANs: []uint16{10, 20}})
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 40; i++ {
			if v := r.run(1, ipv4(bcast, src(1, i))); v == m.drop {
				t.Fatalf("flooding source %d dropped", i)
			}
		}
		s := r.stats(1)
		if s.C[tbpf.Learned] != uint64(high) || s.C[tbpf.UnlearnedFull] != uint64(40-high) {
			t.Errorf("flooding port: learned %d unlearned_full %d, want %d %d", s.C[tbpf.Learned], s.C[tbpf.UnlearnedFull], high, 40-high)
		}
		r.wantDrops(1, tbpf.TrestleTrDropReasonTR_DROP_TABLE_FULL, 0, "flood")
		r.wantCount(1, high)
		// A new station in VLAN 20 takes the room above the mark.
		if v := r.run(2, ipv4(bcast, macB)); v == m.drop {
			t.Fatal("the new station in VLAN 20 was dropped")
		}
		r.wantCount(2, 1)
		r.wantCount(0, high+1)
	})
}
