package frame

import (
	"encoding/binary"
	"net"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// IGMP and MLD messages as hosts and queriers send them (RFC 2236 and
// 3376; RFC 2710 and 3810), and multicast UDP to a group: the frames of
// multicast snooping's tests. gopacket decodes IGMP but does not write it,
// so its bytes are made here; MLD is gopacket's.

// IGMP message types (RFC 2236 2.1, RFC 3376 4).
const (
	IGMPQuery    = 0x11
	IGMPv2Report = 0x16
	IGMPLeave    = 0x17
	IGMPv3Report = 0x22
)

// Group record types of IGMPv3 and MLDv2 (the same numbers).
const (
	ModeIsInclude = 1
	ModeIsExclude = 2
	ToInclude     = 3
	ToExclude     = 4
	AllowSources  = 5
	BlockSources  = 6
)

// Record is an IGMPv3 group record or an MLDv2 address record.
type Record struct {
	Type    uint8
	Group   netip.Addr
	Sources []netip.Addr
}

// GroupMAC is the MAC a group's frames go to (RFC 1112 6.4, RFC 2464 7).
func GroupMAC(g netip.Addr) net.HardwareAddr {
	b := g.As16()
	if g.Is4() {
		return net.HardwareAddr{0x01, 0x00, 0x5e, b[13] & 0x7f, b[14], b[15]}
	}
	return net.HardwareAddr{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

var (
	allHosts4   = netip.MustParseAddr("224.0.0.1")
	allRouters4 = netip.MustParseAddr("224.0.0.2")
	igmpv3Dst   = netip.MustParseAddr("224.0.0.22")
	allNodes6   = netip.MustParseAddr("ff02::1")
	allRouters6 = netip.MustParseAddr("ff02::2")
	mldv2Dst    = netip.MustParseAddr("ff02::16")
)

// igmpFrame is an IGMP message msg from src (MAC of the host: src's
// EUI-less 02:... form is the caller's) in an IPv4 packet to dst, with the
// router alert option (RFC 2113) as hosts send it, TTL 1.
func igmpFrame(tags []Tag, smac net.HardwareAddr, src, dst netip.Addr, msg []byte) []byte {
	binary.BigEndian.PutUint16(msg[2:], 0)
	binary.BigEndian.PutUint16(msg[2:], ^fold(sum(msg, 0)))
	ip := &layers.IPv4{Version: 4, TTL: 1, Protocol: layers.IPProtocolIGMP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice(),
		Options: []layers.IPv4Option{{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}}}
	return Eth{Dst: GroupMAC(dst), Src: smac, Tags: tags, Type: uint16(layers.EthernetTypeIPv4),
		Payload: serialize(ip, gopacket.Payload(msg))}.MustBytes()
}

// IGMPv2 is a version 2 report (to the group), a leave (to 224.0.0.2) or,
// with an invalid group, a general query (to 224.0.0.1).
func IGMPv2(typ uint8, smac net.HardwareAddr, src, group netip.Addr) []byte {
	msg := make([]byte, 8)
	msg[0] = typ
	dst := group
	switch typ {
	case IGMPLeave:
		dst = allRouters4
	case IGMPQuery:
		msg[1] = 100 // 10 s
		if !group.IsValid() {
			dst = allHosts4
		}
	}
	if group.IsValid() {
		copy(msg[4:], group.AsSlice())
	}
	return igmpFrame(nil, smac, src, dst, msg)
}

// IGMPv3Query is a version 3 general query, to 224.0.0.1: hosts that hear
// it stay in version 3 (a version 2 query turns them to version 2, RFC
// 3376 7.2.1, whose leave only the group's last reporter sends).
func IGMPv3Query(smac net.HardwareAddr, src netip.Addr) []byte {
	return IGMPv3QueryOf(nil, smac, src, netip.Addr{}, 10*time.Second, 125*time.Second)
}

// IGMPv3QueryOf is a version 3 query with VLAN tags tags: a general query
// (group invalid), to 224.0.0.1, or a group-specific one, to the group;
// hosts answer within maxResp, and the querier says it queries every qqi
// (RFC 3376 4.1), with robustness 2.
func IGMPv3QueryOf(tags []Tag, smac net.HardwareAddr, src, group netip.Addr, maxResp, qqi time.Duration) []byte {
	msg := make([]byte, 12)
	msg[0] = IGMPQuery
	msg[1] = TimeCode(uint32(maxResp / (100 * time.Millisecond)))
	msg[8] = 2 // QRV
	msg[9] = TimeCode(uint32(qqi / time.Second))
	dst := allHosts4
	if group.IsValid() {
		copy(msg[4:], group.AsSlice())
		dst = group
	}
	return igmpFrame(tags, smac, src, dst, msg)
}

// TimeCode is a time in a query's one-byte code (IGMPv3's Max Resp Code in
// tenths of a second, and the QQIC of IGMPv3 and MLDv2 in seconds; RFC
// 3376 4.1.1 and 4.1.7): exact below 128, above it a mantissa and an
// exponent, rounded down; at most 31744.
func TimeCode(v uint32) uint8 {
	if v < 128 {
		return uint8(v)
	}
	v = min(v, 31744)
	exp := uint32(0)
	for v>>(exp+3) > 0x1f {
		exp++
	}
	return uint8(0x80 | exp<<4 | (v>>(exp+3))&0x0f)
}

// IGMPv3 is a version 3 report of recs, to 224.0.0.22.
func IGMPv3(smac net.HardwareAddr, src netip.Addr, recs ...Record) []byte {
	msg := make([]byte, 8)
	msg[0] = IGMPv3Report
	binary.BigEndian.PutUint16(msg[6:], uint16(len(recs)))
	for _, r := range recs {
		rec := make([]byte, 8)
		rec[0] = r.Type
		binary.BigEndian.PutUint16(rec[2:], uint16(len(r.Sources)))
		copy(rec[4:], r.Group.AsSlice())
		for _, s := range r.Sources {
			rec = append(rec, s.AsSlice()...)
		}
		msg = append(msg, rec...)
	}
	return igmpFrame(nil, smac, src, igmpv3Dst, msg)
}

// mldFrame is an MLD message from src to dst: ICMPv6 behind a hop-by-hop
// header with the router alert option (RFC 2711), hop limit 1.
func mldFrame(tags []Tag, smac net.HardwareAddr, src, dst netip.Addr, typ uint8, msg gopacket.SerializableLayer) []byte {
	ip := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolIPv6HopByHop, HopLimit: 1, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
	if err := ic.SetNetworkLayerForChecksum(ip); err != nil {
		panic(err)
	}
	body := serialize(ic, msg)
	// Next header ICMPv6, 8 bytes: router alert (MLD), then PadN.
	hbh := []byte{uint8(layers.IPProtocolICMPv6), 0, 5, 2, 0, 0, 1, 0}
	return Eth{Dst: GroupMAC(dst), Src: smac, Tags: tags, Type: uint16(layers.EthernetTypeIPv6),
		Payload: serialize(ip, gopacket.Payload(append(hbh, body...)))}.MustBytes()
}

// MLDv1 is a version 1 report (to the group), a done (to ff02::2) or, with
// an invalid group, a general query (to ff02::1). (The three messages are
// one layout: written as a report's layer, of the ICMPv6 type typ.)
func MLDv1(typ uint8, smac net.HardwareAddr, src, group netip.Addr) []byte {
	m := layers.MLDv1Message{MulticastAddress: net.IPv6zero}
	dst := group
	switch typ {
	case layers.ICMPv6TypeMLDv1MulticastListenerDoneMessage:
		dst = allRouters6
	case layers.ICMPv6TypeMLDv1MulticastListenerQueryMessage:
		m.MaximumResponseDelay = 10e9
		if !group.IsValid() {
			dst = allNodes6
		}
	}
	if group.IsValid() {
		m.MulticastAddress = group.AsSlice()
	}
	return mldFrame(nil, smac, src, dst, typ, &layers.MLDv1MulticastListenerReportMessage{MLDv1Message: m})
}

// MLDv2 is a version 2 report of recs, to ff02::16.
func MLDv2(smac net.HardwareAddr, src netip.Addr, recs ...Record) []byte {
	m := &layers.MLDv2MulticastListenerReportMessage{}
	for _, r := range recs {
		rec := layers.MLDv2MulticastAddressRecord{RecordType: layers.MLDv2MulticastAddressRecordType(r.Type),
			N: uint16(len(r.Sources)), MulticastAddress: r.Group.AsSlice()}
		for _, s := range r.Sources {
			rec.SourceAddresses = append(rec.SourceAddresses, s.AsSlice())
		}
		m.MulticastAddressRecords = append(m.MulticastAddressRecords, rec)
	}
	m.NumberOfMulticastAddressRecords = uint16(len(recs))
	return mldFrame(nil, smac, src, mldv2Dst, layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2, m)
}

// MLDv2Query is a version 2 query with VLAN tags tags (RFC 3810 5.1): a
// general query (group invalid), to ff02::1, or a multicast address
// specific one, to the group; from src, which hosts take only if it is
// link-local (5.1.14); answered within maxResp (at most 32.767 s), by a
// querier that queries every qqi, with robustness 2.
func MLDv2Query(tags []Tag, smac net.HardwareAddr, src, group netip.Addr, maxResp, qqi time.Duration) []byte {
	m := &layers.MLDv2MulticastListenerQueryMessage{MulticastAddress: net.IPv6zero,
		MaximumResponseCode: uint16(min(maxResp/time.Millisecond, 32767)), QueriersRobustnessVariable: 2,
		QueriersQueryIntervalCode: TimeCode(uint32(qqi / time.Second))}
	dst := allNodes6
	if group.IsValid() {
		m.MulticastAddress, dst = group.AsSlice(), group
	}
	return mldFrame(tags, smac, src, dst, layers.ICMPv6TypeMLDv1MulticastListenerQueryMessage, m)
}

// UDPTo is a UDP datagram from src to a group (IPv4 or IPv6), port 5000.
func UDPTo(smac net.HardwareAddr, src, group netip.Addr, payload []byte) []byte {
	udp := &layers.UDP{SrcPort: 5000, DstPort: 5000}
	typ := layers.EthernetTypeIPv4
	var ip gopacket.NetworkLayer
	if group.Is4() {
		ip = &layers.IPv4{Version: 4, TTL: 8, Protocol: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: group.AsSlice()}
	} else {
		typ = layers.EthernetTypeIPv6
		ip = &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolUDP, HopLimit: 8, SrcIP: src.AsSlice(), DstIP: group.AsSlice()}
	}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		panic(err)
	}
	return Eth{Dst: GroupMAC(group), Src: smac, Type: uint16(typ),
		Payload: serialize(ip.(gopacket.SerializableLayer), udp, gopacket.Payload(payload))}.MustBytes()
}
