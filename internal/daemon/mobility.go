package daemon

import (
	"fmt"
	"net"
	"time"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// MAC mobility (docs/switching.md, "MAC mobility"): a station moves now
// and then (a VM migrates, a laptop changes its dock); an address that
// moves again and again is a tenant taking another's address, or a loop.
// The daemon counts each address's moves as the datapath reports them
// (the event ring's TR_EVENT_MOVE: between local ports, and from the
// fabric to a port) and as the overlay makes them (zebra's word that a
// local address is remote now moves it onto the overlay port: putRemote),
// and one that moves more than the
// bridge's mac_move_limit times within mac_move_window is frozen: written
// as a static entry on the port it was on before the moves began, so that
// frames with it as source from any other port are dropped (src_static)
// and the datapath sends its traffic there. It is reported (event
// mac_frozen; `fdb show` marks it frozen) and released when the window has
// passed again (mac_frozen_end) or by `trestle fdb del`.
//
// The port it was on is the first move's origin, not the last move's
// destination: a tenant who takes a station's address moves it first away
// from the station's port. That may be an overlay port: the address was a
// remote station's, and a tenant here keeps taking it. It is frozen there,
// a static entry of the overlay port: the tenant's frames with it are
// dropped here (so this host stops advertising it, and the fabric stays
// with the station's host), its traffic goes into the fabric to the VTEP
// zebra names, and it is never advertised (it is not local). A patch port
// holds no entry: nothing is frozen there. A freeze lasts across reloads,
// not across a restart of the daemon, as a loop's block.
//
// Moves the ring had no room for (a storm) are not counted: an address in a
// storm reaches the limit all the same.

// maxMoveCounts bounds the addresses whose moves are counted at once: a
// flood of moving sources costs at most this many records (a few MB).
const maxMoveCounts = 65536

// moveCount is an address's moves in its window.
type moveCount struct {
	start time.Time // the window's start: its first move
	n     int
	home  uint16 // the slot it was on before the first move
	// done: frozen, or found to be no port's to freeze, in this window;
	// tried: when a freeze the table would not take was last tried.
	done  bool
	tried time.Time
}

// freezeRetry is how soon a freeze the table would not take is tried
// again: a storm's moves come thousands a second.
const freezeRetry = 100 * time.Millisecond

// frozenEntry is a frozen address: where it is held (Static), until when,
// and after how many moves.
type frozenEntry struct {
	config.Static
	until time.Time
	moves int
}

// countMove counts a move of an address, and freezes it past its bridge's
// limit. From the event loop.
func (d *Daemon) countMove(m datapath.Move, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.countMoveLocked(m, now)
}

// countMoveLocked is countMove with d.mu held: the overlay's moves of a
// local address onto the fabric (putRemote), which the control plane makes
// and no ring reports.
func (d *Daemon) countMoveLocked(m datapath.Move, now time.Time) {
	b := d.bridgeByID(m.Bridge)
	if b == nil || d.cfg == nil || d.closed || b.cfg.MACMoveLimit == 0 || len(m.MAC) != 6 {
		return
	}
	k := moveKeyOf(m)
	c := d.moveCounts[k]
	if c == nil || now.Sub(c.start) > b.cfg.MACMoveWindow {
		if c == nil && len(d.moveCounts) >= maxMoveCounts && !d.pruneMoveCounts(now) {
			return // as many addresses moving at once as counted: this one is not
		}
		c = &moveCount{start: now, home: m.FromSlot}
		d.moveCounts[k] = c
	}
	if c.n++; c.n <= b.cfg.MACMoveLimit || c.done || now.Sub(c.tried) < freezeRetry {
		return
	}
	c.tried = now
	// Not done when the table would not take the entry: in a storm the
	// datapath learns the address again between the delete and the write
	// of AddFDB's every try. The next move tries again, from the same
	// place.
	c.done = d.freeze(b, m.MAC, m.VLAN, c, now)
}

// pruneMoveCounts forgets the counts whose window has passed; it says
// whether that made room. Called with d.mu held.
func (d *Daemon) pruneMoveCounts(now time.Time) bool {
	for k, c := range d.moveCounts {
		b := d.bridgeByID(k.bridge)
		if b == nil || now.Sub(c.start) > b.cfg.MACMoveWindow {
			delete(d.moveCounts, k)
		}
	}
	return len(d.moveCounts) < maxMoveCounts
}

// freeze holds mac on the port it was on before its moves (c.home), as a
// static entry, for the bridge's window. It says whether that is settled
// for the window: frozen, or no port's to freeze; false: try again. Called
// with d.mu held.
func (d *Daemon) freeze(b *bridgeState, mac net.HardwareAddr, vlan uint16, c *moveCount, now time.Time) bool {
	st := config.Static{MAC: append(net.HardwareAddr(nil), mac...), VLAN: vlan}
	k := staticKey(st)
	if _, ok := b.frozen[k]; ok {
		return true
	}
	if _, ok := b.written[k]; ok {
		return true // a static entry already: it does not move
	}
	p := b.portBySlot(c.home)
	if p == nil || p.mode == "" || p.ifindex <= 0 || p.blocked != "" || p.cfg.IsPatch() || p.span() != nil {
		d.log.Info("address moved past mac_move_limit, not frozen: it came from no port an entry can be held on",
			"bridge", b.cfg.Name, "mac", st.MAC.String(), "vlan", vlan, "moves", c.n, "within", b.cfg.MACMoveWindow)
		return true
	}
	st.Port = p.name()
	e := datapath.FDBEntry{Bridge: b.id, VLAN: vlan, MAC: st.MAC, Ifindex: uint32(p.ifindex), Slot: p.slot, Static: true}
	if err := d.table.AddFDB(e); err != nil {
		d.log.Debug("freeze an address that moved past mac_move_limit: tried again at its next move", "bridge", b.cfg.Name, "mac", st.MAC.String(), "vlan", vlan, "port", p.name(), "err", err)
		return false
	}
	f := frozenEntry{Static: st, until: now.Add(b.cfg.MACMoveWindow), moves: c.n}
	b.frozen[k] = f
	b.written[k] = staticEntry{Static: st, Ifindex: p.ifindex, Slot: p.slot}
	v := vlan
	d.events.emit(ctl.Event{Event: ctl.EventMACFrozen, Bridge: b.cfg.Name, Port: p.name(), MAC: st.MAC.String(), VLAN: &v,
		Count: uint64(c.n), Seconds: b.cfg.MACMoveWindow.Seconds(), Limit: b.cfg.MACMoveLimit,
		Reason: fmt.Sprintf("moved %d times within %s (mac_move_limit %d): held on %s until %s; 'trestle fdb del %s %s' releases it",
			c.n, b.cfg.MACMoveWindow, b.cfg.MACMoveLimit, p.name(), f.until.Format(time.RFC3339), b.cfg.Name, st.MAC)})
	d.nudgeOverlay() // advertised as static, if an overlay's
	return true
}

// thawTick releases the frozen addresses whose window has passed: their
// static entry goes, and the next frame learns them where they are. Every
// second, from the event loop.
func (d *Daemon) thawTick(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cfg == nil || d.closed {
		return
	}
	for _, b := range d.bridges {
		for k, f := range b.frozen {
			if now.Before(f.until) {
				continue
			}
			d.thaw(b, k, f)
		}
	}
}

// thaw releases one frozen address. Called with d.mu held.
func (d *Daemon) thaw(b *bridgeState, k string, f frozenEntry) {
	delete(b.frozen, k)
	if w, ok := b.written[k]; ok && !w.User {
		delete(b.written, k)
		if _, err := d.table.DelFDB(b.id, f.VLAN, f.MAC); err != nil {
			d.log.Debug("release a frozen address", "bridge", b.cfg.Name, "mac", f.MAC.String(), "err", err)
		}
	}
	v := f.VLAN
	d.events.emit(ctl.Event{Event: ctl.EventMACFrozenEnd, Bridge: b.cfg.Name, Port: f.Port, MAC: f.MAC.String(), VLAN: &v, Count: uint64(f.moves)})
	d.nudgeOverlay()
}

// keepFrozen carries a bridge's frozen addresses into its next model while
// it still freezes (commitStatics forgets those whose port is gone).
func keepFrozen(old, b *bridgeState) {
	if b.cfg.MACMoveLimit == 0 {
		return
	}
	for k, f := range old.frozen {
		b.frozen[k] = f
	}
}
