package datapath

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Resize: the sizes a load fixes (Sizes: the learning table's entries, how
// often a timestamp is refreshed) changed while the switch forwards, the
// way an upgrade moves a datapath between builds, in place.
//
// Resize copies the learning table into maps of the new size (the table
// and its address counts, fdbGroup: they hold one state) and loads the entry
// points again for the new sizes, on the new table and on every other map
// as it is; from then on Attach and Upgrade give the new programs, and the
// control plane's writes go to the new table. The caller moves every
// attachment (Upgrade: a link update, so no frame meets an interface
// without a program), then ends the resize:
//
//   - Keep, once every attachment runs the new programs: it waits for the
//     old ones to finish the frames they were running, carries into the new
//     table the addresses they learned since the copy began, voids every
//     memo, and closes the old programs and table.
//   - Undo, when the caller's change failed: the old programs and table are
//     the current ones again (the caller moves the attachments back), and the
//     new ones are closed; what the new programs learned is learned again.
//
// What a resize costs the frames: nothing is counted twice or lost from the
// counters (they are the same maps); an address learned by the old programs
// after the copy is carried over by Keep, or learned again by a new program
// first (it is then in the table once). A station that moved between ports
// in the window (the copy takes milliseconds) moves again with its next
// frame; its frames meanwhile go to the port it left. The address counts
// that max_entries and max_macs are checked against are not copied but made
// from the entries copied and carried over, so they are exact whatever the
// old programs learned meanwhile. While it runs, the old table and the new
// are both in memory.
//
// The devmap programs (trestle_vlan_egress, trestle_patch_egress) and the
// overlay's way in (trestle_via) use neither the table nor a load-time
// constant: they keep running as they are (TestResizeLeavesOtherPrograms
// holds them to that).

// Sizes are the load-time sizes the configuration sets: the learning
// table's entries (every bridge's) and how stale a timestamp may get before
// the datapath refreshes it (well under the shortest aging time).
type Sizes struct {
	FDBCapacity uint32
	Refresh     time.Duration
}

func (s Sizes) String() string {
	return fmt.Sprintf("a table of %d entries refreshed every %v", s.FDBCapacity, s.Refresh)
}

// Sizes are the sizes the programs now given to interfaces were loaded with.
func (d *Datapath) Sizes() Sizes { return Sizes{FDBCapacity: d.FDBCapacity(), Refresh: d.refresh} }

// Resizing is a resize the caller has not ended (Keep or Undo).
type Resizing struct {
	d *Datapath
	// since: the datapath's clock (Now) before the copy began; what the old
	// programs learned from then on is Keep's to carry over.
	since uint64
	// What the datapath was: given back by Undo, closed by Keep.
	spec    *ebpf.CollectionSpec
	refresh time.Duration
	progs   map[stage]progSet
	tbl     *fdbTable
	ended   bool
	// Carried counts the addresses Keep carried over, for the log and tests.
	Carried int
}

// Resize loads the programs for sizes s. The table never shrinks: a smaller
// FDBCapacity than the loaded one keeps the loaded one (what the table holds
// must fit). A zero Refresh keeps the loaded one. On an error nothing has
// changed.
func (d *Datapath) Resize(s Sizes) (*Resizing, error) {
	if d.resizing != nil {
		return nil, errors.New("resize the datapath: the last resize has not ended")
	}
	cur := d.Sizes()
	s.FDBCapacity = max(s.FDBCapacity, cur.FDBCapacity)
	if s.Refresh <= 0 {
		s.Refresh = cur.Refresh
	}
	spec := d.spec.Copy()
	spec.Maps[tbpf.TrestleMapFdb].MaxEntries = s.FDBCapacity
	if err := setRefresh(spec, s.Refresh); err != nil {
		return nil, err
	}
	r := &Resizing{d: d, since: Now(), spec: d.spec, refresh: d.refresh, progs: d.progs}
	nt, err := copyTable(spec, d.tbl)
	if err != nil {
		return nil, err
	}
	r.tbl = d.setTable(nt, false)
	d.spec, d.refresh, d.progs = spec, s.Refresh, map[stage]progSet{}
	for name, m := range nt.maps() {
		d.maps[name] = m
	}
	d.resizing = r
	// The new table counts what it learns from 0: reserves counted in
	// the old one's go (fair.go).
	err = d.dropReserves()
	if err == nil {
		if err = d.loadModes(d.stage, r.progs[d.stage].modes()); err != nil {
			err = fmt.Errorf("load the programs for %s: %w", s, err)
		}
	}
	if err == nil && d.pin != nil {
		err = d.pin.pinMaps(nt.maps())
	}
	if err != nil {
		if uerr := r.Undo(); uerr != nil {
			err = errors.Join(err, fmt.Errorf("go back to the loaded table: %w", uerr))
		}
		return nil, err
	}
	return r, nil
}

// copyTable makes the maps of a table of spec's sizes and copies old into
// them, with address counts made from the learned entries it copied.
func copyTable(spec *ebpf.CollectionSpec, old *fdbTable) (*fdbTable, error) {
	t := &fdbTable{}
	for _, f := range []struct {
		name string
		m    **ebpf.Map
	}{
		{tbpf.TrestleMapFdb, &t.fdb}, {tbpf.TrestleMapPortMacs, &t.portMacs}, {tbpf.TrestleMapPortMacsDel, &t.portMacsDel},
		{tbpf.TrestleMapBridgeMacs, &t.bridgeMacs}, {tbpf.TrestleMapBridgeMacsDel, &t.bridgeMacsDel},
	} {
		ms := spec.Maps[f.name].Copy()
		ms.Pinning = ebpf.PinNone
		m, err := ebpf.NewMap(ms)
		if err != nil {
			t.close()
			if f.name == tbpf.TrestleMapFdb {
				return nil, fmt.Errorf("create a learning table of %d entries: %w", ms.MaxEntries, err)
			}
			return nil, fmt.Errorf("create map %s: %w", f.name, err)
		}
		*f.m = m
	}
	// The new table's counts start at zero on the datapath's side (*_macs):
	// the control plane's side holds what was copied, as a negative count
	// of deletions, so that each count is the entries the table holds.
	counts := tableCounts{}
	err := batches(old.fdb, func(keys []tbpf.FDBKey, vals []tbpf.FDBVal) error {
		if _, err := t.fdb.BatchUpdate(keys, vals, nil); err != nil {
			return fmt.Errorf("write %d entries: %w", len(keys), err)
		}
		for i := range keys {
			counts.add(keys[i], vals[i])
		}
		return nil
	})
	if err != nil {
		t.close()
		return nil, fmt.Errorf("copy the learning table: %w", err)
	}
	if err := counts.write(t); err != nil {
		t.close()
		return nil, fmt.Errorf("copy the learning table: %w", err)
	}
	return t, nil
}

// tableCounts are learned entries by port slot and by bridge.
type tableCounts struct{ ports, bridges map[uint32]int32 }

func (c *tableCounts) add(k tbpf.FDBKey, v tbpf.FDBVal) {
	if v.Flags&tbpf.FDBStatic != 0 {
		return // statics are not counted (bpf/lib/maps.h)
	}
	if c.ports == nil {
		c.ports, c.bridges = map[uint32]int32{}, map[uint32]int32{}
	}
	c.ports[uint32(v.Slot)]++
	c.bridges[uint32(k.Bridge)]++
}

// write adds the entries counted to t's counts, on the control plane's side.
func (c *tableCounts) write(t *fdbTable) error {
	for idx, n := range c.ports {
		if err := addCountN(t.portMacsDel, idx, -n); err != nil {
			return fmt.Errorf("count the addresses of slot %d: %w", idx, err)
		}
	}
	for idx, n := range c.bridges {
		if err := addCountN(t.bridgeMacsDel, idx, -n); err != nil {
			return fmt.Errorf("count the addresses of bridge %d: %w", idx, err)
		}
	}
	return nil
}

// Keep ends a resize whose attachments the caller has all moved: the old
// programs and table go, once what they learned since the copy is carried
// over. An error is what could not be carried over (its addresses are
// learned again); the resize has ended all the same.
func (r *Resizing) Keep() error {
	if r.ended {
		return nil
	}
	d := r.d
	// No old program runs once the programs running now have finished:
	// the old table is then still.
	err := d.WaitGrace()
	if err == nil {
		r.Carried, err = d.carryOver(r.tbl, r.since)
	}
	// A memo an old program made stands for its table, not this one.
	err = errors.Join(err, d.voidAllMemos())
	r.release()
	d.log("resize done: the old programs and table closed", "addresses_carried_over", r.Carried)
	return err
}

// carryOver puts into the table the addresses old learned since (those
// learned or refreshed since; a refreshed one is in the table already), each
// where old has it, unless the table has the address (a new program learned
// it, or it was copied). It says how many it put, and counts them.
func (d *Datapath) carryOver(old *fdbTable, since uint64) (int, error) {
	t, done := d.use()
	defer done()
	counts := tableCounts{}
	put := 0
	var errs []error
	err := batches(old.fdb, func(keys []tbpf.FDBKey, vals []tbpf.FDBVal) error {
		for i := range keys {
			k, v := keys[i], vals[i]
			if v.Flags&tbpf.FDBStatic != 0 || v.SeenNs < since {
				continue
			}
			if err := t.fdb.Update(&k, &v, ebpf.UpdateNoExist); err != nil {
				if !errors.Is(err, ebpf.ErrKeyExist) && len(errs) == 0 {
					errs = append(errs, fmt.Errorf("put an address into the new table: %w", err))
				}
				continue
			}
			counts.add(k, v)
			put++
		}
		return nil
	})
	errs = append(errs, err)
	errs = append(errs, counts.write(t))
	if err := errors.Join(errs...); err != nil {
		return put, fmt.Errorf("carry over what the old programs learned: %w", err)
	}
	return put, nil
}

// Undo goes back to the programs and table of before the resize; the
// caller moves the attachments back to them (Upgrade).
func (r *Resizing) Undo() error {
	if r.ended {
		return nil
	}
	d := r.d
	cur := d.progs
	nt := d.setTable(r.tbl, false)
	d.spec, d.refresh, d.progs = r.spec, r.refresh, r.progs
	for name, m := range r.tbl.maps() {
		d.maps[name] = m
	}
	errs := []error{d.dropReserves()} // counted in the new table's learns (fair.go)
	if d.pin != nil {
		errs = append(errs, d.pin.pinMaps(r.tbl.maps()))
	}
	// The build the attachments go back to must be there (a stage may
	// have been switched on the new programs meanwhile), in the modes
	// they run.
	errs = append(errs, d.loadModes(d.stage, cur[d.stage].modes()))
	for _, s := range cur {
		s.close()
	}
	d.retire(nt)
	r.ended, d.resizing = true, nil
	return errors.Join(errs...)
}

// release closes the old programs and table.
func (r *Resizing) release() {
	if r.ended {
		return
	}
	for _, s := range r.progs {
		s.close()
	}
	r.d.retire(r.tbl)
	r.ended, r.d.resizing = true, nil
}

// setRefresh sets the entry points' refresh interval (0: the object's).
func setRefresh(spec *ebpf.CollectionSpec, r time.Duration) error {
	if r <= 0 {
		return nil
	}
	if err := spec.Variables[tbpf.TrestleVarRefreshNs].Set(uint64(r.Nanoseconds())); err != nil {
		return fmt.Errorf("set refresh interval: %w", err)
	}
	return nil
}

// refreshOf is the refresh interval spec's programs are loaded with.
func refreshOf(spec *ebpf.CollectionSpec) time.Duration {
	var ns uint64
	if v := spec.Variables[tbpf.TrestleVarRefreshNs]; v != nil && v.Get(&ns) == nil {
		return time.Duration(ns)
	}
	return 0
}

// voidAllMemos voids every CPU's memos (bpf/lib/memo.h, lib/fdb.h).
func (d *Datapath) voidAllMemos() error {
	err := d.bumpGeneration()
	d.configChanged(&err)
	return err
}
