package frame

import (
	"net"
	"net/netip"

	"github.com/gopacket/gopacket/layers"
)

// DHCP is a DHCPv4 server's message of type typ (layers.DHCPMsgTypeAck,
// Offer, ...) from the server (smac, src) to the client whose hardware
// address is chaddr, giving it yiaddr, in a frame to dst (the client's MAC,
// or broadcast), over UDP 67 to 68, as a server sends it; for the tests of
// the neighbour table's learning from DHCP.
func DHCP(tags []Tag, dst, smac net.HardwareAddr, src netip.Addr, typ layers.DHCPMsgType, yiaddr netip.Addr, chaddr net.HardwareAddr) []byte {
	to := net.IPv4bcast
	if dst[0]&1 == 0 {
		to = yiaddr.AsSlice()
	}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: to}
	udp := &layers.UDP{SrcPort: 67, DstPort: 68}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		panic(err)
	}
	d := &layers.DHCPv4{Operation: layers.DHCPOpReply, HardwareType: layers.LinkTypeEthernet, HardwareLen: 6,
		Xid: 0x74727374, YourClientIP: yiaddr.AsSlice(), ClientHWAddr: chaddr,
		Options: layers.DHCPOptions{
			layers.NewDHCPOption(layers.DHCPOptMessageType, []byte{byte(typ)}),
			layers.NewDHCPOption(layers.DHCPOptServerID, src.AsSlice()),
			layers.NewDHCPOption(layers.DHCPOptLeaseTime, []byte{0, 0, 0x0e, 0x10}),
		}}
	return Eth{Dst: dst, Src: smac, Tags: tags, Type: uint16(layers.EthernetTypeIPv4), Payload: serialize(ip, udp, d)}.MustBytes()
}

// DHCPv6Reply is a DHCPv6 server's REPLY (UDP 547 to 546) from smac/src to
// the client at dst/to (its MAC and link-local address), giving it addrs in
// one IA_NA, each with the valid lifetime valid (seconds; 0: the address
// is released).
func DHCPv6Reply(tags []Tag, dst, smac net.HardwareAddr, src, to netip.Addr, valid uint32, addrs ...netip.Addr) []byte {
	ia := []byte{0, 0, 0, 1, 0, 0, 0x0e, 0x10, 0, 0, 0x1c, 0x20} // IAID 1, T1 3600, T2 7200
	for _, a := range addrs {
		b := a.As16()
		sub := append([]byte{0, byte(layers.DHCPv6OptIAAddr), 0, 24}, b[:]...)
		sub = append(sub, byte(valid>>24), byte(valid>>16), byte(valid>>8), byte(valid), byte(valid>>24), byte(valid>>16), byte(valid>>8), byte(valid))
		ia = append(ia, sub...)
	}
	ip := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolUDP, HopLimit: 64, SrcIP: src.AsSlice(), DstIP: to.AsSlice()}
	udp := &layers.UDP{SrcPort: 547, DstPort: 546}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		panic(err)
	}
	d := &layers.DHCPv6{MsgType: layers.DHCPv6MsgTypeReply, TransactionID: []byte{0x74, 0x72, 0x73},
		Options: layers.DHCPv6Options{layers.NewDHCPv6Option(layers.DHCPv6OptIANA, ia)}}
	return Eth{Dst: dst, Src: smac, Tags: tags, Type: uint16(layers.EthernetTypeIPv6), Payload: serialize(ip, udp, d)}.MustBytes()
}
