package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/trestle/trestle/internal/datapath"
)

// The fairness of the table (docs/security.md, "A table one port cannot
// starve"): at or past a bridge's high-water mark the datapath learns a new
// source of a port that holds its fair share or more only within the
// reserve the daemon last gave it (bpf/lib/fdb.h, tr_table_refuses), so the
// room up to max_entries is for the ports under theirs. The daemon keeps
// that room and gives the reserves: at each look (eventTick), a bridge past
// its mark loses the oldest learned entries of the port furthest over its
// share (the port that holds the most: every port's share is the same),
// down to the mark and never that port below its share; static and overlay
// entries are never taken. Then every port of a bridge at or past its mark,
// whatever the exact count, may learn its reserve (datapath.Marks) until the
// next look: a port over its share (an uplink with thousands of stations, a
// patch port) still learns its newcomers, and what they take comes back out
// of the port furthest over at the next look, which is the flooder's while
// one floods. A reserve is counted in what the port learns, not in what it
// holds, so the entries evicted from a flooder give it no room back: it
// learns one reserve a look, whatever the daemon deletes. A newcomer the
// full table forwarded unlearned is learned at its next frame (the
// deletions add to fdb_gen, which voids the memo that kept its frames off
// the table; without one, the memo runs out within half the refresh
// interval).

// fairMarks are a bridge's marks, as the datapath computes them.
type fairMarks = datapath.Marks

// evictions are the learned entries of es to delete so that each bridge in
// over gets back to its mark: the oldest of the port that holds the most,
// again while the bridge is past the mark and that port past its share.
// keep names entries never to take (of a port the daemon does not own, or
// an overlay's remote address).
func evictions(es []datapath.FDBEntry, over map[uint16]fairMarks, keep func(datapath.FDBEntry) bool) []datapath.FDBEntry {
	type key struct{ bridge, slot uint16 }
	bySlot := map[key][]datapath.FDBEntry{}
	count := map[uint16]int{}
	for _, e := range es {
		if _, ok := over[e.Bridge]; !ok || e.Static {
			continue
		}
		count[e.Bridge]++
		if !keep(e) {
			bySlot[key{e.Bridge, e.Slot}] = append(bySlot[key{e.Bridge, e.Slot}], e)
		}
	}
	var out []datapath.FDBEntry
	for _, id := range slices.Sorted(maps.Keys(over)) {
		m := over[id]
		n := count[id]
		for n > m.High {
			var heavy key
			most := 0
			for k, l := range bySlot {
				if k.bridge == id && (len(l) > most || len(l) == most && k.slot < heavy.slot) {
					heavy, most = k, len(l)
				}
			}
			if most <= m.Fair {
				break
			}
			l := bySlot[heavy]
			slices.SortFunc(l, func(a, b datapath.FDBEntry) int { return cmp.Compare(a.SeenNs, b.SeenNs) })
			take := min(n-m.High, most-m.Fair)
			out = append(out, l[:take]...)
			bySlot[heavy] = l[take:]
			n -= take
		}
	}
	return out
}

// makeRoom evicts, in every bridge past its high-water mark, what
// evictions says, then gives every port of a bridge at or past its mark
// its reserve (reserves). It reads the table only when a bridge's count is
// past its mark, a chunk at a time without the lock, as the aging sweep
// does, keeping the learned entries of those bridges only (what the choice
// of the oldest needs).
func (d *Daemon) makeRoom() error {
	d.mu.Lock()
	over, marked := map[uint16]fairMarks{}, map[uint16]fairMarks{}
	for _, b := range d.bridges {
		if b.info == nil || b.info.MaxEntries == 0 {
			continue
		}
		m := datapath.TableMarks(b.info.MaxEntries, len(b.info.Ports))
		n, err := d.counters.BridgeMACs(b.id)
		if err != nil || n < m.High {
			continue
		}
		marked[b.id] = m
		if n > m.High {
			over[b.id] = m
		}
	}
	d.mu.Unlock()
	err := d.evict(over)
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(err, d.reserves(marked))
}

// evict deletes what evictions says of the bridges in over.
func (d *Daemon) evict(over map[uint16]fairMarks) error {
	if len(over) == 0 {
		return nil
	}
	var es []datapath.FDBEntry
	err := d.table.WalkFDB(func(chunk []datapath.FDBEntry) error {
		for _, e := range chunk {
			if _, ok := over[e.Bridge]; ok && !e.Static {
				es = append(es, e)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	byID := d.bridgesByID()
	victims := evictions(es, over, func(e datapath.FDBEntry) bool {
		b := byID[e.Bridge]
		return b == nil || b.portBySlot(e.Slot) == nil || isOverlayEntry(b, e)
	})
	if len(victims) == 0 {
		return nil
	}
	n, err := d.table.DelFDBs(victims)
	d.log.Info("table past its high-water mark: evicted the oldest learned entries of the port holding the most", "entries", n)
	return err
}

// reserves gives every port of the bridges in marked (at or past their
// mark) its reserve, and takes back the reserves of the ports whose bridge
// has gone under its mark since the last look, so that one given long ago
// is never used when the bridge reaches its mark again. The caller holds
// d.mu.
func (d *Daemon) reserves(marked map[uint16]fairMarks) error {
	var errs []error
	given := map[uint16]bool{}
	for _, b := range d.bridges {
		m, ok := marked[b.id]
		if !ok {
			continue
		}
		for _, p := range b.ports {
			if p.slot == 0 {
				continue
			}
			if err := d.table.SetReserve(p.slot, m.Reserve); err != nil {
				errs = append(errs, fmt.Errorf("port %s: %w", p.name(), err))
				continue
			}
			given[p.slot] = true
		}
	}
	for slot := range d.reserved {
		if given[slot] {
			continue
		}
		if err := d.table.SetReserve(slot, 0); err != nil {
			errs = append(errs, err)
			given[slot] = true // taken back at the next look
		}
	}
	d.reserved = given
	return errors.Join(errs...)
}

// bridgesByID are the bridges by their datapath ids. The caller holds d.mu.
func (d *Daemon) bridgesByID() map[uint16]*bridgeState {
	byID := map[uint16]*bridgeState{}
	for _, b := range d.bridges {
		byID[b.id] = b
	}
	return byID
}
