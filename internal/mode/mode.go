// Package mode is a port's attach mode, and the one place that decides it.
//
// A port is attached at XDP (packet rate: no socket buffers) or at tc (the
// host stack's GSO and checksum state pass intact). The configuration says
// "auto", "xdp" or "tc"; Decide turns that, and facts about the interface and
// its bridge, into the mode to attach in and the reason, in words a user
// reads in `trestle show`. Decide does no I/O, so every rule is a unit test.
package mode

import (
	"fmt"
	"strings"
)

// Mode is a configured or an attached mode.
type Mode string

const (
	Auto Mode = "auto" // configured only: decide per interface
	XDP  Mode = "xdp"
	TC   Mode = "tc"
)

// Names lists the configurable modes, for messages and --help.
var Names = []string{string(Auto), string(XDP), string(TC)}

// Parse reads a configured mode.
func Parse(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Auto, XDP, TC:
		return m, nil
	}
	return "", fmt.Errorf("%q is not one of %s", s, strings.Join(Names, ", "))
}

func (m Mode) String() string { return string(m) }

// Link is what Decide needs to know of an interface.
type Link struct {
	Name     string
	Type     string // netlink's kind: "veth", "tuntap", "bridge", "device"...
	Physical bool   // has a bus device (/sys/class/net/NAME/device): a NIC
	// NativeXDP: the driver runs XDP programs (XDP features "basic").
	NativeXDP bool
	// TakesRedirects: frames redirected at XDP into it are sent (XDP
	// features "ndo-xmit"). A veth has it only while its peer has GRO or an
	// XDP program, which the daemon can arrange: see PeerFixable.
	TakesRedirects bool
	// PeerFixable: a veth whose peer the daemon can reach to turn its GRO
	// on, after which it takes redirects.
	PeerFixable bool
	// PeerProblem says why the peer cannot be reached, when it cannot.
	PeerProblem string
}

// CanTakeRedirects says whether XDP redirects into the interface are, or
// can be made, delivered.
func (l Link) CanTakeRedirects() bool {
	return l.TakesRedirects || (l.Type == "veth" && l.PeerFixable)
}

// Bridge is what Decide needs to know of the port's bridge: its other ports,
// by name, as decided so far.
type Bridge struct {
	XDPPorts    []string // ports attached at XDP, whose floods and unicast reach every port by XDP redirect
	NoRedirects []string // ports that exist and cannot take XDP redirects
}

// Decision is what Decide says.
type Decision struct {
	Mode Mode   // XDP or TC; "" when the port cannot be attached
	Why  string // why this mode, or why not attached
	// FixPeer: the port is a veth whose peer must be prepared before frames
	// reach it: GRO on (so XDP redirects into the veth are delivered), and,
	// for a port attached at XDP, TX checksum offload off (a
	// checksum-partial frame loses that state in an XDP redirect).
	FixPeer bool
	// PeerCsumOff: with FixPeer, TX checksum offload goes off too.
	PeerCsumOff bool
}

// Decide picks the mode of one port. configured is the port's config; l is
// its interface; b its bridge's other ports.
func Decide(configured Mode, l Link, b Bridge) Decision {
	var d Decision
	switch configured {
	case XDP:
		d = Decision{Mode: XDP, Why: `configured: mode = "xdp"`}
	case TC:
		d = Decision{Mode: TC, Why: `configured: mode = "tc"`}
	default:
		d = auto(l, b)
	}
	if d.Mode == XDP {
		if l.Type == "veth" {
			// A veth at XDP: its peer's stack receives our redirects.
			if !l.PeerFixable && !l.TakesRedirects {
				return Decision{Why: "mode xdp refused: frames redirected into this veth would vanish, and its peer cannot be prepared: " + l.PeerProblem}
			}
			d.FixPeer, d.PeerCsumOff = true, true
		}
		return d
	}
	return atTC(d, l, b)
}

// atTC checks a tc decision: if the bridge has XDP ports, their frames reach
// this port by XDP redirect, which it must be able to take.
func atTC(d Decision, l Link, b Bridge) Decision {
	if len(b.XDPPorts) > 0 {
		if !l.CanTakeRedirects() {
			why := fmt.Sprintf("the kernel reports no ndo_xdp_xmit for this %s device", l.Type)
			if l.Type == "veth" {
				why = "its veth peer cannot be prepared for XDP redirects: " + l.PeerProblem
			}
			return Decision{Why: fmt.Sprintf("cannot take the XDP redirects of this bridge's xdp ports (%s): %s; use mode = \"tc\" on those", strings.Join(b.XDPPorts, ", "), why)}
		}
		// A veth takes them once its peer has GRO on; whether it reports
		// so now or not (because it is on already), the fix is the
		// daemon's to keep, and to give back when no xdp port is left.
		if l.Type == "veth" {
			d.FixPeer = true
		}
	}
	return d
}

// auto is "auto" for one interface.
func auto(l Link, b Bridge) Decision {
	switch {
	case l.Type == "veth":
		return Decision{Mode: TC, Why: "auto: veth peer is a host or container stack; tc keeps its GSO and checksum offload"}
	case l.Type == "tuntap":
		return Decision{Mode: TC, Why: "auto: TAP device of a VM or program; tc keeps GSO and checksum state"}
	case !l.Physical:
		return Decision{Mode: TC, Why: fmt.Sprintf("auto: %s device: tc works on every device type", l.Type)}
	case !l.NativeXDP:
		return Decision{Mode: TC, Why: "auto: this NIC's driver has no native XDP; tc instead"}
	case len(b.NoRedirects) > 0:
		return Decision{Mode: TC, Why: fmt.Sprintf("auto: port %q of this bridge cannot take XDP redirects, so tc", b.NoRedirects[0])}
	}
	return Decision{Mode: XDP, Why: "auto: physical NIC: native XDP forwards without socket buffers"}
}

// Fallback is the decision after an XDP attach that Decide chose for an
// "auto" port failed: tc, with the kernel's reason, if the port can be at tc.
func Fallback(err error, l Link, b Bridge) Decision {
	return atTC(Decision{Mode: TC, Why: fmt.Sprintf("auto: native XDP refused (%v); tc instead", err)}, l, b)
}
