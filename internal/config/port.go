package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/pelletier/go-toml/v2/unstable"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/linklocal"
	"github.com/trestle/trestle/internal/mode"
)

// Port attaches one interface to a bridge, or is a patch port joining the
// bridge to another one (Patch set), with no interface. On a VLAN-aware
// bridge it is either an access port (VLAN set) or a trunk (Trunk set); on
// other bridges VLAN, Trunk and Native are all zero. Patch ports follow the
// same VLAN rules as the others.
type Port struct {
	Interface string    // "" for a patch port
	Mode      mode.Mode // auto, xdp or tc; auto for a patch port, which has none
	MaxMACs   int       // key max_macs; 0 = unlimited
	// Policy is what the port's keys ask of its entry in the datapath,
	// which the daemon writes as it is: the flag of each boolean key of
	// portTable whose row names one, set when the key is not its default
	// (learning = false sets TR_PORT_NO_LEARN, locked = true
	// TR_PORT_LOCKED, ...), TR_PORT_LIMIT_FORWARD for mac_limit_action =
	// "forward", TR_PORT_OVERLAY for an overlay port, and an ip_guard
	// port's GuardIPs. Read a key's value with Has.
	Policy tbpf.PortPolicy
	// Key patch: the peer bridge, which has a patch port back to this
	// one; "" for an interface port.
	Patch string
	// Key name: a patch port's name, "patch-" + Patch by default; unique
	// among the names of the bridge's ports, interfaces included. "" for
	// an interface port.
	Name string
	// Key vlan: the access VLAN, which untagged and priority-tagged frames
	// join and which leaves the port untagged. 1 by default on a VLAN-aware
	// bridge; 0 on a trunk or on a bridge that is not VLAN-aware.
	VLAN uint16
	// Key trunk: every VID carried tagged, expanded from ranges, sorted,
	// unique; nil when the port is not a trunk.
	Trunk []uint16
	// Key native: the VLAN untagged frames on a trunk join, and which
	// leaves it untagged; one of Trunk. 0 = none: untagged frames are dropped.
	Native uint16
	// Key storm: storm control, the frames a second of each kind of flood
	// the port's ingress accepts (0: no limit); the excess is dropped.
	Storm Storm
	// Key vxlan: an overlay port's VNI (0: not an overlay port). Its
	// Interface is the VXLAN device the daemon creates for it
	// (OverlayDevice), its mode tc and its learning off: remote
	// addresses come from the control plane (docs/overlay.md).
	VXLAN uint32
	// Key mtu: the overlay port's VXLAN device MTU; 0: the underlay's
	// minus 50.
	MTU int
	// Key dstport: the overlay's UDP port, DefaultDstPort unless set.
	DstPort int
	// Key allowed_macs: the addresses a locked port's host sends from,
	// each written as a static entry of the port in every VLAN it carries
	// (AllowedStatics).
	AllowedMACs []net.HardwareAddr
	// Key allowed_ips: an ip_guard port's addresses, IPv4 and IPv6 (not
	// prefixes), each once, in the order given.
	AllowedIPs []netip.Addr
	Line       int // line of the [[bridge.port]] header
}

// Has says whether the port's Policy has the flag f: a boolean key of
// portTable not at its default (locked, ip_guard, learning = false, ...).
func (p *Port) Has(f tbpf.PortFlag) bool { return p.Policy.Has(f) }

// The flags of the port keys that code other than their row reads.
const (
	flagNoLearn      = tbpf.TrestleTrPortFlagsTR_PORT_NO_LEARN
	flagLimitForward = tbpf.TrestleTrPortFlagsTR_PORT_LIMIT_FORWARD
	flagLocked       = tbpf.TrestleTrPortFlagsTR_PORT_LOCKED
	flagIPGuard      = tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD
	flagBPDUGuard    = tbpf.TrestleTrPortFlagsTR_PORT_BPDU_GUARD
	flagQinQ         = tbpf.TrestleTrPortFlagsTR_PORT_QINQ
	flagOverlay      = tbpf.TrestleTrPortFlagsTR_PORT_OVERLAY
)

// MaxAllowedIPs is how many addresses one port's allowed_ips may list.
const MaxAllowedIPs = 64

// GuardIPs are the addresses an ip_guard port's frames may come from:
// its AllowedIPs and the IPv6 link-local address (EUI-64, RFC 4291
// appendix A) of each of its AllowedMACs, which a host with the kernel's
// default addr_gen_mode gives itself. Sorted, each once; nil when the port
// has no ip_guard.
func (p *Port) GuardIPs() []netip.Addr {
	if !p.Has(flagIPGuard) {
		return nil
	}
	out := slices.Clone(p.AllowedIPs)
	for _, m := range p.AllowedMACs {
		out = append(out, linklocal.EUI64(m))
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// Neighbour is an address a port's station holds, in one VLAN (0: the
// bridge is not VLAN-aware): an entry of the bridge's neighbour table.
type Neighbour struct {
	Addr netip.Addr
	MAC  net.HardwareAddr
	VLAN uint16
}

// Neighbours are the static entries of the neighbour table the port's
// keys make, in every VLAN the port carries (as AllowedStatics): on an
// ip_guard port, each of its allowed_ips with its allowed_macs when it has
// one (with several, which holds which address is not said), and the
// EUI-64 link-local address of each allowed MAC (GuardIPs binds them).
// nil without ip_guard: an address a port is not bound to is no fact to
// answer for.
func (p *Port) Neighbours() []Neighbour {
	if !p.Has(flagIPGuard) || len(p.AllowedMACs) == 0 {
		return nil
	}
	vlans := p.VLANs()
	if vlans == nil {
		vlans = []uint16{0}
	}
	var out []Neighbour
	for _, v := range vlans {
		if len(p.AllowedMACs) == 1 {
			for _, a := range p.AllowedIPs {
				out = append(out, Neighbour{Addr: a, MAC: p.AllowedMACs[0], VLAN: v})
			}
		}
		for _, m := range p.AllowedMACs {
			out = append(out, Neighbour{Addr: linklocal.EUI64(m), MAC: m, VLAN: v})
		}
	}
	return out
}

// AllowedStatics are the static entries that bind the port's AllowedMACs
// to it: each address in every VLAN the port carries, or untagged (0) on a
// bridge that is not VLAN-aware.
func (p *Port) AllowedStatics() []Static {
	vlans := p.VLANs()
	if vlans == nil {
		vlans = []uint16{0}
	}
	var out []Static
	for _, m := range p.AllowedMACs {
		for _, v := range vlans {
			out = append(out, Static{MAC: m, Port: p.PortName(), VLAN: v, Line: p.Line})
		}
	}
	return out
}

// Overlay ports (issue 30).
const (
	MaxVNI         = 1<<24 - 1
	DefaultDstPort = 4789 // IANA's VXLAN port
)

// wayInName says whether s names an end of an overlay VNI's xdp way in
// (ttrVNI, ttpVNI: internal/overlay's Names), whose entries in the port
// maps would be a port's.
func wayInName(s string) bool {
	for _, pre := range []string{"ttr", "ttp"} {
		rest, ok := strings.CutPrefix(s, pre)
		if !ok || rest == "" || rest[0] == '0' {
			continue
		}
		if v, err := strconv.ParseUint(rest, 10, 32); err == nil && v >= 1 && v < 1<<24 {
			return true
		}
	}
	return false
}

// OverlayDevice is the name of the VXLAN device of VNI vni, which the
// daemon creates and owns: deterministic, so that a restarted daemon
// adopts it, and at most 11 bytes.
func OverlayDevice(vni uint32) string { return fmt.Sprintf("tvx%d", vni) }

// IsOverlay reports whether the port is an overlay (VXLAN) port.
func (p *Port) IsOverlay() bool { return p.VXLAN != 0 }

// IsPatch reports whether the port is a patch port to another bridge.
func (p *Port) IsPatch() bool { return p.Patch != "" }

// PortName returns what show, fdb, stats and static entries call the port:
// its interface, or a patch port's Name.
func (p *Port) PortName() string {
	if p.IsPatch() {
		return p.Name
	}
	return p.Interface
}

// IsTrunk reports whether the port carries tagged VLANs.
func (p *Port) IsTrunk() bool { return len(p.Trunk) > 0 }

// PVID returns the VLAN untagged frames join: the access VLAN, or a trunk's
// native VLAN. 0 for a trunk without one, and on a bridge that is not
// VLAN-aware.
func (p *Port) PVID() uint16 {
	if p.IsTrunk() {
		return p.Native
	}
	return p.VLAN
}

// Carries reports whether frames of VLAN vid may enter and leave the port.
func (p *Port) Carries(vid uint16) bool {
	if p.IsTrunk() {
		_, found := slices.BinarySearch(p.Trunk, vid)
		return found
	}
	return vid == p.VLAN
}

// VLANs returns every VID the port carries, sorted; nil on a bridge that is
// not VLAN-aware.
func (p *Port) VLANs() []uint16 {
	switch {
	case p.IsTrunk():
		return slices.Clone(p.Trunk)
	case p.VLAN != 0:
		return []uint16{p.VLAN}
	}
	return nil
}

// portVLANs is what port found in a port's VLAN keys, for the checks that
// need the whole bridge.
type portVLANs struct {
	set bool // vlan or trunk is present, valid or not: the bridge is VLAN-aware
	ok  bool // vlan, trunk and native are valid, so static entries can be checked against them
}

// portSite is where a port is in the file, for the checks that need the
// whole bridge or every bridge.
type portSite struct {
	field string // bridge[0].port[1]
	t     *value // the port's table
	ok    bool   // no error about the port so far
}

// ports checks the ports of bridge table t (v is its "port" value, nil when
// missing) and returns them with what their VLAN keys held.
func (c *checker) ports(t, v *value, field, label string) ([]Port, []portVLANs, []portSite) {
	// A bridge with no port is allowed: it takes ports added at run time
	// (`trestle port add`, the CNI plugin, the QEMU scripts).
	if v == nil {
		return nil, nil, nil
	}
	elems, _ := c.elements(v, field+".port")
	var ports []Port
	var vlans []portVLANs
	var sites []portSite
	for i, pt := range elems {
		pf := fmt.Sprintf("%s.port[%d]", field, i)
		before := len(c.errs)
		if i == MaxPortsPerBridge {
			c.errorf(pt.line, pf, "too many ports in one bridge: at most %d are allowed", MaxPortsPerBridge)
		}
		if c.totalPorts++; c.totalPorts == MaxPorts+1 {
			c.errorf(pt.line, pf, "too many ports in all bridges together: at most %d are allowed", MaxPorts)
		}
		if pt.kind != unstable.Table {
			continue
		}
		p, pv := c.port(pt, pf, label)
		ports = append(ports, p)
		vlans = append(vlans, pv)
		sites = append(sites, portSite{field: pf, t: pt, ok: len(c.errs) == before})
	}
	return ports, vlans, sites
}

// portTable is [[bridge.port]].
var portTable = Table{
	Path:  "bridge.port",
	Array: true,
	Help:  "One port of the bridge above it: an interface, a patch port to another bridge, or an overlay port (vxlan). At most " + fmt.Sprint(MaxPortsPerBridge) + " in a bridge, " + fmt.Sprint(MaxPorts) + " in all bridges together.",
	Keys: []Key{
		{Name: "interface", fileOnly: true, Kind: KindString, Form: "an interface name (1 to 15 bytes, no / : or whitespace)", Example: `"veth-z"`,
			Help: "The interface the port attaches to, in the daemon's namespace; in one port of one bridge only. A port has interface, patch or vxlan."},
		{Name: "vxlan", fileOnly: true, Kind: KindInt, Min: 1, Max: MaxVNI, Example: "1000",
			Help: "Instead of interface: an overlay port, this VNI across hosts over VXLAN with FRR's EVPN (docs/overlay.md); needs [daemon] vtep. The daemon creates its device, tvxVNI, attached at tc, learning from the control plane; once in all bridges; on a VLAN-aware bridge it carries its vlan, which another port of the bridge carries."},
		{Name: "mtu", fileOnly: true, Kind: KindInt, Min: 68, Max: 65535, Default: "the underlay's MTU minus 50", Example: "1450",
			Help: "An overlay port's MTU; overlay ports only."},
		{Name: "dstport", fileOnly: true, Kind: KindInt, Min: 1, Max: 65535, Default: fmt.Sprint(DefaultDstPort), Example: "4789",
			Help: "An overlay port's UDP port, the same on every host of the VNI; overlay ports only."},
		{Name: "patch", fileOnly: true, Kind: KindString, Form: "a bridge's name", Example: `"br1"`,
			Help: "Instead of interface: a patch port to this bridge, which declares one back; patches form no cycle, and join at most " + fmt.Sprint(MaxPatchChain) + " bridges."},
		{Name: "name", fileOnly: true, Kind: KindString, Form: "a port name, unique in the bridge", Default: `"patch-" + patch`, Example: `"to-br1"`,
			Help: "A patch port's name in show, fdb, stats and static entries; patch ports only."},
		{Name: "mode", Kind: KindEnum, Values: modeValues(), Default: `"auto"`, Example: `"tc"`, own: true,
			Help: "How the port attaches: decided per interface, at XDP (packet rate), or at tc (keeps GSO for host traffic); not for patch ports; tc for overlay ports."},
		{Name: "max_macs", Kind: KindInt, Min: 0, Max: maxTableSize, Default: "0", Example: "100",
			Help: "Addresses the port may have learned at once; 0 is no limit."},
		{Name: "mac_limit_action", Kind: KindEnum, Default: `"drop"`, Example: `"forward"`,
			Values: []Value{{LimitDrop, "frames from new sources at max_macs are dropped"}, {LimitForward, "forwarded without learning"}},
			Help:   "What a frame from a new source gets when the port is at max_macs; with max_macs only."},
		{Name: "learning", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_NO_LEARN, Default: "true", Example: "false",
			Help: "Learn the sources of the port's frames; false: frames to the stations behind it flood."},
		{Name: "locked", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_LOCKED, check: notPatchOrOverlay("binds the sources of a port's host, and a patch port has none", "binds the sources of a port's host, and an overlay port's come from the control plane"), Default: "false", Example: "true",
			Help: "Take frames only from sources bound to the port (its static entries and allowed_macs) and learn none; others are dropped (locked), and no address moves onto or off the port. Not for patch or overlay ports."},
		{Name: "allowed_macs", Kind: KindList, Form: `an array of unicast MAC addresses, such as ["02:00:00:00:00:01"]`, Example: `["02:00:00:00:00:09"]`,
			Help: "The sources a locked port takes beside its static entries: each a static entry of the port in every VLAN it carries, so never another port's; with locked = true only."},
		{Name: "ip_guard", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD, check: notPatchOrOverlay("binds the addresses of a port's host, and a patch port has none", "binds the addresses of a port's host, and an overlay port carries other hosts' frames"), Default: "false", Example: "true",
			Help: "Bind the port to its IP addresses: an ARP frame must carry one of allowed_ips as its sender, a neighbour advertisement as its target, an IPv4 or IPv6 frame as its source (0.0.0.0 only for DHCP, :: only for duplicate address detection and MLD reports; a locked port's allowed_macs add their EUI-64 link-local addresses); others are dropped (ip_guard_arp, ip_guard_nd, ip_guard_ip). Needs allowed_ips; not for patch or overlay ports."},
		{Name: "allowed_ips", Kind: KindList, Form: `an array of IPv4 and IPv6 addresses (not prefixes), such as ["10.0.0.5", "fd00::5"]`, Example: `["10.0.0.9", "fd00::9"]`,
			Help: "The addresses an ip_guard port's host uses, at most " + fmt.Sprint(MaxAllowedIPs) + "; with ip_guard = true only."},
		{Name: "ra_guard", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_RA_GUARD, check: notPatchOrOverlay("guards a host's port, and a patch port's frames were guarded at the port they entered by", "guards a host's port, and an overlay port carries other sites' routers"), Default: "false", Example: "true",
			Help: "The port's host is no router: ICMPv6 router advertisements and redirects from it are dropped (ra_guard), and so is ICMPv6 behind more extension headers than trestle reads. Not for patch or overlay ports."},
		{Name: "dhcp_guard", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_DHCP_GUARD, check: notPatchOrOverlay("guards a host's port, and a patch port's frames were guarded at the port they entered by", "guards a host's port, and an overlay port carries other sites' servers"), Default: "false", Example: "true",
			Help: "The port's host is no DHCP server: DHCP server messages (UDP 67 to 68) and DHCPv6 ADVERTISE, REPLY, RECONFIGURE and RELAY-REPL messages (from UDP 547) from it are dropped (dhcp_guard); its own DHCP client messages pass. Not for patch or overlay ports."},
		{Name: "bpdu_guard", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_BPDU_GUARD, check: notPatchOrOverlay("guards an edge port's cable, and a patch port has none", "guards an edge port's cable, and an overlay port's far side is the VNI's other switches"), Default: "false", Example: "true",
			Help: "Block the port when a BPDU (a spanning tree frame, to 01:80:c2:00:00:00) arrives by it, as an edge port that should never hear another switch: it then takes and sends nothing (state blocked, why bpdu_guard; the BPDU is dropped as bpdu_guard) until `trestle port enable`. Not for patch or overlay ports."},
		{Name: "fast_leave", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_FAST_LEAVE, Default: "false", Example: "true",
			Help: "On a multicast_snooping bridge, an IGMP leave or MLD done from the port ends its membership of the group at once, as the Linux bridge's mcast_fast_leave: for a port with one host behind it; else the membership ends when no report answers the querier within 2 s (or with the membership interval, 260 s, when no querier has been seen)."},
		{Name: "multicast_router", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_MCAST_ROUTER, Default: "false", Example: "true",
			Help: "On a multicast_snooping bridge, the port is always a multicast router port (the Linux bridge's mcast_router 2): every group's frames and every IGMP and MLD report go to it. Without it a port is a router port while it hears queries or PIM hellos (260 s after the last)."},
		{Name: "protected", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_PROTECTED, Default: "false", Example: "true",
			Help: "Exchange no frame (unicast or flood) with another protected port of the bridge."},
		{Name: "flood", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_NO_FLOOD, Default: "true", Example: "false", Help: "Send floods of unknown unicast out of the port."},
		{Name: "mcast_flood", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_NO_MFLOOD, Default: "true", Example: "false", Help: "Send multicast floods out of the port."},
		{Name: "bcast_flood", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_NO_BFLOOD, Default: "true", Example: "false", Help: "Send broadcast floods out of the port."},
		{Name: "storm", Kind: KindTable, Form: "an inline table (below)", Example: "{ broadcast = 1000 }",
			Help: "Storm control: the floods a second of each kind the port's host may send; not for patch ports."},
		{Name: "vlan", Kind: KindInt, Min: 1, Max: maxVLAN, Default: "1 on a VLAN-aware bridge", Example: "10",
			Help: "Access port of this VLAN: untagged and priority-tagged frames join it, and it leaves untagged. Not with trunk."},
		{Name: "trunk", Kind: KindVLANs, Form: `an array of VLAN IDs 1..4094 and ranges, such as [10, 20, "100-199"]`, Example: `[10, "20-29"]`,
			Help: "Trunk port: tagged frames of these VLANs pass, and leave tagged. A bridge with a port that sets vlan or trunk is VLAN-aware."},
		{Name: "native", Kind: KindInt, Min: 1, Max: maxVLAN, Example: "10",
			Help: "A trunk's untagged VLAN, one of trunk: untagged frames join it, and it leaves untagged; none: untagged frames are dropped."},
		{Name: "native_tagged", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED, check: checkNativeTagged, Default: "false", Example: "true",
			Help: "The trunk's native VLAN leaves it tagged too, as its other VLANs do; untagged frames still join the native VLAN. With trunk and native only."},
		{Name: "qinq", Kind: KindBool, Flag: tbpf.TrestleTrPortFlagsTR_PORT_QINQ, check: checkQinQ, Default: "false", Example: "true",
			Help: "An access port that is an 802.1ad tunnel port: a frame with a second tag behind a priority tag or an S-tag joins the port's VLAN, tags kept; on other access ports it is dropped (double_tagged). Not for trunks, patch or overlay ports."},
	},
}

// modeValues are the modes a port takes, from the mode package.
func modeValues() []Value {
	vs := make([]Value, len(mode.Names))
	for i, n := range mode.Names {
		vs[i] = Value{Name: n}
	}
	return vs
}

func (c *checker) port(t *value, field, bridge string) (Port, portVLANs) {
	p := Port{Mode: mode.Auto, Line: t.line}
	vlansOK := true
	var flagged []*Key // the rows whose flag the port's keys set
	c.walk(t, field, &portTable, func(k *Key, v *value, f string, x leaf, ok bool) {
		if k.Flag != 0 {
			// A boolean key of the datapath: its flag, set when the
			// value is not the default; its row's check comes below.
			if ok && x.b != (k.Default == "true") {
				p.Policy.Flags |= k.Flag
				flagged = append(flagged, k)
			}
			return
		}
		switch k.Name {
		case "interface":
			s, ok := c.str(v, f)
			if !ok {
				break
			}
			// Kept even when invalid, so that static entries naming it
			// do not add a second, misleading error.
			p.Interface = s
			if why := ifnameProblem(s); why != "" {
				c.errorf(v.line, f, "%q is not a valid interface name: %s", s, why)
				break
			}
			if wayInName(s) {
				c.errorf(v.line, f, "%q is the name of an end of an overlay VNI's xdp way in, which the daemon makes (docs/overlay.md): not a port", s)
				break
			}
			// One interface can carry one attachment only.
			if prev, dup := c.ifaces[s]; dup {
				c.errorf(v.line, f, "%q is also a port of %s at line %d", s, prev.bridge, prev.line)
			} else {
				c.ifaces[s] = portRef{bridge: bridge, line: v.line, field: f}
			}
		case "patch":
			// Checked against the other bridges once every bridge is known.
			s, ok := c.str(v, f)
			if !ok {
				break
			}
			p.Patch = s
			if !validBridgeName(s) {
				c.errorf(v.line, f, "%q is not a valid bridge name: use 1 to %d of A-Z a-z 0-9 _ . -", s, maxNameLen)
			}
		case "name":
			s, ok := c.str(v, f)
			if !ok {
				break
			}
			// Kept even when invalid, as interface is.
			p.Name = s
			if why := ifnameProblem(s); why != "" {
				c.errorf(v.line, f, "%q is not a valid port name: %s", s, why)
			}
		case "mode":
			// own: a patch port has none, whatever the value; the mode
			// package says which are modes.
			_, hasIface := t.vals["interface"]
			if _, hasPatch := t.vals["patch"]; hasPatch && !hasIface {
				c.errorf(v.line, f, "a patch port attaches to no interface and has no mode")
				break
			}
			if s, ok := c.str(v, f); ok {
				if m, err := mode.Parse(s); err == nil {
					p.Mode = m
				} else {
					c.errorf(v.line, f, "%v", err)
				}
			}
		case "max_macs":
			if ok {
				p.MaxMACs = int(x.n)
			}
		case "allowed_macs":
			p.AllowedMACs = c.allowedMACs(v, f)
		case "allowed_ips":
			p.AllowedIPs = c.allowedIPs(v, f)
		case "storm":
			p.Storm = c.storm(v, f)
		case "mac_limit_action":
			if ok {
				p.Policy = p.Policy.With(flagLimitForward, x.s == LimitForward)
			}
		case "vxlan":
			if ok {
				p.VXLAN = uint32(x.n)
			}
		case "mtu":
			if ok {
				p.MTU = int(x.n)
			}
		case "dstport":
			if ok {
				p.DstPort = int(x.n)
			}
		case "vlan":
			p.VLAN, vlansOK = uint16(x.n), vlansOK && ok
		case "trunk":
			vids, ok := c.trunk(v, f)
			p.Trunk, vlansOK = vids, vlansOK && ok
		case "native":
			p.Native, vlansOK = uint16(x.n), vlansOK && ok
		}
	})
	iface, hasIface := t.vals["interface"]
	patch, hasPatch := t.vals["patch"]
	name, hasName := t.vals["name"]
	vx, hasVXLAN := t.vals["vxlan"]
	if hasVXLAN {
		c.overlayPort(t, vx, field, bridge, &p)
	} else {
		for _, k := range []string{"mtu", "dstport"} {
			if v, ok := t.vals[k]; ok {
				c.errorf(v.line, field+"."+k, "is for overlay ports (vxlan) only")
			}
		}
	}
	switch {
	case hasVXLAN:
		// overlayPort reported what conflicts with vxlan.
	case hasIface && hasPatch:
		c.errorf(patch.line, field+".patch", "conflicts with interface at line %d: a port attaches an interface or patches to another bridge, not both", iface.line)
	case !hasIface && !hasPatch:
		c.errorf(t.line, field, "interface, patch or vxlan is required")
	case hasName && !hasPatch:
		c.errorf(name.line, field+".name", "is for patch ports only: a port with an interface is named by it")
	case hasPatch && !hasName && p.Patch != "":
		p.Name = "patch-" + p.Patch
		// A valid bridge name is made of valid characters, but may be
		// too long to take the prefix.
		if why := ifnameProblem(p.Name); why != "" && validBridgeName(p.Patch) {
			c.errorf(t.line, field+".name", "the default name %q is not a valid port name: %s; set name", p.Name, why)
		}
	}
	if sv, ok := t.vals["storm"]; ok && hasPatch {
		c.errorf(sv.line, field+".storm", "limits what a port's interface floods into the bridge, and a patch port has none")
	}
	if la, ok := t.vals["mac_limit_action"]; ok {
		if _, hasMax := t.vals["max_macs"]; !hasMax || p.MaxMACs == 0 {
			c.errorf(la.line, field+".mac_limit_action", "says what happens at max_macs, which the port does not set (or sets to 0, no limit)")
		}
	}
	site := portKeys{t: t}
	for _, k := range flagged {
		if k.check == nil {
			continue
		}
		if why := k.check(site); why != "" {
			c.errorf(t.vals[k.Name].line, field+"."+k.Name, "%s", why)
		}
	}
	if av, ok := t.vals["allowed_macs"]; ok && !p.Has(flagLocked) {
		c.errorf(av.line, field+".allowed_macs", "says which sources a locked port takes: set locked = true")
	}
	gv, hasGuard := t.vals["ip_guard"]
	switch av, hasIPs := t.vals["allowed_ips"]; {
	case hasGuard && p.Has(flagIPGuard) && (hasPatch || hasVXLAN):
		// Its row's check said why.
	case hasIPs && !p.Has(flagIPGuard):
		c.errorf(av.line, field+".allowed_ips", "says which addresses an ip_guard port's host uses: set ip_guard = true")
	case p.Has(flagIPGuard) && !hasIPs:
		c.errorf(gv.line, field+".ip_guard", "binds the port to its addresses, and it lists none: set allowed_ips (without one, every IP frame of the port would be dropped)")
	}
	vlan, hasVLAN := t.vals["vlan"]
	trunk, hasTrunk := t.vals["trunk"]
	native, hasNative := t.vals["native"]
	switch {
	case hasVLAN && hasTrunk:
		c.errorf(trunk.line, field+".trunk", "conflicts with vlan at line %d: a port is an access port (vlan) or a trunk, not both; a trunk's untagged VLAN is native", vlan.line)
		vlansOK = false
	case hasNative && !hasTrunk:
		c.errorf(native.line, field+".native", "is for trunks only: set trunk too, or use vlan for an access port")
		vlansOK = false
	case p.Native != 0 && p.IsTrunk() && !p.Carries(p.Native):
		// Only when trunk is valid, or the list named would be wrong.
		c.errorf(native.line, field+".native", "%d is not one of the port's trunk VLANs (%s)", p.Native, VLANRanges(p.Trunk))
		vlansOK = false
	}
	p.Policy.GuardIPs = p.GuardIPs()
	return p, portVLANs{set: hasVLAN || hasTrunk, ok: vlansOK}
}

// portKeys is a [[bridge.port]] as a row's check sees it: which keys it
// sets, and so what kind of port it is.
type portKeys struct{ t *value }

func (s portKeys) has(key string) bool { _, ok := s.t.vals[key]; return ok }
func (s portKeys) patch() bool         { return s.has("patch") }
func (s portKeys) overlay() bool       { return s.has("vxlan") }

// notPatchOrOverlay is the check of a key for ports of an interface only:
// patch says why not on a patch port, overlay why not on an overlay port.
func notPatchOrOverlay(patch, overlay string) func(portKeys) string {
	return func(s portKeys) string {
		switch {
		case s.patch():
			return patch
		case s.overlay():
			return overlay
		}
		return ""
	}
}

// checkNativeTagged: a trunk's native VLAN, of an interface.
func checkNativeTagged(s portKeys) string {
	switch {
	case !s.has("native"):
		return "tags a trunk's native VLAN on the way out: set trunk and native too"
	case s.patch():
		return "is for trunks of an interface: a frame crossing a patch port keeps its VLAN"
	}
	return ""
}

// checkQinQ: an access port of an interface (a VLAN-aware bridge is the
// bridge's check).
func checkQinQ(s portKeys) string {
	switch {
	case s.has("trunk"):
		return "is for access ports: a trunk's outer tag is its VLAN, and what follows is that VLAN's payload"
	case s.patch():
		return "is for access ports of an interface, and a patch port's frames were classified in the bridge they left"
	case s.overlay():
		return "is for access ports of an interface, not for overlay ports"
	}
	return ""
}

// allowedMACs checks allowed_macs: unicast, non-zero addresses, each once.
func (c *checker) allowedMACs(v *value, f string) []net.HardwareAddr {
	return addressList(c, v, f, `must be an array of MAC addresses, such as ["02:00:00:00:00:01"]`,
		func(s string) (net.HardwareAddr, string) {
			return stationMAC(s, "a station sends from a unicast one")
		}, func(a, b net.HardwareAddr) bool { return bytes.Equal(a, b) })
}

// allowedIPs checks allowed_ips: addresses (not prefixes) a host may send
// from, each once, at most MaxAllowedIPs. IPv4 ones are kept in their
// 4-byte form.
func (c *checker) allowedIPs(v *value, f string) []netip.Addr {
	if v.kind == unstable.Array && len(v.elems) > MaxAllowedIPs {
		c.errorf(v.line, f, "lists %d addresses, more than %d", len(v.elems), MaxAllowedIPs)
		return nil
	}
	return addressList(c, v, f, `must be an array of IP addresses, such as ["10.0.0.5", "fd00::5"]`,
		hostIP, func(a, b netip.Addr) bool { return a == b })
}

// addressList checks an array of addresses, each read by parse (which
// says why one is wrong), each once; notArray is the error when v is no
// array.
func addressList[T fmt.Stringer](c *checker, v *value, f, notArray string, parse func(string) (T, string), same func(a, b T) bool) []T {
	if v.kind != unstable.Array {
		c.errorf(v.line, f, "%s", notArray)
		return nil
	}
	var out []T
	for i, e := range v.elems {
		ef := fmt.Sprintf("%s[%d]", f, i)
		s, ok := c.str(e, ef)
		if !ok {
			continue
		}
		a, why := parse(s)
		switch {
		case why != "":
			c.errorf(e.line, ef, "%s", why)
		case slices.ContainsFunc(out, func(b T) bool { return same(a, b) }):
			c.errorf(e.line, ef, "%s is listed twice", a)
		default:
			out = append(out, a)
		}
	}
	return out
}

// hostIP reads an address a host may send from; why says what is wrong.
func hostIP(s string) (netip.Addr, string) {
	if strings.Contains(s, "/") {
		return netip.Addr{}, fmt.Sprintf("%q is a prefix: ip_guard binds addresses, each written alone, such as \"10.0.0.5\"", s)
	}
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return a, fmt.Sprintf("%q is not an IP address, such as \"10.0.0.5\" or \"fd00::5\"", s)
	case a.Zone() != "":
		return a, fmt.Sprintf("%q has a zone: write the address alone", s)
	case a.Is4In6():
		return a, fmt.Sprintf("%q is an IPv4-mapped IPv6 address, which no frame carries: write it as IPv4 (%s)", s, a.Unmap())
	case a.IsUnspecified():
		return a, fmt.Sprintf("%q is the unspecified address, which ip_guard allows only for DHCP and duplicate address detection", s)
	case a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return a, fmt.Sprintf("%q is a group address: a host sends from a unicast one", s)
	case a.IsLoopback():
		return a, fmt.Sprintf("%q is a loopback address, which never leaves its host", s)
	}
	return a, ""
}

// BindConflict says why port p's allowed_macs cannot be bound to it in
// bridge b: an address another port has in one of p's VLANs, as a static
// entry or by its allowed_macs. "" when none; p may be one of b's ports.
func (b *Bridge) BindConflict(p *Port) string {
	owner := map[string]string{} // "mac/vlan" -> port
	for _, s := range b.Static {
		owner[fmt.Sprintf("%s/%d", s.MAC, s.VLAN)] = s.Port
	}
	for i := range b.Ports {
		if q := &b.Ports[i]; q.PortName() != p.PortName() {
			for _, s := range q.AllowedStatics() {
				owner[fmt.Sprintf("%s/%d", s.MAC, s.VLAN)] = s.Port
			}
		}
	}
	for _, s := range p.AllowedStatics() {
		if o, taken := owner[fmt.Sprintf("%s/%d", s.MAC, s.VLAN)]; taken && o != s.Port {
			return fmt.Sprintf("%s is bound to port %q already (vlan %d: a static entry, or its allowed_macs): an address is bound to one port", s.MAC, o, s.VLAN)
		}
	}
	return ""
}

// ParsePortArgs reads a port given as KEY=VALUE arguments, with the keys and
// checks of a [[bridge.port]], for bridge b: interface=veth9 vlan=10,
// trunk=10,20-29 native=10, storm.broadcast=1000. A value is written as
// its key's kind in the table wants it: a list split at commas, a number
// or true/false as it is, anything else as a string. Errors name the
// argument, as ParseRuleArgs's do. Beside the port's own checks, its name
// (interface or patch port name) must be new in b; what takes every bridge
// (an interface in another bridge, a patch's peer, the totals) is the
// caller's, and so is what the port does to the bridge (the port that
// makes it VLAN-aware makes its other ports access ports of VLAN 1).
func ParsePortArgs(b *Bridge, args []string) (Port, error) {
	var doc strings.Builder
	for _, a := range args {
		k, v, err := splitArg(a, "_.", "a port key such as interface=veth1, vlan=10 or storm.broadcast=1000")
		if err != nil {
			return Port{}, err
		}
		tab, name := &portTable, k
		if sub, key, nested := strings.Cut(k, "."); nested && sub == "storm" {
			tab, name = &stormTable, key
		}
		fmt.Fprintf(&doc, "%s = %s\n", k, argValue(tab.Key(name), v))
	}
	root, serr := parseTOML([]byte(doc.String()))
	if serr != nil {
		return Port{}, fmt.Errorf("%s (a key given twice?)", serr.msg)
	}
	c := &checker{file: "args", ifaces: map[string]portRef{}, vnis: map[uint32]portRef{}}
	label := "bridge " + b.Name
	if v, ok := root.vals["vxlan"]; ok {
		// The VTEP and the VNIs of every bridge are the file's.
		c.errorf(v.line, "port.vxlan", "overlay ports are declared in the config file, not added at run time")
	}
	p, _ := c.port(root, "port", label)
	if name := p.PortName(); name != "" {
		for i := range b.Ports {
			if q := &b.Ports[i]; q.PortName() == name || q.Interface == name {
				f := "port.interface"
				if p.IsPatch() {
					f = "port.name"
				}
				c.errorf(0, f, "%q is already a port of %s", name, label)
				break
			}
		}
	}
	if err := c.argErrors("port"); err != nil {
		return Port{}, err
	}
	if b.VLANAware() && p.VLAN == 0 && !p.IsTrunk() {
		p.VLAN = 1 // as on any port of a VLAN-aware bridge that sets neither
	}
	p.Line = 0
	if why := b.BindConflict(&p); why != "" {
		return Port{}, errors.New("allowed_macs: " + why)
	}
	return p, nil
}

// PortArgsHelp lists the keys a port added at run time takes (trestle
// port add, the CNI plugin), from the port table: each as KEY=VALUE with
// the first clause of its help (and the default of a boolean or an enum),
// storm's keys as storm.KEY.
func PortArgsHelp() string {
	const col, width = 29, 78
	var b strings.Builder
	line := func(arg, help string) {
		fmt.Fprintf(&b, "  %s", arg)
		at := 2 + len(arg)
		if at >= col-1 {
			b.WriteString("\n")
			at = 0
		}
		b.WriteString(strings.Repeat(" ", col-at))
		at = col
		for i, w := range strings.Fields(help) {
			if i > 0 && at+1+len(w) > width {
				b.WriteString("\n" + strings.Repeat(" ", col))
				at = col
			} else if i > 0 {
				b.WriteByte(' ')
				at++
			}
			b.WriteString(w)
			at += len(w)
		}
		b.WriteByte('\n')
	}
	for _, k := range portTable.Keys {
		switch {
		case k.fileOnly:
		case k.Kind == KindTable:
			for _, sk := range stormTable.Keys {
				line(k.Name+"."+sk.Name+"="+argExample(&sk), "storm control: "+firstClause(sk.Help))
			}
		case k.Kind == KindBool || k.Kind == KindEnum:
			line(k.Name+"="+argExample(&k), firstClause(k.Help)+" (default "+strings.Trim(k.Default, `"`)+")")
		default:
			line(k.Name+"="+argExample(&k), firstClause(k.Help))
		}
	}
	return b.String()
}

// argExample is a value of key k as a command line writes it.
func argExample(k *Key) string {
	switch k.Kind {
	case KindBool:
		return "true|false"
	case KindEnum:
		names := make([]string, len(k.Values))
		for i, v := range k.Values {
			names[i] = v.Name
		}
		return strings.Join(names, "|")
	}
	return strings.NewReplacer("[", "", "]", "", `"`, "", " ", "").Replace(k.Example)
}

// firstClause is help up to its first colon (after a few words: "Trunk
// port: ..." goes on), semicolon or full stop, with a lower-case start:
// the help of a key as a listing gives it.
func firstClause(help string) string {
	end := len(help)
	for _, sep := range []string{": ", "; ", ". "} {
		if i := strings.Index(help, sep); i >= 0 && i < end && (sep != ": " || len(strings.Fields(help[:i])) > 2) {
			end = i
		}
	}
	s := strings.TrimSuffix(help[:end], ".")
	if len(s) > 1 && (s[1] == ' ' || unicode.IsLower(rune(s[1]))) {
		s = strings.ToLower(s[:1]) + s[1:]
	}
	return s
}

// argValue writes v, given on a command line, as the TOML value key k
// takes (nil: a key the table lacks, which the checker reports).
func argValue(k *Key, v string) string {
	bare := func(v string) bool {
		_, err := strconv.ParseInt(v, 0, 64)
		return err == nil || v == "true" || v == "false"
	}
	switch {
	case k != nil && (k.Kind == KindList || k.Kind == KindVLANs):
		var elems []string
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); bare(e) {
				elems = append(elems, e)
			} else {
				elems = append(elems, strconv.Quote(e))
			}
		}
		return "[" + strings.Join(elems, ", ") + "]"
	case k != nil && (k.Kind == KindBool || k.Kind == KindInt || k.Kind == KindName) && bare(v):
		return v
	}
	return strconv.Quote(v)
}
