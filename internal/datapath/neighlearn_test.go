package datapath

import (
	"bytes"
	"encoding/binary"
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

// streamCase is a frame with a stream's addresses, sent after the stream
// made its decision memo: sent from the memo, or decided by the pipeline
// (and then copied or not).
type streamCase struct {
	name   string
	data   []byte
	memo   bool
	copied bool
}

// ipOf is an IPv4 (v6 false) or IPv6 packet from askV4/askV6 to
// nbV4/nbV6, protocol (next header) proto, whose payload opens with the
// ports sport and dport.
func ipOf(v6 bool, proto uint8, sport, dport uint16) []byte {
	l4 := make([]byte, 12)
	binary.BigEndian.PutUint16(l4, sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	if v6 {
		h := make([]byte, 40)
		h[0], h[6], h[7] = 0x60, proto, 64
		binary.BigEndian.PutUint16(h[4:], uint16(len(l4)))
		s, d := askV6.As16(), nbV6.As16()
		copy(h[8:], s[:])
		copy(h[24:], d[:])
		return append(h, l4...)
	}
	h := make([]byte, 20)
	h[0], h[8], h[9] = 0x45, 64, proto
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(l4)))
	s, d := askV4.As4(), nbV4.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	return append(h, l4...)
}

// setFwdMemoSlot makes CPU 0's decision memo count what it sends as
// received on slot (struct tr_fwd_memo's in_slot, bpf/types.h): where a
// frame's rx is counted then tells a hit (on slot) from the pipeline (on
// the port the frame came in by), which writes the memo afresh.
func (r *rig) setFwdMemoSlot(slot int) {
	r.t.Helper()
	var vals [][]byte
	if err := r.dp.objs.CpuCache.Lookup(uint32(0), &vals); err != nil {
		r.t.Fatalf("read cpu_cache: %v", err)
	}
	binary.LittleEndian.PutUint16(vals[0][14:], uint16(slot))
	if err := r.dp.objs.CpuCache.Put(uint32(0), vals); err != nil {
		r.t.Fatalf("write cpu_cache: %v", err)
	}
}

// runStream sends a stream of UDP from macA to macB (known on slot to),
// in VLAN vid (tagged so, or untagged for 0), into slot from twice, so
// that its decision memo is made, then each case with the stream's
// addresses, and checks where the case was decided and whether it was
// copied. spare: a third slot, which the memo is made to name.
func (r *rig) runStream(rd *SnoopReader, vid uint16, from, to, spare int, cases []streamCase) {
	r.t.Helper()
	stream := ethframe.Eth{Dst: macB, Src: macA, Tags: vtags(vid), Type: 0x0800, Payload: ipOf(false, 17, 5000, 6000)}.MustBytes()
	for _, c := range cases {
		for i := 0; i < 2; i++ {
			r.wantVerdict(r.run(from, stream), r.m.redirect, c.name+": the stream")
		}
		if got := r.fwdMemoIngress(); got != r.port[from] {
			r.t.Errorf("%s: no decision memo of the stream (its ingress %d, want %d)", c.name, got, r.port[from])
			continue
		}
		r.setFwdMemoSlot(spare)
		rx, tx := r.stats(spare).C[tbpf.RxPackets], r.stats(to).C[tbpf.TxPackets]
		r.runLearn(rd, vid, len(vtags(vid)), []learnCase{{c.name, from, c.data, c.copied}})
		if memo := r.stats(spare).C[tbpf.RxPackets] != rx; memo != c.memo {
			r.t.Errorf("%s: sent from the decision memo %v, want %v", c.name, memo, c.memo)
		}
		if r.stats(to).C[tbpf.TxPackets] != tx+1 {
			r.t.Errorf("%s: not forwarded to slot %d", c.name, to)
		}
	}
}

// streamFrames are runStream's cases in VLAN vid: a stream's other
// frames are sent from the memo; any ICMPv6 and a DHCP server's message
// are not, and those the neighbour table learns from are copied.
func streamFrames(vid uint16) []streamCase {
	ip := func(v6 bool, proto uint8, sport, dport uint16) []byte {
		typ := uint16(0x0800)
		if v6 {
			typ = 0x86dd
		}
		return ethframe.Eth{Dst: macB, Src: macA, Tags: vtags(vid), Type: typ, Payload: ipOf(v6, proto, sport, dport)}.MustBytes()
	}
	srv := netip.MustParseAddr("10.0.0.1")
	clientReq := ethframe.DHCP(vtags(vid), macB, macA, askV4, layers.DHCPMsgTypeRequest, netip.IPv4Unspecified(), macA)
	off := 14 + 4*len(vtags(vid)) + 20
	clientReq[off], clientReq[off+1], clientReq[off+2], clientReq[off+3] = 0, 68, 0, 67
	echo6 := ip(true, 58, 0, 0)
	echo6[len(echo6)-12] = 128 // an echo request, no message of neighbour discovery
	return []streamCase{
		{"the stream's UDP", ip(false, 17, 5000, 6000), true, false},
		{"TCP", ip(false, 6, 40000, 443), true, false},
		{"UDP over IPv6", ip(true, 17, 5000, 6000), true, false},
		{"TCP over IPv6", ip(true, 6, 40000, 443), true, false},
		{"ICMP echo", ip(false, 1, 0x0800, 0), true, false},
		{"DHCP client's request (68 to 67)", clientReq, true, false},
		{"ICMPv6 echo request", echo6, false, false},
		{"ARP reply", arpOf(vid, macB, macA, layers.ARPReply, macA, askV4, macB, nbV4), false, true},
		{"NA", naOf(vid, macB, macA, askV6, nbV6), false, true},
		{"DHCPACK to the client", ethframe.DHCP(vtags(vid), macB, macA, srv, layers.DHCPMsgTypeAck, nbV4, macB), false, true},
		{"DHCPv6 REPLY", ethframe.DHCPv6Reply(vtags(vid), macB, macA, askV6, netip.MustParseAddr("fe80::b"), 3600, nbV6), false, true},
		{"the stream's UDP again", ip(false, 17, 5000, 6000), true, false},
	}
}

// TestNeighLearnMidStream: a bridge with neigh_suppress keeps the decision
// memo (bpf/lib/memo.h, TR_MEMO_NEIGH): a stream's frames are sent from
// it, and an ARP reply, an advertisement or a DHCP server's message with
// the stream's addresses is decided by the pipeline and copied, on a plain
// bridge and a VLAN-aware one (tagged from the trunk).
func TestNeighLearnMidStream(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		t.Run("plain", func(t *testing.T) {
			r := newRig(t, m, 1024, [4]uint32{})
			r.setBridge(BridgeInfo{NeighSuppress: true}, PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1},
				PortInfo{Ifindex: r.port[2], Bridge: 1, Slot: 2}, PortInfo{Ifindex: r.port[3], Bridge: 1, Slot: 3})
			rd, err := r.dp.Snoop()
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			r.run(2, ipv4(bcast, macB)) // macB known on slot 2
			r.runStream(rd, 0, 1, 2, 3, streamFrames(0))
		})
		t.Run("VLAN-aware", func(t *testing.T) {
			r := neighVRig(t, m)
			rd, err := r.dp.Snoop()
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			r.run(1, ipv4(bcast, macB)) // macB known on slot 1, VLAN 10
			r.runStream(rd, 10, 3, 1, 2, streamFrames(10))
		})
	})
}
