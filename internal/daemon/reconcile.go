package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
)

// Reconcile: start, reload, adoption and link events all go through apply,
// which moves the running switch to a config in three steps:
//
//  1. plan: the next model (bridge ids, port slots). Nothing is changed;
//     a config that does not fit is refused here.
//  2. commit: every dataplane change that can fail (the datapath loaded
//     again when the model needs a larger table or a shorter refresh,
//     attachments, port and bridge writes, static entries), each with its
//     undo in a journal. The first failure undoes them all, last first: the
//     running switch is as it was, and still correct.
//  3. finalize: what cannot be undone and need not fail: detaching programs
//     no port uses any more, giving peers their settings back, flushing the
//     entries of ports and bridges that are gone, swapping the model in.
//
// A port that cannot come up (its interface is missing, an attach is
// refused, its veth peer is out of reach) is no failure of the apply: it
// is down, with the reason, and comes up at a later apply.

// journal is the undo list of a commit.
type journal struct {
	undo []func() error
	what []string
}

func (j *journal) add(what string, undo func() error) {
	j.undo = append(j.undo, undo)
	j.what = append(j.what, what)
}

// rollback undoes everything, last first, and returns what it could not.
func (j *journal) rollback() error {
	var errs []error
	for i := len(j.undo) - 1; i >= 0; i-- {
		if err := j.undo[i](); err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", j.what[i], err))
		}
	}
	return errors.Join(errs...)
}

// change is what an apply does, as planned.
type change struct {
	next           map[string]*bridgeState
	order          []*bridgeState // next, in config order
	newIDs         []uint16
	newSlots       []uint16
	removedPorts   []*portState
	removedBridges []*bridgeState
	// attached are the attachments the next model uses, by ifindex; made
	// are those the commit made (detached by a rollback).
	attached map[int]Attachment
	made     map[int]Attachment
	// peers: the peer fixes of the next model's interfaces; peerCands
	// those opened to look at a peer and not (yet) used.
	peers     map[int]*peerFix
	peerCands map[int]*peerFix
	// stopped: ports that were forwarding and no longer are (link down,
	// or down): their entries go.
	stopped []*portState
	// statics to delete once the rest is committed.
	staleStatics []staleStatic
	// Learned entries that no longer mean what they did: those of a port
	// in VLANs it no longer carries (vlanMoved, the port as now written),
	// and every one of a bridge whose VLAN-awareness flipped (its VLANs
	// were the frames' tags, and are now its ports', or the other way).
	vlanMoved map[slotKey]datapath.PortInfo
	flipped   map[uint16]bool
	// locked are the slots of ports that became locked: their learned
	// entries are flushed, so that a locked port holds only its statics
	// (none moves off it, none is left unbound in a source memo).
	locked map[slotKey]bool
	// vtep: this host's VTEP, for the overlay ports' VNIs (overlay.go).
	vtep netip.Addr
	// only, when set, scopes the apply to some ports (a run-time port
	// added or removed, scoped.go): the others are taken as they are,
	// not looked at again.
	only portScope
	// run: the ports of the next model added at run time (the merge's),
	// by bridge and interface; they attach in tc filters (hookFor).
	run map[portID]bool
	// grow: the sizes the next model needs that the programs running were
	// not loaded for (a larger table, a shorter refresh), and why, or nil;
	// resizing, the resize the commit began, which finalize ends.
	grow     *growth
	resizing Resizing
}

// growth is a resize an apply needs.
type growth struct {
	sizes datapath.Sizes
	why   string // "FILE: the bridges' max_entries need ..."
}

type staleStatic struct {
	b *bridgeState
	s staticEntry
}

// apply moves the switch to cfg, the config file's, with the ports added
// at run time (desired.go): one desired state. Called with d.mu held.
func (d *Daemon) apply(cfg *config.Config) error { return d.applyScoped(cfg, nil) }

// applyScoped is apply, which looks again only at the ports of only when
// it is set (scoped.go): what the world took away is left to the link
// events' apply (no forget), and the other ports keep their interface,
// mode and attachment as they are.
func (d *Daemon) applyScoped(cfg *config.Config, only portScope) error {
	if d.closed {
		return errors.New("the daemon is stopping")
	}
	// Ports that start or stop forwarding are events, told once the
	// apply is over, whether it worked or not (forget may have taken
	// ports down either way).
	defer d.portEvents(d.portStates())
	if only == nil {
		d.forget()
	}
	want, keptRun, goneRun := d.desired(cfg, only)
	c, err := d.plan(want)
	if err != nil {
		return err
	}
	c.only = only
	c.run = map[portID]bool{}
	for _, rp := range keptRun {
		c.run[portID{rp.Bridge, rp.Interface}] = true
	}
	j := &journal{}
	if err := d.commit(c, j); err != nil {
		if rerr := j.rollback(); rerr != nil {
			d.log.Error("rolling back a failed apply left something behind", "err", rerr)
		}
		for _, a := range c.made {
			_ = a.Detach()
		}
		for idx, f := range c.peerCands {
			if d.peers[idx] != f {
				f.peer.Close()
			}
		}
		d.alloc.giveBack(c.newSlots, c.newIDs)
		return err
	}
	d.finalize(c)
	d.cfg = cfg
	d.settleRun(keptRun, goneRun)
	d.settleLater()
	return nil
}

// plan builds the next model: kept bridges and ports carry over with their
// ids, slots and state; new ones get ids and slots that no bridge or port
// used before this apply, so that none inherits the entries of one that is
// going away before they are flushed.
func (d *Daemon) plan(cfg *config.Config) (*change, error) {
	vtep, err := d.overlayPlan(cfg)
	if err != nil {
		return nil, err
	}
	c := &change{next: map[string]*bridgeState{}, attached: map[int]Attachment{}, made: map[int]Attachment{}, peers: map[int]*peerFix{}, vtep: vtep,
		grow: d.growthFor(cfg)}
	fail := func(err error) (*change, error) {
		d.alloc.giveBack(c.newSlots, c.newIDs)
		return nil, err
	}
	kept := map[*portState]bool{}
	for _, nb := range cfg.Bridges {
		old := d.bridges[nb.Name]
		b := &bridgeState{cfg: nb, cliStatics: map[string]config.Static{}, written: map[string]staticEntry{}, frozen: map[string]frozenEntry{}}
		if old != nil {
			b.id, b.info = old.id, old.info
			for k, v := range old.cliStatics {
				b.cliStatics[k] = v
			}
			keepFrozen(old, b)
			if !d.fromFile {
				b.cliRules = old.cliRules // rules from the CLI last until a reload from the file
			}
			for k, v := range old.written {
				b.written[k] = v
			}
		} else {
			id, err := d.alloc.id()
			if err != nil {
				return fail(fmt.Errorf("bridge %q: %w", nb.Name, err))
			}
			b.id = id
			c.newIDs = append(c.newIDs, id)
		}
		for _, pc := range nb.Ports {
			var p *portState
			if old != nil {
				if op := old.portByKey(portKey(pc)); op != nil {
					cp := *op
					p = &cp
					kept[op] = true
				}
			}
			if p == nil {
				slot, err := d.alloc.slot()
				if err != nil {
					return fail(fmt.Errorf("bridge %q: port %q: %w", nb.Name, pc.Interface, err))
				}
				p = &portState{slot: slot}
				c.newSlots = append(c.newSlots, slot)
			}
			p.cfg, p.bridge = pc, b
			p.blockedWas, p.blocked = p.blocked, d.blocks[portID{nb.Name, portKey(pc)}].why
			if pc.IsPatch() {
				// Up for as long as both bridges are configured.
				p.mode, p.running, p.why = modePatch, true, "patch port to bridge "+pc.Patch
				p.ifindex = int(datapath.PatchIfindex(p.slot))
			}
			b.ports = append(b.ports, p)
		}
		c.next[nb.Name] = b
		c.order = append(c.order, b)
	}
	joinTrees(c.order, c.next)
	for name, b := range d.bridges {
		for _, p := range b.ports {
			if !kept[p] {
				c.removedPorts = append(c.removedPorts, p)
			}
		}
		if c.next[name] == nil {
			c.removedBridges = append(c.removedBridges, b)
		}
	}
	return c, nil
}

// anyVLANAware says whether a bridge of the next model is VLAN-aware.
func (c *change) anyVLANAware() bool {
	return slices.ContainsFunc(c.order, func(b *bridgeState) bool { return b.cfg.VLANAware() })
}

// A stage (the VLAN stage, the filter stage) is in the programs only while
// some bridge needs it (docs/architecture.md rule 6).
type stageSwitch struct {
	name string // "VLAN stage"
	why  string // what needs it: "a bridge is VLAN-aware"
	need func(*change) bool
	on   func() bool
	set  func(bool) error
}

func (d *Daemon) stageSwitches() []stageSwitch {
	return []stageSwitch{
		{"VLAN stage", "a bridge is VLAN-aware", (*change).anyVLANAware, d.stages.VLANStage, d.stages.SetVLANStage},
		{"filter stage", "a bridge's filter is on", (*change).anyFilter, d.stages.FilterStage, d.stages.SetFilterStage},
	}
}

// stagesOn loads the programs with each stage the next model needs and the
// running ones lack, and moves every port to them before any bridge uses
// the stage (a program without the VLAN stage would forward a VLAN-aware
// bridge's frames across its VLANs; one without the filter, unfiltered).
// A bridge that does not use a stage behaves the same under either program.
func (d *Daemon) stagesOn(c *change, j *journal) error {
	for _, s := range d.stageSwitches() {
		if !s.need(c) || s.on() {
			continue
		}
		if err := s.set(true); err != nil {
			return err
		}
		j.add("turn the "+s.name+" on", func() error {
			err := s.set(false)
			return errors.Join(err, d.upgradeAll(d.attached))
		})
		d.log.Info(s.name+" on", "why", s.why)
		if err := d.upgradeAll(d.attached); err != nil {
			return err
		}
	}
	return nil
}

// stagesOff moves every port to the programs without the stages no bridge
// of the model now running needs.
func (d *Daemon) stagesOff(c *change) {
	for _, s := range d.stageSwitches() {
		if s.need(c) || !s.on() {
			continue
		}
		if err := s.set(false); err != nil {
			d.log.Warn("turn the "+s.name+" off", "err", err)
		} else if err := d.upgradeAll(d.attached); err != nil {
			d.log.Warn("move ports to the programs without the "+s.name, "err", err)
		} else {
			d.log.Info(s.name+" off", "why", "no bridge needs it")
		}
	}
}

// upgradeAll moves attachments to the dataplane's current programs.
func (d *Daemon) upgradeAll(attached map[int]Attachment) error {
	var errs []error
	for _, a := range attached {
		if _, err := d.attacher.Upgrade(a); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// growthFor says what sizes cfg needs that the running programs were not
// loaded for: a table for the bridges' max_entries larger than the one
// loaded, a refresh shorter than the one loaded for its shortest aging time.
// Nothing else the configuration sets is fixed at load. The table never
// shrinks (bridges that go leave their room to those that come), and a
// refresh shorter than a longer aging time needs is kept: neither is reason
// to load anything again.
func (d *Daemon) growthFor(cfg *config.Config) *growth {
	need, refresh := fdbCapacity(cfg), refreshFor(cfg)
	var why []string
	if need > d.capacity {
		why = append(why, fmt.Sprintf("the bridges' max_entries need a learning table of %d entries (it holds %d)", need, d.capacity))
	}
	if refresh < d.refresh {
		why = append(why, fmt.Sprintf("an aging time of %v needs timestamps refreshed every %v (now every %v)", 4*refresh, refresh, d.refresh))
	}
	if len(why) == 0 {
		return nil
	}
	return &growth{sizes: datapath.Sizes{FDBCapacity: max(need, d.capacity), Refresh: refresh}, why: cfg.File + ": " + strings.Join(why, ", and ")}
}

// grow loads the programs again for the sizes the next model needs, on a
// copy of the table (datapath/resize.go), and moves every port to them in
// place, before anything else of the commit: what follows writes the new
// table, and each stage switched on is loaded for the new sizes. Undone, the
// ports go back to the programs and table of before; finalize ends it.
func (d *Daemon) grow(c *change, j *journal) error {
	if c.grow == nil {
		return nil
	}
	r, err := d.sizer.Resize(c.grow.sizes)
	if err != nil {
		return fmt.Errorf("%s, and the datapath could not be loaded for it: %w; the running switch is as it was: "+
			"lower max_entries or lengthen aging, or give the daemon the memory a table of that size takes (each entry is taken up front)", c.grow.why, err)
	}
	c.resizing = r
	wasCap, wasRefresh := d.capacity, d.refresh
	d.capacity, d.refresh = c.grow.sizes.FDBCapacity, c.grow.sizes.Refresh
	j.add("load the datapath for new sizes", func() error {
		d.capacity, d.refresh = wasCap, wasRefresh
		c.resizing = nil
		return errors.Join(r.Undo(), d.upgradeAll(d.attached))
	})
	if err := d.upgradeAll(d.attached); err != nil {
		return fmt.Errorf("%s: move the ports to the programs loaded for it: %w", c.grow.why, err)
	}
	d.log.Info("datapath loaded again for new sizes, every port moved in place", "fdb_capacity", d.capacity, "refresh", d.refresh,
		"was_fdb_capacity", wasCap, "was_refresh", wasRefresh, "why", c.grow.why)
	return nil
}

// endGrow lets go of the programs and table of before a resize, once every
// port runs the new ones (finalize's first step: the flushes that follow
// must meet what it carries over).
func (d *Daemon) endGrow(c *change) {
	if c.resizing == nil {
		return
	}
	if err := c.resizing.Keep(); err != nil {
		d.log.Warn("addresses learned while the table was copied are learned again", "err", err)
	}
	c.resizing = nil
}

// commit makes every fallible change, journaled.
func (d *Daemon) commit(c *change, j *journal) error {
	if err := d.grow(c, j); err != nil {
		return err
	}
	if err := d.stagesOn(c, j); err != nil {
		return err
	}
	claimed := map[int]bool{}
	if err := d.commitOverlay(c, j); err != nil {
		return err
	}
	if err := d.commitPorts(c, j); err != nil {
		return err
	}
	for _, b := range c.order {
		for _, p := range b.ports {
			if p.mode != "" {
				claimed[p.ifindex] = true
			}
		}
	}
	// Ports that go: out of the port maps first (frames from them are no
	// longer taken in), unless their interface is now another port's, whose
	// write below takes it over; a rollback must give it back to the old
	// port after that write is undone (the journal runs last first).
	for _, p := range c.removedPorts {
		if p.written == nil {
			continue
		}
		old := *p.written
		if claimed[int(old.Ifindex)] {
			j.add("hand port "+p.name()+" over", func() error { return d.topo.SetPort(old) })
			continue
		}
		if err := d.topo.DelPort(old.Ifindex, old.Slot); err != nil {
			return fmt.Errorf("bridge %q: remove port %q: %w", p.bridge.cfg.Name, p.name(), err)
		}
		j.add("remove port "+p.name(), func() error { return d.topo.SetPort(old) })
	}
	// Then the bridges' flood lists, before the ports they name are
	// announced: a port that moves leaves its old bridge's floods before it
	// joins the new one (datapath.go's order). A bridge that becomes
	// VLAN-aware is written unaware first, and aware once its ports say
	// which VLANs they carry.
	var turnAware []*bridgeState
	for _, b := range c.order {
		if slices.Contains(c.newIDs, b.id) {
			if err := d.topo.ResetBridge(b.id); err != nil {
				return fmt.Errorf("bridge %q: %w", b.cfg.Name, err)
			}
		}
		want := b.desired()
		if want.VLANAware && (b.info == nil || !b.info.VLANAware) {
			turnAware = append(turnAware, b)
			want.VLANAware, want.VLANs = false, nil
		}
		if err := d.writeBridge(b, want, j); err != nil {
			return err
		}
	}
	c.vlanMoved, c.flipped, c.locked = map[slotKey]datapath.PortInfo{}, map[uint16]bool{}, map[slotKey]bool{}
	for _, b := range c.order {
		if b.info != nil && b.cfg.VLANAware() != b.info.VLANAware {
			c.flipped[b.id] = true
		}
		for _, p := range b.ports {
			want := p.info()
			if samePortInfo(want, p.written) {
				continue
			}
			if want != nil && p.written != nil && (want.PVID != p.written.PVID || want.Trunk != p.written.Trunk || !slices.Equal(want.VLANs, p.written.VLANs)) {
				c.vlanMoved[slotKey{b.id, p.slot}] = *want
			}
			if want != nil && want.Policy.Has(flagLocked) && p.written != nil && !p.written.Policy.Has(flagLocked) {
				c.locked[slotKey{b.id, p.slot}] = true
			}
			if err := d.writePort(p, want, j); err != nil {
				return fmt.Errorf("bridge %q: %w", b.cfg.Name, err)
			}
		}
	}
	for _, b := range turnAware {
		if err := d.writeBridge(b, b.desired(), j); err != nil {
			return err
		}
	}
	for _, b := range c.removedBridges {
		if b.info == nil {
			continue
		}
		old := *b.info
		if err := d.topo.DelBridge(b.id); err != nil {
			return fmt.Errorf("bridge %q: remove: %w", b.cfg.Name, err)
		}
		j.add("remove bridge "+b.cfg.Name, func() error { return d.topo.SetBridge(old) })
	}
	for _, b := range c.order {
		if err := d.commitStatics(c, b, j); err != nil {
			return fmt.Errorf("bridge %q: %w", b.cfg.Name, err)
		}
	}
	// Every map now says what the next model says: adopted programs (of an
	// earlier daemon, perhaps an older build) move to this one's, in place.
	var inScope map[int]bool
	if c.only != nil {
		inScope = c.only.ifindexes(c)
	}
	for idx, a := range c.attached {
		if c.only != nil && !inScope[idx] {
			continue // as the last full apply left it
		}
		if c.only == nil {
			// A tc filter another took off: put back, with what it ran.
			if put, err := d.attacher.Restore(a); err != nil {
				d.log.Error("a port's tc filter was removed by another, and could not be put back", "ifindex", idx, "err", err)
			} else if put {
				d.log.Warn("a port's tc filter was removed by another; put back", "ifindex", idx)
			}
		}
		changed, err := d.attacher.Upgrade(a)
		if err == nil && !changed {
			continue
		}
		for _, b := range c.order {
			for _, p := range b.ports {
				if p.ifindex != idx || p.mode == "" {
					continue
				}
				if err != nil {
					// It forwards, with the program (and maybe the maps)
					// of the daemon before: said where the user looks.
					p.why = fmt.Sprintf("still runs an earlier daemon's program: moving it to this one's failed: %v", err)
					d.log.Error("a port keeps the program of an earlier daemon", "bridge", b.cfg.Name, "port", p.name(), "err", err)
				} else {
					d.log.Info("port moved to this daemon's program in place (link update)", "bridge", b.cfg.Name, "port", p.name(), "ifindex", idx, "mode", a.Mode())
				}
			}
		}
	}
	return nil
}

// writeBridge writes a bridge, journaled, unless the dataplane holds it so.
func (d *Daemon) writeBridge(b *bridgeState, want datapath.BridgeInfo, j *journal) error {
	if sameBridgeInfo(&want, b.info) {
		return nil
	}
	if err := d.topo.SetBridge(want); err != nil {
		return err // it names the bridge
	}
	old := b.info
	j.add("write bridge "+b.cfg.Name, func() error {
		if old == nil {
			return d.topo.DelBridge(want.ID)
		}
		return d.topo.SetBridge(*old)
	})
	b.info = &want
	return nil
}

// writePort writes a port's maps, journaled.
func (d *Daemon) writePort(p *portState, want *datapath.PortInfo, j *journal) error {
	old := p.written
	if want == nil {
		if err := d.topo.DelPort(old.Ifindex, old.Slot); err != nil {
			return fmt.Errorf("remove port %q: %w", p.name(), err)
		}
	} else if err := d.topo.SetPort(*want); err != nil {
		return fmt.Errorf("write port %q: %w", p.name(), err)
	}
	j.add("write port "+p.name(), func() error {
		if old == nil {
			return d.topo.DelPort(want.Ifindex, want.Slot)
		}
		return d.topo.SetPort(*old)
	})
	p.written = want
	return nil
}

// commitStatics writes the bridge's static entries (config and CLI) whose
// ports are attached; those no longer wanted are deleted by finalize.
func (d *Daemon) commitStatics(c *change, b *bridgeState, j *journal) error {
	want := map[string]staticEntry{}
	for k, f := range b.frozen {
		want[k] = staticEntry{Static: f.Static}
	}
	for k, s := range b.cliStatics {
		want[k] = staticEntry{Static: s, User: true}
	}
	for _, s := range b.cfg.Static {
		want[staticKey(s)] = staticEntry{Static: s}
		delete(b.frozen, staticKey(s)) // the config binds it now
	}
	// A locked port's allowed_macs bind its sources as static entries of
	// it; the config and port add refuse one another port has.
	for i := range b.cfg.Ports {
		for _, s := range b.cfg.Ports[i].AllowedStatics() {
			want[staticKey(s)] = staticEntry{Static: s}
			delete(b.frozen, staticKey(s))
		}
	}
	for k, w := range want {
		p := b.port(w.Port)
		if p == nil {
			delete(b.frozen, k) // its port is gone: nothing to hold it on
		}
		if p == nil || p.mode == "" {
			delete(want, k) // written when the port comes up
			continue
		}
		// A CLI entry whose port no longer carries its VLAN (the config's
		// are checked when it is read) is kept, not written, until the
		// port carries it again: in the table it would only make frames
		// of that VLAN drop at the port.
		if w.User && b.cfg.VLANAware() && !p.cfg.Carries(w.VLAN) {
			d.log.Warn("static entry from the CLI not written: its port does not carry its VLAN", "bridge", b.cfg.Name, "mac", w.MAC, "vlan", w.VLAN, "port", p.name())
			delete(want, k)
			continue
		}
		w.Ifindex, w.Slot = p.ifindex, p.slot
		want[k] = w
	}
	for k, s := range b.written {
		if w, ok := want[k]; !ok || w.Ifindex != s.Ifindex || w.Slot != s.Slot {
			if !ok {
				c.staleStatics = append(c.staleStatics, staleStatic{b, s})
				delete(b.written, k)
			}
		}
	}
	for k, w := range want {
		if s, ok := b.written[k]; ok && s.Ifindex == w.Ifindex && s.Slot == w.Slot && s.User == w.User {
			continue
		}
		e := datapath.FDBEntry{Bridge: b.id, VLAN: w.VLAN, MAC: w.MAC, Ifindex: uint32(w.Ifindex), Slot: w.Slot, Static: true, User: w.User}
		if err := d.table.AddFDB(e); err != nil {
			return fmt.Errorf("write static entry %s vlan %d: %w", w.MAC, w.VLAN, err)
		}
		old, had := b.written[k]
		j.add("write static "+k, func() error {
			if had {
				return d.table.AddFDB(datapath.FDBEntry{Bridge: b.id, VLAN: old.VLAN, MAC: old.MAC, Ifindex: uint32(old.Ifindex), Slot: old.Slot, Static: true, User: old.User})
			}
			_, err := d.table.DelFDB(b.id, w.VLAN, w.MAC)
			return err
		})
		b.written[k] = w
	}
	return nil
}

// finalize does what cannot be undone and swaps the next model in.
func (d *Daemon) finalize(c *change) {
	d.endGrow(c)
	// Programs that no port of the next model uses, and their peers.
	for idx, a := range d.attached {
		if c.attached[idx] == a {
			continue
		}
		if err := a.Detach(); err != nil {
			d.log.Warn("detach", "ifindex", idx, "err", err)
		}
	}
	for idx, f := range d.peers {
		if c.peers[idx] == f {
			continue
		}
		if err := f.restore(); err != nil {
			d.log.Warn("restore veth peer", "peer", f.peer.String(), "err", err)
		}
		f.peer.Close()
	}
	d.attached, d.peers = c.attached, c.peers
	c.closePeerCands()
	for _, s := range c.staleStatics {
		if _, err := d.table.DelFDB(s.b.id, s.s.VLAN, s.s.MAC); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			d.log.Warn("delete static entry", "bridge", s.b.cfg.Name, "mac", s.s.MAC, "err", err)
		}
	}
	// Entries of what went away or stopped forwarding, from one dump.
	for _, p := range c.removedPorts {
		d.log.Info("port removed", "bridge", p.bridge.cfg.Name, "port", p.name())
	}
	for _, b := range c.removedBridges {
		d.log.Info("bridge removed", "bridge", b.cfg.Name)
	}
	d.release(c)
	for _, b := range c.order {
		if d.bridges[b.cfg.Name] == nil {
			d.log.Info("bridge added", "bridge", b.cfg.Name, "id", b.id)
		}
		var was []config.Mirror
		if old := d.bridges[b.cfg.Name]; old != nil {
			was = old.cfg.Mirrors
		}
		d.logMirrors(b.cfg.Name, was, b.cfg.Mirrors)
	}
	d.bridges = c.next
	d.neighs.configure(d.learnConfig(), time.Now())
	d.syncNeighs()
	d.snoop.configure(d.snoopConfig(), time.Now())
	d.finalizeOverlay(c)
	// Stages no bridge needs any more: every port goes back to the
	// programs without them.
	d.stagesOff(c)
	d.saveState()
	d.agingMayHaveChanged()
}

// slotKey is a port slot of a bridge.
type slotKey struct{ bridge, slot uint16 }

// release flushes the entries of removed ports and bridges and of ports
// that stopped forwarding, and frees the slots and ids of the removed ones;
// if the flush failed they stay dirty (not given out) until a sweep
// flushes them.
func (d *Daemon) release(c *change) {
	slots, ids := map[slotKey]bool{}, map[uint16]bool{}
	for _, p := range c.removedPorts {
		slots[slotKey{p.bridge.id, p.slot}] = true
		d.alloc.freeSlot(p.slot)
	}
	for _, p := range c.stopped {
		slots[slotKey{p.bridge.id, p.slot}] = true
		for k, s := range p.bridge.written {
			if s.Slot == p.slot {
				delete(p.bridge.written, k) // written again when it forwards again
			}
		}
	}
	for _, b := range c.removedBridges {
		ids[b.id] = true
		d.alloc.freeID(b.id)
	}
	if len(slots) == 0 && len(ids) == 0 && len(c.vlanMoved) == 0 && len(c.flipped) == 0 && len(c.locked) == 0 {
		return
	}
	err := d.flush(func(e datapath.FDBEntry) bool {
		if ids[e.Bridge] || slots[slotKey{e.Bridge, e.Slot}] {
			return true
		}
		if e.Static {
			return false
		}
		if c.flipped[e.Bridge] || c.locked[slotKey{e.Bridge, e.Slot}] {
			return true
		}
		p, ok := c.vlanMoved[slotKey{e.Bridge, e.Slot}]
		return ok && !p.Carries(e.VLAN)
	})
	if err == nil {
		return
	}
	d.log.Error("flush of removed or stopped ports' entries failed; their slots and ids are not reused until a sweep flushes them", "err", err)
	for _, p := range c.removedPorts {
		d.alloc.dirtySlot(p.slot)
	}
	for _, b := range c.removedBridges {
		d.alloc.dirtyID(b.id)
	}
}

// flushSlot deletes every entry, static or learned, on a port slot of a
// bridge, and says whether all went. Statics are written again when the
// port forwards again.
func (d *Daemon) flushSlot(b *bridgeState, slot uint16) bool {
	err := d.flush(func(e datapath.FDBEntry) bool { return slotKey{e.Bridge, e.Slot} == slotKey{b.id, slot} })
	for k, s := range b.written {
		if s.Slot == slot {
			delete(b.written, k)
		}
	}
	if err != nil {
		d.log.Error("flush of a port's entries failed; its slot is not reused until a sweep flushes it", "bridge", b.cfg.Name, "slot", slot, "err", err)
		return false
	}
	return true
}

// flush deletes the entries match selects, walking the table a chunk at a
// time (each chunk's go before the next is read: the table is never held
// whole, under the lock as this is); a dump or a delete that fails fails
// the flush, which may then have deleted a part of them.
func (d *Daemon) flush(match func(datapath.FDBEntry) bool) error {
	var gone []datapath.FDBEntry
	return d.table.WalkFDB(func(es []datapath.FDBEntry) error {
		gone = gone[:0]
		for _, e := range es {
			if match(e) {
				gone = append(gone, e)
			}
		}
		_, err := d.table.DelFDBs(gone)
		return err
	})
}

// forget takes what the world took away out of the model before an apply:
// attachments whose interface was deleted, or renamed (the program leaves a
// renamed interface; a port named after the new name, if any, takes it at
// this apply). Their ports go down and their entries are flushed.
func (d *Daemon) forget() {
	for idx, a := range d.attached {
		l, err := d.sys.LinkByIndex(idx)
		gone := ""
		switch {
		case errors.Is(err, errNoLink):
			gone = "was deleted"
		case err != nil:
			d.log.Warn("look up an attached interface", "ifindex", idx, "err", err)
			continue
		}
		owned := false
		for _, b := range d.bridges {
			for _, p := range b.ports {
				if p.ifindex != idx || p.mode == "" {
					continue
				}
				owned = true
				why := gone
				if why == "" && l.Name != p.name() {
					why = fmt.Sprintf("was renamed to %q", l.Name)
				}
				if why != "" {
					d.portGone(p, fmt.Sprintf("interface %q %s", p.name(), why))
				}
			}
		}
		// A link no port owns (adopted, or left by a daemon that died
		// between an attach and its port's write) is the apply's to keep
		// for a port that wants it, or to detach at its end.
		still := false
		for _, b := range d.bridges {
			for _, p := range b.ports {
				still = still || (p.ifindex == idx && p.mode != "")
			}
		}
		if owned && !still {
			if err := a.Detach(); err != nil && gone == "" {
				d.log.Warn("detach", "ifindex", idx, "err", err)
			}
			delete(d.attached, idx)
			if f := d.peers[idx]; f != nil {
				if gone == "" {
					_ = f.restore()
				}
				f.peer.Close()
				delete(d.peers, idx)
			}
		}
	}
}

// portGone takes a port whose interface went away out of the dataplane:
// out of its bridge's floods, out of the port maps, its entries flushed.
func (d *Daemon) portGone(p *portState, why string) {
	p.mode, p.why, p.running = "", why, false
	b := p.bridge
	// Out of its bridge's floods, and those of the bridges patched to it.
	for _, tb := range append([]*bridgeState{b}, b.tree...) {
		want := tb.desired()
		if sameBridgeInfo(&want, tb.info) {
			continue
		}
		if err := d.topo.SetBridge(want); err != nil {
			d.log.Error("update bridge", "bridge", tb.cfg.Name, "err", err)
		} else {
			tb.info = &want
		}
	}
	if p.written != nil {
		if err := d.topo.DelPort(p.written.Ifindex, p.written.Slot); err != nil {
			d.log.Error("remove port", "bridge", b.cfg.Name, "port", p.name(), "err", err)
		} else {
			p.written = nil
		}
	}
	if !d.flushSlot(b, p.slot) {
		// The slot keeps entries that name the old interface: the port
		// takes a clean slot, and this one waits for a sweep. With no
		// clean slot to give, the port keeps its own (marked dirty, so
		// never given out twice) and its stale entries meet the egress
		// check until a sweep flushes them.
		d.alloc.dirtySlot(p.slot)
		if s, err := d.alloc.slot(); err == nil {
			if d.topo.ResetPort(s) == nil {
				d.alloc.freeSlot(p.slot)
				p.slot = s
			} else {
				d.alloc.freeSlot(s) // no port holds it: give it back
			}
		}
	}
	p.ifindex = 0
}

// modeLink is what mode.Decide needs to know of an interface; the veth
// peer is looked for only when the decision needs it (peerFixable).
func modeLink(l Link) mode.Link {
	return mode.Link{
		Name: l.Name, Type: l.Type, Physical: l.Physical,
		NativeXDP:      l.XDP.Has(netdevXDPBasic),
		TakesRedirects: l.XDP.Has(netdevXDPNdoXmit),
	}
}

// closePeerCands closes the peers opened only to look at.
func (c *change) closePeerCands() {
	for idx, f := range c.peerCands {
		if c.peers[idx] != f {
			f.peer.Close()
		}
	}
	c.peerCands = nil
}

// logMirrors says which mirrors of a bridge an apply added, changed and
// removed.
func (d *Daemon) logMirrors(bridge string, was, now []config.Mirror) {
	find := func(ms []config.Mirror, name string) *config.Mirror {
		for i := range ms {
			if ms[i].Name == name {
				return &ms[i]
			}
		}
		return nil
	}
	for _, m := range now {
		args := []any{"bridge", bridge, "mirror", m.Name, "ports", strings.Join(m.Ports, ","), "direction", m.Direction(), "to", m.To}
		if len(m.VLANs) > 0 {
			args = append(args, "vlans", config.VLANRanges(m.VLANs))
		}
		switch o := find(was, m.Name); {
		case o == nil:
			d.log.Info("mirror added", args...)
		case !slices.Equal(o.Ports, m.Ports) || o.In != m.In || o.Out != m.Out || o.To != m.To || !slices.Equal(o.VLANs, m.VLANs):
			d.log.Info("mirror changed", args...)
		}
	}
	for _, m := range was {
		if find(now, m.Name) == nil {
			d.log.Info("mirror removed", "bridge", bridge, "mirror", m.Name)
		}
	}
}
