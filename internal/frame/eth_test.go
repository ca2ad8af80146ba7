package frame

import (
	"bytes"
	"encoding/hex"
	"net"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func TestEthBytes(t *testing.T) {
	dst, src := net.HardwareAddr{2, 0, 0, 0, 0, 2}, net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for _, c := range []struct {
		name string
		e    Eth
		want string
	}{
		{"runt as built", Eth{Dst: dst, Src: src, Type: 0x0800, Payload: []byte{1, 2, 3}},
			"020000000002" + "020000000001" + "0800" + "010203"},
		{"a length, not a type", Eth{Dst: dst, Src: src, Type: 0x05ff},
			"020000000002" + "020000000001" + "05ff"},
		{"padded", Eth{Dst: dst, Src: src, Type: 0x88b5, Payload: []byte("hi"), Pad: true},
			"020000000002" + "020000000001" + "88b5" + "6869" + strings.Repeat("00", 44)},
		{"QinQ with priority and DEI, outermost first", Eth{Dst: dst, Src: src, Tags: []Tag{STag(20), CTagP(5, 10), {TPIDC, 0x1000 | 7}}, Type: 0x88b5, Payload: []byte{0xaa}},
			"020000000002" + "020000000001" + "88a80014" + "8100a00a" + "81001007" + "88b5" + "aa"},
		{"tagged and padded: the tag counts", Eth{Dst: dst, Src: src, Tags: []Tag{CTag(100)}, Type: 0x88b5, Pad: true},
			"020000000002" + "020000000001" + "81000064" + "88b5" + strings.Repeat("00", 42)},
	} {
		got, err := c.e.Bytes()
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if hex.EncodeToString(got) != c.want {
			t.Errorf("%s:\n got %x\nwant %s", c.name, got, c.want)
		}
	}
}

// What Eth builds, gopacket reads back as the same layers.
func TestEthDecodes(t *testing.T) {
	e := Eth{Dst: Broadcast(), Src: net.HardwareAddr{2, 0, 0, 0, 0, 1}, Tags: []Tag{STag(20), CTagP(3, 10)}, Type: 0x88b5, Payload: []byte("marker"), Pad: true}
	p := gopacket.NewPacket(e.MustBytes(), layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if eth == nil || eth.DstMAC.String() != "ff:ff:ff:ff:ff:ff" || eth.EthernetType != TPIDS {
		t.Fatalf("ethernet: %+v", eth)
	}
	var tags []*layers.Dot1Q
	for _, l := range p.Layers() {
		if q, ok := l.(*layers.Dot1Q); ok {
			tags = append(tags, q)
		}
	}
	if len(tags) != 2 || tags[0].VLANIdentifier != 20 || tags[1].VLANIdentifier != 10 || tags[1].Priority != 3 || tags[1].Type != 0x88b5 {
		t.Fatalf("tags: %+v", tags)
	}
	if !bytes.HasPrefix(tags[1].LayerPayload(), []byte("marker")) {
		t.Errorf("payload %q", tags[1].LayerPayload())
	}
}

// Bad input is an error, not a frame with a short address in it.
func TestEthBadAddress(t *testing.T) {
	for _, e := range []Eth{{Dst: net.HardwareAddr{1, 2, 3}, Src: Broadcast()}, {Dst: Broadcast()}} {
		if f, err := e.Bytes(); err == nil {
			t.Errorf("%+v: built %x", e, f)
		}
	}
}
