package harness

import (
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/trestle/trestle/internal/frame"
)

// Frames of the ip_guard tests (tests/policy, tests/cni): ARP, IPv4 UDP
// and IPv6 neighbour advertisements with any addresses, serialized by
// gopacket with lengths and checksums, then <marker> (past the packet,
// where HasVMarker finds it).

// GuardFrame is an Ethernet frame of EtherType typ from src to dst whose
// payload is the layers given, then <marker>.
func GuardFrame(t testing.TB, dst, src net.HardwareAddr, typ layers.EthernetType, marker string, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	payload := append(buf.Bytes(), "<"+marker+">"...)
	return frame.Eth{Dst: dst, Src: src, Type: uint16(typ), Payload: payload, Pad: true}.MustBytes()
}

// ARPFrame is a broadcast ARP packet from src: op layers.ARPRequest or
// ARPReply, spa the sender's IPv4 address, tpa the target's.
func ARPFrame(t testing.TB, src net.HardwareAddr, op uint16, spa, tpa, marker string) []byte {
	a := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: op, SourceHwAddress: src, SourceProtAddress: net.ParseIP(spa).To4(),
		DstHwAddress: make([]byte, 6), DstProtAddress: net.ParseIP(tpa).To4()}
	return GuardFrame(t, VLANBcast(), src, layers.EthernetTypeARP, marker, a)
}

// UDP4Frame is an IPv4 UDP packet from srcMAC and from to to, ports sport
// to dport.
func UDP4Frame(t testing.TB, dst, srcMAC net.HardwareAddr, from, to string, sport, dport uint16, marker string) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.ParseIP(from).To4(), DstIP: net.ParseIP(to).To4()}
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	if err := u.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	return GuardFrame(t, dst, srcMAC, layers.EthernetTypeIPv4, marker, ip, u, gopacket.Payload("ip-guard"))
}

// NAFrame is an unsolicited neighbour advertisement to all nodes from
// srcMAC and from, of target.
func NAFrame(t testing.TB, srcMAC net.HardwareAddr, from, target, marker string) []byte {
	ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6, SrcIP: net.ParseIP(from), DstIP: net.ParseIP("ff02::1")}
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborAdvertisement, 0)}
	if err := ic.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	na := &layers.ICMPv6NeighborAdvertisement{Flags: 0x20, TargetAddress: net.ParseIP(target)}
	return GuardFrame(t, net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, srcMAC, layers.EthernetTypeIPv6, marker, ip, ic, na)
}

// STPGroup is the destination of spanning tree BPDUs.
func STPGroup() net.HardwareAddr { return net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, 0} }

// BPDUFrame is an 802.1D configuration BPDU from src (802.3, LLC 42 42 03),
// as a switch that runs spanning tree sends it every hello time.
func BPDUFrame(t testing.TB, src net.HardwareAddr) []byte {
	t.Helper()
	id := layers.STPSwitchID{Priority: 32768, SysID: 1, HwAddr: src}
	ls := []gopacket.SerializableLayer{
		&layers.Ethernet{SrcMAC: src, DstMAC: STPGroup(), EthernetType: layers.EthernetTypeLLC},
		&layers.LLC{DSAP: 0x42, SSAP: 0x42, Control: 0x03},
		&layers.STP{RouteID: id, BridgeID: id, PortID: 0x8001, MaxAge: 20 << 8, HelloTime: 2 << 8, FDelay: 15 << 8},
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// RAFrame is a router advertisement to all nodes from srcMAC and from (a
// link-local address), as a rogue router sends it: router lifetime 1800 s,
// no options.
func RAFrame(t testing.TB, srcMAC net.HardwareAddr, from, marker string) []byte {
	ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6, SrcIP: net.ParseIP(from), DstIP: net.ParseIP("ff02::1")}
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeRouterAdvertisement, 0)}
	if err := ic.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	ra := &layers.ICMPv6RouterAdvertisement{HopLimit: 64, RouterLifetime: 1800}
	return GuardFrame(t, net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, srcMAC, layers.EthernetTypeIPv6, marker, ip, ic, ra)
}

// DHCPv6Frame is a DHCPv6 message of type typ (layers.DHCPv6MsgTypeAdvertise,
// ...) from srcMAC and from, ports sport to dport, to dst (an address of
// ff02::1:2, All_DHCP_Relay_Agents_and_Servers, or a client's link-local).
func DHCPv6Frame(t testing.TB, dst, srcMAC net.HardwareAddr, from, to string, sport, dport uint16, typ layers.DHCPv6MsgType, marker string) []byte {
	ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolUDP, SrcIP: net.ParseIP(from), DstIP: net.ParseIP(to)}
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	if err := u.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	d := &layers.DHCPv6{MsgType: typ, TransactionID: []byte{1, 2, 3}}
	return GuardFrame(t, dst, srcMAC, layers.EthernetTypeIPv6, marker, ip, u, d)
}

// DHCP4Frame is a DHCPv4 message of type typ (layers.DHCPMsgTypeDiscover,
// ...) from srcMAC and from, ports sport to dport, broadcast: a client's
// (68 -> 67, from 0.0.0.0) or a server's (67 -> 68).
func DHCP4Frame(t testing.TB, srcMAC net.HardwareAddr, from string, sport, dport uint16, typ layers.DHCPMsgType, marker string) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.ParseIP(from).To4(), DstIP: net.IPv4bcast.To4()}
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	if err := u.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	op := layers.DHCPOpRequest
	if sport == 67 {
		op = layers.DHCPOpReply
	}
	d := &layers.DHCPv4{Operation: op, HardwareType: layers.LinkTypeEthernet, HardwareLen: 6, Xid: 0x2a, ClientHWAddr: srcMAC,
		Options: layers.DHCPOptions{layers.NewDHCPOption(layers.DHCPOptMessageType, []byte{byte(typ)})}}
	return GuardFrame(t, VLANBcast(), srcMAC, layers.EthernetTypeIPv4, marker, ip, u, d)
}
