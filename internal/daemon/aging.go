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
//
// The table is walked a chunk at a time, and each chunk's stale entries
// deleted before the next is read, so that the sweep holds a chunk of the
// table, never all; the daemon's lock is held for one chunk's deletions,
// never for the walk. An entry refreshed while its chunk is read may go as
// idle, as it might have before (the datapath refreshes without the lock),
// and comes back with the station's next frame.
func (d *Daemon) sweep() error {
	named := map[uint16]bool{} // slots and bridge ids the walk met
	ids := map[uint16]bool{}
	var orphans, idle []datapath.FDBEntry
	var errs []error
	werr := d.table.WalkFDB(func(es []datapath.FDBEntry) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		byID := map[uint16]*bridgeState{}
		for _, b := range d.bridges {
			byID[b.id] = b
		}
		orphans, idle = orphans[:0], idle[:0]
		for _, e := range es {
			named[e.Slot], ids[e.Bridge] = true, true
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
		if len(aged) > 0 && d.hasOverlay(aged) {
			d.nudgeOverlay() // withdraw them now, not at the next full sync
		}
		errs = append(errs, oerr, aerr)
		return nil
	})
	if err := errors.Join(append(errs, werr)...); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.alloc.clean(named, ids)
	return nil
}

// errNoBridge names a bridge that does not exist.
func errNoBridge(name string) error { return fmt.Errorf("no bridge %q", name) }
