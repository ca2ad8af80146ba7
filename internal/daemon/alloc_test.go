package daemon

import (
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// The allocator's invariant (alloc.go): 0 is never given out, nothing is
// given out twice, and a dirty slot or id waits for a clean table.
func TestAllocInvariant(t *testing.T) {
	var a alloc
	seen := map[uint16]bool{}
	for i := 1; i < tbpf.MaxPorts; i++ {
		s, err := a.slot()
		if err != nil {
			t.Fatalf("slot %d of %d: %v", i, tbpf.MaxPorts-1, err)
		}
		if s == 0 || seen[s] {
			t.Fatalf("slot %d given out (0 or twice)", s)
		}
		seen[s] = true
	}
	if s, err := a.slot(); err == nil {
		t.Fatalf("slot %d given out beyond the table", s)
	}

	// A freed slot comes back; a dirty one does not, used or not, until
	// no entry names it.
	a.freeSlot(7)
	a.dirtySlot(9) // used and dirty: a port kept its slot
	a.freeSlot(9)
	a.dirtySlot(9)
	if s, err := a.slot(); err != nil || s != 7 {
		t.Fatalf("after freeing 7: slot %d, %v", s, err)
	}
	if s, err := a.slot(); err == nil {
		t.Fatalf("slot %d given out while 9 is dirty", s)
	}
	a.clean(map[uint16]bool{9: true}, nil)
	if !a.slotIsDirty(9) {
		t.Fatal("slot 9 clean while an entry names it")
	}
	a.clean(map[uint16]bool{}, nil)
	if a.slotIsDirty(9) {
		t.Fatal("slot 9 still dirty with no entry naming it")
	}
	if s, err := a.slot(); err != nil || s != 9 {
		t.Fatalf("after cleaning 9: slot %d, %v", s, err)
	}

	// Adoption takes what the pinned datapath holds; beyond the table
	// there is nothing to take, or to mark.
	var b alloc
	if !b.adoptable(3) || b.adoptable(uint16(tbpf.MaxPorts)) {
		t.Fatal("adoptable: a free slot must be, one beyond the table must not")
	}
	b.takeSlot(1)
	b.takeSlot(3)
	if b.adoptable(3) {
		t.Fatal("slot 3 adoptable twice")
	}
	b.dirtySlot(uint16(tbpf.MaxPorts)) // names nothing: ignored
	b.dirtySlot(2)
	if s, err := b.slot(); err != nil || s != 4 {
		t.Fatalf("with 1 and 3 taken and 2 dirty: slot %d, %v", s, err)
	}

	// A failed apply gives back what its plan took.
	var c alloc
	s, _ := c.slot()
	id, _ := c.id()
	c.giveBack([]uint16{s}, []uint16{id})
	if s2, _ := c.slot(); s2 != s {
		t.Fatalf("slot %d not given back (got %d)", s, s2)
	}
	if id2, _ := c.id(); id2 != id {
		t.Fatalf("id %d not given back (got %d)", id, id2)
	}

	// Ids as slots: none 0, none twice, dirty ones wait.
	var d alloc
	ids := map[uint16]bool{}
	for i := 1; i <= tbpf.MaxBridges; i++ {
		id, err := d.id()
		if err != nil || id == 0 || ids[id] {
			t.Fatalf("id %d of %d: %d, %v", i, tbpf.MaxBridges, id, err)
		}
		ids[id] = true
	}
	if id, err := d.id(); err == nil {
		t.Fatalf("id %d given out beyond the table", id)
	}
	d.freeID(2)
	d.dirtyID(2)
	if id, err := d.id(); err == nil {
		t.Fatalf("id %d given out while 2 is dirty", id)
	}
	d.clean(nil, map[uint16]bool{})
	if id, err := d.id(); err != nil || id != 2 {
		t.Fatalf("after cleaning 2: id %d, %v", id, err)
	}
	d.takeID(2) // adoption of a held id marks it used, as it is
	if id, err := d.id(); err == nil {
		t.Fatalf("id %d given out with every id used", id)
	}
}
