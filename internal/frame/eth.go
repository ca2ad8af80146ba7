package frame

import (
	"fmt"
	"net"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// The one frame builder of the tests and the lab: an Ethernet frame with
// any VLAN tags (Eth), and the lab's test frames (Build), both serialized by
// gopacket's layers.

// TPIDs of VLAN tags: an 802.1Q C-tag and an 802.1ad S-tag.
const (
	TPIDC = 0x8100
	TPIDS = 0x88a8
)

// Tag is a VLAN tag as it is on the wire: its TPID and its TCI (PCP<<13 |
// DEI<<12 | VID).
type Tag struct{ TPID, TCI uint16 }

// CTag is an 802.1Q tag of vid, PCP 0; CTagP one with priority pcp; STag an
// 802.1ad tag of vid.
func CTag(vid uint16) Tag       { return Tag{TPIDC, vid} }
func CTagP(pcp, vid uint16) Tag { return Tag{TPIDC, pcp<<13 | vid} }
func STag(vid uint16) Tag       { return Tag{TPIDS, vid} }

// Eth is an Ethernet frame: its addresses, its VLAN tags outermost first,
// its EtherType (or a length, below 0x600, as a test of bad frames sends
// it) and its payload. Without Pad the frame is exactly that long, a runt
// if so built (veth carries short frames); with Pad it is zero-padded to
// the 60-byte minimum.
type Eth struct {
	Dst, Src net.HardwareAddr
	Tags     []Tag
	Type     uint16
	Payload  []byte
	Pad      bool
}

// Layers are the frame's layers for gopacket.SerializeLayers.
func (e Eth) Layers() []gopacket.SerializableLayer {
	next := func(i int) layers.EthernetType {
		if i < len(e.Tags) {
			return layers.EthernetType(e.Tags[i].TPID)
		}
		return layers.EthernetType(e.Type)
	}
	out := []gopacket.SerializableLayer{&layers.Ethernet{DstMAC: e.Dst, SrcMAC: e.Src, EthernetType: next(0)}}
	for i, t := range e.Tags {
		out = append(out, &layers.Dot1Q{Priority: uint8(t.TCI >> 13), DropEligible: t.TCI&0x1000 != 0, VLANIdentifier: t.TCI & 0xfff, Type: next(i + 1)})
	}
	return append(out, gopacket.Payload(e.Payload))
}

// Bytes is the frame on the wire, without FCS. Addresses other than 6
// bytes long are an error.
func (e Eth) Bytes() ([]byte, error) {
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, e.Layers()...); err != nil {
		return nil, fmt.Errorf("ethernet frame: %w", err)
	}
	f := buf.Bytes()
	if n := ethLen + vlanLen*len(e.Tags) + len(e.Payload); !e.Pad && n < len(f) {
		f = f[:n] // gopacket pads every frame to 60 bytes
	}
	return f, nil
}

// MustBytes is Bytes for a frame made of addresses known to be good; it
// panics on others.
func (e Eth) MustBytes() []byte {
	f, err := e.Bytes()
	if err != nil {
		panic(err)
	}
	return f
}

// Broadcast is the broadcast address, ff:ff:ff:ff:ff:ff (a new slice each
// time: callers may change it).
func Broadcast() net.HardwareAddr { return net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} }
