package frame

import (
	"net"
	"net/netip"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Neighbour discovery's frames as a host sends them, for the tests of
// neighbour suppression: ARP (RFC 826), and IPv6 neighbour solicitations
// and advertisements (RFC 4861) with their ICMPv6 checksum. tags: the
// frame's VLAN tags, outermost first (none: untagged).

// ARP is an ARP packet of operation op (layers.ARPRequest, ARPReply) from
// sha/spa to tha/tpa (IPv4 over Ethernet), in a frame from src to dst,
// padded to the Ethernet minimum as a host's stack pads it.
func ARP(tags []Tag, dst, src net.HardwareAddr, op uint16, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	s, t := spa.As4(), tpa.As4()
	a := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: op, SourceHwAddress: sha, SourceProtAddress: s[:], DstHwAddress: tha, DstProtAddress: t[:]}
	return Eth{Dst: dst, Src: src, Tags: tags, Type: uint16(layers.EthernetTypeARP), Payload: serialize(a), Pad: true}.MustBytes()
}

// SolicitedNode is target's solicited-node multicast address (RFC 4291
// 2.7.1) and the MAC it is sent to.
func SolicitedNode(target netip.Addr) (netip.Addr, net.HardwareAddr) {
	t := target.As16()
	a := netip.MustParseAddr("ff02::1:ff00:0").As16()
	copy(a[13:], t[13:])
	return netip.AddrFrom16(a), net.HardwareAddr{0x33, 0x33, 0xff, t[13], t[14], t[15]}
}

// NS is a neighbour solicitation from src (its MAC) and from (its address,
// :: for duplicate address detection) for target, to target's
// solicited-node address, with the source link-layer address option sll
// (nil: none).
func NS(tags []Tag, src net.HardwareAddr, from, target netip.Addr, sll net.HardwareAddr) []byte {
	dst, dmac := SolicitedNode(target)
	ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: target.AsSlice()}
	if sll != nil {
		ns.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: sll}}
	}
	return Eth{Dst: dmac, Src: src, Tags: tags, Type: uint16(layers.EthernetTypeIPv6),
		Payload: icmp6(from, dst, layers.ICMPv6TypeNeighborSolicitation, ns)}.MustBytes()
}

// NA is the neighbour advertisement the host with mac and target sends to
// the solicitation's source (dst, its MAC; to, its address): solicited and
// override set, its link-layer address in the target option.
func NA(tags []Tag, dst, mac net.HardwareAddr, target, to netip.Addr) []byte {
	na := &layers.ICMPv6NeighborAdvertisement{Flags: 0x60, TargetAddress: target.AsSlice(),
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: mac}}}
	return Eth{Dst: dst, Src: mac, Tags: tags, Type: uint16(layers.EthernetTypeIPv6),
		Payload: icmp6(target, to, layers.ICMPv6TypeNeighborAdvertisement, na)}.MustBytes()
}

// icmp6 is an IPv6 packet (hop limit 255) from src to dst of an ICMPv6
// message of type typ, its body msg, the checksum computed.
func icmp6(src, dst netip.Addr, typ uint8, msg gopacket.SerializableLayer) []byte {
	ip := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: 255, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
	if err := ic.SetNetworkLayerForChecksum(ip); err != nil {
		panic(err)
	}
	return serialize(ip, ic, msg)
}

func serialize(ls ...gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		panic(err)
	}
	return buf.Bytes()
}
