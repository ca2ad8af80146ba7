package daemon

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/config"
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
	keep := func(e datapath.FDBEntry) (holder, bool) { return holder{slot: e.Slot}, e.Slot != 3 }
	got := evictions(es, map[uint16]fairMarks{1: {High: 22, Fair: 8}}, keep)
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
	if got := evictions(es, map[uint16]fairMarks{1: {High: 10, Fair: 20}}, keep); len(got) != 0 {
		t.Errorf("evicted %d entries of ports within their share, want none", len(got))
	}
	// Down to the share, when the mark would take more.
	if got := evictions(es, map[uint16]fairMarks{1: {High: 10, Fair: 15}}, keep); len(got) != 5 {
		t.Errorf("evicted %d entries, want 5 (slot 1 from 20 down to its share 15)", len(got))
	}
}

// Remote VTEPs hold shares as ports do: at the mark (not past it), a
// VTEP over its share loses its oldest down to it, while a port over its
// share keeps what it has (only past the mark is a port taken from).
func TestEvictionsRemote(t *testing.T) {
	b1, b2 := netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	var es []datapath.FDBEntry
	vtepOf := map[string]netip.Addr{}
	add := func(slot uint16, vtep netip.Addr, n int) {
		for i := range n {
			e := datapath.FDBEntry{Bridge: 1, Slot: slot, MAC: net.HardwareAddr{2, 0, byte(slot), byte(len(vtepOf)), 0, byte(i)}, SeenNs: uint64(100 - i)}
			es = append(es, e)
			vtepOf[e.MAC.String()] = vtep
		}
	}
	add(1, netip.Addr{}, 10) // a port over its share of 6
	add(9, b1, 12)           // the overlay port: 12 behind one VTEP
	add(9, b2, 2)            // and 2 behind another
	holderOf := func(e datapath.FDBEntry) (holder, bool) {
		return holder{slot: e.Slot, vtep: vtepOf[e.MAC.String()]}, true
	}
	got := evictions(es, map[uint16]fairMarks{1: {High: 24, Fair: 6}}, holderOf)
	if len(got) != 6 {
		t.Fatalf("at the mark: evicted %d, want 6 (the first VTEP from 12 to its share, 6): %v", len(got), got)
	}
	for i, e := range got {
		if vtepOf[e.MAC.String()] != b1 || e.SeenNs != uint64(89+i) {
			t.Errorf("eviction %d: %+v behind %s, want the first VTEP's oldest", i, e, vtepOf[e.MAC.String()])
		}
	}
	// Under the mark nothing is taken, even of a VTEP over its share.
	if got := evictions(es, map[uint16]fairMarks{1: {High: 30, Fair: 6}}, holderOf); len(got) != 0 {
		t.Errorf("under the mark: evicted %d, want none", len(got))
	}
}

// A look at a bridge whose count sits exactly at its mark (1024 entries
// over 8 ports: mark 960, share 128, reserve 4): nothing past it to
// evict, but every port gets its reserve, the uplink over its share (300
// stations) included, so its newcomer is learned. Once a newcomer takes the
// bridge past the mark, the next look evicts from the port furthest over
// its share (the flooder's oldest), not the uplink's, and gives the
// reserves again. Under the mark the reserves are taken back.
func TestMakeRoomAtTheMark(t *testing.T) {
	tbl := newFakeTable(&fakeOps{})
	d := newDaemon(quietLog(), nil, nil, 1<<20, time.Second)
	d.table, d.counters = tbl, &fakeCounters{table: tbl}
	b := &bridgeState{id: 1, cfg: config.Bridge{Name: "br0"}}
	info := datapath.BridgeInfo{ID: 1, MaxEntries: 1024}
	for slot := uint16(1); slot <= 8; slot++ {
		b.ports = append(b.ports, &portState{bridge: b, slot: slot})
		info.Ports = append(info.Ports, datapath.PortInfo{Slot: slot})
	}
	b.info = &info
	d.bridges["br0"] = b
	m := datapath.TableMarks(1024, 8)
	if m.High != 960 || m.Fair != 128 || m.Reserve != 4 {
		t.Fatalf("marks of 1024 entries over 8 ports: %+v, want high 960, fair 128, reserve 4", m)
	}
	mac := func(slot uint16, i int) string { return fmt.Sprintf("02:00:%02x:00:%02x:%02x", slot, i>>8, i&0xff) }
	// learn puts in a learned entry seen at seen (ns): the lower, the older.
	learn := func(slot uint16, i int, seen uint64) {
		m, _ := net.ParseMAC(mac(slot, i))
		tbl.fdb[fdbKeyOf(1, 0, m)] = datapath.FDBEntry{Bridge: 1, MAC: m, Slot: slot, Ifindex: 10 + uint32(slot), SeenNs: seen}
	}
	for i := 0; i < 300; i++ {
		learn(1, i, uint64(i)) // the uplink's stations, older than the flood
	}
	for i := 0; i < 660; i++ {
		learn(2, i, uint64(1000+i))
	}
	look := func() {
		t.Helper()
		if err := d.makeRoom(); err != nil {
			t.Fatal(err)
		}
	}
	count := func(slot uint16) int { n, _ := d.counters.PortMACs(slot); return n }
	every := map[uint16]int{}
	for slot := uint16(1); slot <= 8; slot++ {
		every[slot] = 4
	}

	look()
	if n, _ := d.counters.BridgeMACs(1); n != 960 {
		t.Fatalf("at the mark exactly, a look left %d entries, want 960: nothing to evict", n)
	}
	if !maps.Equal(tbl.reserve, every) {
		t.Errorf("reserves at the mark: %v, want 4 for every port", tbl.reserve)
	}

	// The uplink learns a newcomer in its reserve, the flooder its own
	// reserve's worth: the next look takes the bridge back to the mark
	// out of the flooder's oldest.
	learn(1, 300, 5000)
	for i := 660; i < 664; i++ {
		learn(2, i, uint64(1000+i))
	}
	look()
	if count(1) != 301 || count(2) != 659 {
		t.Errorf("after the look past the mark: uplink %d flooder %d, want 301 659 (the flooder's 5 oldest evicted)", count(1), count(2))
	}
	for i := 0; i < 5; i++ {
		m, _ := net.ParseMAC(mac(2, i))
		if _, ok := tbl.fdb[fdbKeyOf(1, 0, m)]; ok {
			t.Errorf("the flooder's %s, among its oldest, is still there", m)
		}
	}
	if !maps.Equal(tbl.reserve, every) {
		t.Errorf("reserves after the eviction: %v, want 4 for every port", tbl.reserve)
	}

	// Under the mark: the reserves are taken back.
	for i := 5; i < 100; i++ {
		m, _ := net.ParseMAC(mac(2, i))
		delete(tbl.fdb, fdbKeyOf(1, 0, m))
	}
	look()
	if len(tbl.reserve) != 0 {
		t.Errorf("reserves under the mark: %v, want none", tbl.reserve)
	}
}
