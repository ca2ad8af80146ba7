package daemon

import (
	"errors"
	"fmt"
	"time"

	"github.com/trestle/trestle/internal/datapath"
)

// sweep deletes learned entries idle for longer than their bridge's aging
// time, from the entries' own timestamps (a restarted daemon resumes aging
// where the last one was), and flushes slots and ids a failed flush left
// dirty. The address counts follow each deletion (datapath.DelFDB): there
// is nothing to recount.
func (d *Daemon) sweep() error {
	// The table is read before the lock is taken, as status reads it: an
	// entry refreshed while it is read may go as idle, as it might have
	// before (the datapath refreshes without the lock), and comes back
	// with the station's next frame.
	es, err := d.table.FDB()
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	byID := d.bridgesByID()
	var orphans, idle []datapath.FDBEntry
	for _, e := range es {
		b := byID[e.Bridge]
		switch {
		case b == nil || b.portBySlot(e.Slot) == nil:
			// Of a bridge or port that is gone and whose flush failed.
			orphans = append(orphans, e)
		case isOverlayEntry(b, e):
			// A remote address: zebra's to withdraw, never aged.
		case !e.Static && e.Age > b.cfg.Aging:
			idle = append(idle, e)
		}
	}
	_, oerr := d.table.DelFDBs(orphans)
	aged, aerr := d.table.AgeOut(idle, func(id uint16) time.Duration { return byID[id].cfg.Aging })
	for _, e := range aged {
		d.aged[byID[e.Bridge].cfg.Name]++
	}
	if err := errors.Join(oerr, aerr); err != nil {
		return err
	}
	d.cleanDirty(es)
	return nil
}

// bridgesByID are the bridges by their datapath ids. The caller holds d.mu.
func (d *Daemon) bridgesByID() map[uint16]*bridgeState {
	byID := map[uint16]*bridgeState{}
	for _, b := range d.bridges {
		byID[b.id] = b
	}
	return byID
}

// cleanDirty frees the dirty slots and ids that no entry names any more.
func (d *Daemon) cleanDirty(left []datapath.FDBEntry) {
	named := map[uint16]bool{}
	ids := map[uint16]bool{}
	for _, e := range left {
		named[e.Slot] = true
		ids[e.Bridge] = true
	}
	d.alloc.clean(named, ids)
}

// errNoBridge names a bridge that does not exist.
func errNoBridge(name string) error { return fmt.Errorf("no bridge %q", name) }
