package daemon

import (
	"fmt"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// alloc hands out bridge ids and port slots. Its marks are written only by
// its own methods, which keep this invariant:
//
//   - 0 is never given out: slot 0 counts the frames of no port, id 0 is
//     no bridge.
//   - A slot or id is given out only when it is neither used nor dirty, so
//     that no new port or bridge inherits the entries of one that went.
//   - Used: a port or bridge of the model, or of the apply under way,
//     holds it. It is freed when that port or bridge is removed, or when a
//     failed apply gives back what its plan took.
//   - Dirty: the table may still hold entries that name it (a flush
//     failed). Only clean, with a dump of the table in which no entry
//     names it, makes it clean again. A slot may be used and dirty at once:
//     a port whose flush failed keeps its slot when no clean one is left.
type alloc struct {
	slots [tbpf.MaxPorts]mark
	ids   [tbpf.MaxBridges + 1]mark
}

type mark struct{ used, dirty bool }

// slot gives out a clean free slot, marked used.
func (a *alloc) slot() (uint16, error) {
	if i, ok := take(a.slots[:]); ok {
		return i, nil
	}
	return 0, fmt.Errorf("no free port slot: at most %d ports", len(a.slots)-1)
}

// id gives out a clean free bridge id, marked used.
func (a *alloc) id() (uint16, error) {
	if i, ok := take(a.ids[:]); ok {
		return i, nil
	}
	return 0, fmt.Errorf("no free bridge id: at most %d bridges", len(a.ids)-1)
}

func take(ms []mark) (uint16, bool) {
	for i := 1; i < len(ms); i++ {
		if !ms[i].used && !ms[i].dirty {
			ms[i].used = true
			return uint16(i), true
		}
	}
	return 0, false
}

// adoptable says whether a slot a pinned datapath holds can be taken over:
// one that exists and that no port of the model holds already.
func (a *alloc) adoptable(s uint16) bool { return int(s) < len(a.slots) && !a.slots[s].used }

// takeSlot and takeID mark what an adopted port or bridge holds as used.
func (a *alloc) takeSlot(s uint16) { a.slots[s].used = true }
func (a *alloc) takeID(id uint16)  { a.ids[id].used = true }

// freeSlot and freeID let go of a removed port's slot, a removed bridge's
// id; a dirty one is still not given out until it is clean.
func (a *alloc) freeSlot(s uint16) { a.slots[s].used = false }
func (a *alloc) freeID(id uint16)  { a.ids[id].used = false }

// giveBack frees what a plan took, when its apply fails.
func (a *alloc) giveBack(slots, ids []uint16) {
	for _, s := range slots {
		a.freeSlot(s)
	}
	for _, id := range ids {
		a.freeID(id)
	}
}

// dirtySlot and dirtyID mark a slot or an id whose entries may still be in
// the table (a slot beyond the table's is ignored: it names nothing).
func (a *alloc) dirtySlot(s uint16) {
	if int(s) < len(a.slots) {
		a.slots[s].dirty = true
	}
}

func (a *alloc) dirtyID(id uint16) {
	if int(id) < len(a.ids) {
		a.ids[id].dirty = true
	}
}

// slotIsDirty says whether a slot waits for a sweep.
func (a *alloc) slotIsDirty(s uint16) bool { return int(s) < len(a.slots) && a.slots[s].dirty }

// clean makes clean the dirty slots and ids that no entry of a full dump
// of the table names any more (slots, ids: those some entry names).
func (a *alloc) clean(slots, ids map[uint16]bool) {
	for s := range a.slots {
		if a.slots[s].dirty && !slots[uint16(s)] {
			a.slots[s].dirty = false
		}
	}
	for id := range a.ids {
		if a.ids[id].dirty && !ids[uint16(id)] {
			a.ids[id].dirty = false
		}
	}
}
