// Package frame builds, stamps and parses the test frames of `trestle gen`
// and `trestle sink`.
//
// A test frame, without FCS, is
//
//	Ethernet   dst(6) src(6) [0x8100 TCI(2)] ethertype(2)      14 or 18 bytes
//	IPv4       20 bytes, no options (or IPv6, 40 bytes)
//	UDP        8 bytes
//	test hdr   16 bytes, all big-endian:
//	             +0  magic    uint16 = 0x7452 ("tR")
//	             +2  flow id  uint16
//	             +4  sequence uint32, per flow, from 0
//	             +8  send timestamp uint64, nanoseconds of CLOCK_MONOTONIC
//	zeros      up to the frame size
//
// The IP and UDP lengths cover the whole frame: there is never Ethernet
// padding, so the UDP payload is the test header and zeros to the end.
// IPv4 headers are version 4, IHL 5, TOS 0, ID 0, DF, TTL 64, protocol 17;
// IPv6 headers are traffic class 0, flow label 0, next header 17, hop limit
// 64. The VLAN tag has PCP 0 and DEI 0. Every checksum is valid, and the UDP
// checksum is never 0 (0xffff is sent instead, RFC 768).
//
// The generator's eBPF program copies the first Layout.HdrLen bytes of a
// template made by Build, writes the test header, and finishes the UDP
// checksum from UDPCsumBase; StampWithBase is that computation in Go, and the
// tests hold it equal to Stamp and to a checksum computed from scratch. So
// the byte layout above is a contract with bpf/lab/gen.c, not a detail.
package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

const (
	Magic         = 0x7452 // "tR"
	TestHeaderLen = 16
	// MaxSize is the largest frame without FCS the generator sends: its
	// frames are BPF_PROG_RUN live XDP frames, one 4 KiB page less the
	// kernel's headroom and tail room.
	MaxSize = 3368
)

const (
	ethLen   = 14
	vlanLen  = 4
	ipv4Len  = 20
	ipv6Len  = 40
	udpLen   = 8
	minFrame = 60 // Ethernet minimum without FCS

	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	protoUDP      = 17
	defaultTTL    = 64
)

// ErrSpec is wrapped by every error Build and Flows return for a bad Spec.
var ErrSpec = errors.New("invalid frame spec")

// Spec describes one test frame.
type Spec struct {
	Dst, Src         net.HardwareAddr
	VLAN             uint16 // 0 = untagged; 1..4094 = 802.1Q tag (TPID 0x8100, PCP 0, DEI 0)
	IPv6             bool
	SrcIP, DstIP     net.IP // IPv4 or IPv6 as IPv6 says
	SrcPort, DstPort uint16
	Size             int // frame size WITHOUT FCS, MinSize(...)..MaxSize
	Flow             uint16
}

// Layout gives offsets into a frame made by Build.
type Layout struct {
	L3      int // IP header
	L4      int // UDP header
	Test    int // test header
	UDPCsum int // UDP checksum field
	IPCsum  int // IPv4 header checksum field; -1 for IPv6
	HdrLen  int // bytes before the test header, == Test: what the eBPF generator copies
}

// MinSize is the smallest frame (without FCS) that holds the headers and the
// test header, and at least the 60-byte Ethernet minimum: IPv4 60, IPv4 with
// VLAN 62, IPv6 78, IPv6 with VLAN 82.
func MinSize(vlan, ipv6 bool) int {
	return max(layout(vlan, ipv6).Test+TestHeaderLen, minFrame)
}

func layout(vlan, ipv6 bool) Layout {
	var l Layout
	l.L3 = ethLen
	if vlan {
		l.L3 += vlanLen
	}
	l.IPCsum = l.L3 + 10
	l.L4 = l.L3 + ipv4Len
	if ipv6 {
		l.IPCsum = -1
		l.L4 = l.L3 + ipv6Len
	}
	l.UDPCsum = l.L4 + 6
	l.Test = l.L4 + udpLen
	l.HdrLen = l.Test
	return l
}

// check returns the first problem with s, naming the field.
func (s *Spec) check() error {
	if len(s.Dst) != 6 {
		return fmt.Errorf("%w: Dst MAC %q: need 6 bytes, have %d", ErrSpec, s.Dst, len(s.Dst))
	}
	if len(s.Src) != 6 {
		return fmt.Errorf("%w: Src MAC %q: need 6 bytes, have %d", ErrSpec, s.Src, len(s.Src))
	}
	if s.VLAN > 4094 {
		// 4095 is reserved (IEEE 802.1Q), and bits above 12 would spill into PCP/DEI.
		return fmt.Errorf("%w: VLAN %d: not 0 (untagged) or 1..4094", ErrSpec, s.VLAN)
	}
	for _, a := range []struct {
		name string
		ip   net.IP
	}{{"SrcIP", s.SrcIP}, {"DstIP", s.DstIP}} {
		if err := checkFamily(a.name, a.ip, s.IPv6); err != nil {
			return err
		}
	}
	if lo := MinSize(s.VLAN != 0, s.IPv6); s.Size < lo || s.Size > MaxSize {
		return fmt.Errorf("%w: Size %d: not in %d..%d", ErrSpec, s.Size, lo, MaxSize)
	}
	return nil
}

// checkFamily: an IPv4-mapped IPv6 address counts as IPv4, because net.IP
// cannot tell "::ffff:10.0.0.1" from "10.0.0.1" and ParseIP makes the latter
// 16 bytes long.
func checkFamily(name string, ip net.IP, v6 bool) error {
	switch {
	case len(ip) != net.IPv4len && len(ip) != net.IPv6len:
		return fmt.Errorf("%w: %s %v: not an IP address", ErrSpec, name, ip)
	case v6 && ip.To4() != nil:
		return fmt.Errorf("%w: %s %v: IPv4 address in an IPv6 spec", ErrSpec, name, ip)
	case !v6 && ip.To4() == nil:
		return fmt.Errorf("%w: %s %v: IPv6 address in an IPv4 spec", ErrSpec, name, ip)
	}
	return nil
}

// Build returns the frame s describes with sequence 0 and timestamp 0, and
// its layout. All checksums are valid.
func Build(s Spec) ([]byte, Layout, error) {
	if err := s.check(); err != nil {
		return nil, Layout{}, err
	}
	l := layout(s.VLAN != 0, s.IPv6)
	// The UDP payload: the test header with sequence 0 and timestamp 0,
	// then zeros to the frame's size.
	payload := make([]byte, s.Size-l.Test)
	binary.BigEndian.PutUint16(payload[0:], Magic)
	binary.BigEndian.PutUint16(payload[2:], s.Flow)
	e := Eth{Dst: s.Dst, Src: s.Src, Type: etherTypeIPv4}
	if s.VLAN != 0 {
		e.Tags = []Tag{CTag(s.VLAN)} // PCP 0, DEI 0
	}
	udp := &layers.UDP{SrcPort: layers.UDPPort(s.SrcPort), DstPort: layers.UDPPort(s.DstPort)}
	var ip gopacket.SerializableLayer
	if s.IPv6 {
		e.Type = etherTypeIPv6
		ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolUDP, HopLimit: defaultTTL, SrcIP: s.SrcIP.To16(), DstIP: s.DstIP.To16()}
		if err := udp.SetNetworkLayerForChecksum(ip6); err != nil {
			return nil, Layout{}, err
		}
		ip = ip6
	} else {
		// DF; ID 0 is fine for packets that never fragment (RFC 6864).
		ip4 := &layers.IPv4{Version: 4, Flags: layers.IPv4DontFragment, TTL: defaultTTL, Protocol: layers.IPProtocolUDP, SrcIP: s.SrcIP.To4(), DstIP: s.DstIP.To4()}
		if err := udp.SetNetworkLayerForChecksum(ip4); err != nil {
			return nil, Layout{}, err
		}
		ip = ip4
	}
	all := e.Layers()
	all = append(all[:len(all)-1], ip, udp, gopacket.Payload(payload))
	buf := gopacket.NewSerializeBuffer()
	// Every length and checksum computed; a UDP checksum of 0 is sent as
	// 0xffff (RFC 768), as StampWithBase does.
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, all...); err != nil {
		return nil, Layout{}, fmt.Errorf("%w: %v", ErrSpec, err)
	}
	return buf.Bytes(), l, nil
}

// sum adds b as big-endian 16-bit words to s, an odd last byte as the high
// half of a word (RFC 1071). It does not fold; a uint64 cannot overflow for
// any frame.
func sum(b []byte, s uint64) uint64 {
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

// fold reduces s to 16 bits with end-around carry. The result is 0 only when
// s is 0, so a sum that includes a non-zero word folds to 1..0xffff.
func fold(s uint64) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// udpCsum is the checksum field for a folded sum: its complement, with 0
// sent as 0xffff because 0 means "no checksum" (RFC 768). Both are one's-
// complement zero, so a receiver verifies either.
func udpCsum(folded uint16) uint16 {
	if c := ^folded; c != 0 {
		return c
	}
	return 0xffff
}

// UDPCsumBase is the folded (not inverted) 16-bit one's-complement sum of
// everything the UDP checksum covers -- the pseudo-header and the UDP header
// and payload -- with the checksum field, the sequence number and the
// timestamp taken as zero, whatever f holds there. f must be a frame made by
// Build (stamped or not), and l its layout.
//
// The base is never 0 (the pseudo-header's protocol word is 17, and a sum
// with a non-zero word never folds to 0). Build writes ^base into the
// checksum field, except that base 0xffff gives 0xffff rather than 0; so for
// a template's checksum field c, base == ^c when c != 0xffff, and base ==
// 0xffff when c == 0xffff.
//
// The eBPF generator adds the 16-bit words of seq and the timestamp to the
// base, folds, inverts and maps 0 to 0xffff: see StampWithBase.
func UDPCsumBase(f []byte, l Layout) uint16 {
	var s uint64
	if l.IPCsum < 0 {
		s = sum(f[l.L3+8:l.L3+40], s) // source and destination address
	} else {
		s = sum(f[l.L3+12:l.L3+20], s)
	}
	// The rest of the pseudo-header is the protocol and the UDP length:
	// IPv4 has zero(8) proto(8) length(16), IPv6 length(32) zero(24) next
	// header(8); as 16-bit words both add up to proto + length.
	s += protoUDP + uint64(binary.BigEndian.Uint16(f[l.L4+4:]))
	// Every piece starts at an even offset from the UDP header, so the
	// pieces can be summed apart.
	s = sum(f[l.L4:l.UDPCsum], s)  // ports and length
	s = sum(f[l.Test:l.Test+4], s) // magic and flow
	s = sum(f[l.Test+TestHeaderLen:], s)
	return fold(s)
}

// Stamp writes seq and ts into f, a frame made by Build with layout l, and
// updates the UDP checksum from the one f holds and the words it replaces
// (RFC 1624, eqn. 3), whatever seq and timestamp f held before.
func Stamp(f []byte, l Layout, seq uint32, ts uint64) {
	be := binary.BigEndian
	at := f[l.Test+4 : l.Test+TestHeaderLen]
	// ^c is the sum of the frame, with either zero for a field of 0xffff:
	// they are the same number in one's complement, and udpCsum maps both
	// results to 0xffff.
	s := uint64(^be.Uint16(f[l.UDPCsum:]))
	for i := 0; i < len(at); i += 2 {
		s += uint64(^be.Uint16(at[i:])) // subtract the old word
	}
	be.PutUint32(at[0:], seq)
	be.PutUint64(at[4:], ts)
	s = sum(at, s)
	be.PutUint16(f[l.UDPCsum:], udpCsum(fold(s)))
}

// StampWithBase does what bpf/lab/gen.c does to a copied template: write seq and
// ts, add their 16-bit words to base (from UDPCsumBase) in a 32-bit sum, fold
// twice, invert, and send 0 as 0xffff. (The program also writes the magic and
// flow id, which the template already holds.) It exists so that tests can
// hold the eBPF arithmetic equal to Stamp.
func StampWithBase(f []byte, l Layout, base uint16, seq uint32, ts uint64) {
	be := binary.BigEndian
	be.PutUint32(f[l.Test+4:], seq)
	be.PutUint64(f[l.Test+8:], ts)

	// At most 7 words of 0xffff: no overflow in 32 bits, and two folds
	// are enough, exactly as in csum_fold().
	s := uint32(base)
	for v, i := uint64(seq), 0; i < 2; i++ {
		s += uint32(v & 0xffff)
		v >>= 16
	}
	for v, i := ts, 0; i < 4; i++ {
		s += uint32(v & 0xffff)
		v >>= 16
	}
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	c := ^uint16(s)
	if c == 0 {
		c = 0xffff
	}
	be.PutUint16(f[l.UDPCsum:], c)
}
