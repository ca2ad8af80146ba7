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
