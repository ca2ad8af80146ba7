package daemon

import (
	"maps"
	"net"
	"net/netip"
	"slices"

	"github.com/trestle/trestle/internal/datapath"
)

// MAC+IP routes across the overlay (docs/overlay.md, "ARP
// suppression across the fabric"): at each comparison of the table with
// the VNIs (runSync), each overlay port's VNI is given the bridge's local
// neighbour entries in the port's VLAN (static and learned), which zebra
// advertises as MAC+IP routes, and gives back the remote ones zebra installed from other VTEPs'
// routes (internal/overlay's SyncNeighs), which the neighbour table holds
// as remote entries of the overlay port: a bridge with neigh_suppress
// answers for a station of another host, a trestle host or a Linux VTEP,
// as for its own.

// syncOverlayNeighs gives each VNI its local neighbours and takes its
// remote ones; the neighbour table is written again when those changed.
func (d *Daemon) syncOverlayNeighs() {
	type job struct {
		vni   uint32
		local map[netip.Addr]net.HardwareAddr
	}
	d.mu.Lock()
	local, _ := d.localNeighs()
	var jobs []job
	for _, p := range d.overlayPorts() {
		j := job{vni: p.cfg.VXLAN, local: map[netip.Addr]net.HardwareAddr{}}
		for k, n := range local {
			if k.Bridge == p.bridge.id && k.VLAN == overlayVLAN(p) {
				j.local[k.Addr] = n.MAC
			}
		}
		// And what the bridge learned there (neighlearn.go), as static
		// ones: a static entry of the same address wins.
		for a, mac := range d.neighs.learnedIn(p.bridge.id, overlayVLAN(p)) {
			if _, ok := j.local[a]; !ok {
				j.local[a] = mac
			}
		}
		jobs = append(jobs, j)
	}
	d.mu.Unlock()

	remote := map[uint32]map[netip.Addr]net.HardwareAddr{}
	var unread []uint32
	for _, j := range jobs {
		r, err := d.ovl.mgr.SyncNeighs(j.vni, j.local)
		if err != nil {
			d.log.Warn("overlay neighbours", "vni", j.vni, "err", err)
			if r == nil {
				// Not read: what was taken stays until a read says
				// otherwise (a failed read is no withdrawal).
				unread = append(unread, j.vni)
			}
		}
		if len(r) > 0 {
			remote[j.vni] = r
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, vni := range unread {
		if old, ok := d.ovl.neighs[vni]; ok {
			remote[vni] = old
		}
	}
	if maps.EqualFunc(remote, d.ovl.neighs, func(a, b map[netip.Addr]net.HardwareAddr) bool {
		return maps.EqualFunc(a, b, func(x, y net.HardwareAddr) bool { return x.String() == y.String() })
	}) {
		return
	}
	d.ovl.neighs = remote
	d.syncNeighs()
}

// remoteNeighs adds to want the remote neighbours of the overlay ports
// that forward, as entries of their port, where no local entry holds the
// address. Called with d.mu held.
func (d *Daemon) remoteNeighs(want map[datapath.NeighKey]datapath.Neigh, room int) (over int) {
	ports := d.overlayPorts()
	slices.SortFunc(ports, func(a, b *portState) int { return int(a.slot) - int(b.slot) })
	for _, p := range ports {
		ips := slices.SortedFunc(maps.Keys(d.ovl.neighs[p.cfg.VXLAN]), netip.Addr.Compare)
		for _, ip := range ips {
			k := datapath.NeighKey{Bridge: p.bridge.id, VLAN: overlayVLAN(p), Addr: ip}
			if _, ok := want[k]; ok {
				continue
			}
			if len(want) >= room {
				over++
				continue
			}
			want[k] = datapath.Neigh{MAC: d.ovl.neighs[p.cfg.VXLAN][ip], Slot: p.slot}
		}
	}
	return over
}
