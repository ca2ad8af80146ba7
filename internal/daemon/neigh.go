package daemon

import (
	"fmt"
	"slices"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// The neighbour table (docs/switching.md, "Neighbour suppression"): IP to
// MAC per bridge and VLAN, which a bridge with neigh_suppress answers ARP
// and neighbour discovery from. The daemon writes its static entries, the
// ports' (config.Port.Neighbours: allowed_ips with allowed_macs), after
// each apply: they are facts of the configuration, made again from it,
// and an entry missing for a moment costs a flood, not a wrong answer.
// Learned entries are the learner's (neighlearn.go); a static or remote
// entry writes over a learned one of its address.

// neighTable is a dataplane with a neighbour table (internal/datapath).
type neighTable interface {
	Neighs() ([]datapath.NeighEntry, error)
	SetNeighs(map[datapath.NeighKey]datapath.Neigh) error
}

// wantNeighs is the static entries of the ports that forward (a station
// whose port does not is not answered for), and the overlay ports' remote
// ones (overlayneigh.go). Beyond the table's room, the rest are left out
// (over says how many).
func (d *Daemon) wantNeighs() (want map[datapath.NeighKey]datapath.Neigh, over int) {
	want, over = d.localNeighs()
	over += d.remoteNeighs(want, tbpf.MaxNeigh)
	return want, over
}

// localNeighs is the static entries of the ports that forward.
func (d *Daemon) localNeighs() (want map[datapath.NeighKey]datapath.Neigh, over int) {
	want = map[datapath.NeighKey]datapath.Neigh{}
	for _, b := range d.bridgeOrder() {
		for _, p := range b.ports {
			if !p.forwards() || p.cfg.IsPatch() || p.cfg.IsOverlay() {
				continue
			}
			for _, n := range p.cfg.Neighbours() {
				k := datapath.NeighKey{Bridge: b.id, VLAN: n.VLAN, Addr: n.Addr.Unmap()}
				if _, ok := want[k]; ok {
					continue // another port holds it too: the first says
				}
				if len(want) >= tbpf.MaxNeigh {
					over++
					continue
				}
				want[k] = datapath.Neigh{MAC: n.MAC, Slot: p.slot}
			}
		}
	}
	return want, over
}

// bridgeOrder is the bridges by id, so that what wins a shared address
// does not change from one apply to the next.
func (d *Daemon) bridgeOrder() []*bridgeState {
	var out []*bridgeState
	for _, b := range d.bridges {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *bridgeState) int { return int(a.id) - int(b.id) })
	return out
}

// syncNeighs writes the table's static entries as the model has them.
// Called with d.mu held.
func (d *Daemon) syncNeighs() {
	nt, ok := d.table.(neighTable)
	if !ok {
		return
	}
	want, over := d.wantNeighs()
	if over > 0 {
		d.log.Warn("the neighbour table is full: some ports' addresses are not in it, and requests for them are flooded",
			"left_out", over, "room", tbpf.MaxNeigh)
	}
	// With the learner's lock held: no learned entry is written between
	// the table's read and its static entries' writes.
	if err := d.neighs.fix(want, func() error { return nt.SetNeighs(want) }); err != nil {
		d.log.Warn("write the neighbour table", "err", err)
	}
}

// neighShow is `trestle neigh show [BRIDGE]`.
func (d *Daemon) neighShow(bridge string) ([]ctl.NeighEntry, error) {
	nt, ok := d.table.(neighTable)
	if !ok {
		return nil, fmt.Errorf("this dataplane has no neighbour table")
	}
	if bridge != "" && d.bridges[bridge] == nil {
		return nil, fmt.Errorf("no bridge %q", bridge)
	}
	es, err := nt.Neighs()
	if err != nil {
		return nil, err
	}
	out := []ctl.NeighEntry{}
	for _, b := range d.bridgeOrder() {
		if bridge != "" && b.cfg.Name != bridge {
			continue
		}
		for _, e := range es {
			if e.Bridge != b.id {
				continue
			}
			origin := ctl.NeighStatic
			if e.Learned {
				origin = ctl.NeighLearned
			}
			port, vtep := "", ""
			if p := b.portBySlot(e.Slot); p != nil {
				port = p.name()
				if p.cfg.IsOverlay() {
					origin = ctl.NeighRemote
					if a, ok := d.ovl.mgr.RemoteOf(p.cfg.VXLAN, e.MAC); ok {
						vtep = a.String()
					}
				}
			}
			out = append(out, ctl.NeighEntry{Bridge: b.cfg.Name, IP: e.Addr.String(), MAC: e.MAC.String(), VLAN: e.VLAN,
				Port: port, Origin: origin, AgeSeconds: e.Age.Seconds(), VTEP: vtep})
		}
	}
	return out, nil
}
