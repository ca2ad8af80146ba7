package daemon

import (
	"cmp"
	"maps"
	"slices"

	"github.com/trestle/trestle/internal/datapath"
)

// The fairness of the table (issue 29, docs/security.md): past a bridge's
// high-water mark the datapath learns no new source of a port that holds
// its fair share or more (bpf/lib/fdb.h, tr_table_refuses), so the room up
// to max_entries is for the ports under theirs. The daemon keeps that room:
// at each look (eventTick), a bridge past its mark loses the oldest learned
// entries of the port that holds the most, down to the mark and never that
// port below its fair share; static and overlay entries are never taken.
// A newcomer the full table forwarded unlearned is then learned at its next
// frame (the deletions add to fdb_gen, which voids the memo that kept its
// frames off the table).

// fairMarks are a bridge's marks, as the datapath computes them.
type fairMarks struct{ high, fair int }

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
		for n > m.high {
			var heavy key
			most := 0
			for k, l := range bySlot {
				if k.bridge == id && (len(l) > most || len(l) == most && k.slot < heavy.slot) {
					heavy, most = k, len(l)
				}
			}
			if most <= m.fair {
				break
			}
			l := bySlot[heavy]
			slices.SortFunc(l, func(a, b datapath.FDBEntry) int { return cmp.Compare(a.SeenNs, b.SeenNs) })
			take := min(n-m.high, most-m.fair)
			out = append(out, l[:take]...)
			bySlot[heavy] = l[take:]
			n -= take
		}
	}
	return out
}

// makeRoom evicts, in every bridge past its high-water mark, what
// evictions says. It reads the table only when a bridge's count is past
// its mark, a chunk at a time without the lock, as the aging sweep does,
// keeping the learned entries of those bridges only (what the choice of
// the oldest needs).
func (d *Daemon) makeRoom() error {
	d.mu.Lock()
	over := map[uint16]fairMarks{}
	for _, b := range d.bridges {
		if b.info == nil || b.info.MaxEntries == 0 {
			continue
		}
		high, fair := datapath.TableMarks(b.info.MaxEntries, len(b.info.Ports))
		if n, err := d.counters.BridgeMACs(b.id); err == nil && n > high {
			over[b.id] = fairMarks{high, fair}
		}
	}
	d.mu.Unlock()
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

// bridgesByID are the bridges by their datapath ids. The caller holds d.mu.
func (d *Daemon) bridgesByID() map[uint16]*bridgeState {
	byID := map[uint16]*bridgeState{}
	for _, b := range d.bridges {
		byID[b.id] = b
	}
	return byID
}
