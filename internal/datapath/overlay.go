package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// PutLearned writes a learned (not static) entry on the control plane's
// word: a remote address of an overlay port (issue 30), which the
// datapath then moves like any learned entry when the station shows up on
// another port. It replaces a learned entry for the address, and refuses to
// replace a static one (statics never move). Its count is the datapath's
// way: the address counts of its port and bridge grow by one, taken off
// the control plane's deletions (*_macs_del), the one count the control
// plane writes (bpf/lib/maps.h). It returns the entry it replaced, if
// any: where the address was (a station the fabric took from a local
// port moved, and the daemon counts the move as the datapath's own).
func (d *Datapath) PutLearned(e FDBEntry) (FDBEntry, bool, error) {
	var prev FDBEntry
	replaced := false
	k, err := fdbKey(e.Bridge, e.VLAN, e.MAC)
	if err != nil {
		return prev, false, err
	}
	if e.Static {
		return prev, false, fmt.Errorf("put learned entry %s vlan %d: a static entry is AddFDB's", e.MAC, e.VLAN)
	}
	t, done := d.use()
	defer done()
	var cur tbpf.FDBVal
	if err := t.fdb.Lookup(&k, &cur); err == nil && cur.Flags&tbpf.FDBStatic != 0 {
		return prev, false, fmt.Errorf("put learned entry %s vlan %d: %w", e.MAC, e.VLAN, ErrStatic)
	}
	v := tbpf.FDBVal{Ifindex: e.Ifindex, Slot: e.Slot, SeenNs: Now()}
	for attempt := 0; ; attempt++ {
		old, had, err := t.delEntry(k)
		if err != nil {
			return prev, false, fmt.Errorf("put learned entry %s vlan %d: %w", e.MAC, e.VLAN, err)
		}
		if had && !replaced {
			// The first try's: where it was before the control plane's
			// word (a later try's is the datapath's learn in between).
			prev, replaced = old, true
		}
		if had && old.Static {
			// Added in between: put back, and refused.
			_ = t.fdb.Update(&k, &tbpf.FDBVal{Ifindex: old.Ifindex, Slot: old.Slot, SeenNs: old.SeenNs, Flags: flagsOf(old)}, ebpf.UpdateNoExist)
			return FDBEntry{}, false, fmt.Errorf("put learned entry %s vlan %d: %w", e.MAC, e.VLAN, ErrStatic)
		}
		err = t.fdb.Update(&k, &v, ebpf.UpdateNoExist)
		if err == nil {
			break
		}
		if !errors.Is(err, ebpf.ErrKeyExist) || attempt == 8 {
			return prev, replaced, fmt.Errorf("put learned entry %s vlan %d: %w", e.MAC, e.VLAN, err)
		}
	}
	if err := addCountN(t.portMacsDel, uint32(e.Slot), -1); err != nil {
		return prev, replaced, fmt.Errorf("count address of slot %d: %w", e.Slot, err)
	}
	if err := addCountN(t.bridgeMacsDel, uint32(e.Bridge), -1); err != nil {
		return prev, replaced, fmt.Errorf("count address of bridge %d: %w", e.Bridge, err)
	}
	// It may replace an entry on another port that a CPU's memo holds.
	return prev, replaced, d.bumpGeneration()
}

// ErrStatic: a static entry holds the address.
var ErrStatic = errors.New("a static entry holds the address")

func flagsOf(e FDBEntry) uint16 {
	var f uint16
	if e.Static {
		f |= tbpf.FDBStatic
	}
	if e.User {
		f |= tbpf.FDBUser
	}
	return f
}

func addCountN(m *ebpf.Map, idx uint32, n int32) error {
	var c int32
	if err := m.Lookup(idx, &c); err != nil {
		return err
	}
	return m.Put(idx, c+n)
}
