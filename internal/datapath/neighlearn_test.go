package datapath

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	tbpf "github.com/trestle/trestle/internal/bpf"
	ethframe "github.com/trestle/trestle/internal/frame"
)

// The neighbour table's learning (bpf/lib/neigh.h, tr_neigh_copy) through
// BPF_PROG_TEST_RUN, in both builds, on a plain bridge and a VLAN-aware
// one: which frames a bridge with neigh_suppress copies to the snoop ring
// for the daemon (ARP with a sender, ND but duplicate address detection,
// DHCP server messages; flooded, answered or forwarded), each with its
// bridge, VLAN, port, Ethernet addresses and payload, and which it does
// not; a bridge without the key copies nothing.

// learnCase is a frame from a slot, and whether it is copied.
type learnCase struct {
	name   string
	slot   int
	data   []byte
	copied bool
}

// runLearn runs each case and reads the ring after it: the copy it wants
// (vlan: the frame's FDB VLAN; tags: how many tags precede the payload),
// or none.
func (r *rig) runLearn(rd *SnoopReader, vlan uint16, tags int, cases []learnCase) {
	r.t.Helper()
	for _, c := range cases {
		r.run(c.slot, c.data)
		wait := 20 * time.Millisecond // a copy is in the ring when the run returns
		if c.copied {
			wait = time.Second
		}
		m, err := rd.Read(time.Now().Add(wait))
		if !c.copied {
			if !errors.Is(err, ErrNoEvent) {
				r.t.Errorf("%s: copied (%+v, %v), want no copy", c.name, m, err)
			}
			continue
		}
		if err != nil {
			r.t.Errorf("%s: no copy: %v", c.name, err)
			continue
		}
		off := 14 + 4*tags
		want := c.data[off:]
		if !m.Neigh || m.Bridge != 1 || m.VLAN != vlan || m.Slot != uint16(c.slot) ||
			!bytes.Equal(m.Dst, c.data[:6]) || !bytes.Equal(m.Src, c.data[6:12]) || !bytes.Equal(m.Packet, want) ||
			m.Proto != uint16(c.data[off-2])<<8|uint16(c.data[off-1]) {
			r.t.Errorf("%s: copy neigh %v bridge %d vlan %d slot %d %v > %v proto %#04x packet % x; want a neighbour copy of bridge 1 vlan %d slot %d, the frame's addresses, payload % x",
				c.name, m.Neigh, m.Bridge, m.VLAN, m.Slot, m.Src, m.Dst, m.Proto, m.Packet, vlan, c.slot, want)
		}
	}
}

// learnFrames are the cases of a bridge with neigh_suppress, in VLAN vid
// (0: untagged), from slot from, with macB known on slot to (so that
// frames to it are forwarded) and the table holding nbV4 (so that a
// request for it is answered).
func learnFrames(vid uint16, from, to int, on bool) []learnCase {
	zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
	srv := netip.MustParseAddr("10.0.0.1")
	ns := nsOf(vid, macA, askV6, nbV6, true)
	dad := nsOf(vid, macA, zeroV6, askV6, false)
	hop64 := nsOf(vid, macA, askV6, nbV6, true)
	hop64[len(hop64)-len(ns)+14+4*len(vtags(vid))+7] = 64
	dhcpOffer := ethframe.DHCP(vtags(vid), macB, macA, srv, layers.DHCPMsgTypeOffer, nbV4, macB)
	return []learnCase{
		{"ARP request (flooded)", from, arpOf(vid, bcast, macA, layers.ARPRequest, macA, askV4, zero, unknown), on},
		{"ARP request the table answers", from, arpOf(vid, bcast, macA, layers.ARPRequest, macA, askV4, zero, nbV4), on},
		{"ARP reply (forwarded)", from, arpOf(vid, macB, macA, layers.ARPReply, macA, askV4, macB, nbV4), on},
		{"gratuitous ARP", from, arpOf(vid, bcast, macA, layers.ARPRequest, macA, askV4, zero, askV4), on},
		{"ARP probe (sender 0.0.0.0)", from, arpOf(vid, bcast, macA, layers.ARPRequest, macA, zeroV4, zero, askV4), false},
		{"NS", from, ns, on},
		{"NS with hop limit 64", from, hop64, false},
		{"DAD (source ::)", from, dad, false},
		{"NA (forwarded)", from, naOf(vid, macB, macA, askV6, nbV6), on},
		{"unsolicited NA to all nodes", from, ethframe.NA(vtags(vid), net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, macA, askV6, netip.MustParseAddr("ff02::1")), on},
		{"DHCPACK (broadcast)", from, ethframe.DHCP(vtags(vid), bcast, macA, srv, layers.DHCPMsgTypeAck, nbV4, macB), on},
		{"DHCPOFFER (to the client)", from, dhcpOffer, on},
		{"DHCP client's request (68 to 67)", to, clientDHCP(vid, macB), false},
		{"DHCPv6 REPLY", from, ethframe.DHCPv6Reply(vtags(vid), macB, macA, askV6, netip.MustParseAddr("fe80::b"), 3600, nbV6), on},
		{"DHCPv6 from a client (546 to 547)", to, func() []byte {
			f := ethframe.DHCPv6Reply(vtags(vid), macA, macB, netip.MustParseAddr("fe80::b"), askV6, 3600, nbV6)
			o := 14 + 4*len(vtags(vid)) + 40
			f[o+1], f[o+3] = 0x22, 0x23
			return f
		}(), false},
		{"IPv4 UDP to a group", from, ethframe.UDPTo(macA, askV4, grp4, make([]byte, 32)), false},
	}
}

// clientDHCP is a client's DHCPREQUEST, UDP 68 to 67: no server's.
func clientDHCP(vid uint16, mac net.HardwareAddr) []byte {
	f := ethframe.DHCP(vtags(vid), bcast, mac, netip.IPv4Unspecified(), layers.DHCPMsgTypeRequest, netip.IPv4Unspecified(), mac)
	off := 14 + 4*len(vtags(vid)) + 20
	f[off], f[off+1], f[off+2], f[off+3] = 0, 68, 0, 67
	return f
}

func TestNeighLearnCopies(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		for _, on := range []bool{false, true} {
			r := newRig(t, m, 1024, [4]uint32{})
			ports := []PortInfo{{Ifindex: r.port[1], Bridge: 1, Slot: 1}, {Ifindex: r.port[2], Bridge: 1, Slot: 2}, {Ifindex: r.port[3], Bridge: 1, Slot: 3}}
			r.setBridge(BridgeInfo{NeighSuppress: on}, ports...)
			r.setNeighs(map[NeighKey]Neigh{{Bridge: 1, Addr: nbV4}: {MAC: macB, Slot: 2}})
			rd, err := r.dp.Snoop()
			if err != nil {
				t.Fatal(err)
			}
			r.run(2, ipv4(bcast, macB)) // macB known on slot 2
			r.runLearn(rd, 0, 0, learnFrames(0, 1, 2, on))
			if n, err := r.dp.SnoopLost(); err != nil || n != 0 {
				t.Errorf("snoop lost %d (%v), want 0", n, err)
			}
			// An overlay port's frames (at tc, the only mode that has
			// them) are the fabric's stations: not copied.
			if on && m.name == "tc" {
				ports[2].Policy = tbpf.PortPolicy{}.With(tbpf.TrestleTrPortFlagsTR_PORT_OVERLAY, true)
				r.setPort(ports[2])
				r.setBridge(BridgeInfo{NeighSuppress: true, Overlay: true}, ports...)
				zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
				r.runLearn(rd, 0, 0, []learnCase{
					{"ARP request from the overlay port", 3, arpOf(0, bcast, macC, layers.ARPRequest, macC, askV4, zero, unknown), false},
					{"ARP request from a host's port", 1, arpOf(0, bcast, macA, layers.ARPRequest, macA, askV4, zero, unknown), true},
				})
			}
			rd.Close()
		}
	})
}

// TestNeighLearnCopiesVLAN: in a VLAN-aware bridge, a copy names the
// frame's VLAN, tagged on the trunk or untagged on an access port.
func TestNeighLearnCopiesVLAN(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := neighVRig(t, m)
		r.setNeighs(map[NeighKey]Neigh{{Bridge: 1, VLAN: 10, Addr: nbV4}: {MAC: macC, Slot: 1}})
		rd, err := r.dp.Snoop()
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		r.run(1, ipv4(bcast, macB)) // macB known on slot 1, VLAN 10
		r.runLearn(rd, 10, 1, learnFrames(10, 3, 1, true))
		r.run(3, ethframe.Eth{Dst: bcast, Src: macB, Tags: vtags(20), Type: 0x0800, Payload: make([]byte, 46)}.MustBytes()) // and on slot 3, VLAN 20
		r.runLearn(rd, 20, 0, learnFrames(0, 2, 3, true))
	})
}
