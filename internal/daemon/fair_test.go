package daemon

import (
	"net"
	"testing"

	"github.com/trestle/trestle/internal/datapath"
)

// evictions takes the oldest learned entries of the port that holds the
// most, down to the bridge's mark and never that port below its share;
// statics, kept entries and other bridges are never taken.
func TestEvictions(t *testing.T) {
	var es []datapath.FDBEntry
	add := func(bridge, slot uint16, n int, static bool) {
		for i := 0; i < n; i++ {
			es = append(es, datapath.FDBEntry{Bridge: bridge, Slot: slot, Static: static,
				MAC: net.HardwareAddr{0x02, byte(bridge), byte(slot), 0, 0, byte(i)}, SeenNs: uint64(1000*int(slot) + 100 - i)})
		}
	}
	add(1, 1, 20, false) // the flooder: 20 of a table of 24, mark 22, share 8
	add(1, 2, 4, false)
	add(1, 3, 2, false)
	add(1, 1, 3, true) // statics: never counted, never taken
	add(2, 1, 30, false)
	keep := func(e datapath.FDBEntry) bool { return e.Slot == 3 }
	got := evictions(es, map[uint16]fairMarks{1: {high: 22, fair: 8}}, keep)
	if len(got) != 4 {
		t.Fatalf("evicted %d entries, want 4 (26 learned, mark 22): %v", len(got), got)
	}
	for i, e := range got {
		if e.Bridge != 1 || e.Slot != 1 || e.Static {
			t.Errorf("evicted %+v, want a learned entry of slot 1, bridge 1", e)
		}
		// The oldest first: slot 1's SeenNs run 1100 down to 1081.
		if want := uint64(1081 + i); e.SeenNs != want {
			t.Errorf("eviction %d seen at %d, want %d (the oldest first)", i, e.SeenNs, want)
		}
	}

	// A port never goes below its share: past the mark with every port
	// at or under it, nothing is taken.
	if got := evictions(es, map[uint16]fairMarks{1: {high: 10, fair: 20}}, keep); len(got) != 0 {
		t.Errorf("evicted %d entries of ports within their share, want none", len(got))
	}
	// Down to the share, when the mark would take more.
	if got := evictions(es, map[uint16]fairMarks{1: {high: 10, fair: 15}}, keep); len(got) != 5 {
		t.Errorf("evicted %d entries, want 5 (slot 1 from 20 down to its share 15)", len(got))
	}
}
