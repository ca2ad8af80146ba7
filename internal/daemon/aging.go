package daemon

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/trestle/trestle/internal/datapath"
)

// sweep deletes learned entries idle for longer than their bridge's aging
// time, from the entries' own timestamps (a restarted daemon resumes aging
// where the last one was), and flushes slots and ids a failed flush left
// dirty. The address counts follow each deletion (datapath.DelFDB): there
// is nothing to recount.
func (d *Daemon) sweep() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	byID := map[uint16]*bridgeState{}
	for _, b := range d.bridges {
		byID[b.id] = b
	}
	es, err := d.dp.FDB()
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range es {
		b := byID[e.Bridge]
		if b == nil || b.portBySlot(e.Slot) == nil {
			// Of a bridge or port that is gone and whose flush failed.
			if _, err := d.dp.DelFDB(e.Bridge, e.VLAN, e.MAC); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		if e.Static || e.Age <= b.cfg.Aging {
			continue
		}
		if _, err := d.dp.AgeOut(e.Bridge, e.VLAN, e.MAC, b.cfg.Aging); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		d.cleanDirty(es)
	}
	return errors.Join(errs...)
}

// cleanDirty frees the dirty slots and ids that no entry names any more.
func (d *Daemon) cleanDirty(left []datapath.FDBEntry) {
	named := map[uint16]bool{}
	ids := map[uint16]bool{}
	for _, e := range left {
		named[e.Slot] = true
		ids[e.Bridge] = true
	}
	for s, dirty := range d.alloc.slotDirty {
		if dirty && !named[uint16(s)] {
			d.alloc.slotDirty[s] = false
		}
	}
	for id, dirty := range d.alloc.idDirty {
		if dirty && !ids[uint16(id)] {
			d.alloc.idDirty[id] = false
		}
	}
}

// errNoBridge names a bridge that does not exist.
func errNoBridge(name string) error { return fmt.Errorf("no bridge %q", name) }
