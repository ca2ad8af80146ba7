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
	r := newRig(t, m, 1024, [4]uint32{})
	rd, err := r.dp.Events()
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
