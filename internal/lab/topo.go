package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/trestle/trestle/internal/netnsutil"
)

// Shape is the topology of a measurement: hosts joined through a chain of
// bridges in one DUT namespace, or straight to each other.
type Shape struct {
	Hosts int // hosts h1..hN, each with one interface eth0; at least 2
	// Chain is the number of bridges in a row between h1 and h2, joined by
	// veth pairs inside the DUT namespace; 0 is the straight path (a veth
	// pair from h1 to h2, no DUT). With more than 2 hosts it must be 1: one
	// bridge with a port per host.
	Chain  int
	Queues int // receive and transmit queues of every veth end; 0: 1
	// Patch: the bridges of a chain are joined by the DUT's patch ports
	// (Topo.Patches, which the DUT makes) and not by veth pairs.
	Patch bool
}

func (s Shape) check() error {
	switch {
	case s.Hosts < 2:
		return fmt.Errorf("topology: %d hosts, need at least 2", s.Hosts)
	case s.Chain < 0 || s.Chain > 64:
		return fmt.Errorf("topology: chain of %d bridges, must be 0..64", s.Chain)
	case s.Chain == 0 && s.Hosts != 2:
		return fmt.Errorf("topology: the straight path joins 2 hosts, not %d", s.Hosts)
	case s.Chain > 1 && s.Hosts != 2:
		return fmt.Errorf("topology: a chain of %d bridges joins 2 hosts, not %d", s.Chain, s.Hosts)
	}
	return nil
}

// Host is a host namespace with one interface.
type Host struct {
	NS  *NS
	If  string // "eth0"
	MAC net.HardwareAddr
	IP  string // without prefix length; the hosts share 10.77.0.0/24
	// Port is the DUT interface the host is plugged into ("" on the
	// straight path).
	Port string
	// VLAN is the tag the host's frames carry on the wire (0: untagged):
	// the host is on a trunk port (see SetVLANs).
	VLAN uint16
}

// Bridge is one bridge the DUT is to build: its name and its ports.
type Bridge struct {
	Name  string
	Ports []string
}

// Patch joins two bridges of the DUT by a pair of patch ports, which the
// DUT makes (no kernel interface): port PortA on bridge A is the peer of
// PortB on bridge B.
type Patch struct {
	A, PortA string
	B, PortB string
}

// Topo is a built topology.
type Topo struct {
	Shape   Shape
	Net     *Net
	Hosts   []*Host
	DUT     *NS      // nil on the straight path
	Bridges []Bridge // what the DUT must build in DUT
	// Patches join consecutive bridges of a chain with Shape.Patch; their
	// ports are not in Bridges' Ports, which are kernel interfaces.
	Patches []Patch
	// Ingress lists the DUT interfaces that receive the generator's frames
	// first or on the way, in order: the ports whose NAPI is the DUT's work.
	Ingress []string
	// VLANs, if set, is each DUT port's place in VLANs, which the DUT
	// configures (SetVLANs); nil: no VLANs, every frame untagged.
	VLANs map[string]PortVLAN
	// Mirror, if set, is a port mirror the DUT makes (SetMirror).
	Mirror *Mirror
	// Filter, if set, is the rule set the DUT applies to every bridge
	// (SetFilter).
	Filter *Filter
	// Side, if set, is a second bridge with hosts of its own (AddSide),
	// in Bridges too; its hosts are not in Hosts.
	Side *SideBridge
	// Loop, if set, is two ports of the first bridge joined outside the
	// DUT (AddLoop), in that bridge's Ports too; the DUT turns its loop
	// protection on there.
	Loop *Loop
	// Multicast, if set, is the multicast kind's ask: the DUT's bridges
	// snoop IGMP and MLD, or flood every group (Snooper).
	Multicast *Multicast
	// Suppress: the DUT's bridges answer ARP and neighbour solicitations
	// from their neighbour table (the @suppress variant): trestle's
	// neigh_suppress, the Linux bridge's on every port.
	Suppress bool
}

// HostMAC is host i's address, 02:00:00:00:00:i (1-based).
func HostMAC(i int) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, byte(i >> 8), byte(i)} }

// HostIP is host i's IPv4 address (1-based).
func HostIP(i int) string { return fmt.Sprintf("10.77.%d.%d", i>>8, i&0xff) }

// attach plugs host h into the DUT's namespace at h.Port, with its
// address (netnsutil.Attach, the one topology step of the tests and the
// lab).
func (n *Net) attach(dut *NS, h *Host, queues int) error {
	return netnsutil.Attach(&dut.NS, netnsutil.Host{NS: &h.NS.NS, If: h.If, MAC: h.MAC, CIDR: h.IP + "/16", Port: h.Port}, max(queues, 1))
}

// Build creates the namespaces and veth pairs of s in n. Bridge i of a
// chain has ports "p1" or "cI-1b" toward h1 and "cIa" or "p2" toward h2;
// the one bridge of a star has ports p1..pN. With s.Patch, bridge i of a
// chain is joined to bridge i+1 by the patch ports "pI-I+1" and "pI+1-I"
// (t.Patches) in place of the veth pair cIa-cIb, which is not made: the
// first bridge's only port is p1, the last's p2.
func Build(ctx context.Context, n *Net, s Shape) (*Topo, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	t := &Topo{Shape: s, Net: n}
	for i := 1; i <= s.Hosts; i++ {
		ns, err := n.NS(fmt.Sprintf("h%d", i))
		if err != nil {
			return nil, err
		}
		t.Hosts = append(t.Hosts, &Host{NS: ns, If: "eth0", MAC: HostMAC(i), IP: HostIP(i)})
	}
	if s.Chain == 0 {
		h1, h2 := t.Hosts[0], t.Hosts[1]
		if err := n.Veth(h1.NS, h1.If, h2.NS, h2.If, VethOpts{MACA: h1.MAC, MACB: h2.MAC, Queues: s.Queues}); err != nil {
			return nil, err
		}
		for _, h := range t.Hosts {
			if err := h.NS.AddrAdd(h.If, h.IP+"/16"); err != nil {
				return nil, err
			}
		}
	} else {
		dut, err := n.NS("dut")
		if err != nil {
			return nil, err
		}
		t.DUT = dut
		for i, h := range t.Hosts {
			h.Port = fmt.Sprintf("p%d", i+1)
			if err := n.attach(dut, h, s.Queues); err != nil {
				return nil, err
			}
		}
		if s.Chain == 1 {
			b := Bridge{Name: "br1"}
			for _, h := range t.Hosts {
				b.Ports = append(b.Ports, h.Port)
			}
			t.Bridges = []Bridge{b}
			t.Ingress = []string{"p1"}
		} else {
			for i := 1; i <= s.Chain; i++ {
				if s.Patch {
					t.Bridges, t.Patches = patchedChain(s.Chain)
					t.Ingress = []string{"p1"}
					break
				}
				b := Bridge{Name: fmt.Sprintf("br%d", i)}
				in, out := fmt.Sprintf("c%db", i-1), fmt.Sprintf("c%da", i)
				if i == 1 {
					in = "p1"
				}
				if i == s.Chain {
					out = "p2"
				} else if err := n.Veth(dut, out, dut, fmt.Sprintf("c%db", i), VethOpts{Queues: s.Queues}); err != nil {
					return nil, err
				}
				b.Ports = []string{in, out}
				t.Bridges = append(t.Bridges, b)
				t.Ingress = append(t.Ingress, in)
			}
		}
	}
	return t, nil
}

// patchedChain is a chain of n bridges (n > 1) joined by patch ports: the
// hosts' ports p1 on br1 and p2 on brN, and between brI and brI+1 the pair
// pI-I+1 (on brI) and pI+1-I (on brI+1).
func patchedChain(n int) ([]Bridge, []Patch) {
	var brs []Bridge
	var ps []Patch
	for i := 1; i <= n; i++ {
		b := Bridge{Name: fmt.Sprintf("br%d", i)}
		switch i {
		case 1:
			b.Ports = []string{"p1"}
		case n:
			b.Ports = []string{"p2"}
		}
		brs = append(brs, b)
		if i < n {
			ps = append(ps, Patch{A: b.Name, PortA: fmt.Sprintf("p%d-%d", i, i+1), B: fmt.Sprintf("br%d", i+1), PortB: fmt.Sprintf("p%d-%d", i+1, i)})
		}
	}
	return brs, ps
}

// Joins says how t's bridges are joined, for a unit's record ("": one
// bridge, or none): by patch ports, pair by pair, or by veth pairs.
func (t *Topo) Joins() string {
	if len(t.Patches) > 0 {
		var pairs []string
		for _, pp := range t.Patches {
			pairs = append(pairs, fmt.Sprintf("%s:%s <-> %s:%s", pp.A, pp.PortA, pp.B, pp.PortB))
		}
		return "patch ports, no veth pairs between bridges: " + strings.Join(pairs, ", ")
	}
	if len(t.Bridges) > 1 {
		return "veth pairs"
	}
	return ""
}

// features names the DUT features t needs beyond plain ports, for a DUT
// build that may lack them ("": none): VLAN ports, patch ports, mirrors.
func (t *Topo) features() string {
	var f []string
	if t.VLANs != nil {
		f = append(f, "VLAN ports")
	}
	if len(t.Patches) > 0 {
		f = append(f, "patch ports")
	}
	if t.Mirror != nil {
		f = append(f, "mirrors")
	}
	if t.Filter != nil {
		f = append(f, "filter rules")
	}
	if t.Loop != nil {
		f = append(f, "loop detection")
	}
	if t.Multicast != nil && t.Multicast.Snoop {
		f = append(f, "multicast snooping")
	}
	if t.Suppress {
		f = append(f, "neighbour suppression")
	}
	return strings.Join(f, " or ")
}

// DUTPorts lists every interface of the DUT namespace that a bridge owns.
func (t *Topo) DUTPorts() []string {
	var out []string
	for _, b := range t.Bridges {
		out = append(out, b.Ports...)
	}
	return out
}

// sideHosts are the hosts of the second bridge (Needs.SideHosts).
const sideHosts = 2

// SideBridge is a second bridge of the DUT with hosts of its own: it is
// not measured, it shows whether the DUT still learns there while the
// other bridge is flooded (trestle's bridges share one table map).
type SideBridge struct {
	Name  string
	Hosts []*Host
}

// AddSide adds to t (a one-bridge topology) a second bridge, "brs", with
// n hosts s1..sN of its own on ports q1..qN, for the DUT to build with the
// first.
func (t *Topo) AddSide(n int) error {
	if t.DUT == nil || len(t.Bridges) != 1 {
		return errors.New("topology: a second bridge goes beside one bridge, in a DUT")
	}
	side := &SideBridge{Name: "brs"}
	b := Bridge{Name: side.Name}
	for i := 1; i <= n; i++ {
		ns, err := t.Net.NS(fmt.Sprintf("s%d", i))
		if err != nil {
			return err
		}
		h := &Host{NS: ns, If: "eth0", MAC: HostMAC(0x100 + i), IP: HostIP(0x100 + i), Port: fmt.Sprintf("q%d", i)}
		if err := t.Net.attach(t.DUT, h, t.Shape.Queues); err != nil {
			return err
		}
		side.Hosts = append(side.Hosts, h)
		b.Ports = append(b.Ports, h.Port)
	}
	t.Bridges = append(t.Bridges, b)
	t.Side = side
	return nil
}
