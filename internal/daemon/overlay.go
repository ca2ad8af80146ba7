package daemon

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"

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
//   - local addresses out: a station the datapath learns or moves in a
//     bridge with an overlay port is told at once (TR_EVENT_LEARN and
//     TR_EVENT_MOVE, overlayEvent): one write on the advertise port, or a
//     withdrawal. The whole table is compared with what the advertise
//     ports hold every overlayFull, walked a chunk at a time, and at once
//     after a reconcile, an fdb command, or a sweep that aged addresses
//     of an overlay's bridge (syncOverlay): an aged, flushed or deleted
//     address is withdrawn then, and one whose event was lost (the ring
//     full, overlayLoop behind) advertised.
//   - remote addresses in: each remote MAC zebra writes on the vxlan
//     device is put in the table at once (PutLearned: a learned entry of
//     the overlay port, which moves when the station shows up locally, and
//     which the sweep never ages); one zebra deletes stays, stale, for
//     overlay.StaleWait (or while FRR restarts: internal/overlay's
//     stale.go), and is deleted at the first sync after, which also puts
//     back remotes the table lost (a flush, an fdb del) and deletes
//     entries of the overlay port that no remote backs.
//   - sticky addresses (internal/overlay's sticky.go): a static local
//     address is advertised sticky, and a remote one advertised sticky is
//     held as a static entry of the overlay port (putRemote), not a
//     learned one: a frame with it as source from any other port is
//     dropped (src_static) and counted, and no learn moves it. The
//     daemon tells its own such statics from the operator's by
//     b.written, which holds every static it wrote for the config, the
//     CLI or a freeze.

// overlayFull is how often the whole table is compared with what the
// advertise ports hold (addresses aged, flushed or deleted are withdrawn
// then, or at once when the daemon deleted them itself); overlaySync is the
// least time between two comparisons, however often nudged. A new or moved
// station's route does not wait for either: the datapath's event is told
// to zebra at once.
const (
	overlayFull = time.Second
	overlaySync = 100 * time.Millisecond
	// overlayMoves is how many learns and moves may wait for overlayLoop.
	overlayMoves = 4096
)

// remotePutter writes a learned entry on the control plane's word
// (datapath.PutLearned: it returns the entry it replaced); a dataplane
// without it has no overlay.
type remotePutter interface {
	PutLearned(datapath.FDBEntry) (datapath.FDBEntry, bool, error)
}

// overlayState is the daemon's overlay half.
type overlayState struct {
	mgr     *overlay.Manager
	hasAddr func(netip.Addr) (bool, error)
	watch   func(done <-chan struct{}, handle func(overlay.Neigh)) (<-chan struct{}, error)
	// zebra: zebra's exits (overlay.WatchZebra), for the Manager to hold
	// what it withdrew across an FRR restart.
	zebra func(done <-chan struct{}) (<-chan struct{}, error)
	put   remotePutter // nil: the dataplane cannot hold remote addresses
	nudge chan struct{}
	moves chan datapath.Move // learns and moves, for overlayLoop
	// changes: what the kernel's FDB events changed of the remote
	// addresses (overlayNeigh), for overlayLoop to mirror, in order.
	changes chan overlay.Change
	// fresh: what events made of addresses (true: local) since a
	// comparison of the whole table began, by VNI; nil between them.
	fresh map[uint32]map[[6]byte]bool
	// full: overlay ports (by VNI) whose remote addresses did not all
	// fit (their bridge's max_entries, their max_macs), said once until
	// they fit again.
	full map[uint32]bool
	// Encapsulation in the datapath (encap.go): the dataplane's (nil: it has none),
	// how a VTEP's next hop is found, and what it holds (nil: not read
	// yet).
	encap   encapWriter
	nextHop func(local, vtep netip.Addr) (overlay.NextHop, error)
	encaps  map[datapath.EncapKey]datapath.Encap
	// neighs: each VNI's remote IP neighbours, from other VTEPs' MAC+IP
	// routes (overlayneigh.go).
	neighs map[uint32]map[netip.Addr]net.HardwareAddr
	// evicted: the remote addresses the fair share evicted (fair.go),
	// by VNI, with the VTEP they were behind: not put back until their
	// route changes, and their VTEP holds no more than its share until
	// they are gone. Bounded by the Manager's remotes.
	evicted map[uint32]map[[6]byte]netip.Addr
	// held: the statics that hold sticky remote addresses, by VNI, as
	// the last sync counted them and puts since: room they take that
	// no address count shows.
	held map[uint32]int
	// bgp: bgpd's word on withdrawals (bgp.go), asked by bgpQuery;
	// bgpLog: what bgpLoop said of it; away: the last Settle kept
	// entries of sessions that went (settleStale's, for its log).
	bgp      *overlay.BGPView
	bgpQuery func(ctx context.Context, dir string) (summary, routes []byte, err error)
	bgpLog   bgpLog
	away     bool
}

func newOverlayState(k overlay.Kernel, put remotePutter) *overlayState {
	o := &overlayState{mgr: overlay.NewManager(k), hasAddr: overlay.HasAddr, watch: overlay.Watch, zebra: overlay.WatchZebra, put: put, nudge: make(chan struct{}, 1), moves: make(chan datapath.Move, overlayMoves), changes: make(chan overlay.Change, overlayMoves), full: map[uint32]bool{},
		nextHop: overlay.ResolveNextHop, evicted: map[uint32]map[[6]byte]netip.Addr{}, held: map[uint32]int{},
		bgp: overlay.NewBGPView(), bgpQuery: overlay.Vtysh}
	o.encap, _ = put.(encapWriter)
	o.mgr.SetSessions(o.bgp)
	return o
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
		// The file's problem, found here rather than by config.Parse:
		// refused as the file's others are, FILE:LINE: first.
		return vtep, config.Errors{{File: cfg.File, Line: cfg.Daemon.VTEPLine, Field: "daemon.vtep",
			Msg: fmt.Sprintf("%s is not an address of this namespace: give it to an interface (the loopback, say) first", vtep)}}
	}
	return vtep, nil
}

// commitOverlay makes (or takes over) each overlay port's kernel objects,
// so that the ports attach to their vxlan devices; a VNI new to the
// daemon is removed again by a rollback.
func (d *Daemon) commitOverlay(c *change, j *journal) error {
	var via *overlay.Prog
	for _, b := range c.order {
		for _, p := range b.ports {
			if !p.cfg.IsOverlay() {
				continue
			}
			if via == nil {
				v, err := d.viaProg()
				if err != nil {
					// The VNIs serve tc ports all the same.
					d.log.Warn("overlay: no xdp way in: xdp ports cannot reach overlay ports", "err", err)
				}
				via = &v
			}
			spec := overlay.Spec{VNI: p.cfg.VXLAN, VTEP: c.vtep, MTU: p.cfg.MTU, DstPort: p.cfg.DstPort, Via: *via}
			_, created, err := d.ovl.mgr.Ensure(spec)
			if errors.Is(err, overlay.ErrNoWayIn) {
				d.log.Warn("overlay: xdp ports cannot reach this overlay port", "bridge", b.cfg.Name, "vni", spec.VNI, "err", err)
				err = nil
			}
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

// viaProgrammer is a dataplane with the program of the overlay's xdp ways
// in (internal/datapath's trestle_via).
type viaProgrammer interface {
	ViaProgram() (*ebpf.Program, error)
}

// viaProg is that program, for overlay.Spec.Via; none when the dataplane
// has none (a VNI is then made without its xdp way in).
func (d *Daemon) viaProg() (overlay.Prog, error) {
	vp, ok := d.topo.(viaProgrammer)
	if !ok {
		return overlay.Prog{}, nil
	}
	prog, err := vp.ViaProgram()
	if err != nil {
		return overlay.Prog{}, fmt.Errorf("overlay: %w", err)
	}
	if prog == nil {
		return overlay.Prog{}, nil
	}
	info, err := prog.Info()
	if err != nil {
		return overlay.Prog{}, fmt.Errorf("overlay: read the program of the xdp ways in: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return overlay.Prog{}, fmt.Errorf("overlay: the kernel gives no ID for the program of the xdp ways in")
	}
	return overlay.Prog{FD: prog.FD(), ID: uint32(id)}, nil
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

// ovlAcc gathers, over a walk of the table, what the full comparison of
// one overlay port needs: its local addresses (MAC -> static, on the
// bridge's other ports), the MACs present in the VLAN its remote entries
// take, and its own learned entries. It holds the entries of the port's
// broadcast domain (bounded by its bridge's max_entries), never the table.
type ovlAcc struct {
	vni          uint32
	slot, bridge uint16
	aware        bool
	vid          uint16
	others       map[uint16]bool // the bridge's other ports, by slot
	local        map[[6]byte]bool
	present      map[[6]byte]bool
	mine         map[[6]byte]datapath.FDBEntry
	// statics: the overlay port's static entries (the operator's, and
	// those that hold sticky remote addresses).
	statics map[[6]byte]datapath.FDBEntry
}

// overlayAccs starts a comparison: an accumulator for each overlay port
// that forwards, and a clean record of what events advertise or withdraw
// meanwhile (d.ovl.fresh). Called with d.mu held.
func (d *Daemon) overlayAccs() []*ovlAcc {
	var accs []*ovlAcc
	d.ovl.fresh = map[uint32]map[[6]byte]bool{}
	for _, p := range d.overlayPorts() {
		a := &ovlAcc{vni: p.cfg.VXLAN, slot: p.slot, bridge: p.bridge.id, aware: p.bridge.cfg.VLANAware(), vid: overlayVLAN(p),
			others: map[uint16]bool{}, local: map[[6]byte]bool{}, present: map[[6]byte]bool{}, mine: map[[6]byte]datapath.FDBEntry{}, statics: map[[6]byte]datapath.FDBEntry{}}
		for _, q := range p.bridge.ports {
			if q != p {
				a.others[q.slot] = true
			}
		}
		d.ovl.fresh[a.vni] = map[[6]byte]bool{}
		accs = append(accs, a)
	}
	return accs
}

// add enters one entry of the table (as inOverlay and syncOverlay's
// comparison take it).
func (a *ovlAcc) add(e datapath.FDBEntry) {
	if e.Bridge != a.bridge || (a.aware && e.VLAN != a.vid) {
		return
	}
	k := overlay.MAC6(e.MAC)
	if e.VLAN == a.vid {
		a.present[k] = true
	}
	switch {
	case e.Slot == a.slot:
		switch {
		case e.VLAN != a.vid:
		case e.Static:
			a.statics[k] = e
		default:
			a.mine[k] = e
		}
	case a.others[e.Slot]:
		a.local[k] = a.local[k] || e.Static
	}
}

// syncOverlay compares the whole table with each overlay port's VNI:
// local addresses are written on (or withdrawn from) the advertise port,
// remote ones the table lacks are put back, and entries of the overlay
// port that no remote backs go. The table is walked a chunk at a time
// without the daemon's lock (a tenant can fill it), into accumulators of
// the overlay ports' broadcast domains; the comparison is made under the
// lock. Learns and moves reach zebra at once by overlayEvent; this is the
// slower reconcile (overlayFull, and on a nudge) that catches what events
// do not tell: addresses aged, flushed or deleted, remote ones lost.
func (d *Daemon) syncOverlay() error {
	d.mu.Lock()
	accs := d.overlayAccs()
	d.mu.Unlock()
	if len(accs) == 0 {
		return nil
	}
	err := d.table.WalkFDB(func(es []datapath.FDBEntry) error {
		for _, e := range es {
			for _, a := range accs {
				a.add(e)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.applyOverlay(accs)
}

// applyOverlay makes each VNI what its accumulator found, with what events
// told during the walk laid over it (the walk may have passed a station
// before it was learned or moved). Called with d.mu held.
func (d *Daemon) applyOverlay(accs []*ovlAcc) error {
	var errs []error
	// The remote MACs in the table now, by VNI: only theirs are
	// encapsulated by the datapath (encap.go).
	inTable := map[uint32]map[[6]byte]bool{}
	for _, a := range accs {
		p := d.overlayPortOf(a.vni)
		if p == nil || p.slot != a.slot || p.bridge.id != a.bridge {
			continue // reconfigured during the walk: the next sync
		}
		vni := a.vni
		for k, isLocal := range d.ovl.fresh[vni] {
			if !isLocal {
				delete(a.local, k)
			} else if _, ok := a.local[k]; !ok {
				a.local[k] = false
			}
		}
		remotes := d.ovl.mgr.Remotes(vni)
		backed := map[[6]byte]overlay.Remote{}
		for _, r := range remotes {
			backed[overlay.MAC6(r.MAC)] = r
		}
		// A sticky remote address learned here before its route came is
		// taken back (its static entry replaces the learned one below):
		// not advertised, zebra would ignore it.
		takeBack := map[[6]byte]bool{}
		for k, r := range backed {
			if static, ok := a.local[k]; ok && r.Sticky && !static {
				delete(a.local, k)
				takeBack[k] = true
			}
		}
		if _, _, err := d.ovl.mgr.SyncLocal(vni, a.local); err != nil {
			errs = append(errs, err)
		}
		// Entries of the overlay port no remote backs go first, so that
		// their room is there for the remotes the table lacks; so do
		// the statics the daemon wrote for remotes no longer sticky (or
		// no longer remote).
		var gone []datapath.FDBEntry
		in, deleted := map[[6]byte]bool{}, map[[6]byte]bool{}
		inTable[vni] = in
		for k, e := range a.mine {
			if r, ok := backed[k]; !ok || r.Sticky {
				gone = append(gone, e) // a sticky one is written static below
				deleted[k] = true
			} else {
				in[k] = true
			}
		}
		held := 0 // the statics that hold sticky remotes
		for k, e := range a.statics {
			if !d.stickyStatic(p, e) {
				in[k] = true // the operator's: encapsulated as any remote
				continue
			}
			if r, ok := backed[k]; !ok || !r.Sticky {
				gone = append(gone, e)
				deleted[k] = true
			} else {
				in[k] = true
				held++
			}
		}
		if len(gone) > 0 {
			if _, err := d.table.DelFDBs(gone); err != nil {
				errs = append(errs, err)
			}
		}
		// The statics of sticky remotes count in no address count; they
		// take room all the same.
		room := d.remoteRoom(p) - held
		share := d.remoteShare(p, a, backed, deleted)
		skipped := 0
		for _, r := range remotes {
			k := overlay.MAC6(r.MAC)
			if in[k] || a.present[k] && !deleted[k] && !takeBack[k] {
				// In the table already, or here since (learned:
				// advertised, and zebra decides; a static, which
				// wins).
				continue
			}
			if share.evicted(k, r) {
				continue // until its route changes
			}
			if room <= 0 || !r.Sticky && !share.takes(r.VTEP) {
				skipped++
				continue
			}
			if err := d.putRemote(p, r.MAC, r.Sticky); err != nil {
				errs = append(errs, err)
			} else {
				room--
				in[k] = true
				if !r.Sticky {
					share.put(r.VTEP)
				} else {
					held++
				}
			}
		}
		d.ovl.held[vni] = held
		switch {
		case skipped > 0 && !d.ovl.full[vni]:
			d.ovl.full[vni] = true
			d.log.Warn("overlay: remote addresses left out of the table: the bridge is at max_entries or at its mark with their VTEP at its share, or the overlay port at max_macs; their frames flood to the VNI's VTEPs", "bridge", p.bridge.cfg.Name, "vni", vni, "left_out", skipped)
		case skipped == 0 && d.ovl.full[vni]:
			delete(d.ovl.full, vni)
			d.log.Info("overlay: every remote address is in the table again", "bridge", p.bridge.cfg.Name, "vni", vni)
		}
	}
	d.ovl.fresh = nil
	if err := d.syncEncaps(inTable); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// overlayEvent tells zebra of a station the datapath learned or moved
// (TR_EVENT_LEARN, TR_EVENT_MOVE) at once: one write on the advertise port
// of the VNI whose broadcast domain it is in (a withdrawal when it moved
// onto the overlay port), rather than a comparison of the whole table.
// Called with d.mu held.
func (d *Daemon) overlayEvent(m datapath.Move) {
	e := datapath.FDBEntry{Bridge: m.Bridge, VLAN: m.VLAN}
	for _, p := range d.overlayPorts() {
		if !inOverlay(p, e) {
			continue
		}
		k := overlay.MAC6(m.MAC)
		var err error
		switch {
		case m.ToSlot == p.slot:
			_, err = d.ovl.mgr.DropLocal(p.cfg.VXLAN, k)
			d.ovl.markFresh(p.cfg.VXLAN, k, false)
		case p.bridge.portBySlot(m.ToSlot) != nil:
			_, err = d.ovl.mgr.AddLocal(p.cfg.VXLAN, k)
			d.ovl.markFresh(p.cfg.VXLAN, k, true)
		}
		if err != nil {
			d.log.Warn("overlay: advertise a learned address", "bridge", p.bridge.cfg.Name, "vni", p.cfg.VXLAN, "mac", m.MAC, "err", err)
		}
	}
}

// markFresh records, while a comparison walks the table, what an event
// made of an address (local or not), for applyOverlay to lay over the walk.
func (o *overlayState) markFresh(vni uint32, k [6]byte, local bool) {
	if f := o.fresh[vni]; f != nil {
		f[k] = local
	}
}

// hasOverlay says whether any of es is in the broadcast domain of an
// overlay port. Called with d.mu held.
func (d *Daemon) hasOverlay(es []datapath.FDBEntry) bool {
	for _, p := range d.overlayPorts() {
		for _, e := range es {
			if inOverlay(p, e) {
				return true
			}
		}
	}
	return false
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

// putRemote puts mac in the table as a remote address of overlay port p:
// a learned entry, or, sticky (advertised sticky by its VTEP), a static
// one, which replaces a learned entry anywhere and which no frame from
// another port moves. A static of the operator's for the address wins
// (zebra has the local one), as does a frozen one (b.written has both).
// An address it takes, learned, from another port of the bridge moved
// there, from the fabric: the move is counted as the datapath's are
// (mobility.go), so that an address a remote host keeps taking from a
// local port is frozen on that port. Called with d.mu held.
func (d *Daemon) putRemote(p *portState, mac []byte, sticky bool) error {
	e := datapath.FDBEntry{Bridge: p.bridge.id, VLAN: overlayVLAN(p), MAC: mac, Ifindex: uint32(p.ifindex), Slot: p.slot}
	if _, ok := p.bridge.written[staticKey(config.Static{MAC: mac, VLAN: e.VLAN})]; ok {
		return nil
	}
	var (
		prev     datapath.FDBEntry
		replaced bool
		err      error
	)
	if sticky {
		e.Static = true
		err = d.table.AddFDB(e)
	} else if prev, replaced, err = d.ovl.put.PutLearned(e); errors.Is(err, datapath.ErrStatic) {
		// The daemon's static of a remote that was sticky (b.written
		// has none of the operator's): a learned entry now.
		if _, derr := d.table.DelFDB(e.Bridge, e.VLAN, e.MAC); derr == nil {
			prev, replaced, err = d.ovl.put.PutLearned(e)
		}
	}
	if err != nil {
		return fmt.Errorf("bridge %q: overlay VNI %d: %w", p.bridge.cfg.Name, p.cfg.VXLAN, err)
	}
	if replaced && prev.Slot != p.slot && p.bridge.portBySlot(prev.Slot) != nil {
		d.countMoveLocked(datapath.Move{Time: time.Now(), Bridge: e.Bridge, VLAN: e.VLAN, MAC: e.MAC, FromSlot: prev.Slot, ToSlot: p.slot}, time.Now())
	}
	return nil
}

// stickyStatic says whether e, an entry of overlay port p, is a static
// the daemon wrote for a sticky remote address: none of the operator's
// (config, CLI, freeze: b.written). Called with d.mu held.
func (d *Daemon) stickyStatic(p *portState, e datapath.FDBEntry) bool {
	_, ok := p.bridge.written[staticKey(config.Static{MAC: e.MAC, VLAN: e.VLAN})]
	return e.Static && e.Slot == p.slot && !ok
}

// overlayChange mirrors a remote address zebra wrote: put at once, moving
// a local entry (zebra took the remote one as newer); a deleted one goes
// at the next sync, which the change asks for. Called with d.mu held.
func (d *Daemon) overlayChange(c overlay.Change) {
	p := d.overlayPortOf(c.VNI)
	if p == nil {
		return
	}
	// Its headers (if any) name the VTEP it had: gone, or behind another
	// VTEP now, it takes the vxlan device until the next comparison, which
	// the nudge brings. Behind the same VTEP (zebra writing it again, as
	// after an FRR restart on this host or another) they still hold, and
	// stay: taken away, its frames would meet the vxlan device while zebra
	// writes its entries there, and some be lost.
	if c.Gone || !d.encapsTo(p, c.MAC, c.VTEP) {
		d.dropEncap(p, c.MAC)
	}
	d.nudgeOverlay()
	// A route that changed is put again, evicted or not.
	delete(d.ovl.evicted[c.VNI], overlay.MAC6(c.MAC))
	if c.Gone || d.remoteRoom(p)-d.ovl.held[c.VNI] <= 0 || d.remoteAtMark(p) {
		// A full bridge (the sync says so, once), or one at its mark,
		// where the sync weighs each VTEP's share.
		d.nudgeOverlay()
		return
	}
	if err := d.putRemote(p, c.MAC, c.Sticky); err != nil {
		d.log.Warn("overlay: mirror a remote address", "vni", c.VNI, "mac", c.MAC, "vtep", c.VTEP, "err", err)
	} else if c.Sticky {
		d.ovl.held[c.VNI]++ // the next sync counts again
	}
}

// isOverlayEntry says whether e is a remote address of an overlay port,
// which the sweep does not age (zebra withdraws it).
func isOverlayEntry(b *bridgeState, e datapath.FDBEntry) bool {
	p := b.portBySlot(e.Slot)
	return p != nil && p.cfg.IsOverlay() && !e.Static
}

// overlayLoop keeps the table and the VNIs in step (see above) until ctx
// is done. The kernel's FDB events are entered by overlayNeigh, on the
// goroutine of their subscription (overlay.Watch), made before the first
// apply read the VNIs' FDBs, so that none falls between; lost closes when
// it fails, and the loop subscribes again. The datapath's
// learns and moves come by d.ovl.moves and are told one by one; the whole
// table is compared every overlayFull, and on a nudge, but never twice
// within overlaySync (a burst of nudges is one comparison).
func (d *Daemon) overlayLoop(ctx context.Context, lost <-chan struct{}) {
	tick := time.NewTicker(overlayFull)
	defer tick.Stop()
	var last time.Time
	var later <-chan time.Time // a nudge that came too soon after the last comparison
	zebra, err := d.ovl.zebra(ctx.Done())
	if err != nil {
		d.log.Warn("overlay: cannot watch zebra's nexthop objects; an FRR restart withdraws the remote addresses until it is back", "err", err)
	}
	full := func() {
		if wait := overlaySync - time.Since(last); wait > 0 {
			if later == nil {
				later = time.After(wait)
			}
			return
		}
		later = nil
		d.runSync()
		last = time.Now()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-lost:
			if !ok {
				lost = d.resubscribeOverlay(ctx)
			}
		case c := <-d.ovl.changes:
			d.mu.Lock()
			d.overlayChange(c)
			d.mu.Unlock()
		case m := <-d.ovl.moves:
			d.mu.Lock()
			d.overlayEvent(m)
			d.mu.Unlock()
		case _, ok := <-zebra:
			if !ok {
				d.log.Warn("overlay: zebra's nexthop objects no longer watched; an FRR restart withdraws the remote addresses until it is back")
				zebra = nil
				continue
			}
			if d.ovl.mgr.ZebraExited() {
				d.log.Warn("overlay: zebra exited after withdrawing every remote VTEP: FRR is restarting; its remote addresses and flood lists are kept, stale, until it is back",
					"limit", overlay.HoldLimit)
			}
		case <-tick.C:
			full()
		case <-later:
			later = nil
			full()
		case <-d.ovl.nudge:
			full()
		}
	}
}

// overlayNeigh enters one of the kernel's FDB events into the Manager, on
// the goroutine that reads them (overlay.Watch), apart from overlayLoop,
// which may be walking the table: an entry zebra withdraws is written back
// at once (internal/overlay's stale.go), in the half millisecond before
// zebra takes the flood list too, so that no frame meets neither. What it
// changed goes to the loop, in order; when the loop is that far behind,
// the next comparison mirrors it instead.
func (d *Daemon) overlayNeigh(n overlay.Neigh) {
	c, changed := d.ovl.mgr.Handle(n)
	if !changed {
		return
	}
	select {
	case d.ovl.changes <- c:
	default:
		d.nudgeOverlay()
	}
}

// overlayMoved hands a learn or move of the datapath to overlayLoop; when
// it is behind (a flood of new sources), the event is left for the next
// comparison of the whole table, which the loop is nudged to make.
func (d *Daemon) overlayMoved(m datapath.Move) {
	select {
	case d.ovl.moves <- m:
	default:
		d.nudgeOverlay()
	}
}

// runSync compares the table with the VNIs, if an overlay port forwards.
func (d *Daemon) runSync() {
	d.mu.Lock()
	have := len(d.overlayPorts()) > 0
	if !have && len(d.ovl.encaps) > 0 {
		// The last overlay port went: its headers go too.
		if err := d.syncEncaps(nil); err != nil {
			d.log.Warn("overlay sync", "err", err)
		}
	}
	d.mu.Unlock()
	if !have {
		return
	}
	d.settleStale()
	if err := d.syncOverlay(); err != nil {
		d.log.Warn("overlay sync", "err", err)
	}
	d.syncOverlayNeighs() // MAC+IP routes both ways (overlayneigh.go)
}

// settleStale removes the stale remote addresses whose time is up
// (overlay.Manager.Settle); the sync that follows takes them out of the
// table.
func (d *Daemon) settleStale() {
	st, err := d.ovl.mgr.Settle()
	if err != nil {
		d.log.Warn("overlay: stale remote addresses", "err", err)
	}
	switch away := st.Away > 0; {
	case away && !d.ovl.away:
		d.log.Warn("overlay: the BGP session that carried withdrawn remote addresses went (a peer's FRR restarting?); they are kept, stale, until it is back",
			"kept", st.Away, "limit", overlay.HoldLimit)
	case !away && d.ovl.away:
		d.log.Info("overlay: no remote address is kept for a BGP session any longer")
	}
	d.ovl.away = st.Away > 0
	switch {
	case st.Ended && st.Claimed:
		d.log.Info("overlay: FRR is back: the stale remote addresses it did not write again are removed", "removed", st.Removed)
	case st.Ended:
		d.log.Warn("overlay: FRR not back within the limit: its stale remote addresses are removed", "limit", overlay.HoldLimit, "removed", st.Removed)
	}
}

// resubscribeOverlay watches the FDBs again after events were lost, and
// reads every VNI's again.
func (d *Daemon) resubscribeOverlay(ctx context.Context) <-chan struct{} {
	if ctx.Err() != nil {
		return nil
	}
	d.log.Warn("overlay: FDB events lost; watching again and reading the VNIs' FDBs")
	lost, err := d.ovl.watch(ctx.Done(), d.overlayNeigh)
	if err != nil {
		d.log.Warn("overlay: cannot watch FDB entries; remote addresses follow at each sync only", "err", err)
		lost = nil
	}
	for _, vni := range d.ovl.mgr.Held() {
		if _, err := d.ovl.mgr.Reload(vni); err != nil {
			d.log.Warn("overlay: read a VNI's FDB", "vni", vni, "err", err)
		}
	}
	d.nudgeOverlay()
	return lost
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
	o.Stale, o.FRRRestarting = st.Stale, st.Holding
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

// remoteShares is how one sync weighs the remote VTEPs of an overlay port
// against the fair share (docs/security.md, "A table one port cannot
// starve"): under its bridge's mark any VTEP's addresses are put (as a port
// learns under the mark), at it or past it only those of a VTEP under its
// share; a VTEP some of whose addresses were evicted is held to its share
// whatever the count (capped), so that a flood from its host does not fill
// the table again at each sync, and an evicted address is not put back
// until its route changes (overlayChange) or goes.
type remoteShares struct {
	n, high, fair int
	counts        map[netip.Addr]int // the VTEPs' learned entries in the table
	capped        map[netip.Addr]bool
	ev            map[[6]byte]netip.Addr
}

// remoteShare reads what remoteShares needs for overlay port p, after the
// sync deleted what it deleted, and forgets the evictions of addresses
// that are gone or behind another VTEP now. Called with d.mu held.
func (d *Daemon) remoteShare(p *portState, a *ovlAcc, backed map[[6]byte]overlay.Remote, deleted map[[6]byte]bool) *remoteShares {
	s := &remoteShares{high: math.MaxInt, counts: map[netip.Addr]int{}, capped: map[netip.Addr]bool{}, ev: d.ovl.evicted[p.cfg.VXLAN]}
	if b := p.bridge; b.info != nil && b.info.MaxEntries > 0 {
		m, _ := d.holderMarks(b)
		s.high, s.fair = m.High, m.Fair
	}
	s.n, _ = d.counters.BridgeMACs(p.bridge.id)
	for k := range a.mine {
		if r, ok := backed[k]; ok && !deleted[k] {
			s.counts[r.VTEP]++
		}
	}
	for k, at := range s.ev {
		if r, ok := backed[k]; !ok || r.VTEP != at {
			delete(s.ev, k)
		} else {
			s.capped[at] = true
		}
	}
	return s
}

// evicted says whether remote r (key k) was evicted behind the VTEP it
// is still behind: not put back.
func (s *remoteShares) evicted(k [6]byte, r overlay.Remote) bool {
	at, ok := s.ev[k]
	return ok && at == r.VTEP
}

// takes says whether one more address of vtep goes in.
func (s *remoteShares) takes(vtep netip.Addr) bool {
	return s.counts[vtep] < s.fair || s.n < s.high && !s.capped[vtep]
}

// put counts one more address of vtep in the table.
func (s *remoteShares) put(vtep netip.Addr) {
	s.counts[vtep]++
	s.n++
}

// remoteAtMark says whether overlay port p's remote addresses are weighed
// against their VTEPs' shares now (its bridge at its mark, or a VTEP of it
// capped), which only a sync does. Called with d.mu held.
func (d *Daemon) remoteAtMark(p *portState) bool {
	if len(d.ovl.evicted[p.cfg.VXLAN]) > 0 {
		return true
	}
	b := p.bridge
	if b.info == nil || b.info.MaxEntries == 0 {
		return false
	}
	n, err := d.counters.BridgeMACs(b.id)
	return err != nil || n >= datapath.TableMarks(b.info.MaxEntries, 1).High
}

// noteEvicted records the remote addresses among victims (remotes: each
// overlay port's, by slot) as evicted, for the sync not to put them back;
// it returns how many. Called with d.mu held.
func (o *overlayState) noteEvicted(byID map[uint16]*bridgeState, victims []datapath.FDBEntry, remotes map[uint16]map[[6]byte]netip.Addr) int {
	n := 0
	for _, e := range victims {
		b := byID[e.Bridge]
		p := b.portBySlot(e.Slot)
		if p == nil || !p.cfg.IsOverlay() {
			continue
		}
		k := overlay.MAC6(e.MAC)
		at, ok := remotes[e.Slot][k]
		if !ok {
			continue
		}
		if o.evicted[p.cfg.VXLAN] == nil {
			o.evicted[p.cfg.VXLAN] = map[[6]byte]netip.Addr{}
		}
		o.evicted[p.cfg.VXLAN][k] = at
		n++
	}
	return n
}
