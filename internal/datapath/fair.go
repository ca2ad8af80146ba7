package datapath

import (
	"fmt"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Marks are a bridge's marks of fairness (docs/security.md, "A table one
// port cannot starve"), as the datapath computes them (bpf/lib/fdb.h,
// tr_table_refuses) and the daemon keeps them (internal/daemon/fair.go).
// At High learned addresses or more, a port that holds Fair or more learns
// a new source only within the reserve the daemon last gave it
// (SetReserve). The room from High up to the table's size is for the ports
// under their share.
type Marks struct {
	High    int // the high-water mark: max_entries less a TR_FDB_HEADROOM-th of it, rounded up
	Fair    int // a port's fair share: max_entries / the bridge's ports, at least 1
	Reserve int // a port's reserve at the mark, a look: half the room above it over the ports, at least 1
}

// TableMarks are the marks of a bridge of maxEntries learned addresses over
// nports ports. The reserves of all ports together take at most half the
// room above the mark between two of the daemon's looks (where that room
// is at least 2 a port), so a port under its share always finds the other
// half.
func TableMarks(maxEntries uint32, nports int) Marks {
	headroom := (maxEntries + uint32(tbpf.FDBHeadroom) - 1) / uint32(tbpf.FDBHeadroom)
	f := maxEntries
	n := uint32(max(nports, 1))
	if nports > 0 {
		f = maxEntries / n
	}
	return Marks{High: int(maxEntries - headroom), Fair: int(max(f, 1)), Reserve: int(max(headroom/(2*n), 1))}
}

// SetReserve lets the port in slot learn n more new sources, from now,
// while its bridge is at or past its high-water mark and the port at or
// over its fair share; 0: none. A reserve replaces the one before, used or
// not. It is counted in what the datapath has learned on the port
// (port_macs), which no deletion lowers, so entries deleted meanwhile (the
// daemon's evictions, aging) give the port no more. Only the daemon gives
// reserves.
func (d *Datapath) SetReserve(slot uint16, n int) error {
	if n < 0 || n > 1<<30 {
		return fmt.Errorf("reserve of slot %d: %d is out of range", slot, n)
	}
	var hold uint32
	if n > 0 {
		t, done := d.use()
		var learned int32
		err := t.portMacs.Lookup(uint32(slot), &learned)
		done()
		if err != nil {
			return fmt.Errorf("read what slot %d learned: %w", slot, err)
		}
		// The sum wraps (the datapath compares a difference); 0 is none.
		if hold = uint32(learned) + uint32(n); hold == 0 {
			hold = 1
		}
	}
	if err := d.objs.PortHold.Put(uint32(slot), hold); err != nil {
		return fmt.Errorf("write the reserve of slot %d: %w", slot, err)
	}
	return nil
}

// dropReserves takes every port's reserve back: a new table's learn counts
// start again from 0 (resize.go), and a hold counted in the old table's
// would let a port learn without bound at the mark. The daemon gives them
// again at its next look.
func (d *Datapath) dropReserves() error {
	keys := make([]uint32, tbpf.MaxPorts)
	zeros := make([]uint32, tbpf.MaxPorts)
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := d.objs.PortHold.BatchUpdate(keys, zeros, nil); err != nil {
		return fmt.Errorf("take the ports' reserves back: %w", err)
	}
	return nil
}
