package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/overlay"
)

// Encapsulation in XDP (docs/overlay.md): for each remote MAC of an
// overlay port in a bridge with xdp ports, the daemon writes the outer
// headers its frames take (the next hop's addresses, this host's VTEP and
// the remote one, the VNI, the UDP port), and the XDP program
// encapsulates a known unicast frame to that MAC itself and redirects it
// into the underlay device, instead of handing it to the vxlan device
// through the xdp way in. Only where that is safe: an IPv4 VTEP, a route
// and a neighbour the kernel knows (the first frames to a VTEP take the
// way in, and the kernel resolves the neighbour for them), and an
// underlay device that takes XDP redirects. The whole set is compared
// with what the dataplane holds at each comparison of the overlay (once a
// second, and when nudged); a MAC that changes VTEP loses its headers at
// once, and takes the way in until the next comparison writes the new ones.

// encapWriter is a dataplane that encapsulates in XDP (internal/datapath).
type encapWriter interface {
	SetEncap(bridge, vlan uint16, mac net.HardwareAddr, e datapath.Encap) error
	DelEncap(bridge, vlan uint16, mac net.HardwareAddr) error
	Encaps() (map[datapath.EncapKey]datapath.Encap, error)
}

// bridgeHasXDP says whether a port of b forwards at XDP: only their frames
// read the headers.
func bridgeHasXDP(b *bridgeState) bool {
	for _, p := range b.ports {
		if p.mode == mode.XDP && p.forwards() {
			return true
		}
	}
	return false
}

// wantEncaps is the headers the dataplane should hold now.
func (d *Daemon) wantEncaps() map[datapath.EncapKey]datapath.Encap {
	want := map[datapath.EncapKey]datapath.Encap{}
	type hop struct {
		nh overlay.NextHop
		ok bool
	}
	hops := map[[2]netip.Addr]hop{}
	for _, p := range d.overlayPorts() {
		if !bridgeHasXDP(p.bridge) {
			continue
		}
		st, ok := d.ovl.mgr.Status(p.cfg.VXLAN)
		if !ok {
			continue
		}
		for _, r := range st.Remotes {
			hk := [2]netip.Addr{st.VTEP, r.VTEP}
			h, seen := hops[hk]
			if !seen {
				h.nh, h.ok = d.encapHop(st.VTEP, r.VTEP)
				hops[hk] = h
			}
			if !h.ok {
				continue
			}
			k := datapath.EncapKey{Bridge: p.bridge.id, VLAN: overlayVLAN(p), MAC: overlay.MAC6(r.MAC)}
			want[k] = datapath.Encap{Ifindex: uint32(h.nh.Ifindex), Hdr: overlay.Header(h.nh, st.VTEP, r.VTEP, p.cfg.VXLAN, uint16(p.cfg.DstPort))}
		}
	}
	return want
}

// encapHop is the next hop from local to vtep, if frames may be
// encapsulated to it in XDP: resolved, and its device takes XDP
// redirects (a veth only while its peer has GRO on or an XDP program).
func (d *Daemon) encapHop(local, vtep netip.Addr) (overlay.NextHop, bool) {
	nh, err := d.ovl.nextHop(local, vtep)
	if err != nil {
		if !errors.Is(err, overlay.ErrUnresolved) {
			d.log.Debug("overlay: no XDP encapsulation to a VTEP", "vtep", vtep, "err", err)
		}
		return nh, false
	}
	l, err := d.sys.LinkByIndex(nh.Ifindex)
	if err != nil || l.XDPErr != nil || !l.XDP.Has(netdevXDPNdoXmit) {
		return nh, false
	}
	return nh, true
}

// syncEncaps makes the dataplane's headers what wantEncaps says. Called
// with d.mu held.
func (d *Daemon) syncEncaps() error {
	w := d.ovl.encap
	if w == nil {
		return nil
	}
	if d.ovl.encaps == nil {
		cur, err := w.Encaps() // an earlier daemon's (persist)
		if err != nil {
			return fmt.Errorf("overlay: read the XDP encapsulations: %w", err)
		}
		if cur == nil {
			cur = map[datapath.EncapKey]datapath.Encap{}
		}
		d.ovl.encaps = cur
	}
	want := map[datapath.EncapKey]datapath.Encap{}
	if len(d.overlayPorts()) > 0 {
		want = d.wantEncaps()
	}
	var errs []error
	for k, e := range want {
		if cur, ok := d.ovl.encaps[k]; ok && cur == e {
			continue
		}
		if err := w.SetEncap(k.Bridge, k.VLAN, k.MAC[:], e); err != nil {
			errs = append(errs, err)
			continue
		}
		d.ovl.encaps[k] = e
	}
	for k := range d.ovl.encaps {
		if _, ok := want[k]; ok {
			continue
		}
		if err := w.DelEncap(k.Bridge, k.VLAN, k.MAC[:]); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(d.ovl.encaps, k)
	}
	return errors.Join(errs...)
}

// dropEncap takes a remote MAC's headers away at once (it changed VTEP or
// went): its frames take the way in until the next comparison. Called
// with d.mu held.
func (d *Daemon) dropEncap(p *portState, mac net.HardwareAddr) {
	k := datapath.EncapKey{Bridge: p.bridge.id, VLAN: overlayVLAN(p), MAC: overlay.MAC6(mac)}
	if _, ok := d.ovl.encaps[k]; !ok || d.ovl.encap == nil {
		return
	}
	if err := d.ovl.encap.DelEncap(k.Bridge, k.VLAN, mac); err != nil {
		d.log.Warn("overlay: take an XDP encapsulation away", "mac", mac, "err", err)
		return
	}
	delete(d.ovl.encaps, k)
}
