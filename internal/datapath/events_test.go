package datapath

import (
	"errors"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// readMoves reads what the event ring holds.
func readMoves(t *testing.T, rd *EventReader) []Move {
	t.Helper()
	var out []Move
	for {
		m, err := rd.Read(time.Now().Add(50 * time.Millisecond))
		if errors.Is(err, ErrNoEvent) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
}

// eventRig is a rig with a reader of its event ring.
func eventRig(t *testing.T, m tmode) (*rig, *EventReader) {
	return ringRig(t, m, (*Datapath).Events)
}

// edgeRig is a rig with a reader of its guards' ring (EdgeEvents).
func edgeRig(t *testing.T, m tmode) (*rig, *EventReader) {
	return ringRig(t, m, (*Datapath).EdgeEvents)
}

func ringRig(t *testing.T, m tmode, open func(*Datapath) (*EventReader, error)) (*rig, *EventReader) {
	r := newRig(t, m, 1024, [4]uint32{})
	rd, err := open(r.dp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	return r, rd
}

// Each move of a learned address is one record naming the address and both
// ports; learning, refreshing and forwarding write none.
func TestMoveEvents(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r, rd := eventRig(t, m)
		before := time.Now()
		r.run(1, ipv4(bcast, macA)) // learned
		r.run(3, ipv4(macA, macB))  // learned, forwarded
		r.run(1, ipv4(macB, macA))  // known
		r.run(2, ipv4(macB, macA))  // moved 1 -> 2
		r.run(2, ipv4(macB, macA))  // known
		r.run(1, ipv4(macB, macA))  // moved 2 -> 1
		got := readMoves(t, rd)
		if len(got) != 2 {
			t.Fatalf("%d move records, want 2: %+v", len(got), got)
		}
		for i, want := range [][2]int{{1, 2}, {2, 1}} {
			g := got[i]
			if g.Bridge != 1 || g.VLAN != 0 || g.MAC.String() != macA.String() ||
				g.FromSlot != uint16(want[0]) || g.ToSlot != uint16(want[1]) ||
				g.FromIfindex != r.port[want[0]] || g.ToIfindex != r.port[want[1]] {
				t.Errorf("move %d: %+v, want %s from slot %d (ifindex %d) to %d (ifindex %d)", i, g, macA, want[0], r.port[want[0]], want[1], r.port[want[1]])
			}
			// The datapath's clock is coarse: a tick or so either side.
			if g.Time.Before(before.Add(-100*time.Millisecond)) || g.Time.After(time.Now().Add(100*time.Millisecond)) {
				t.Errorf("move %d at %v, not between %v and now", i, g.Time, before)
			}
		}
		if lost, err := r.dp.EventsLost(); err != nil || lost != 0 {
			t.Errorf("lost %d (%v), want 0", lost, err)
		}
	})
}

// A ring with no room drops records and counts them: what was read and what
// was lost add up to the moves counted.
func TestMoveEventsLost(t *testing.T) {
	rigSpecEdit = func(s *ebpf.CollectionSpec) { s.Maps[tbpf.TrestleMapEventRing].MaxEntries = 4096 }
	defer func() { rigSpecEdit = nil }()
	forEachMode(t, func(t *testing.T, m tmode) {
		r, rd := eventRig(t, m)
		r.run(1, ipv4(bcast, macA))
		const moves = 400 // a page holds about 100 records
		for i := 0; i < moves; i++ {
			r.run(2-i%2, ipv4(macB, macA))
		}
		got := len(readMoves(t, rd))
		lost, err := r.dp.EventsLost()
		if err != nil {
			t.Fatal(err)
		}
		moved := r.stats(1).C[tbpf.Moved] + r.stats(2).C[tbpf.Moved]
		if moved != moves || uint64(got)+lost != moved || lost == 0 {
			t.Errorf("moved %d: %d records read and %d lost, want them to add up to %d, some lost", moved, got, lost, moves)
		}
	})
}

// In a bridge with an overlay port (BridgeInfo.Overlay) each new address
// is a record too (Move.Learn), so that the daemon advertises it to FRR at
// once; a known one, refreshed or forwarded, is none; a bridge without one
// reports no learn.
func TestLearnEvents(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r, rd := eventRig(t, m)
		r.run(1, ipv4(bcast, macA)) // learned, no overlay port: no record
		var ports []PortInfo
		for slot := 1; slot <= 3; slot++ {
			ports = append(ports, PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot)})
		}
		if err := r.ns.Do(func() error {
			return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, Overlay: true})
		}); err != nil {
			t.Fatal(err)
		}
		r.run(2, ipv4(macA, macB)) // learned: a record
		r.run(2, ipv4(macA, macB)) // known
		r.run(1, ipv4(macB, macA)) // known, forwarded
		r.run(3, ipv4(macB, macA)) // moved 1 -> 3: a move
		got := readMoves(t, rd)
		if len(got) != 2 {
			t.Fatalf("%d records, want a learn and a move: %+v", len(got), got)
		}
		if g := got[0]; !g.Learn || g.MAC.String() != macB.String() || g.Bridge != 1 || g.FromSlot != 0 || g.ToSlot != 2 || g.ToIfindex != r.port[2] {
			t.Errorf("record 0: %+v, want the learn of %s on slot 2", g, macB)
		}
		if g := got[1]; g.Learn || g.MAC.String() != macA.String() || g.FromSlot != 1 || g.ToSlot != 3 {
			t.Errorf("record 1: %+v, want the move of %s from slot 1 to 3", g, macA)
		}
		bs, err := r.dp.Bridges()
		if err != nil || len(bs) != 1 || !bs[0].Overlay {
			t.Errorf("bridges read back: %+v (%v), want br0 with Overlay", bs, err)
		}
	})
}
