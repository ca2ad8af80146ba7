package overlay

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// TestHeader: the outer headers the datapath puts before a frame, with the
// per-frame fields filled as it fills them, read back by gopacket: the
// next hop's addresses, IPv4 from local to the VTEP (TTL 64, don't
// fragment, a valid checksum), UDP to the port, VXLAN with the VNI, and
// the frame behind.
func TestHeader(t *testing.T) {
	nh := NextHop{Ifindex: 3, Src: net.HardwareAddr{2, 0, 0, 0, 0, 1}, Dst: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	local, vtep := netip.MustParseAddr("10.255.0.1"), netip.MustParseAddr("10.255.0.2")
	h := Header(nh, local, vtep, 1000, 4789)
	inner := make([]byte, 64)
	copy(inner, []byte{2, 0, 0, 0, 2, 1, 2, 0, 0, 0, 1, 1, 0x88, 0xb5}) // local experimental EtherType: an opaque payload
	pkt := append(h[:], inner...)
	// What the datapath writes per frame.
	binary.BigEndian.PutUint16(pkt[16:18], uint16(len(pkt)-14))
	binary.BigEndian.PutUint16(pkt[24:26], ipChecksum(pkt[14:34]))
	binary.BigEndian.PutUint16(pkt[38:40], uint16(len(pkt)-34))
	binary.BigEndian.PutUint16(pkt[34:36], 50000)

	// The frame behind is opaque to gopacket (its EtherType): only the
	// outer layers and the inner Ethernet header must decode.
	p := gopacket.NewPacket(pkt, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	vx, _ := p.Layer(layers.LayerTypeVXLAN).(*layers.VXLAN)
	if eth == nil || ip == nil || udp == nil || vx == nil {
		t.Fatalf("layers %v", p.Layers())
	}
	if eth.SrcMAC.String() != nh.Src.String() || eth.DstMAC.String() != nh.Dst.String() || eth.EthernetType != layers.EthernetTypeIPv4 {
		t.Errorf("Ethernet %+v", eth)
	}
	if ip.SrcIP.String() != "10.255.0.1" || ip.DstIP.String() != "10.255.0.2" || ip.TTL != 64 || ip.Flags != layers.IPv4DontFragment ||
		ip.Protocol != layers.IPProtocolUDP || ip.IHL != 5 || int(ip.Length) != len(pkt)-14 {
		t.Errorf("IPv4 %+v", ip)
	}
	if ipChecksum(pkt[14:34]) != 0 {
		t.Errorf("IPv4 checksum %#04x does not verify", ip.Checksum)
	}
	if udp.DstPort != 4789 || udp.Checksum != 0 || int(udp.Length) != len(pkt)-34 {
		t.Errorf("UDP %+v", udp)
	}
	if !vx.ValidIDFlag || vx.VNI != 1000 {
		t.Errorf("VXLAN %+v", vx)
	}
	in := gopacket.NewPacket(vx.Payload, layers.LayerTypeEthernet, gopacket.Default)
	if e, _ := in.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); e == nil || e.SrcMAC.String() != "02:00:00:00:01:01" {
		t.Errorf("the frame behind: %v", in)
	}
}

// ipChecksum is RFC 1071's checksum of b (0 over a header whose checksum
// is right).
func ipChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}
