package datapath

import (
	"net"
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Locked ports and sources that are another port's static entry, through
// BPF_PROG_TEST_RUN (issue 29), in the cases of the Linux bridge's
// selftests bridge_locked_port.sh (a locked port forwards only from a
// source bound to it, its FDB entry; learning does not make one) and
// bridge_sticky_fdb.sh (an entry that must not move stays where it is when
// its address arrives on another port).

var (
	macE = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0e}
	macF = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0f}
)

// lock rewrites the rig's port in slot locked or not.
func (r *rig) lock(slot int, locked bool) {
	r.t.Helper()
	r.setPort(PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot), Policy: tbpf.PortPolicy{}.With(tbpf.TrestleTrPortFlagsTR_PORT_LOCKED, locked)})
}

func (r *rig) addStatic(mac net.HardwareAddr, slot int) {
	r.t.Helper()
	err := r.ns.Do(func() error {
		return r.dp.AddFDB(FDBEntry{Bridge: 1, MAC: mac, Ifindex: r.port[slot], Slot: uint16(slot), Static: true})
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) delEntry(mac net.HardwareAddr) {
	r.t.Helper()
	if err := r.ns.Do(func() error { _, err := r.dp.DelFDB(1, 0, mac); return err }); err != nil {
		r.t.Fatal(err)
	}
}

// wantEntry checks where mac is: on slot, static or not; slot 0: nowhere.
func (r *rig) wantEntry(mac net.HardwareAddr, slot int, static bool, what string) {
	r.t.Helper()
	e, ok := r.lookup(mac)
	switch {
	case slot == 0 && ok:
		r.t.Errorf("%s: %s is in the table (%+v), want it not", what, mac, e)
	case slot != 0 && (!ok || int(e.Slot) != slot || e.Static != static):
		r.t.Errorf("%s: %s is %+v (there: %t), want on slot %d, static %t", what, mac, e, ok, slot, static)
	}
}

func (r *rig) wantDrops(slot int, reason tbpf.DropReason, n uint64, what string) {
	r.t.Helper()
	if got := r.drops(slot, reason); got != n {
		r.t.Errorf("%s: port %d %s drops %d, want %d", what, slot, reason, got, n)
	}
}

func TestLockedPort(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		locked := tbpf.TrestleTrDropReasonTR_DROP_LOCKED
		r.lock(1, true)

		// A source with no entry: dropped, not learned (the selftest's
		// "Ping did not work after locking port" before the entry).
		r.wantVerdict(r.run(1, ipv4(bcast, macA)), m.drop, "unbound source on a locked port")
		r.wantDrops(1, locked, 1, "unbound source")
		r.wantEntry(macA, 0, false, "unbound source")
		if s := r.stats(1); s.C[tbpf.Learned] != 0 || s.C[tbpf.Flooded] != 0 {
			t.Errorf("port 1: learned %d flooded %d, want 0 0", s.C[tbpf.Learned], s.C[tbpf.Flooded])
		}

		// Bound by a static entry of the port (allowed_macs): forwarded,
		// again and again (the memos' path), and the entry stays static.
		r.addStatic(macA, 1)
		for i := 0; i < 3; i++ {
			r.wantVerdict(r.run(1, ipv4(bcast, macA)), m.redirect, "bound source on a locked port")
		}
		r.wantDrops(1, locked, 1, "bound source")
		r.wantEntry(macA, 1, true, "bound source")

		// Frames to it reach it: B, learned on port 2, forwards to A.
		r.wantVerdict(r.run(2, ipv4(macA, macB)), m.redirect, "known unicast to the locked port")
		if s := r.stats(1); s.C[tbpf.TxPackets] != 1 {
			t.Errorf("port 1 tx %d, want 1", s.C[tbpf.TxPackets])
		}
		// And a stream from A to B: the decision memo's path.
		for i := 0; i < 3; i++ {
			r.wantVerdict(r.run(1, ipv4(macB, macA)), m.redirect, "A to B")
		}

		// The binding is deleted: the next frame from A, though every
		// memo vouched for it, is dropped (fdb_gen voids them).
		r.delEntry(macA)
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.drop, "source unbound again")
		r.wantDrops(1, locked, 2, "source unbound again")
		r.wantEntry(macA, 0, false, "source unbound again")

		// Nothing moves onto a locked port: B, learned on port 2, sent
		// from port 1, is dropped and stays on port 2.
		r.wantVerdict(r.run(1, ipv4(bcast, macB)), m.drop, "another port's learned address from the locked port")
		r.wantDrops(1, locked, 3, "steal of a learned address")
		r.wantEntry(macB, 2, false, "steal of a learned address")
		// Nor a static entry of another port (locked decides first).
		r.addStatic(macC, 3)
		r.wantVerdict(r.run(1, ipv4(bcast, macC)), m.drop, "another port's static address from the locked port")
		r.wantDrops(1, locked, 4, "steal of a static address")
		r.wantEntry(macC, 3, true, "steal of a static address")
		if s := r.stats(1); s.C[tbpf.Moved] != 0 || s.C[tbpf.Learned] != 0 {
			t.Errorf("port 1: moved %d learned %d, want 0 0", s.C[tbpf.Moved], s.C[tbpf.Learned])
		}

		// Nothing moves off it: A bound to port 1 again, sent from port
		// 2, is dropped there as src_static and stays.
		r.addStatic(macA, 1)
		r.wantVerdict(r.run(2, ipv4(bcast, macA)), m.drop, "the locked port's address from another port")
		r.wantDrops(2, tbpf.TrestleTrDropReasonTR_DROP_SRC_STATIC, 1, "steal from the locked port")
		r.wantEntry(macA, 1, true, "steal from the locked port")
		if s := r.stats(2); s.C[tbpf.Moved] != 0 {
			t.Errorf("port 2: moved %d, want 0", s.C[tbpf.Moved])
		}

		// Unlocked, the port learns again.
		r.lock(1, false)
		r.wantVerdict(r.run(1, ipv4(bcast, macD)), m.redirect, "new source on the port unlocked")
		r.wantEntry(macD, 1, false, "new source on the port unlocked")
	})
}

// A learned entry left on a port that became locked (before the daemon
// flushes it) does not bind its source.
func TestLockedPortLearnedEntry(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		r.wantVerdict(r.run(1, ipv4(bcast, macE)), m.redirect, "E learned, unlocked")
		r.wantVerdict(r.run(1, ipv4(bcast, macF)), m.redirect, "F learned: the source memo is F's")
		r.lock(1, true)
		r.wantVerdict(r.run(1, ipv4(bcast, macE)), m.drop, "E's learned entry on the locked port")
		r.wantDrops(1, tbpf.TrestleTrDropReasonTR_DROP_LOCKED, 1, "learned entry")
		r.wantEntry(macE, 1, false, "learned entry")
	})
}

func TestSourceOfAnotherPortsStatic(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		srcStatic := tbpf.TrestleTrDropReasonTR_DROP_SRC_STATIC
		r.addStatic(macA, 1)

		// From its own port: forwarded, no drop.
		r.wantVerdict(r.run(1, ipv4(bcast, macA)), m.redirect, "static source from its port")
		// From another: dropped each time, counted, never moved (the
		// sticky selftest's "Sticky entry roamed").
		for i := 0; i < 3; i++ {
			r.wantVerdict(r.run(2, ipv4(macB, macA)), m.drop, "static source from another port")
		}
		r.wantDrops(2, srcStatic, 3, "static source from another port")
		r.wantEntry(macA, 1, true, "static source from another port")
		if s := r.stats(2); s.C[tbpf.Moved] != 0 || s.C[tbpf.Flooded] != 0 {
			t.Errorf("port 2: moved %d flooded %d, want 0 0", s.C[tbpf.Moved], s.C[tbpf.Flooded])
		}
		if s := r.stats(3); s.C[tbpf.TxPackets] != 1 {
			t.Errorf("port 3 tx %d, want 1 (A's first flood only)", s.C[tbpf.TxPackets])
		}

		// From a port that learns nothing: dropped too, also after a
		// frame of its own made the source memo.
		r.setPolicy(3, 0, true, false)
		r.wantVerdict(r.run(3, ipv4(bcast, macD)), m.redirect, "unknown source from a port that does not learn")
		r.wantVerdict(r.run(3, ipv4(bcast, macD)), m.redirect, "and again (memo)")
		r.wantEntry(macD, 0, false, "port that does not learn")
		r.wantVerdict(r.run(3, ipv4(bcast, macA)), m.drop, "static source from a port that does not learn")
		r.wantDrops(3, srcStatic, 1, "port that does not learn")

		// A stream from D (not learned) to B: forwarded from the memos.
		r.run(2, ipv4(macD, macB)) // B on port 2
		for i := 0; i < 3; i++ {
			r.wantVerdict(r.run(3, ipv4(macB, macD)), m.redirect, "D to B from a port that does not learn")
		}
		// The static written for D on port 1 voids the memos: dropped.
		r.addStatic(macD, 1)
		r.wantVerdict(r.run(3, ipv4(macB, macD)), m.drop, "D made static on port 1, from port 3")
		r.wantDrops(3, srcStatic, 2, "D made static")

		// Deleted, the address is a station like any other again: it is
		// learned where it speaks.
		r.delEntry(macA)
		r.wantVerdict(r.run(2, ipv4(bcast, macA)), m.redirect, "A no longer static")
		r.wantEntry(macA, 2, false, "A no longer static")
	})
}

// On a VLAN-aware bridge a source is bound per VLAN: a locked trunk's
// static entry in VLAN 10 lets its frames of VLAN 10 through, not those
// of VLAN 20 (allowed_macs are written in every VLAN the port carries).
func TestLockedTrunkVLANs(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 0)
		flood := m.redirect
		if m.name == "tc" {
			flood = tcStolen
		}
		r.setPort(PortInfo{Ifindex: r.port[3], Bridge: 1, Slot: 3, Trunk: true, VLANs: []uint16{10, 20}, Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_LOCKED}})
		err := r.ns.Do(func() error {
			return r.dp.AddFDB(FDBEntry{Bridge: 1, VLAN: 10, MAC: macA, Ifindex: r.port[3], Slot: 3, Static: true})
		})
		if err != nil {
			t.Fatal(err)
		}
		r.wantVerdict(r.run(3, tagged(bcast, macA, 10)), flood, "bound in VLAN 10")
		r.wantVerdict(r.run(3, tagged(bcast, macA, 20)), m.drop, "not bound in VLAN 20")
		r.wantDrops(3, tbpf.TrestleTrDropReasonTR_DROP_LOCKED, 1, "VLAN 20")
		// From the access port of VLAN 10, A is another port's static
		// address; in VLAN 20 it is nobody's, and learned there.
		r.wantVerdict(r.run(1, ipv4(bcast, macA)), m.drop, "A in VLAN 10 from the access port")
		r.wantDrops(1, tbpf.TrestleTrDropReasonTR_DROP_SRC_STATIC, 1, "A in VLAN 10")
		r.wantVerdict(r.run(2, ipv4(bcast, macA)), flood, "A in VLAN 20 from the access port")
		found := false
		es, err := r.dp.FDB()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.MAC.String() == macA.String() && e.VLAN == 20 && e.Slot == 2 && !e.Static {
				found = true
			}
		}
		if !found {
			t.Errorf("A not learned in VLAN 20 on slot 2: %+v", es)
		}
	})
}
