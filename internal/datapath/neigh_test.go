package datapath

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	tbpf "github.com/trestle/trestle/internal/bpf"
	ethframe "github.com/trestle/trestle/internal/frame"
)

// neigh_suppress (bpf/lib/neigh.h) through BPF_PROG_TEST_RUN, in both
// builds, on a plain bridge and a VLAN-aware one: the answers byte for byte
// (built with internal/frame on gopacket's layers, as a host would send them), the
// requests that must be flooded, and a bridge without the key unchanged.

var (
	nbV4    = netip.MustParseAddr("10.0.0.11")
	nbV6    = netip.MustParseAddr("fd00::11")
	askV4   = netip.MustParseAddr("10.0.0.10")
	askV6   = netip.MustParseAddr("fd00::10")
	unknown = netip.MustParseAddr("10.0.0.99")
)

// vtags is an 802.1Q tag of vid, or none for 0.
func vtags(vid uint16) []ethframe.Tag {
	if vid == 0 {
		return nil
	}
	return []ethframe.Tag{ethframe.CTag(vid)}
}

func arpOf(vid uint16, dst, src net.HardwareAddr, op uint16, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	return ethframe.ARP(vtags(vid), dst, src, op, sha, spa, tha, tpa)
}

// nsOf is a solicitation from src, with its MAC as the source link-layer
// option when sll.
func nsOf(vid uint16, src net.HardwareAddr, from, target netip.Addr, sll bool) []byte {
	var opt net.HardwareAddr
	if sll {
		opt = src
	}
	return ethframe.NS(vtags(vid), src, from, target, opt)
}

func naOf(vid uint16, dmac, mac net.HardwareAddr, target, to netip.Addr) []byte {
	return ethframe.NA(vtags(vid), dmac, mac, target, to)
}

// setBridge writes the rig's bridge again, as b says beside its ports.
func (r *rig) setBridge(b BridgeInfo, ports ...PortInfo) {
	r.t.Helper()
	b.ID, b.Name, b.MaxEntries, b.Ports = 1, "br0", 1024, ports
	if err := r.ns.Do(func() error { return r.dp.SetBridge(b) }); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) setNeighs(want map[NeighKey]Neigh) {
	r.t.Helper()
	if err := r.ns.Do(func() error { return r.dp.SetNeighs(want) }); err != nil {
		r.t.Fatal(err)
	}
}

// suppressCase is a frame from a slot and what becomes of it: answered
// (want, the answer, byte for byte) or flooded (want nil).
type suppressCase struct {
	name string
	slot int
	data []byte
	want []byte
}

func (r *rig) runSuppress(cases []suppressCase) {
	r.t.Helper()
	for _, c := range cases {
		before := r.stats(c.slot)
		ret, out := r.runOut(c.slot, c.data)
		after := r.stats(c.slot)
		sup := after.C[tbpf.TrestleTrCounterTR_CNT_SUPPRESSED] - before.C[tbpf.TrestleTrCounterTR_CNT_SUPPRESSED]
		fl := after.C[tbpf.TrestleTrCounterTR_CNT_FLOODED] - before.C[tbpf.TrestleTrCounterTR_CNT_FLOODED]
		if c.want == nil {
			if r.m.name == "tc" && ret == tcStolen {
				ret = r.m.redirect // a tc flood with copies retagged ends so (vlan_test.go)
			}
			r.wantVerdict(ret, r.m.redirect, c.name+": flooded")
			if sup != 0 || fl != 1 {
				r.t.Errorf("%s: suppressed +%d, flooded +%d, want +0 and +1", c.name, sup, fl)
			}
			if !bytes.Equal(out, c.data) {
				r.t.Errorf("%s: the flooded frame changed:\n got % x\nwant % x", c.name, out, c.data)
			}
			continue
		}
		r.wantVerdict(ret, r.m.redirect, c.name+": answered")
		if sup != 1 || fl != 0 {
			r.t.Errorf("%s: suppressed +%d, flooded +%d, want +1 and +0", c.name, sup, fl)
		}
		if !bytes.Equal(out, c.want) {
			r.t.Errorf("%s: the answer\n got % x\nwant % x", c.name, out, c.want)
		}
	}
}

func TestNeighSuppress(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		ports := []PortInfo{{Ifindex: r.port[1], Bridge: 1, Slot: 1}, {Ifindex: r.port[2], Bridge: 1, Slot: 2}, {Ifindex: r.port[3], Bridge: 1, Slot: 3}}
		// macB holds nbV4 and nbV6 on slot 2; macA (slot 1) asks.
		r.setNeighs(map[NeighKey]Neigh{
			{Bridge: 1, Addr: nbV4}:  {MAC: macB, Slot: 2},
			{Bridge: 1, Addr: nbV6}:  {MAC: macB, Slot: 2},
			{Bridge: 1, Addr: askV4}: {MAC: macA, Slot: 1},
		})
		req := arpOf(0, bcast, macA, layers.ARPRequest, macA, askV4, net.HardwareAddr{0, 0, 0, 0, 0, 0}, nbV4)
		ns := nsOf(0, macA, askV6, nbV6, true)

		// Without the key: flooded, as before, and nothing counted.
		r.runSuppress([]suppressCase{{"ARP request, no neigh_suppress", 1, req, nil}, {"NS, no neigh_suppress", 1, ns, nil}})

		r.setBridge(BridgeInfo{NeighSuppress: true}, ports...)
		other := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x77} // the solicitation's option names another MAC
		r.runSuppress([]suppressCase{
			{"ARP request", 1, req, arpOf(0, macA, macB, layers.ARPReply, macB, nbV4, macA, askV4)},
			{"NS with its source link-layer address", 1, ns, naOf(0, macA, macB, nbV6, askV6)},
			{"NS answered to its option's MAC", 1, ethframe.NS(nil, macA, askV6, nbV6, other), naOf(0, other, macB, nbV6, askV6)},
			{"NS without options (grown by the option)", 1, nsOf(0, macA, askV6, nbV6, false), naOf(0, macA, macB, nbV6, askV6)},
			{"gratuitous ARP", 1, arpOf(0, bcast, macA, layers.ARPRequest, macA, nbV4, net.HardwareAddr{0, 0, 0, 0, 0, 0}, nbV4), nil},
			{"ARP probe (sender 0.0.0.0)", 1, arpOf(0, bcast, macA, layers.ARPRequest, macA, zeroV4, net.HardwareAddr{0, 0, 0, 0, 0, 0}, nbV4), nil},
			{"ARP reply (broadcast)", 1, arpOf(0, bcast, macA, layers.ARPReply, macA, askV4, macB, nbV4), nil},
			{"ARP request for an unknown target", 1, arpOf(0, bcast, macA, layers.ARPRequest, macA, askV4, net.HardwareAddr{0, 0, 0, 0, 0, 0}, unknown), nil},
			{"ARP request for a target on the asking port", 2, arpOf(0, bcast, macC, layers.ARPRequest, macC, askV4, net.HardwareAddr{0, 0, 0, 0, 0, 0}, nbV4), nil},
			{"DAD (source ::)", 1, nsOf(0, macA, zeroV6, nbV6, false), nil},
			{"NS for an unknown target", 1, nsOf(0, macA, askV6, netip.MustParseAddr("fd00::99"), true), nil},
			{"NS with hop limit 64", 1, func() []byte { b := nsOf(0, macA, askV6, nbV6, true); b[14+7] = 64; return b }(), nil},
		})
		// The table's answer is the port's fact: the port's own MAC
		// changes, and so does the answer; an entry gone, the request is
		// flooded again.
		r.setNeighs(map[NeighKey]Neigh{{Bridge: 1, Addr: nbV4}: {MAC: macD, Slot: 3}})
		r.runSuppress([]suppressCase{
			{"ARP request after the entry moved", 1, req, arpOf(0, macA, macD, layers.ARPReply, macD, nbV4, macA, askV4)},
			{"NS after the entry went", 1, ns, nil},
		})
		// XDP sends the answer by the ingress's tx_ports entry: without
		// one, the answer (the frame rewritten) is dropped, counted as
		// that drop and neither flooded nor suppressed.
		if m.name == "xdp" {
			if err := r.dp.objs.TxPorts.Delete(uint32(1)); err != nil {
				t.Fatal(err)
			}
			before := r.stats(1)
			r.wantVerdict(r.run(1, req), m.drop, "answer with no way back")
			after := r.stats(1)
			noEgress := tbpf.TrestleTrDropReasonTR_DROP_NO_EGRESS
			if d := after.Drops[noEgress] - before.Drops[noEgress]; d != 1 ||
				after.C[tbpf.TrestleTrCounterTR_CNT_FLOODED] != before.C[tbpf.TrestleTrCounterTR_CNT_FLOODED] ||
				after.C[tbpf.TrestleTrCounterTR_CNT_SUPPRESSED] != before.C[tbpf.TrestleTrCounterTR_CNT_SUPPRESSED] {
				t.Errorf("answer with no way back: no_egress +%d, flooded %d -> %d, suppressed %d -> %d; want +1, and neither moved",
					d, before.C[tbpf.TrestleTrCounterTR_CNT_FLOODED], after.C[tbpf.TrestleTrCounterTR_CNT_FLOODED],
					before.C[tbpf.TrestleTrCounterTR_CNT_SUPPRESSED], after.C[tbpf.TrestleTrCounterTR_CNT_SUPPRESSED])
			}
		}
		es, err := r.dp.Neighs()
		if err != nil || len(es) != 1 || es[0].Addr != nbV4 || es[0].Slot != 3 || es[0].Learned || es[0].MAC.String() != macD.String() {
			t.Errorf("the table: %+v (%v), want 10.0.0.11 on slot 3, static", es, err)
		}
	})
}

// neighVRig is vrig's bridge with neigh_suppress: slot 1 an access port
// of VLAN 10, slot 2 of VLAN 20, slot 3 a trunk of both.
func neighVRig(t *testing.T, m tmode) *rig {
	r := vrig(t, m, 0)
	ports := []PortInfo{
		{Ifindex: r.port[1], Bridge: 1, Slot: 1, PVID: 10},
		{Ifindex: r.port[2], Bridge: 1, Slot: 2, PVID: 20},
		{Ifindex: r.port[3], Bridge: 1, Slot: 3, Trunk: true, VLANs: []uint16{10, 20}},
	}
	r.setBridge(BridgeInfo{VLANAware: true, VLANs: []uint16{10, 20}, NeighSuppress: true}, ports...)
	return r
}

// TestNeighSuppressVLAN: in a VLAN-aware bridge, the table is per VLAN and
// the answer leaves as the request came, tagged or not.
func TestNeighSuppressVLAN(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := neighVRig(t, m)
		// macB holds nbV4 and nbV6 on the access port of VLAN 10.
		r.setNeighs(map[NeighKey]Neigh{
			{Bridge: 1, VLAN: 10, Addr: nbV4}:  {MAC: macB, Slot: 1},
			{Bridge: 1, VLAN: 10, Addr: nbV6}:  {MAC: macB, Slot: 1},
			{Bridge: 1, VLAN: 20, Addr: askV4}: {MAC: macC, Slot: 3},
		})
		zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
		r.runSuppress([]suppressCase{
			{"tagged ARP request in VLAN 10", 3, arpOf(10, bcast, macA, layers.ARPRequest, macA, askV4, zero, nbV4),
				arpOf(10, macA, macB, layers.ARPReply, macB, nbV4, macA, askV4)},
			{"tagged NS in VLAN 10", 3, nsOf(10, macA, askV6, nbV6, true), naOf(10, macA, macB, nbV6, askV6)},
			{"tagged ARP request in VLAN 20 (the address is VLAN 10's)", 3, arpOf(20, bcast, macA, layers.ARPRequest, macA, askV4, zero, nbV4), nil},
			{"untagged ARP request in VLAN 20", 2, arpOf(0, bcast, macD, layers.ARPRequest, macD, nbV4, zero, askV4),
				arpOf(0, macD, macC, layers.ARPReply, macC, askV4, macD, nbV4)},
			{"tagged DAD in VLAN 10", 3, nsOf(10, macA, zeroV6, nbV6, false), nil},
		})
	})
}
