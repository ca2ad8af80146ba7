package frame

import "encoding/binary"

// TestHeader is the test header of a received frame.
type TestHeader struct {
	Flow uint16
	Seq  uint32
	TS   uint64
}

// Parse finds the test header in an Ethernet frame without FCS: untagged or
// with one 802.1Q or 802.1ad tag, then IPv4 (any IHL, not a non-first
// fragment) or IPv6 without extension headers, then UDP, then the magic.
// ok is false for anything else, including frames whose IP or UDP length
// says the test header is not part of the datagram (it would be padding).
// The frame may be cut short after the test header, as captures often are.
// Parse never panics and does not allocate.
func Parse(f []byte) (h TestHeader, ok bool) {
	be := binary.BigEndian
	if len(f) < ethLen {
		return h, false
	}
	l3 := ethLen
	et := be.Uint16(f[12:])
	if et == TPIDC || et == TPIDS {
		if len(f) < ethLen+vlanLen {
			return h, false
		}
		l3 += vlanLen
		et = be.Uint16(f[16:])
	}

	var l4, ipRoom int // ipRoom: bytes from l4 to the end of the IP packet
	switch et {
	case etherTypeIPv4:
		if len(f) < l3+ipv4Len {
			return h, false
		}
		ip := f[l3:]
		ihl := int(ip[0]&0x0f) * 4
		if ip[0]>>4 != 4 || ihl < ipv4Len || ip[9] != protoUDP {
			return h, false
		}
		if be.Uint16(ip[6:])&0x1fff != 0 {
			return h, false // a later fragment: no UDP header here
		}
		l4 = l3 + ihl
		ipRoom = int(be.Uint16(ip[2:])) - ihl
	case etherTypeIPv6:
		if len(f) < l3+ipv6Len {
			return h, false
		}
		ip := f[l3:]
		if ip[0]>>4 != 6 || ip[6] != protoUDP {
			return h, false
		}
		l4 = l3 + ipv6Len
		ipRoom = int(be.Uint16(ip[4:]))
	default:
		return h, false
	}

	const need = udpLen + TestHeaderLen
	if len(f) < l4+need || ipRoom < need || int(be.Uint16(f[l4+4:])) < need {
		return h, false
	}
	th := f[l4+udpLen:]
	if be.Uint16(th) != Magic {
		return h, false
	}
	return TestHeader{
		Flow: be.Uint16(th[2:]),
		Seq:  be.Uint32(th[4:]),
		TS:   be.Uint64(th[8:]),
	}, true
}
