package datapath

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// The edge's guards (bpf/lib/guard.h): a BPDU on a bpdu_guard port, a
// blocked port both ways, and a loop probe on a loop_detect bridge.

var stpGroup = net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, 0}

// bpdu is an 802.3 frame with LLC 42 42 03 to the STP group: a
// configuration BPDU's length.
func bpdu(src net.HardwareAddr) []byte {
	f := frame(stpGroup, src, 38, 46)
	copy(f[14:], []byte{0x42, 0x42, 0x03, 0, 0, 0, 0})
	return f
}

// probe is a loop probe (struct tr_probe) of daemon id, sent out of port
// slot of bridge.
func probe(src net.HardwareAddr, id uint32, bridge, slot uint16) []byte {
	f := frame(bcast, src, tbpf.ProbeEtherType, 46)
	binary.BigEndian.PutUint32(f[14:], tbpf.ProbeMagic)
	binary.BigEndian.PutUint32(f[18:], id)
	binary.BigEndian.PutUint16(f[22:], bridge)
	binary.BigEndian.PutUint16(f[24:], slot)
	return f
}

func (r *rig) setFlags(slot int, f tbpf.PortFlag) {
	r.t.Helper()
	r.setPort(PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot), Policy: tbpf.PortPolicy{Flags: f}})
}

// setLoopDetect writes the rig's bridge with loop_detect on or off.
func (r *rig) setLoopDetect(on bool) {
	r.t.Helper()
	var ports []PortInfo
	for slot := 1; slot <= 3; slot++ {
		ports = append(ports, PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot)})
	}
	if err := r.ns.Do(func() error {
		return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, LoopDetect: on})
	}); err != nil {
		r.t.Fatal(err)
	}
}

func TestBPDUGuard(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r, rd := edgeRig(t, m)
		guard, reserved := tbpf.TrestleTrDropReasonTR_DROP_BPDU_GUARD, tbpf.TrestleTrDropReasonTR_DROP_RESERVED
		r.setFlags(1, tbpf.TrestleTrPortFlagsTR_PORT_BPDU_GUARD)

		r.wantVerdict(r.run(1, bpdu(macA)), m.drop, "a BPDU on the guarded port")
		r.wantDrops(1, guard, 1, "a BPDU on the guarded port")
		r.wantDrops(1, reserved, 0, "a BPDU on the guarded port")
		r.wantEntry(macA, 0, false, "a BPDU's source")

		// Another reserved group (LLDP's) on the guarded port, and a BPDU
		// on a port without the guard: dropped as before, told nothing.
		lldp := frame(net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, 0x0e}, macA, 0x88cc, 46)
		r.wantVerdict(r.run(1, lldp), m.drop, "LLDP on the guarded port")
		r.wantVerdict(r.run(2, bpdu(macB)), m.drop, "a BPDU on a port without the guard")
		r.wantDrops(1, reserved, 1, "LLDP on the guarded port")
		r.wantDrops(2, reserved, 1, "a BPDU on a port without the guard")
		r.wantDrops(2, guard, 0, "a BPDU on a port without the guard")

		got := readMoves(t, rd)
		if len(got) != 1 {
			t.Fatalf("%d event records, want 1 (the guarded port's BPDU): %+v", len(got), got)
		}
		if g := got[0]; !g.BPDU || g.Loop || g.Learn || g.Bridge != 1 || g.ToSlot != 1 || g.ToIfindex != r.port[1] || g.MAC.String() != macA.String() {
			t.Errorf("event %+v, want a BPDU from %s on slot 1 (ifindex %d) of bridge 1", g, macA, r.port[1])
		}
	})
}

func TestBlockedPort(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		blocked := tbpf.TrestleTrDropReasonTR_DROP_PORT_BLOCKED
		r.run(2, ipv4(bcast, macB)) // macB learned on port 2
		r.addStatic(macD, 2)
		r.setFlags(2, tbpf.PortBlocked)

		// In: dropped before learning, whatever it is.
		r.wantVerdict(r.run(2, ipv4(bcast, macC)), m.drop, "a broadcast from the blocked port")
		r.wantVerdict(r.run(2, ipv4(macA, macC)), m.drop, "a unicast from the blocked port")
		r.wantVerdict(r.run(2, bpdu(macC)), m.drop, "a BPDU from the blocked port")
		r.wantDrops(2, blocked, 3, "frames from the blocked port")
		r.wantEntry(macC, 0, false, "a source behind the blocked port")

		// Out: a known unicast to a station behind it (learned or static)
		// is refused by the egress rule, counted on the ingress port.
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.drop, "to a learned station behind the blocked port")
		r.wantVerdict(r.run(1, ipv4(macD, macA)), m.drop, "to a static station behind the blocked port")
		r.wantDrops(1, blocked, 2, "unicast to the blocked port")

		// Lifted: it forwards again both ways.
		r.setFlags(2, 0)
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.redirect, "to the port lifted")
		r.wantVerdict(r.run(2, ipv4(macA, macC)), m.redirect, "from the port lifted")
		r.wantEntry(macC, 2, false, "a source behind the port lifted")
	})
}

func TestLoopProbe(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r, rd := edgeRig(t, m)
		loop := tbpf.TrestleTrDropReasonTR_DROP_LOOP_PROBE
		src := net.HardwareAddr{0x02, 0x74, 0, 0, 0, 7}

		// Without loop_detect a probe is a frame as any other: flooded.
		r.wantVerdict(r.run(2, probe(src, 7, 1, 1)), m.redirect, "a probe on a bridge without loop_detect")
		r.wantDrops(2, loop, 0, "a probe on a bridge without loop_detect")

		r.setLoopDetect(true)
		r.wantVerdict(r.run(2, probe(src, 7, 1, 3)), m.drop, "a probe on a loop_detect bridge")
		r.wantDrops(2, loop, 1, "a probe on a loop_detect bridge")
		// Cut short, or without the magic: a frame of the type as any
		// other, flooded, not reported.
		short := probe(src, 7, 1, 3)[:22]
		r.wantVerdict(r.run(2, short), m.redirect, "a probe cut short")
		r.wantVerdict(r.run(2, frame(bcast, src, tbpf.ProbeEtherType, 46)), m.redirect, "a frame of the probe's type without its magic")
		r.wantDrops(2, loop, 1, "a probe cut short, a frame without the magic")
		// Other frames of the bridge go on.
		r.wantVerdict(r.run(1, ipv4(bcast, macA)), m.redirect, "a broadcast on a loop_detect bridge")

		var loops []Move
		for _, e := range readMoves(t, rd) {
			if e.Loop {
				loops = append(loops, e)
			}
		}
		if len(loops) != 1 {
			t.Fatalf("%d loop records, want 1: %+v", len(loops), loops)
		}
		if g := loops[0]; g.Bridge != 1 || g.ToSlot != 2 || g.ToIfindex != r.port[2] || g.FromSlot != 3 || g.Probe != 7 || g.ProbeBridge != 1 {
			t.Errorf("loop record %+v, want probe 7 of bridge 1 slot 3 heard on slot 2 (ifindex %d)", g, r.port[2])
		}
	})
}

// A loop's storm of moves fills the event ring; the probe's report, in the
// guards' ring of its own, is there all the same, and no move is in it.
func TestLoopProbeInAStorm(t *testing.T) {
	rigSpecEdit = func(s *ebpf.CollectionSpec) { s.Maps[tbpf.TrestleMapEventRing].MaxEntries = 4096 }
	defer func() { rigSpecEdit = nil }()
	forEachMode(t, func(t *testing.T, m tmode) {
		r, rd := edgeRig(t, m)
		r.setLoopDetect(true)
		r.run(1, ipv4(bcast, macA))
		for i := 0; i < 400; i++ { // a page holds about 100 records
			r.run(2-i%2, ipv4(bcast, macA))
		}
		if lost, err := r.dp.EventsLost(); err != nil || lost == 0 {
			t.Fatalf("the event ring lost %d records (%v): want it full", lost, err)
		}
		r.wantVerdict(r.run(2, probe(net.HardwareAddr{0x02, 0x74, 0, 0, 0, 7}, 7, 1, 3)), m.drop, "a probe in a storm of moves")
		got := readMoves(t, rd)
		if len(got) != 1 || !got[0].Loop || got[0].ToSlot != 2 || got[0].FromSlot != 3 || got[0].Probe != 7 {
			t.Errorf("the edge ring holds %+v, want the one probe heard on slot 2", got)
		}
	})
}
