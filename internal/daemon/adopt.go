package daemon

import (
	"fmt"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
)

// adopt builds the model from what a pinned datapath holds (bridges by
// their names in the maps, ports by ifindex, the links on them, static
// entries), and takes back the peers an earlier daemon recorded. The apply
// that follows diffs the config against it: what the config still has keeps
// forwarding untouched, with its learned entries, counters and timestamps.
func (d *Daemon) adopt() error {
	var recorded stateFile
	if d.state != nil {
		var err error
		if recorded, err = d.state.load(); err != nil {
			d.log.Warn("earlier daemon's state unreadable; its peers are not restored", "err", err)
		}
	}
	if took, err := d.ovl.mgr.Adopt(recorded.VNIs); err != nil {
		d.log.Warn("overlay: cannot take over the VNIs of an earlier daemon", "err", err)
	} else if len(took) > 0 {
		d.log.Info("overlay VNIs of an earlier daemon taken over", "vnis", took)
	}
	links, err := d.pins.AdoptedLinks()
	if err != nil {
		return err
	}
	bridges, err := d.pins.Bridges()
	if err != nil {
		return err
	}
	ports, err := d.pins.Ports()
	if err != nil {
		return err
	}
	byLink := map[int]Attachment{}
	for _, a := range links {
		if other := byLink[a.Ifindex()]; other != nil {
			// Two modes on one interface: a daemon died between an attach
			// in a new mode and the detach of the old. The apply attaches
			// what the config wants; neither may be left untracked.
			d.log.Warn("two programs were left on one interface; one is detached", "ifindex", a.Ifindex(), "kept", other.Mode(), "detached", a.Mode())
			if err := a.Detach(); err != nil {
				return fmt.Errorf("detach the second program on ifindex %d: %w", a.Ifindex(), err)
			}
			continue
		}
		byLink[a.Ifindex()] = a
		d.attached[a.Ifindex()] = a // detached by the apply unless a port keeps it
	}
	filters := d.adoptFilters(byLink)
	byID := map[uint16]*bridgeState{}
	for _, bi := range bridges {
		if bi.Name == "" || d.bridges[bi.Name] != nil {
			continue
		}
		info := bi
		b := &bridgeState{id: bi.ID, info: &info, cliStatics: map[string]config.Static{}, written: map[string]staticEntry{}, frozen: map[string]frozenEntry{},
			cfg: config.Bridge{Name: bi.Name, MaxEntries: int(bi.MaxEntries), Aging: config.DefaultAging}}
		d.bridges[bi.Name] = b
		byID[bi.ID] = b
		d.alloc.takeID(bi.ID)
	}
	forwarding := map[uint16]map[uint16]bool{}
	for _, b := range byID {
		forwarding[b.id] = map[uint16]bool{}
		for _, p := range b.info.Ports {
			forwarding[b.id][p.Slot] = true
		}
	}
	// Patch ports have no interface: each is named by the bridge of its
	// peer, which the plan matches to the config's patch to that bridge.
	patchBridge := map[uint16]*bridgeState{} // patch slot -> its bridge
	for _, pi := range ports {
		if datapath.IsPatchIfindex(pi.Ifindex) && byID[pi.Bridge] != nil {
			patchBridge[pi.Slot] = byID[pi.Bridge]
		}
	}
	for _, pi := range ports {
		b := byID[pi.Bridge]
		if datapath.IsPatchIfindex(pi.Ifindex) {
			if peer := patchBridge[pi.Peer]; b != nil && peer != nil && d.alloc.adoptable(pi.Slot) {
				w := pi
				b.ports = append(b.ports, &portState{bridge: b, slot: pi.Slot, ifindex: int(pi.Ifindex), written: &w,
					mode: modePatch, running: true, why: "adopted from the pinned datapath",
					cfg: config.Port{Patch: peer.cfg.Name, Name: "patch-" + peer.cfg.Name, MaxMACs: int(pi.MaxMACs)}})
				d.alloc.takeSlot(pi.Slot)
				continue
			}
		}
		l, lerr := d.sys.LinkByIndex(int(pi.Ifindex))
		if b == nil || lerr != nil || !d.alloc.adoptable(pi.Slot) {
			// Of no bridge, or its interface is gone: it goes, and its
			// slot waits for a sweep to flush it.
			slot := pi.Slot
			if !d.alloc.adoptable(slot) {
				slot = 0 // the slot is a live port's: its egress stays
			}
			if err := d.topo.DelPort(pi.Ifindex, slot); err != nil {
				return fmt.Errorf("remove stale port ifindex %d: %w", pi.Ifindex, err)
			}
			d.alloc.dirtySlot(pi.Slot)
			continue
		}
		w := pi
		p := &portState{bridge: b, slot: pi.Slot, ifindex: int(pi.Ifindex), via: [2]int{int(pi.Via), int(pi.ViaPeer)}, written: &w,
			cfg: config.Port{Interface: l.Name, Mode: mode.Auto, MaxMACs: int(pi.MaxMACs)}}
		if a := byLink[int(pi.Ifindex)]; a != nil {
			p.mode, p.why = a.Mode(), "adopted from the pinned datapath"
			p.running = forwarding[b.id][pi.Slot]
		}
		d.alloc.takeSlot(pi.Slot)
		b.ports = append(b.ports, p)
	}
	nStatic, nOrphan := 0, 0
	if len(byID) > 0 {
		// A chunk at a time, as every reader of the table (the
		// statics it finds are the config's and the CLI's, bounded).
		err := d.table.WalkFDB(func(es []datapath.FDBEntry) error {
			for _, e := range es {
				b := byID[e.Bridge]
				var p *portState
				if b != nil {
					p = b.portBySlot(e.Slot)
				}
				if p == nil {
					// An entry of no adopted port: it names nothing here.
					if _, err := d.table.DelFDB(e.Bridge, e.VLAN, e.MAC); err == nil {
						nOrphan++
					}
					continue
				}
				if !e.Static {
					continue
				}
				s := config.Static{MAC: e.MAC, Port: p.name(), VLAN: e.VLAN}
				b.written[staticKey(s)] = staticEntry{Static: s, Ifindex: int(e.Ifindex), Slot: e.Slot, User: e.User}
				if e.User {
					b.cliStatics[staticKey(s)] = s
				}
				nStatic++
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// Peers: those of adopted links are held again; the others, of an
	// earlier daemon that stopped without restoring them, are restored.
	for _, r := range recorded.Peers {
		peer, err := d.sys.FindPeer(r.Port, r.Peer.Netns)
		if err != nil {
			d.log.Info("veth peer changed by an earlier daemon is gone with its veth; nothing to restore", "port_ifindex", r.Port, "peer", r.Peer.Name)
			continue
		}
		f := &peerFix{peer: peer, orig: r.Original}
		if d.attached[r.Port] != nil {
			d.peers[r.Port] = f
			continue
		}
		if err := f.restore(); err != nil {
			d.log.Warn("restore a veth peer changed by an earlier daemon", "peer", peer.String(), "err", err)
		} else {
			d.log.Info("restored a veth peer changed by an earlier daemon", "peer", peer.String())
		}
		peer.Close()
	}
	// Maps that started empty (new in this build, or of a changed layout
	// that is rebuilt, not copied) hold nothing of what the model says was
	// written: everything is written again.
	if fresh := d.pins.Fresh(); len(fresh) > 0 && len(byID) > 0 {
		for _, b := range d.bridges {
			b.info = nil
			for _, p := range b.ports {
				p.written = nil
			}
		}
		d.log.Info("maps started empty: every port and bridge is written again", "maps", fresh)
	}
	if len(byID) > 0 || len(links) > 0 {
		d.log.Info("adopted the pinned datapath", "bridges", len(byID), "ports", len(ports), "links", len(links), "filters", filters, "static_entries", nStatic, "stale_entries_removed", nOrphan)
	} else if filters > 0 {
		d.log.Info("took over the tc filters an earlier daemon left on its run-time ports", "filters", filters)
	}
	return nil
}

// adoptFilters takes over the tc filters (datapath.HookFilter) an earlier
// daemon left on the interfaces of the run-time ports it recorded, the
// ports it attached with them (hookFor), into d.attached and byLink, with
// or without persist: a filter is not pinned, so it stays when that
// daemon was killed too. The apply keeps those whose port stays at tc, and
// detaches the others, as it does adopted links. It says how many.
func (d *Daemon) adoptFilters(byLink map[int]Attachment) int {
	n := 0
	for _, rp := range d.run {
		l, err := d.sys.LinkByName(rp.Interface)
		if err != nil || l.Index != rp.Ifindex || byLink[l.Index] != nil {
			continue
		}
		a, err := d.attacher.AdoptFilter(l.Index)
		if err != nil {
			d.log.Warn("cannot tell whether a run-time port's interface has a tc filter of an earlier daemon; the apply attaches one over it", "port", rp.Interface, "err", err)
			continue
		}
		if a != nil {
			byLink[l.Index] = a
			d.attached[l.Index] = a
			n++
		}
	}
	return n
}

// unpin makes an adopted, persisted datapath one that stops with this
// daemon (it runs without persist).
func (d *Daemon) unpin() error {
	for _, a := range d.attached {
		if err := a.Unpin(); err != nil {
			return err
		}
	}
	if err := d.pins.Unpin(); err != nil {
		return err
	}
	d.log.Info("took over a persisted datapath without a break; persist is off, so it stops with this daemon")
	return nil
}
