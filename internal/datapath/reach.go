package datapath

import (
	"fmt"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// A walked bridge's reach (bpf/types.h, struct tr_reach): the interface
// ports its walk's copies may go to, as a bitmap by slot and as a devmap
// with no program. A walk that chose every one of them but the ingress,
// none retagged (a mirrored frame in a 3-port bridge: the way out and the
// span port), is sent in one broadcast over that devmap, not over the
// patch flood set whose program runs on each copy (bpf/walk.h).

// reachFloodSets are the reach flood sets: plain devmaps, one per bridge.
func (d *Datapath) reachFloodSets() sizedSet {
	return sizedSet{outer: d.objs.ReachFloods, sets: d.reachFloods, name: "tr_rflood", what: "reach flood set",
		valueSize: 4, limit: tbpf.MaxBridgePorts, ahead: d.ahead, val: func(ifindex uint32) any { return d.xdpDev(ifindex) }}
}

// setReach writes bridge b's reach (b.Reach's interface ports). Frames
// take the general way while it is written: its bitmap is cleared first,
// the devmap made to hold exactly the ports, and the bitmap written last.
// A reach of more than MaxBridgePorts ports has no set (the general way).
func (d *Datapath) setReach(b BridgeInfo) error {
	if err := d.objs.Reaches.Put(uint32(b.ID), &tbpf.Reach{}); err != nil {
		return fmt.Errorf("clear the reach: %w", err)
	}
	var r tbpf.Reach
	want := map[uint32]bool{}
	for _, p := range b.Reach {
		if IsPatchIfindex(p.Ifindex) || want[p.Ifindex] {
			continue
		}
		if p.Slot == 0 || int(p.Slot) >= tbpf.MaxPorts {
			return fmt.Errorf("reach: port %d in slot %d out of range", p.Ifindex, p.Slot)
		}
		if int(r.N) == len(r.Slots) {
			return d.delReach(b.ID)
		}
		want[p.Ifindex] = true
		r.Sel[p.Slot>>6] |= 1 << (p.Slot & 63)
		r.Slots[r.N] = p.Slot
		r.N++
	}
	m, fresh, err := d.reachFloodSets().fill(b.ID, want)
	if err != nil {
		return err
	}
	if !fresh {
		if err := prune(m, want); err != nil {
			return fmt.Errorf("reach flood set: %w", err)
		}
	}
	if err := d.objs.Reaches.Put(uint32(b.ID), &r); err != nil {
		return fmt.Errorf("write the reach: %w", err)
	}
	return nil
}

// delReach forgets bridge id's reach: its bitmap first, so that no frame
// is sent over the set after.
func (d *Datapath) delReach(id uint16) error {
	if err := d.objs.Reaches.Put(uint32(id), &tbpf.Reach{}); err != nil {
		return fmt.Errorf("clear the reach: %w", err)
	}
	s := d.reachFloodSets()
	return d.delProgFlood(progFloods{what: s.what, outer: s.outer, sets: s.sets}, id)
}

// adoptReachFloods takes hold of the reach flood sets an adopted map holds.
func (d *Datapath) adoptReachFloods() error {
	return adoptInner(d.objs.ReachFloods, d.reachFloods, "reach flood set")
}
