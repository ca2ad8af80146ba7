package datapath

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
	ethframe "github.com/trestle/trestle/internal/frame"
)

// multicast_snooping in bridges the walk crosses (bpf/walk.h,
// tr_walk_snoop), through BPF_PROG_TEST_RUN in both builds: a bridge with
// a patch port, and one with a mirror. A grouped frame reaches its group's
// ports only, in each bridge it crosses; an IGMP report is copied to the
// snoop ring by each snooping bridge, with that bridge's ingress (beyond a
// patch port, the patch port). The cases are chosen so that the walk's
// copies are counted in both modes: one copy (the walk's forward), or
// every port of the reach but the ingress (the reach's count at XDP).

// walkCase is a frame from a port, the verdict, the interface ports its
// copies leave by (of slots 1-3), and whether it was grouped on its
// ingress.
type walkCase struct {
	name    string
	from    int
	data    []byte
	sent    bool // a copy left: the frame redirected, else consumed with none
	to      []int
	grouped bool
}

func (r *rig) runWalkSnoop(cases []walkCase) {
	r.t.Helper()
	for _, c := range cases {
		before := r.allStats()
		want := r.m.redirect
		if !c.sent {
			want = r.m.drop
		}
		r.wantVerdict(r.run(c.from, c.data), want, c.name)
		if got := r.sentBy(before); !slices.Equal(got, c.to) {
			r.t.Errorf("%s: sent by ports %v, want %v", c.name, got, c.to)
		}
		g := r.stats(c.from).C[tbpf.TrestleTrCounterTR_CNT_GROUPED] - before[c.from].C[tbpf.TrestleTrCounterTR_CNT_GROUPED]
		if (g == 1) != c.grouped || g > 1 {
			r.t.Errorf("%s: grouped +%d on its ingress, want grouped %v", c.name, g, c.grouped)
		}
		if d := r.drops(c.from, tbpf.TrestleTrDropReasonTR_DROP_NO_EGRESS) - before[c.from].Drops[tbpf.TrestleTrDropReasonTR_DROP_NO_EGRESS]; d != 0 {
			r.t.Errorf("%s: %d no_egress drops on its ingress", c.name, d)
		}
	}
}

// snoopPatchRig: two snooping bridges joined by a patch,
//
//	br1 [p1, p2, patch 10] -- br2 [patch 11, p3]
func snoopPatchRig(t *testing.T, m tmode) *rig {
	r := newRig(t, m, 1024, [4]uint32{})
	snoop := tbpf.PortPolicy{}.With(tbpf.TrestleTrPortFlagsTR_PORT_SNOOP, true)
	err := r.ns.Do(func() error {
		port := func(slot int, bridge uint16) PortInfo {
			if slot < 10 {
				return PortInfo{Ifindex: r.port[slot], Bridge: bridge, Slot: uint16(slot), Policy: snoop}
			}
			return PortInfo{Ifindex: PatchIfindex(uint16(slot)), Bridge: bridge, Slot: uint16(slot), Peer: uint16(slot ^ 1)}
		}
		p1, p2, p3, p10, p11 := port(1, 1), port(2, 1), port(3, 2), port(10, 1), port(11, 2)
		for _, p := range []PortInfo{p1, p2, p3, p10, p11} {
			if err := r.dp.SetPort(p); err != nil {
				return err
			}
		}
		reach := []PortInfo{p1, p2, p3}
		for _, b := range []BridgeInfo{
			{ID: 1, Name: "br1", Ports: []PortInfo{p1, p2, p10}},
			{ID: 2, Name: "br2", Ports: []PortInfo{p11, p3}},
		} {
			b.MaxEntries, b.Reach, b.Snoop = 1024, reach, true
			if err := r.dp.SetBridge(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) setGroupIn(bridge uint16, group netip.Addr, slots ...uint16) {
	r.t.Helper()
	k := GroupKey{Bridge: bridge, Group: group}
	var err error
	if len(slots) == 0 {
		err = r.dp.DelGroup(k)
	} else {
		err = r.dp.SetGroup(k, slots)
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

func TestSnoopPatch(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := snoopPatchRig(t, m)
		rd, err := r.dp.Snoop()
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		udp := ethframe.UDPTo(macA, hostA, grp4, make([]byte, 32))
		r.runWalkSnoop([]walkCase{{"no entry in either bridge: flooded through both", 1, udp, true, []int{2, 3}, false}})
		r.setGroupIn(1, grp4, 2)
		r.runWalkSnoop([]walkCase{{"br1's member only: not across the patch", 1, udp, true, []int{2}, true}})
		// A member beyond the patch: br1 has the patch port (a report
		// came in by it), br2 its own member.
		r.setGroupIn(1, grp4, 10)
		r.setGroupIn(2, grp4, 3)
		r.runWalkSnoop([]walkCase{{"across the patch to br2's member only", 1, udp, true, []int{3}, true}})
		r.setGroupIn(1, grp4, 2, 10)
		r.setGroupIn(2, grp4)
		r.runWalkSnoop([]walkCase{{"br1's member and, br2 without an entry, br2 flooded", 1, udp, true, []int{2, 3}, true}})
		r.setGroupIn(2, grp4, 11)
		r.runWalkSnoop([]walkCase{{"br2's only port of the group its ingress: none there", 1, udp, true, []int{2}, true}})
		r.setGroupIn(1, grp4, 1)
		r.runWalkSnoop([]walkCase{{"the group's only port its ingress: no copy, no drop", 1, udp, false, nil, true}})
		r.setGroupIn(1, grp4, 2, 10)
		r.setGroupIn(2, grp4, 3, 11)
		r.runWalkSnoop([]walkCase{{"from beyond the patch: across it to br1's member", 3,
			ethframe.UDPTo(macC, hostA, grp4, make([]byte, 32)), true, []int{2}, true}})

		// A report from p3, no querier seen in either bridge: flooded,
		// and copied to the ring by br2 (its port) and by br1 (the patch
		// port it came in by).
		report := ethframe.IGMPv2(ethframe.IGMPv2Report, macC, hostA, grp4)
		r.runWalkSnoop([]walkCase{{"a report, no querier seen: flooded", 3, report, true, []int{1, 2}, false}})
		// Queriers seen: br2's reports go to its far port (its querier
		// the one, querier.go), br1's to its router port p1.
		r.setGroupIn(2, netip.IPv4Unspecified(), 11)
		r.setGroupIn(1, netip.IPv4Unspecified(), 1)
		r.runWalkSnoop([]walkCase{{"a report: across the patch to br1's router port", 3, report, true, []int{1}, true}})
		if g := r.stats(11).C[tbpf.TrestleTrCounterTR_CNT_GROUPED]; g != 2 {
			t.Errorf("patch port 11 grouped %d, want 2 (br1's grouped frames entering br2 by it)", g)
		}
		for i, want := range []struct{ bridge, slot uint16 }{{2, 3}, {1, 10}, {2, 3}, {1, 10}} {
			msg, err := rd.Read(time.Now().Add(time.Second))
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if msg.Bridge != want.bridge || msg.Slot != want.slot || string(msg.Packet) != string(report[14:]) {
				t.Errorf("message %d: bridge %d slot %d packet % x, want bridge %d slot %d the report", i, msg.Bridge, msg.Slot, msg.Packet, want.bridge, want.slot)
			}
		}
		if _, err := rd.Read(time.Now().Add(100 * time.Millisecond)); err == nil {
			t.Errorf("a message more than the reports in the ring")
		}
	})
}

// snoopMirrorRig: a snooping bridge [p1, p2] whose port 1 is mirrored in
// and out to port 3.
func snoopMirrorRig(t *testing.T, m tmode) *rig {
	r := newRig(t, m, 1024, [4]uint32{})
	snoop := tbpf.PortPolicy{}.With(tbpf.TrestleTrPortFlagsTR_PORT_SNOOP, true)
	span := PortInfo{Ifindex: r.port[3], Bridge: 1, Slot: 3, Span: true}
	p1 := PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1, MirrorIn: true, MirrorOut: true, MirrorTo: r.port[3], MirrorToSlot: 3, Policy: snoop}
	p2 := PortInfo{Ifindex: r.port[2], Bridge: 1, Slot: 2, Policy: snoop}
	r.setPort(span)
	r.setPort(p1)
	r.setPort(p2)
	if err := r.ns.Do(func() error {
		return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: []PortInfo{p1, p2},
			Mirror: true, Snoop: true, Reach: []PortInfo{p1, p2, span}})
	}); err != nil {
		t.Fatal(err)
	}
	return r
}

// The span port sees what the mirrored port sees: a grouped frame's copy
// when the port is a member, none when it is not.
func TestSnoopMirror(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := snoopMirrorRig(t, m)
		rd, err := r.dp.Snoop()
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		from2 := ethframe.UDPTo(macB, hostA, grp4, make([]byte, 32))
		from1 := ethframe.UDPTo(macA, hostA, grp4, make([]byte, 32))
		r.runWalkSnoop([]walkCase{{"no entry: flooded, port 1's copy mirrored", 2, from2, true, []int{1, 3}, false}})
		r.setGroup(GroupKey{Group: grp4}, 1)
		r.runWalkSnoop([]walkCase{
			{"to the member port 1, mirrored", 2, from2, true, []int{1, 3}, true},
			{"port 1's own frame: received, mirrored; not to port 2", 1, from1, true, []int{3}, true},
		})
		r.setGroup(GroupKey{Group: grp4}, 2)
		r.runWalkSnoop([]walkCase{
			{"port 1 no member: no copy to it nor to its span port", 2, from2, false, nil, true},
			{"from port 1 to the member port 2, and mirrored in", 1, from1, true, []int{2, 3}, true},
		})
		report := ethframe.IGMPv2(ethframe.IGMPv2Report, macB, hostA, grp4)
		r.runWalkSnoop([]walkCase{{"a report, no querier seen: flooded, mirrored", 2, report, true, []int{1, 3}, false}})
		msg, err := rd.Read(time.Now().Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if msg.Bridge != 1 || msg.Slot != 2 || string(msg.Packet) != string(report[14:]) {
			t.Errorf("message: bridge %d slot %d, want bridge 1 slot 2 the report", msg.Bridge, msg.Slot)
		}
	})
}

// Capture's prediction of a snooping bridge's flood to a group: an out
// record on a port of the group's, none on one outside it; a frame the
// group has no entry for, flooded, on any port. The plain flood (the
// group's ports in group_cur) and the walked one (the walk's choice).
func TestCaptureSnoop(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		for _, walked := range []bool{false, true} {
			var r *rig
			if walked {
				r = snoopMirrorRig(t, m)
			} else {
				r = snoopRig(t, m, true)
			}
			r.setGroup(GroupKey{Group: grp4}, 1)
			udp := ethframe.UDPTo(macB, hostA, grp4, make([]byte, 32))
			other := ethframe.UDPTo(macB, hostA, netip.MustParseAddr("239.9.9.9"), make([]byte, 32))
			flooded := &wantRec{dir: CaptureOut, verdict: VerdictFlooded, egress: 1}
			c := r.startCapture(1, false, true)
			r.capRun(t, c, []capCase{
				{"to the group, port 1 its member", 2, udp, flooded},
				{"to a group without an entry", 2, other, flooded},
			})
			r.setGroup(GroupKey{Group: grp4}, 2)
			r.capRun(t, c, []capCase{{fmt.Sprintf("to the group, port 1 no member (walked %v)", walked), 2, udp, nil}})
			c.Close()
		}
	})
}
