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
	marks := TableMarks(maxEntries, 3)
	high, fair := marks.High, marks.Fair
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
	high := TableMarks(maxEntries, 3).High
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

// The fair table at its edge (a bridge of 32 entries over 3 ports: mark 30,
// share 10), as table cases: the bridge's count exactly at its mark, one
// under it, or full, and each port's reserve as the daemon gives it
// (SetReserve). At the mark, a port at or over its share learns a new source
// only within its reserve (none before the daemon gives one: the flood stops
// there), and entries deleted meanwhile give it no more; a port under its
// share learns; under the mark every port learns; full, none does. Every
// frame goes on, learned or not.
func TestTableFairEdge(t *testing.T) {
	const maxEntries = 32
	if m := TableMarks(maxEntries, 3); m.High != 30 || m.Fair != 10 || m.Reserve != 1 {
		t.Fatalf("marks of 32 entries over 3 ports: %+v, want high 30, fair 10, reserve 1", m)
	}
	cases := []struct {
		name    string
		held    [4]int // learned sources of slots 1 to 3, before the reserves
		reserve [4]int // reserves of slots 1 to 3
		slot    int    // the port of the new sources
		used    int    // new sources it sends after the reserves, before the one looked at
		deleted int    // its entries deleted then
		learn   bool
	}{
		{name: "at the mark, over its share, no reserve", held: [4]int{0, 12, 18, 0}, slot: 1},
		{name: "at the mark, over its share, within its reserve", held: [4]int{0, 12, 18, 0}, reserve: [4]int{0, 1, 1, 1}, slot: 1, learn: true},
		{name: "at the mark, over its share, its reserve used", held: [4]int{0, 12, 18, 0}, reserve: [4]int{0, 2, 0, 0}, slot: 1, used: 2},
		{name: "at the mark, its reserve used, an entry of its deleted", held: [4]int{0, 12, 18, 0}, reserve: [4]int{0, 0, 1, 0}, slot: 2, used: 1, deleted: 1},
		{name: "at the mark, at its share exactly, no reserve", held: [4]int{0, 10, 20, 0}, slot: 1},
		{name: "at the mark, at its share exactly, within its reserve", held: [4]int{0, 10, 20, 0}, reserve: [4]int{0, 1, 0, 0}, slot: 1, learn: true},
		{name: "at the mark, under its share, no reserve", held: [4]int{0, 12, 18, 0}, slot: 3, learn: true},
		{name: "one under the mark, over its share, no reserve", held: [4]int{0, 12, 17, 0}, slot: 1, learn: true},
		{name: "full, within its reserve", held: [4]int{0, 12, 18, 2}, reserve: [4]int{0, 5, 5, 5}, slot: 1},
		{name: "full, under its share", held: [4]int{0, 12, 18, 2}, reserve: [4]int{0, 5, 5, 5}, slot: 3},
	}
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, maxEntries, [4]uint32{})
		for c, tc := range cases {
			src := func(slot, i int) net.HardwareAddr { return net.HardwareAddr{0x0a, byte(c), 0, 0, byte(slot), byte(i)} }
			n := 0
			for slot := 1; slot <= 3; slot++ {
				for i := 0; i < tc.held[slot]; i++ {
					r.run(slot, ipv4(bcast, src(slot, i)))
				}
				n += tc.held[slot]
			}
			r.wantCount(0, n)
			for slot := 1; slot <= 3; slot++ {
				if err := r.dp.SetReserve(uint16(slot), tc.reserve[slot]); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < tc.used; i++ {
				r.run(tc.slot, ipv4(bcast, src(tc.slot, 0x80+i)))
				r.wantEntry(src(tc.slot, 0x80+i), tc.slot, false, tc.name+": a new source in its reserve")
			}
			for i := 0; i < tc.deleted; i++ {
				r.delEntry(src(tc.slot, i))
			}
			n += tc.used - tc.deleted
			r.wantCount(0, n)
			before := r.stats(tc.slot)
			newcomer := net.HardwareAddr{0x0e, byte(c), 0, 0, byte(tc.slot), 0xff}
			r.wantVerdict(r.run(tc.slot, ipv4(bcast, newcomer)), m.redirect, tc.name)
			after := r.stats(tc.slot)
			learned, refused := after.C[tbpf.Learned]-before.C[tbpf.Learned], after.C[tbpf.UnlearnedFull]-before.C[tbpf.UnlearnedFull]
			if tc.learn {
				r.wantEntry(newcomer, tc.slot, false, tc.name)
				if learned != 1 || refused != 0 {
					t.Errorf("%s: learned %d unlearned_full %d, want 1 0", tc.name, learned, refused)
				}
				r.wantCount(0, n+1)
			} else {
				r.wantEntry(newcomer, 0, false, tc.name)
				if learned != 0 || refused != 1 {
					t.Errorf("%s: learned %d unlearned_full %d, want 0 1", tc.name, learned, refused)
				}
				r.wantCount(0, n)
			}
			// The next case starts from an empty table and no reserves
			// (what the ports learned in all goes on counting).
			es, err := r.dp.FDB()
			if err == nil {
				_, err = r.dp.DelFDBs(es)
			}
			if err != nil {
				t.Fatal(err)
			}
			for slot := 1; slot <= 3; slot++ {
				if err := r.dp.SetReserve(uint16(slot), 0); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
