package datapath

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// The learning table's address counts have two writers and one count each
// (bpf/lib/maps.h): the datapath adds to *_macs when it learns and moves,
// the control plane adds to *_macs_del when it deletes a learned entry. Only
// the control plane writes *_macs_del, so reading and writing it back loses
// nothing, and the deletions it counts are taken from the value the kernel
// deleted (LookupAndDelete), so a count follows the entry wherever it was at
// that moment.

// FDBChunk is how many entries WalkFDB hands over at a time: what a reader
// of the table holds of it, whatever the table's size.
const FDBChunk = 1024

// fdbTable is the learning table with its address counts: one state between
// them (pin.go's groups), which a resize replaces whole (resize.go). Readers
// that run beside the daemon's writes (a walk of `fdb show`, a metrics
// scrape) take it with use and give it back with the func use returns: a
// table replaced meanwhile is closed by the last of them, so a walk that
// began on it ends on it (it then reads the table as it was when the new one
// took over) and never meets a closed map.
type fdbTable struct {
	fdb, portMacs, portMacsDel, bridgeMacs, bridgeMacsDel *ebpf.Map
	users                                                 int
	retired                                               bool
}

// fdbGroup names the maps of an fdbTable, as the object does.
var fdbGroup = []string{tbpf.TrestleMapFdb, tbpf.TrestleMapPortMacs, tbpf.TrestleMapPortMacsDel, tbpf.TrestleMapBridgeMacs, tbpf.TrestleMapBridgeMacsDel}

// maps are the table's maps by their names in the object.
func (t *fdbTable) maps() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		tbpf.TrestleMapFdb: t.fdb, tbpf.TrestleMapPortMacs: t.portMacs, tbpf.TrestleMapPortMacsDel: t.portMacsDel,
		tbpf.TrestleMapBridgeMacs: t.bridgeMacs, tbpf.TrestleMapBridgeMacsDel: t.bridgeMacsDel,
	}
}

func (t *fdbTable) close() {
	for _, m := range t.maps() {
		m.Close()
	}
}

// use is the table now, held until done is called.
func (d *Datapath) use() (t *fdbTable, done func()) {
	d.tmu.Lock()
	t = d.tbl
	t.users++
	d.tmu.Unlock()
	return t, func() {
		d.tmu.Lock()
		t.users--
		if t.retired && t.users == 0 {
			t.close()
		}
		d.tmu.Unlock()
	}
}

// setTable makes t the table; the one it replaces is closed once no reader
// holds it, when retire is set (else the caller keeps it, to go back to).
func (d *Datapath) setTable(t *fdbTable, retire bool) *fdbTable {
	d.tmu.Lock()
	defer d.tmu.Unlock()
	old := d.tbl
	d.tbl = t
	if retire && old != nil {
		d.retireLocked(old)
	}
	return old
}

func (d *Datapath) retire(t *fdbTable) {
	d.tmu.Lock()
	defer d.tmu.Unlock()
	d.retireLocked(t)
}

func (d *Datapath) retireLocked(t *fdbTable) {
	t.retired = true
	if t.users == 0 {
		t.close()
	}
}

// FDB dumps the learning table of every bridge (WalkFDB, gathered), for
// tests; the daemon never holds the table whole: it walks it.
func (d *Datapath) FDB() ([]FDBEntry, error) {
	var out []FDBEntry
	err := d.WalkFDB(func(es []FDBEntry) error {
		out = append(out, es...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WalkFDB reads the learning table of every bridge in batches of at most
// FDBChunk entries, bucket by bucket, and hands each to fn as it is read:
// fn's slice is reused for the next batch, so fn copies what it keeps (an
// entry's MAC is its own, not reused). A
// concurrent learn or delete (fn's own deletes too: a batch's buckets are
// behind the cursor) cannot make it read an entry twice or abort. An error
// of the dump or of fn ends the walk and is returned; what fn was handed
// before it is then a part of the table. A walk that a resize overtakes
// reads on the table it began on (resize.go).
func (d *Datapath) WalkFDB(fn func([]FDBEntry) error) error {
	t, done := d.use()
	defer done()
	out := make([]FDBEntry, 0, FDBChunk)
	return batches(t.fdb, func(keys []tbpf.FDBKey, vals []tbpf.FDBVal) error {
		now := Now()
		out = out[:0]
		for i := range keys {
			out = append(out, entryOf(keys[i], vals[i], now))
		}
		return fn(out)
	})
}

// batches reads a learning table in batches of at most FDBChunk entries,
// bucket by bucket, and hands each to fn (whose slices are reused for the
// next batch). An error of the dump or of fn ends it.
func batches(m *ebpf.Map, fn func([]tbpf.FDBKey, []tbpf.FDBVal) error) error {
	keys := make([]tbpf.FDBKey, FDBChunk)
	vals := make([]tbpf.FDBVal, FDBChunk)
	cursor := new(ebpf.MapBatchCursor)
	for {
		n, err := m.BatchLookup(cursor, keys, vals, nil)
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("dump fdb: %w", err)
		}
		if n > 0 {
			if ferr := fn(keys[:n], vals[:n]); ferr != nil {
				return ferr
			}
		}
		if err != nil {
			return nil // ErrKeyNotExist: the last batch
		}
	}
}

func entryOf(k tbpf.FDBKey, v tbpf.FDBVal, now uint64) FDBEntry {
	e := FDBEntry{
		Bridge:  k.Bridge,
		VLAN:    k.Vlan,
		MAC:     append(net.HardwareAddr(nil), k.Mac[:]...),
		Ifindex: v.Ifindex,
		Slot:    v.Slot,
		Static:  v.Flags&tbpf.FDBStatic != 0,
		User:    v.Flags&tbpf.FDBUser != 0,
		SeenNs:  v.SeenNs,
	}
	if now > v.SeenNs {
		e.Age = time.Duration(now - v.SeenNs)
	}
	return e
}

func fdbKey(bridge, vlan uint16, mac net.HardwareAddr) (tbpf.FDBKey, error) {
	k := tbpf.FDBKey{Bridge: bridge, Vlan: vlan}
	if len(mac) != 6 {
		return k, fmt.Errorf("mac %q is not 6 bytes", mac)
	}
	copy(k.Mac[:], mac)
	return k, nil
}

// LookupFDB is the entry of an address, if the table has one.
func (d *Datapath) LookupFDB(bridge, vlan uint16, mac net.HardwareAddr) (FDBEntry, bool, error) {
	k, err := fdbKey(bridge, vlan, mac)
	if err != nil {
		return FDBEntry{}, false, err
	}
	t, done := d.use()
	defer done()
	var v tbpf.FDBVal
	if err := t.fdb.Lookup(&k, &v); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return FDBEntry{}, false, nil
		}
		return FDBEntry{}, false, fmt.Errorf("look up fdb entry %s vlan %d: %w", mac, vlan, err)
	}
	return entryOf(k, v, Now()), true, nil
}

// AddFDB writes a static entry (e.Static must be set; e.User marks it as
// the CLI's), replacing any learned one for the same address, whose count it
// gives back. The learned entry is taken out (LookupAndDelete, so its count
// goes where it was at that moment) and the static one put in only where
// there is none, so that one the datapath learns in between is taken out too.
func (d *Datapath) AddFDB(e FDBEntry) error {
	k, err := fdbKey(e.Bridge, e.VLAN, e.MAC)
	if err != nil {
		return err
	}
	if !e.Static {
		return fmt.Errorf("add fdb entry %s vlan %d: only static entries are written by the control plane", e.MAC, e.VLAN)
	}
	v := tbpf.FDBVal{Ifindex: e.Ifindex, Slot: e.Slot, SeenNs: Now(), Flags: tbpf.FDBStatic}
	if e.User {
		v.Flags |= tbpf.FDBUser
	}
	t, done := d.use()
	defer done()
	for attempt := 0; ; attempt++ {
		if _, _, err := t.delEntry(k); err != nil {
			return fmt.Errorf("add fdb entry %s vlan %d: %w", e.MAC, e.VLAN, err)
		}
		err := t.fdb.Update(&k, &v, ebpf.UpdateNoExist)
		if err == nil {
			break
		}
		if !errors.Is(err, ebpf.ErrKeyExist) || attempt == 8 {
			return fmt.Errorf("add fdb entry %s vlan %d: %w", e.MAC, e.VLAN, err)
		}
	}
	// It may replace a learned entry on another port that a CPU's memo holds.
	return d.bumpGeneration()
}

// delEntry takes one entry out and counts a learned one as deleted where it
// was; ok is false when there was none.
func (t *fdbTable) delEntry(k tbpf.FDBKey) (FDBEntry, bool, error) {
	var v tbpf.FDBVal
	if err := t.fdb.LookupAndDelete(&k, &v); errors.Is(err, ebpf.ErrKeyNotExist) {
		return FDBEntry{}, false, nil
	} else if err != nil {
		return FDBEntry{}, false, err
	}
	e := entryOf(k, v, Now())
	if !e.Static {
		if err := t.countDeleted(e.Slot, e.Bridge); err != nil {
			return e, true, err
		}
	}
	return e, true, nil
}

// DelFDB deletes an entry and returns what it was; ErrKeyNotExist when there
// is none.
func (d *Datapath) DelFDB(bridge, vlan uint16, mac net.HardwareAddr) (FDBEntry, error) {
	k, err := fdbKey(bridge, vlan, mac)
	if err != nil {
		return FDBEntry{}, err
	}
	t, done := d.use()
	defer done()
	e, ok, err := t.delEntry(k)
	if err != nil {
		return e, fmt.Errorf("delete fdb entry %s vlan %d: %w", mac, vlan, err)
	}
	if !ok {
		return e, fmt.Errorf("delete fdb entry %s vlan %d: %w", mac, vlan, ebpf.ErrKeyNotExist)
	}
	return e, d.bumpGeneration()
}

// DelFDBs deletes entries (those already gone are no error) and says how
// many it deleted. The memos are voided once, at the end.
func (d *Datapath) DelFDBs(es []FDBEntry) (int, error) {
	gone, err := d.delFDBs(es)
	return len(gone), err
}

// delFDBs deletes es and returns those that were there.
func (d *Datapath) delFDBs(es []FDBEntry) ([]FDBEntry, error) {
	t, done := d.use()
	defer done()
	var gone []FDBEntry
	var errs []error
	for _, e := range es {
		k, err := fdbKey(e.Bridge, e.VLAN, e.MAC)
		if err == nil {
			var ok bool
			if _, ok, err = t.delEntry(k); ok {
				gone = append(gone, e)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("delete fdb entry %s vlan %d: %w", e.MAC, e.VLAN, err))
		}
	}
	if len(gone) > 0 {
		errs = append(errs, d.bumpGeneration())
	}
	return gone, errors.Join(errs...)
}

// AgeOut deletes the learned entries of es that are still idle for longer
// than aging says for their bridge (they may have been refreshed since the
// dump that named them), and returns those it deleted.
func (d *Datapath) AgeOut(es []FDBEntry, aging func(bridge uint16) time.Duration) ([]FDBEntry, error) {
	t, done := d.use()
	defer done()
	var idle []FDBEntry
	for _, e := range es {
		k, err := fdbKey(e.Bridge, e.VLAN, e.MAC)
		if err != nil {
			return nil, err
		}
		var v tbpf.FDBVal
		if err := t.fdb.Lookup(&k, &v); errors.Is(err, ebpf.ErrKeyNotExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("age out %s vlan %d: %w", e.MAC, e.VLAN, err)
		}
		if v.Flags&tbpf.FDBStatic == 0 && Now()-v.SeenNs > uint64(aging(e.Bridge).Nanoseconds()) {
			idle = append(idle, e)
		}
	}
	return d.delFDBs(idle)
}

// countDeleted counts one learned entry of slot and bridge as deleted.
func (t *fdbTable) countDeleted(slot, bridge uint16) error {
	if err := addCount(t.portMacsDel, uint32(slot)); err != nil {
		return fmt.Errorf("count deleted address of slot %d: %w", slot, err)
	}
	if err := addCount(t.bridgeMacsDel, uint32(bridge)); err != nil {
		return fmt.Errorf("count deleted address of bridge %d: %w", bridge, err)
	}
	return nil
}

// addCount adds one to a count only the control plane writes.
func addCount(m *ebpf.Map, idx uint32) error {
	var n int32
	if err := m.Lookup(idx, &n); err != nil {
		return err
	}
	return m.Put(idx, n+1)
}

// The configuration's generation, cfg_gen, is a seqlock's count for the
// decision memo (bpf/lib/memo.h): odd while the control plane writes the
// ports, bridges, patches, mirrors or stage, even when they are whole. A
// memo is made only at an even count and holds only while the count is the
// one it was made at, so every memo is void from a write's start, none is
// made from a half-written configuration, and one made before is void at
// the end. Each method that writes them calls configChanging first and
// defers configChanged. The daemon's writers are serialized (its mutex);
// nested calls are safe: an inner end makes the count even early, and a
// memo made then is void at the outer end, which moves it on again.

// configChanging makes cfg_gen odd, if it is not: no memo is used or made
// until configChanged. A failure is configChanged's to report (it writes
// the count again).
func (d *Datapath) configChanging() {
	var g uint32
	if d.objs.CfgGen.Get(&g) == nil && g&1 == 0 {
		_ = d.objs.CfgGen.Set(g | 1)
	}
}

// configChanged makes cfg_gen even and new, after the last write (and
// after a write that failed half way too). Its own error is returned when
// the method had none.
func (d *Datapath) configChanged(err *error) {
	var g uint32
	e := d.objs.CfgGen.Get(&g)
	if e == nil {
		e = d.objs.CfgGen.Set((g | 1) + 1)
	}
	if e != nil && *err == nil {
		*err = fmt.Errorf("write the configuration's generation: %w", e)
	}
}

// bumpGeneration tells every CPU's learning cache that entries are gone
// (bpf/lib/fdb.h): a source they vouched for must be looked up again.
func (d *Datapath) bumpGeneration() error {
	var g uint32
	if err := d.objs.FdbGen.Get(&g); err != nil {
		return fmt.Errorf("read fdb generation: %w", err)
	}
	// Only the control plane writes fdb_gen (the datapath counts its moves
	// in move_gen), so read-then-write loses nothing.
	if err := d.objs.FdbGen.Set(g + 1); err != nil {
		return fmt.Errorf("write fdb generation: %w", err)
	}
	return nil
}
