package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/overlay"
)

// Encapsulation in the datapath (docs/overlay.md): for each remote MAC of
// an overlay port, the daemon writes the outer headers its frames take
// (the next hop's addresses, this host's VTEP and the remote one, the VNI,
// the UDP port), and the XDP or tc program encapsulates a known unicast
// frame to that MAC itself and redirects it into the underlay device,
// instead of handing it to the vxlan device (through the xdp way in, for
// xdp ports), whose FDB zebra empties while FRR restarts. Only where that
// is safe: an IPv4 VTEP, a route and a neighbour the kernel knows (the
// first frames to a VTEP take the vxlan device, and the kernel resolves
// the neighbour for them), and an underlay device with room for the
// overlay's frames; one that takes no XDP redirect gets headers for tc
// alone (NoXDP: an skb redirect goes to any device). The whole set is
// compared with what the dataplane holds at each comparison of the overlay
// (once a second, and when nudged); a MAC that changes VTEP loses its
// headers at once, and takes the vxlan device until the next comparison
// writes the new ones.

// encapWriter is a dataplane that encapsulates (internal/datapath).
type encapWriter interface {
	SetEncap(bridge, vlan uint16, mac net.HardwareAddr, e datapath.Encap) error
	DelEncap(bridge, vlan uint16, mac net.HardwareAddr) error
	Encaps() (map[datapath.EncapKey]datapath.Encap, error)
}

// wantEncaps is the headers the dataplane should hold now: those of the
// remote MACs that are in the table (inTable, by VNI; nil: all).
func (d *Daemon) wantEncaps(inTable map[uint32]map[[6]byte]bool) map[datapath.EncapKey]datapath.Encap {
	want := map[datapath.EncapKey]datapath.Encap{}
	type hop struct {
		nh      overlay.NextHop
		ok, xdp bool
	}
	hops := map[[2]netip.Addr]hop{}
	for _, p := range d.overlayPorts() {
		st, ok := d.ovl.mgr.Status(p.cfg.VXLAN)
		if !ok {
			continue
		}
		for _, r := range st.Remotes {
			if inTable != nil && !inTable[p.cfg.VXLAN][overlay.MAC6(r.MAC)] {
				continue // left out of the table (max_entries, max_macs): it floods
			}
			hk := [2]netip.Addr{st.VTEP, r.VTEP}
			h, seen := hops[hk]
			if !seen {
				h.nh, h.ok, h.xdp = d.encapHop(st.VTEP, r.VTEP, st.Devices.MTU)
				hops[hk] = h
			}
			if !h.ok {
				continue
			}
			k := datapath.EncapKey{Bridge: p.bridge.id, VLAN: overlayVLAN(p), MAC: overlay.MAC6(r.MAC)}
			want[k] = datapath.Encap{Ifindex: uint32(h.nh.Ifindex), Hdr: overlay.Header(h.nh, st.VTEP, r.VTEP, p.cfg.VXLAN, uint16(p.cfg.DstPort)), NoXDP: !h.xdp}
		}
	}
	return want
}

// encapHop is the next hop from local to vtep, if frames may be
// encapsulated to it: resolved, and its device's MTU room for the
// overlay's frames encapsulated (the vxlan device's MTU, mtu, plus the
// outer headers: a redirect longer than the device takes is lost without a
// word, where the vxlan device would have said so). xdp: its device takes
// XDP redirects too (a veth only while its peer has GRO on or an XDP
// program); an skb redirect, tc's, goes to any.
func (d *Daemon) encapHop(local, vtep netip.Addr, mtu int) (nh overlay.NextHop, ok, xdp bool) {
	nh, err := d.ovl.nextHop(local, vtep)
	if err != nil {
		if !errors.Is(err, overlay.ErrUnresolved) {
			d.log.Debug("overlay: no encapsulation in the datapath to a VTEP", "vtep", vtep, "err", err)
		}
		return nh, false, false
	}
	if nh.MTU < mtu+overlay.HdrLen {
		return nh, false, false
	}
	l, err := d.sys.LinkByIndex(nh.Ifindex)
	if err != nil {
		return nh, false, false
	}
	return nh, true, l.XDPErr == nil && l.XDP.Has(netdevXDPNdoXmit)
}

// syncEncaps makes the dataplane's headers what wantEncaps says (for the
// remote MACs of inTable). Called with d.mu held.
func (d *Daemon) syncEncaps(inTable map[uint32]map[[6]byte]bool) error {
	w := d.ovl.encap
	if w == nil {
		return nil
	}
	if d.ovl.encaps == nil {
		cur, err := w.Encaps() // an earlier daemon's (persist)
		if err != nil {
			return fmt.Errorf("overlay: read the datapath's encapsulations: %w", err)
		}
		if cur == nil {
			cur = map[datapath.EncapKey]datapath.Encap{}
		}
		d.ovl.encaps = cur
	}
	want := map[datapath.EncapKey]datapath.Encap{}
	if len(d.overlayPorts()) > 0 {
		want = d.wantEncaps(inTable)
	}
	var errs []error
	// Deletions first, so that their room is there for the new ones.
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
	failed, first := 0, error(nil)
	for k, e := range want {
		if cur, ok := d.ovl.encaps[k]; ok && cur == e {
			continue
		}
		if err := w.SetEncap(k.Bridge, k.VLAN, k.MAC[:], e); err != nil {
			// A full map, say: those frames take the way in.
			if failed++; first == nil {
				first = err
			}
			continue
		}
		d.ovl.encaps[k] = e
	}
	if failed > 0 {
		errs = append(errs, fmt.Errorf("overlay: %d encapsulations not written to the datapath, their frames take the vxlan device (first: %w)", failed, first))
	}
	return errors.Join(errs...)
}

// clearEncaps removes every header the dataplane holds, for a daemon that
// stops and leaves its datapath forwarding (persist): while no daemon
// follows zebra's moves, the overlay's frames take the vxlan device, whose
// entries zebra keeps. Called with d.mu held.
func (d *Daemon) clearEncaps() error {
	w := d.ovl.encap
	if w == nil {
		return nil
	}
	cur, err := w.Encaps()
	if err != nil {
		return err
	}
	var errs []error
	for k := range cur {
		if err := w.DelEncap(k.Bridge, k.VLAN, k.MAC[:]); err != nil {
			errs = append(errs, err)
		}
	}
	d.ovl.encaps = nil
	return errors.Join(errs...)
}

// encapsTo says whether the dataplane holds headers for remote MAC mac of
// overlay port p to vtep. Called with d.mu held.
func (d *Daemon) encapsTo(p *portState, mac net.HardwareAddr, vtep netip.Addr) bool {
	e, ok := d.ovl.encaps[datapath.EncapKey{Bridge: p.bridge.id, VLAN: overlayVLAN(p), MAC: overlay.MAC6(mac)}]
	return ok && vtep.IsValid() && overlay.HeaderVTEP(e.Hdr) == vtep
}

// dropEncap takes a remote MAC's headers away at once (it changed VTEP or
// went): its frames take the way in until the next comparison. Called
// with d.mu held.
func (d *Daemon) dropEncap(p *portState, mac net.HardwareAddr) {
	k := datapath.EncapKey{Bridge: p.bridge.id, VLAN: overlayVLAN(p), MAC: overlay.MAC6(mac)}
	if d.ovl.encap == nil {
		return
	}
	if _, ok := d.ovl.encaps[k]; !ok && d.ovl.encaps != nil {
		return // known not to be there; before the first sync, unknown
	}
	if err := d.ovl.encap.DelEncap(k.Bridge, k.VLAN, mac); err != nil {
		d.log.Warn("overlay: take an encapsulation away", "mac", mac, "err", err)
		return
	}
	delete(d.ovl.encaps, k)
}
