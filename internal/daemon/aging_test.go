package daemon

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/datapath"
)

// The sweep needs only the table: learned entries idle beyond their
// bridge's aging go, and are counted; statics and fresh entries stay;
// entries of no port go; a dirty slot is clean once a dump no longer
// names it (the dump the sweep read, so one sweep after its entries went).
func TestSweepAgesAndCleans(t *testing.T) {
	tbl := newFakeTable(&fakeOps{})
	d := newDaemon(quietLog(), nil, nil, 1<<20, time.Second)
	d.table = tbl
	b := &bridgeState{id: 1, cfg: config.Bridge{Name: "br0", Aging: time.Minute}}
	b.ports = []*portState{{bridge: b, slot: 1}}
	d.bridges["br0"] = b
	d.alloc.takeID(1)
	d.alloc.takeSlot(1)
	d.alloc.dirtySlot(5) // named by no entry
	d.alloc.dirtySlot(9) // named by the orphan below

	tbl.learn(1, 1, 10, "02:00:00:00:00:01", 2*time.Minute) // idle
	tbl.learn(1, 1, 10, "02:00:00:00:00:02", time.Second)   // fresh
	tbl.learn(1, 9, 11, "02:00:00:00:00:03", 0)             // of no port
	static, _ := net.ParseMAC("02:00:00:00:00:04")
	tbl.fdb[fdbKeyOf(1, 0, static)] = datapath.FDBEntry{Bridge: 1, MAC: static, Slot: 1, Ifindex: 10, Static: true, Age: time.Hour}

	if err := d.sweep(); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range tbl.fdb {
		left = append(left, e.MAC.String())
	}
	slices.Sort(left)
	if want := []string{"02:00:00:00:00:02", "02:00:00:00:00:04"}; !slices.Equal(left, want) {
		t.Errorf("after a sweep the table holds %v, want %v", left, want)
	}
	if d.aged["br0"] != 1 {
		t.Errorf("aged %d entries of br0, want 1", d.aged["br0"])
	}
	if d.alloc.slotIsDirty(5) || !d.alloc.slotIsDirty(9) {
		t.Errorf("after one sweep: slot 5 dirty %v (want false), slot 9 dirty %v (want true)", d.alloc.slotIsDirty(5), d.alloc.slotIsDirty(9))
	}
	if err := d.sweep(); err != nil {
		t.Fatal(err)
	}
	if d.alloc.slotIsDirty(9) {
		t.Error("slot 9 still dirty after a sweep whose dump no longer names it")
	}
}
