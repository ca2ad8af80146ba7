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

// FDB dumps the learning table of every bridge. It reads the table in
// batches, bucket by bucket, which a concurrent learn or delete cannot make
// it read twice or abort; an error is returned, never a partial table.
func (d *Datapath) FDB() ([]FDBEntry, error) {
	now := Now()
	var out []FDBEntry
	const batch = 4096
	keys := make([]tbpf.FDBKey, batch)
	vals := make([]tbpf.FDBVal, batch)
	cursor := new(ebpf.MapBatchCursor)
	for {
		n, err := d.objs.Fdb.BatchLookup(cursor, keys, vals, nil)
		for i := 0; i < n; i++ {
			out = append(out, entryOf(keys[i], vals[i], now))
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("dump fdb: %w", err)
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

// AddFDB writes a static entry (e.Static must be set; e.User marks it as
// the CLI's), replacing any learned one for the same address, whose count it
// gives back.
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
	var old tbpf.FDBVal
	hadLearned := d.objs.Fdb.Lookup(&k, &old) == nil && old.Flags&tbpf.FDBStatic == 0
	if err := d.objs.Fdb.Put(&k, &v); err != nil {
		return fmt.Errorf("add fdb entry %s vlan %d: %w", e.MAC, e.VLAN, err)
	}
	// XXX: a move between the lookup and the write (the datapath gives the
	// count to the new port) leaves one count on the wrong port until the
	// port's entries are gone. Static writes are rare, moves of the very
	// address rarer.
	if hadLearned {
		if err := d.countDeleted(old.Slot, e.Bridge); err != nil {
			return err
		}
	}
	// It may replace a learned entry on another port that a CPU's memo holds.
	return d.bumpGeneration()
}

// DelFDB deletes an entry and returns what it was; ErrKeyNotExist when there
// is none.
func (d *Datapath) DelFDB(bridge, vlan uint16, mac net.HardwareAddr) (FDBEntry, error) {
	k, err := fdbKey(bridge, vlan, mac)
	if err != nil {
		return FDBEntry{}, err
	}
	var v tbpf.FDBVal
	if err := d.objs.Fdb.LookupAndDelete(&k, &v); err != nil {
		return FDBEntry{}, fmt.Errorf("delete fdb entry %s vlan %d: %w", mac, vlan, err)
	}
	e := entryOf(k, v, Now())
	if !e.Static {
		if err := d.countDeleted(e.Slot, e.Bridge); err != nil {
			return e, err
		}
	}
	return e, d.bumpGeneration()
}

// AgeOut deletes the learned entry for mac if it is still idle for longer
// than aging (it may have been refreshed since the dump that named it), and
// says whether it did.
func (d *Datapath) AgeOut(bridge, vlan uint16, mac net.HardwareAddr, aging time.Duration) (bool, error) {
	k, err := fdbKey(bridge, vlan, mac)
	if err != nil {
		return false, err
	}
	var v tbpf.FDBVal
	if err := d.objs.Fdb.Lookup(&k, &v); errors.Is(err, ebpf.ErrKeyNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("age out %s vlan %d: %w", mac, vlan, err)
	}
	if v.Flags&tbpf.FDBStatic != 0 || Now()-v.SeenNs <= uint64(aging.Nanoseconds()) {
		return false, nil
	}
	if _, err := d.DelFDB(bridge, vlan, mac); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// countDeleted counts one learned entry of slot and bridge as deleted.
func (d *Datapath) countDeleted(slot, bridge uint16) error {
	if err := addCount(d.objs.PortMacsDel, uint32(slot)); err != nil {
		return fmt.Errorf("count deleted address of slot %d: %w", slot, err)
	}
	if err := addCount(d.objs.BridgeMacsDel, uint32(bridge)); err != nil {
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
