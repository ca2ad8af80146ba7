package config

import (
	"slices"

	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/overlay"
)

// Overlay ports (issue 30, docs/overlay.md): a port with vxlan = VNI is the
// VXLAN device of that VNI, which the daemon creates, attaches at tc and
// keeps in step with FRR's EVPN. The parser checks the form of what the
// file says: a VNI once in all bridges, the keys an overlay port takes,
// its VLAN carried by another port of a VLAN-aware bridge, and [daemon]
// vtep present; the daemon checks at apply that vtep is an address of its
// namespace.

// overlayPort checks the keys of overlay port p (its vxlan key vx) that
// relate to each other, and makes it the port of its device.
func (c *checker) overlayPort(t, vx *value, field, bridge string, p *Port) {
	for _, k := range []string{"interface", "patch", "name", "trunk", "native"} {
		if v, ok := t.vals[k]; ok {
			c.errorf(v.line, field+"."+k, "conflicts with vxlan at line %d: an overlay port is the VXLAN device the daemon creates for its VNI (%s)", vx.line, k)
		}
	}
	if v, ok := t.vals["learning"]; ok && !p.Has(flagNoLearn) {
		c.errorf(v.line, field+".learning", "an overlay port learns its remote addresses from the control plane (FRR), never from frames; leave learning out")
	}
	if v, ok := t.vals["mode"]; ok && p.Mode != mode.Auto && p.Mode != mode.TC {
		c.errorf(v.line, field+".mode", "an overlay port attaches at tc (the kernel encapsulates); %q is not for it", p.Mode)
	}
	p.Mode = mode.TC
	p.Policy.Flags |= flagNoLearn | flagOverlay
	if p.DstPort == 0 {
		p.DstPort = DefaultDstPort
	}
	if p.VXLAN == 0 {
		return // out of range, reported by leaf
	}
	p.Interface = OverlayDevice(p.VXLAN)
	ref := portRef{bridge: bridge, line: vx.line}
	if c.vnis == nil {
		c.vnis = map[uint32]portRef{}
	}
	if prev, dup := c.vnis[p.VXLAN]; dup {
		c.errorf(vx.line, field+".vxlan", "VNI %d is also an overlay port of %s at line %d", p.VXLAN, prev.bridge, prev.line)
		return
	}
	c.vnis[p.VXLAN] = ref
	// The device's name is taken from the names of interfaces.
	if prev, dup := c.ifaces[p.Interface]; dup {
		c.errorf(vx.line, field+".vxlan", "the overlay port's device %q is also a port of %s at line %d", p.Interface, prev.bridge, prev.line)
	} else {
		c.ifaces[p.Interface] = ref
	}
	if c.overlay == nil {
		c.overlay = &ref
	}
}

// overlayVLANs checks the overlay ports of one bridge against its other
// ports: on a VLAN-aware bridge each carries a VLAN another port carries,
// one overlay port a VLAN; on another bridge there is one overlay port at
// most (two VNIs in one broadcast domain would be one).
func (c *checker) overlayVLANs(bp *bridgePorts, sites []portSite) {
	seen := map[uint16]int{} // VLAN -> line of its overlay port
	for i := range bp.ports {
		p := &bp.ports[i]
		if !p.IsOverlay() {
			continue
		}
		vx := sites[i].t.vals["vxlan"]
		if prev, dup := seen[p.VLAN]; dup {
			if bp.aware {
				c.errorf(vx.line, sites[i].field+".vxlan", "VLAN %d of %s has an overlay port already, at line %d: one VNI a VLAN", p.VLAN, bp.label, prev)
			} else {
				c.errorf(vx.line, sites[i].field+".vxlan", "%s has an overlay port already, at line %d: a bridge that is not VLAN-aware carries one VNI; give each overlay port a vlan", bp.label, prev)
			}
			continue
		}
		seen[p.VLAN] = vx.line
		if !bp.aware || !bp.vlans[i].ok {
			continue
		}
		carried := false
		for j := range bp.ports {
			if q := &bp.ports[j]; j != i && !q.IsOverlay() && q.Carries(p.VLAN) {
				carried = true
				break
			}
		}
		if !carried {
			line := vx.line
			if v, ok := sites[i].t.vals["vlan"]; ok {
				line = v.line
			}
			c.errorf(line, sites[i].field+".vlan", "VLAN %d is carried by no other port of %s: the overlay would join nothing to it", p.VLAN, bp.label)
		}
	}
}

// needVTEP reports an overlay port with no [daemon] vtep.
func (c *checker) needVTEP(d *Daemon) {
	if c.overlay != nil && c.vtepLine == 0 {
		c.errorf(c.overlay.line, "daemon.vtep", "is required: %s has an overlay port (vxlan) at line %d, and FRR would otherwise silently use its router-id", c.overlay.bridge, c.overlay.line)
	}
}

// overlayObjects reports a port whose interface is one of the kernel
// objects the daemon makes for a VNI of the file's overlay ports (its
// kernel bridge, its advertise port and that one's peer; internal/overlay's
// Names): a port there would switch its bridge's frames into the VNI. The
// same names for a VNI the file has not are anyone's (QEMU names its TAPs
// tap0, tap1, ...).
func (c *checker) overlayObjects() {
	names := make([]string, 0, len(c.ifaces))
	for name, ref := range c.ifaces {
		if ref.field != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		vni, ok := overlay.VNIOf(name)
		if !ok {
			continue
		}
		ov, ours := c.vnis[vni]
		if !ours {
			continue
		}
		n := overlay.NamesOf(vni)
		what := map[string]string{n.Bridge: "kernel bridge", n.Adv: "advertise port", n.AdvPeer: "advertise port's peer"}[name]
		if what == "" {
			continue // the device and the way in's ends are checked as they are read
		}
		ref := c.ifaces[name]
		c.errorf(ref.line, ref.field, "%q is VNI %d's %s, which the daemon makes for the overlay port of %s at line %d (docs/overlay.md): not a port", name, vni, what, ov.bridge, ov.line)
	}
}

// OverlayPorts are the overlay ports of every bridge, with their bridge's
// name, in file order.
func (cfg *Config) OverlayPorts() []OverlayRef {
	var out []OverlayRef
	for i := range cfg.Bridges {
		b := &cfg.Bridges[i]
		for j := range b.Ports {
			if b.Ports[j].IsOverlay() {
				out = append(out, OverlayRef{Bridge: b.Name, Port: b.Ports[j]})
			}
		}
	}
	return out
}

// OverlayRef is an overlay port and the bridge it is a port of.
type OverlayRef struct {
	Bridge string
	Port   Port
}
