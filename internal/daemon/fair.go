package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/overlay"
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

// holder is what an entry counts against in the fair share: a port (vtep
// invalid), or a remote VTEP behind an overlay port (slot the overlay
// port's): each remote VTEP of a bridge's overlay ports holds a share as a
// port does, so that a flood of sources on one host takes no more of this
// host's table than a flooding port would.
type holder struct {
	slot uint16
	vtep netip.Addr
}

// evictions are the learned entries of es to delete so that each bridge in
// over (at or past its mark) gets back to it: first every remote VTEP over
// its share loses its oldest entries down to it (a remote entry is put
// back by no frame, and the sync does not write an evicted one again:
// overlayEvicted); then, while the bridge is past the mark, the oldest of
// the holder (port or VTEP) that holds the most, never below its share.
// holderOf says what an entry counts against; false: never taken (an
// entry of a port the daemon does not own). Every entry of es in a bridge
// of over counts in the bridge's total.
func evictions(es []datapath.FDBEntry, over map[uint16]fairMarks, holderOf func(datapath.FDBEntry) (holder, bool)) []datapath.FDBEntry {
	type key struct {
		bridge uint16
		holder
	}
	byHolder := map[key][]datapath.FDBEntry{}
	count := map[uint16]int{}
	for _, e := range es {
		if _, ok := over[e.Bridge]; !ok || e.Static {
			continue
		}
		count[e.Bridge]++
		if h, ok := holderOf(e); ok {
			k := key{e.Bridge, h}
			byHolder[k] = append(byHolder[k], e)
		}
	}
	var out []datapath.FDBEntry
	// take evicts the n oldest of k's.
	take := func(k key, n int) {
		l := byHolder[k]
		slices.SortFunc(l, func(a, b datapath.FDBEntry) int { return cmp.Compare(a.SeenNs, b.SeenNs) })
		out = append(out, l[:n]...)
		byHolder[k] = l[n:]
		count[k.bridge] -= n
	}
	keys := slices.SortedFunc(maps.Keys(byHolder), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.bridge, b.bridge), cmp.Compare(a.slot, b.slot), a.vtep.Compare(b.vtep))
	})
	for _, k := range keys {
		if m := over[k.bridge]; k.vtep.IsValid() && len(byHolder[k]) > m.Fair && count[k.bridge] >= m.High {
			take(k, len(byHolder[k])-m.Fair)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(over)) {
		m := over[id]
		for count[id] > m.High {
			var heavy key
			most := 0
			for _, k := range keys {
				if k.bridge == id && len(byHolder[k]) > most {
					heavy, most = k, len(byHolder[k])
				}
			}
			if most <= m.Fair {
				break
			}
			take(heavy, min(count[id]-m.High, most-m.Fair))
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
		// At the mark, a bridge with remote VTEPs is looked at too: one
		// over its share loses what is over (evictions).
		if hm, vteps := d.holderMarks(b); n > m.High || vteps > 0 {
			over[b.id] = hm
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
	// The remote addresses of the bridges' overlay ports, by slot.
	remotes := map[uint16]map[[6]byte]netip.Addr{}
	for id := range over {
		b := byID[id]
		if b == nil {
			continue
		}
		for _, p := range b.ports {
			if p.cfg.IsOverlay() {
				at := map[[6]byte]netip.Addr{}
				for _, r := range d.ovl.mgr.Remotes(p.cfg.VXLAN) {
					at[overlay.MAC6(r.MAC)] = r.VTEP
				}
				remotes[p.slot] = at
			}
		}
	}
	victims := evictions(es, over, func(e datapath.FDBEntry) (holder, bool) {
		b := byID[e.Bridge]
		if b == nil || b.portBySlot(e.Slot) == nil {
			return holder{}, false
		}
		if isOverlayEntry(b, e) {
			// One no remote backs goes at the next sync anyway.
			at, ok := remotes[e.Slot][overlay.MAC6(e.MAC)]
			return holder{slot: e.Slot, vtep: at}, ok
		}
		return holder{slot: e.Slot}, true
	})
	if len(victims) == 0 {
		return nil
	}
	n, err := d.table.DelFDBs(victims)
	vteps := d.ovl.noteEvicted(byID, victims, remotes)
	d.log.Info("table at its high-water mark: evicted the oldest learned entries of the remote VTEPs over their share and of the port or VTEP holding the most", "entries", n, "remote", vteps)
	return err
}

// holderMarks are bridge b's marks as its evictions take them: its
// share holders are its ports but its overlay ports, and the remote VTEPs
// of each overlay port (docs/security.md, "A table one port cannot
// starve"); vteps says how many VTEPs there are. The caller holds d.mu.
func (d *Daemon) holderMarks(b *bridgeState) (m fairMarks, vteps int) {
	holders := len(b.info.Ports)
	for _, p := range b.ports {
		if p.cfg.IsOverlay() && p.slot != 0 {
			n := d.ovl.mgr.VTEPs(p.cfg.VXLAN)
			holders += n - 1
			vteps += n
		}
	}
	return datapath.TableMarks(b.info.MaxEntries, max(holders, 1)), vteps
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
