package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/overlay"
)

// Overlay ports (issue 30, docs/overlay.md). An overlay port is one more
// port of the desired state: its interface is the vxlan device of its VNI
// (config.OverlayDevice), which the commit makes (with the VNI's bridge
// and advertise port, internal/overlay) before it attaches the port at tc
// like any other; the finalize removes the objects of VNIs no longer
// configured. Beside the reconcile, overlayLoop keeps the table and FRR
// in step:
//
//   - local addresses out: every overlaySync (and at once after a MAC
//     move, a reconcile or an fdb command) one dump of the table gives
//     each overlay port's local addresses (the entries of its bridge and
//     VLAN on its other ports), which the Manager writes on the advertise
//     port or withdraws. The datapath tells no new learn (only moves), so
//     a new station reaches zebra within overlaySync; an aged, flushed or
//     deleted one is withdrawn within it too.
//   - remote addresses in: each remote MAC zebra writes on the vxlan
//     device is put in the table at once (PutLearned: a learned entry of
//     the overlay port, which moves when the station shows up locally, and
//     which the sweep never ages); one zebra deletes is deleted at the next
//     sync, which also puts back remotes the table lost (a flush, an fdb
//     del) and deletes entries of the overlay port that no remote backs.

// overlaySync is how often the table's local addresses are compared with
// what the advertise ports hold: the latency of a new station's route.
const overlaySync = 100 * time.Millisecond

// remotePutter writes a learned entry on the control plane's word
// (datapath.PutLearned); a dataplane without it has no overlay.
type remotePutter interface {
	PutLearned(datapath.FDBEntry) error
}

// overlayState is the daemon's overlay half.
type overlayState struct {
	mgr     *overlay.Manager
	hasAddr func(netip.Addr) (bool, error)
	watch   func(done <-chan struct{}) (<-chan overlay.Neigh, error)
	put     remotePutter // nil: the dataplane cannot hold remote addresses
	nudge   chan struct{}
	// full: overlay ports (by VNI) whose remote addresses did not all
	// fit (their bridge's max_entries, their max_macs), said once until
	// they fit again.
	full map[uint32]bool
}

func newOverlayState(k overlay.Kernel, put remotePutter) *overlayState {
	return &overlayState{mgr: overlay.NewManager(k), hasAddr: overlay.HasAddr, watch: overlay.Watch, put: put, nudge: make(chan struct{}, 1), full: map[uint32]bool{}}
}

// nudgeOverlay asks overlayLoop for a sync now.
func (d *Daemon) nudgeOverlay() {
	select {
	case d.ovl.nudge <- struct{}{}:
	default:
	}
}

// overlayPlan checks what the daemon checks of the overlay before an
// apply: the VTEP is an address of its namespace (FRR would otherwise
// advertise a next hop no packet comes from), and the dataplane can hold
// remote addresses. It returns the VTEP for the commit.
func (d *Daemon) overlayPlan(cfg *config.Config) (netip.Addr, error) {
	if len(cfg.OverlayPorts()) == 0 {
		return netip.Addr{}, nil
	}
	vtep := cfg.Daemon.VTEP
	where := fmt.Sprintf("%s:%d: daemon.vtep", cfg.File, cfg.Daemon.VTEPLine)
	if d.ovl.put == nil {
		return vtep, fmt.Errorf("%s: this dataplane cannot hold an overlay's remote addresses", where)
	}
	ok, err := d.ovl.hasAddr(vtep)
	if err != nil {
		return vtep, fmt.Errorf("%s: %w", where, err)
	}
	if !ok {
		return vtep, fmt.Errorf("%s: %s is not an address of this namespace: give it to an interface (the loopback, say) first", where, vtep)
	}
	return vtep, nil
}

// commitOverlay makes (or takes over) each overlay port's kernel objects,
// so that the ports attach to their vxlan devices; a VNI new to the
// daemon is removed again by a rollback.
func (d *Daemon) commitOverlay(c *change, j *journal) error {
	for _, b := range c.order {
		for _, p := range b.ports {
			if !p.cfg.IsOverlay() {
				continue
			}
			spec := overlay.Spec{VNI: p.cfg.VXLAN, VTEP: c.vtep, MTU: p.cfg.MTU, DstPort: p.cfg.DstPort}
			_, created, err := d.ovl.mgr.Ensure(spec)
			if err != nil {
				return fmt.Errorf("bridge %q: %w", b.cfg.Name, err)
			}
			if created {
				vni := spec.VNI
				j.add(fmt.Sprintf("create overlay VNI %d", vni), func() error { return d.ovl.mgr.Remove(vni) })
				d.log.Info("overlay VNI created", "bridge", b.cfg.Name, "vni", vni, "vtep", c.vtep, "device", p.cfg.Interface)
			}
		}
	}
	return nil
}

// finalizeOverlay removes the objects of the VNIs the model no longer has
// (zebra withdraws their routes), and syncs the rest soon.
func (d *Daemon) finalizeOverlay(c *change) {
	want := map[uint32]bool{}
	for _, b := range c.order {
		for _, p := range b.ports {
			if p.cfg.IsOverlay() {
				want[p.cfg.VXLAN] = true
			}
		}
	}
	for _, vni := range d.ovl.mgr.Held() {
		if want[vni] {
			continue
		}
		if err := d.ovl.mgr.Remove(vni); err != nil {
			d.log.Warn("remove an overlay VNI", "vni", vni, "err", err)
		} else {
			d.log.Info("overlay VNI removed", "vni", vni)
		}
	}
	if len(want) > 0 {
		d.nudgeOverlay()
	}
}

// removeOverlays removes every VNI's objects: a daemon that stops without
// persist withdraws what it advertised.
func (d *Daemon) removeOverlays() error {
	var errs []error
	for _, vni := range d.ovl.mgr.Held() {
		errs = append(errs, d.ovl.mgr.Remove(vni))
	}
	return errors.Join(errs...)
}

// overlayPorts are the model's overlay ports that forward.
func (d *Daemon) overlayPorts() []*portState {
	var out []*portState
	for _, b := range d.bridges {
		for _, p := range b.ports {
			if p.cfg.IsOverlay() && p.forwards() {
				out = append(out, p)
			}
		}
	}
	return out
}

// overlayPortOf is the overlay port of VNI vni that forwards, or nil.
func (d *Daemon) overlayPortOf(vni uint32) *portState {
	for _, p := range d.overlayPorts() {
		if p.cfg.VXLAN == vni {
			return p
		}
	}
	return nil
}

// overlayVLAN is the VLAN of the table an overlay port's addresses are in:
// its own on a VLAN-aware bridge, untagged (0) on another.
func overlayVLAN(p *portState) uint16 {
	if p.bridge.cfg.VLANAware() {
		return p.cfg.VLAN
	}
	return 0
}

// inOverlay says whether entry e is in the broadcast domain of overlay
// port p: its bridge, and its VLAN on a VLAN-aware bridge (a bridge that
// is not VLAN-aware carries any tag across, so every entry of it).
func inOverlay(p *portState, e datapath.FDBEntry) bool {
	return e.Bridge == p.bridge.id && (!p.bridge.cfg.VLANAware() || e.VLAN == p.cfg.VLAN)
}

// syncOverlay compares the table with each overlay port's VNI, from one
// dump: local addresses are written on (or withdrawn from) the advertise
// port, remote ones the table lacks are put back, and entries of the
// overlay port that no remote backs go. es is the table, read before the
// lock was taken (runSync). Called with d.mu held.
func (d *Daemon) syncOverlay(es []datapath.FDBEntry) error {
	ports := d.overlayPorts()
	if len(ports) == 0 {
		return nil
	}
	var errs []error
	for _, p := range ports {
		vni, vid := p.cfg.VXLAN, overlayVLAN(p)
		local := map[[6]byte]bool{}   // MAC -> static, on the other ports
		present := map[[6]byte]bool{} // in the table, in the VLAN remote entries take
		mine := map[[6]byte]datapath.FDBEntry{}
		for _, e := range es {
			if !inOverlay(p, e) {
				continue
			}
			k := overlay.MAC6(e.MAC)
			if e.VLAN == vid {
				present[k] = true
			}
			switch {
			case e.Slot == p.slot:
				if e.VLAN == vid && !e.Static {
					mine[k] = e
				}
			case p.bridge.portBySlot(e.Slot) != nil:
				local[k] = local[k] || e.Static
			}
		}
		if _, _, err := d.ovl.mgr.SyncLocal(vni, local); err != nil {
			errs = append(errs, err)
		}
		// Entries of the overlay port no remote backs go first, so that
		// their room is there for the remotes the table lacks.
		remotes := d.ovl.mgr.Remotes(vni)
		backed := map[[6]byte]bool{}
		for _, r := range remotes {
			backed[overlay.MAC6(r.MAC)] = true
		}
		var gone []datapath.FDBEntry
		for k, e := range mine {
			if !backed[k] {
				gone = append(gone, e)
			}
		}
		if len(gone) > 0 {
			if _, err := d.table.DelFDBs(gone); err != nil {
				errs = append(errs, err)
			}
		}
		room := d.remoteRoom(p)
		skipped := 0
		for _, r := range remotes {
			k := overlay.MAC6(r.MAC)
			if _, ok := mine[k]; ok || present[k] {
				// In the table already, or learned here since:
				// advertised, and zebra decides.
				continue
			}
			if room <= 0 {
				skipped++
				continue
			}
			if err := d.putRemote(p, r.MAC); err != nil {
				errs = append(errs, err)
			} else {
				room--
			}
		}
		switch {
		case skipped > 0 && !d.ovl.full[vni]:
			d.ovl.full[vni] = true
			d.log.Warn("overlay: remote addresses left out of the table: the bridge is at max_entries or the overlay port at max_macs; their frames flood to the VNI's VTEPs", "bridge", p.bridge.cfg.Name, "vni", vni, "left_out", skipped)
		case skipped == 0 && d.ovl.full[vni]:
			delete(d.ovl.full, vni)
			d.log.Info("overlay: every remote address is in the table again", "bridge", p.bridge.cfg.Name, "vni", vni)
		}
	}
	return errors.Join(errs...)
}

// remoteRoom is how many more remote addresses overlay port p may put in
// the table: its bridge's max_entries and its own max_macs bound them as
// they bound learning (a remote host's routes must not take the room of
// other bridges in the shared table).
func (d *Daemon) remoteRoom(p *portState) int {
	n, err := d.counters.BridgeMACs(p.bridge.id)
	if err != nil {
		return 0
	}
	room := p.bridge.cfg.MaxEntries - n
	if p.cfg.MaxMACs > 0 {
		if m, err := d.counters.PortMACs(p.slot); err == nil {
			room = min(room, p.cfg.MaxMACs-m)
		}
	}
	return room
}

// putRemote puts mac in the table as a remote address of overlay port p.
func (d *Daemon) putRemote(p *portState, mac []byte) error {
	e := datapath.FDBEntry{Bridge: p.bridge.id, VLAN: overlayVLAN(p), MAC: mac, Ifindex: uint32(p.ifindex), Slot: p.slot}
	if err := d.ovl.put.PutLearned(e); err != nil {
		if errors.Is(err, datapath.ErrStatic) {
			return nil // a static entry here wins; zebra has the local one
		}
		return fmt.Errorf("bridge %q: overlay VNI %d: %w", p.bridge.cfg.Name, p.cfg.VXLAN, err)
	}
	return nil
}

// overlayChange mirrors a remote address zebra wrote: put at once, moving
// a local entry (zebra took the remote one as newer); a deleted one goes
// at the next sync, which the change asks for. Called with d.mu held.
func (d *Daemon) overlayChange(c overlay.Change) {
	p := d.overlayPortOf(c.VNI)
	if p == nil {
		return
	}
	if c.Gone || d.remoteRoom(p) <= 0 {
		// A full bridge: the sync says so (once).
		d.nudgeOverlay()
		return
	}
	if err := d.putRemote(p, c.MAC); err != nil {
		d.log.Warn("overlay: mirror a remote address", "vni", c.VNI, "mac", c.MAC, "vtep", c.VTEP, "err", err)
	}
}

// isOverlayEntry says whether e is a remote address of an overlay port,
// which the sweep does not age (zebra withdraws it).
func isOverlayEntry(b *bridgeState, e datapath.FDBEntry) bool {
	p := b.portBySlot(e.Slot)
	return p != nil && p.cfg.IsOverlay() && !e.Static
}

// overlayLoop keeps the table and the VNIs in step (see above) until ctx
// is done. events is the kernel's FDB events, subscribed before the first
// apply read the VNIs' FDBs, so that none falls between.
func (d *Daemon) overlayLoop(ctx context.Context, events <-chan overlay.Neigh) {
	tick := time.NewTicker(overlaySync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case n, ok := <-events:
			if !ok {
				events = d.resubscribeOverlay(ctx)
				continue
			}
			if c, changed := d.ovl.mgr.Handle(n); changed {
				d.mu.Lock()
				d.overlayChange(c)
				d.mu.Unlock()
			}
		case <-tick.C:
			d.runSync()
		case <-d.ovl.nudge:
			d.runSync()
		}
	}
}

// runSync reads the table without the daemon's lock (a full table is a
// dump of 65,536 entries every 100 ms while an overlay port forwards, which
// a tenant can bring about), then compares it under the lock.
func (d *Daemon) runSync() {
	d.mu.Lock()
	have := len(d.overlayPorts()) > 0
	d.mu.Unlock()
	if !have {
		return
	}
	es, err := d.table.FDB()
	if err == nil {
		d.mu.Lock()
		err = d.syncOverlay(es)
		d.mu.Unlock()
	}
	if err != nil {
		d.log.Warn("overlay sync", "err", err)
	}
}

// resubscribeOverlay watches the FDBs again after events were lost, and
// reads every VNI's again.
func (d *Daemon) resubscribeOverlay(ctx context.Context) <-chan overlay.Neigh {
	d.log.Warn("overlay: FDB events lost; watching again and reading the VNIs' FDBs")
	events, err := d.ovl.watch(ctx.Done())
	if err != nil {
		d.log.Warn("overlay: cannot watch FDB entries; remote addresses follow at each sync only", "err", err)
		events = nil
	}
	for _, vni := range d.ovl.mgr.Held() {
		if _, err := d.ovl.mgr.Reload(vni); err != nil {
			d.log.Warn("overlay: read a VNI's FDB", "vni", vni, "err", err)
		}
	}
	d.nudgeOverlay()
	return events
}

// overlayStatus is an overlay port as show gives it.
func (d *Daemon) overlayStatus(p *portState) *ctl.Overlay {
	o := &ctl.Overlay{VNI: p.cfg.VXLAN, DstPort: p.cfg.DstPort}
	if d.cfg != nil && d.cfg.Daemon.VTEP.IsValid() {
		o.VTEP = d.cfg.Daemon.VTEP.String()
	}
	st, ok := d.ovl.mgr.Status(p.cfg.VXLAN)
	if !ok {
		return o
	}
	o.MTU = st.Devices.MTU
	o.RemoteVTEPs, o.RemoteMACs, o.LocalMACs = st.RemoteVTEPs, len(st.Remotes), st.Local
	for _, a := range st.FloodVTEPs {
		o.FloodList = append(o.FloodList, a.String())
	}
	return o
}

// remoteVTEP is the VTEP behind which an entry of overlay port p is, ""
// when it is none of zebra's (a static entry on the port).
func (d *Daemon) remoteVTEP(p *portState, e datapath.FDBEntry) string {
	if !p.cfg.IsOverlay() {
		return ""
	}
	if a, ok := d.ovl.mgr.RemoteOf(p.cfg.VXLAN, e.MAC); ok {
		return a.String()
	}
	return ""
}
