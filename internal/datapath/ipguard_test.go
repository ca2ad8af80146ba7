package datapath

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// ip_guard (bpf/lib/ipguard.h) through BPF_PROG_TEST_RUN: each rule, in
// both builds, with the frame that keeps it and the one that breaks it.

var (
	guardV4   = netip.MustParseAddr("10.0.0.5")
	guardV6   = netip.MustParseAddr("fd00::5")
	guardLL   = netip.MustParseAddr("fe80::5")
	otherV4   = netip.MustParseAddr("10.0.0.6")
	otherV6   = netip.MustParseAddr("fd00::6")
	zeroV4    = netip.IPv4Unspecified()
	zeroV6    = netip.IPv6Unspecified()
	allNodes6 = net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
)

func guardIPsOf(as ...netip.Addr) []netip.Addr {
	out := slices.Clone(as)
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// arpFrame is an ARP packet (IPv4 over Ethernet) from src: op 1 request, 2
// reply; spa the sender's address, tpa the target's.
func arpFrame(src net.HardwareAddr, op uint16, spa, tpa netip.Addr) []byte {
	b := frame(bcast, src, 0x0806, 46)
	a := b[14:]
	binary.BigEndian.PutUint16(a[0:], 1)
	binary.BigEndian.PutUint16(a[2:], 0x0800)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], op)
	copy(a[8:], src)
	s, t := spa.As4(), tpa.As4()
	copy(a[14:], s[:])
	copy(a[24:], t[:])
	return b
}

// ip4Frame is an IPv4 packet from src of protocol proto, whose first four
// bytes of payload are the ports sport and dport.
func ip4Frame(dst, srcMAC net.HardwareAddr, src netip.Addr, proto uint8, sport, dport uint16) []byte {
	b := frame(dst, srcMAC, 0x0800, 46)
	ip := b[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 32)
	ip[8] = 64
	ip[9] = proto
	s := src.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], []byte{10, 0, 0, 1})
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], dport)
	return b
}

// ip6Frame is an IPv6 packet from src: next header nh, then payload.
func ip6Frame(dst, srcMAC net.HardwareAddr, src netip.Addr, nh uint8, payload []byte) []byte {
	b := frame(dst, srcMAC, 0x86dd, 40+len(payload))
	ip := b[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(payload)))
	ip[6] = nh
	ip[7] = 255
	s := src.As16()
	copy(ip[8:], s[:])
	ip[24], ip[25], ip[39] = 0xff, 0x02, 1
	copy(ip[40:], payload)
	return b
}

// icmp6 is an ICMPv6 message of type typ whose target (NS, NA) is target.
func icmp6(typ uint8, target netip.Addr) []byte {
	m := make([]byte, 24)
	m[0] = typ
	t := target.As16()
	copy(m[8:], t[:])
	return m
}

// hopByHop puts an 8-byte hop-by-hop options header (next: nh) before payload.
func hopByHop(nh uint8, payload []byte) []byte {
	return append([]byte{nh, 0, 5, 2, 0, 0, 1, 0}, payload...)
}

func TestIPGuard(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		arpR := tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_ARP
		ndR := tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_ND
		ipR := tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_IP
		r.setPort(PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1, Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD, GuardIPs: guardIPsOf(guardV4, guardV6, guardLL)}})

		mld2 := make([]byte, 8)
		mld2[0] = 143
		udp := func(sport, dport uint16) []byte {
			b := make([]byte, 8)
			binary.BigEndian.PutUint16(b, sport)
			binary.BigEndian.PutUint16(b[2:], dport)
			return b
		}
		var fragLater [8]byte
		fragLater[0] = 58
		binary.BigEndian.PutUint16(fragLater[2:], 8<<3) // offset 64 bytes

		cases := []struct {
			name string
			data []byte
			drop tbpf.DropReason // TR_DROP__MAX: passes
		}{
			{"ARP request from its address", arpFrame(macA, 1, guardV4, otherV4), tbpf.TrestleTrDropReasonTR_DROP__MAX},
			{"ARP reply from its address to anyone", arpFrame(macA, 2, guardV4, netip.MustParseAddr("192.0.2.1")), tbpf.TrestleTrDropReasonTR_DROP__MAX},
			{"gratuitous ARP of its address", arpFrame(macA, 1, guardV4, guardV4), tbpf.TrestleTrDropReasonTR_DROP__MAX},
			{"ARP request with a forged sender", arpFrame(macA, 1, otherV4, guardV4), arpR},
			{"ARP reply with a forged sender", arpFrame(macA, 2, otherV4, guardV4), arpR},
			{"ARP probe for its address (RFC 5227)", arpFrame(macA, 1, zeroV4, guardV4), tbpf.TrestleTrDropReasonTR_DROP__MAX},
			{"ARP probe for another's address", arpFrame(macA, 1, zeroV4, otherV4), arpR},
			{"ARP reply from 0.0.0.0", arpFrame(macA, 2, zeroV4, guardV4), arpR},
			// Its address where a 6-byte hardware address puts the sender's;
			// with 8-byte ones the sender's is 2 bytes on.
			{"ARP with 8-byte hardware addresses", func() []byte { b := arpFrame(macA, 2, guardV4, otherV4); b[18] = 8; return b }(), arpR},
			{"ARP of another protocol", func() []byte { b := arpFrame(macA, 1, guardV4, otherV4); b[16] = 0x86; return b }(), arpR},
			{"IPv4 from its address", ip4Frame(bcast, macA, guardV4, 17, 1000, 2000), tbpf.TrestleTrDropReasonTR_DROP__MAX},
			{"IPv4 with a forged source", ip4Frame(bcast, macA, otherV4, 17, 1000, 2000), ipR},
			{"IPv4 with its IPv6 address's last bytes", ip4Frame(bcast, macA, netip.MustParseAddr("0.0.0.5"), 1, 0, 0), ipR},
			{"DHCP discover from 0.0.0.0", ip4Frame(bcast, macA, zeroV4, 17, 68, 67), tbpf.TrestleTrDropReasonTR_DROP__MAX},
			{"other UDP from 0.0.0.0", ip4Frame(bcast, macA, zeroV4, 17, 68, 68), ipR},
			{"TCP from 0.0.0.0 to port 67", ip4Frame(bcast, macA, zeroV4, 6, 68, 67), ipR},
			{"IPv4 with a bad header length", func() []byte { b := ip4Frame(bcast, macA, guardV4, 17, 1, 2); b[14] = 0x44; return b }(), ipR},
			{"IPv6 from its address", ip6Frame(allNodes6, macA, guardV6, 17, udp(1, 2)), tbpf.TrestleTrDropReasonTR_DROP__MAX},
			{"IPv6 from its link-local address", ip6Frame(allNodes6, macA, guardLL, 17, udp(1, 2)), tbpf.TrestleTrDropReasonTR_DROP__MAX},
			{"IPv6 with a forged source", ip6Frame(allNodes6, macA, otherV6, 17, udp(1, 2)), ipR},
			{"IPv6 from its IPv4 address, mapped", ip6Frame(allNodes6, macA, netip.AddrFrom16(guardV4.As16()), 17, udp(1, 2)), ipR},
			{"NA of its address", ip6Frame(allNodes6, macA, guardV6, 58, icmp6(136, guardV6)), tbpf.TrestleTrDropReasonTR_DROP__MAX},
			{"NA with a forged target", ip6Frame(allNodes6, macA, guardV6, 58, icmp6(136, otherV6)), ndR},
			{"NA with a forged target behind hop-by-hop", ip6Frame(allNodes6, macA, guardV6, 0, hopByHop(58, icmp6(136, otherV6))), ndR},
			{"NS for anyone from its address", ip6Frame(allNodes6, macA, guardV6, 58, icmp6(135, otherV6)), tbpf.TrestleTrDropReasonTR_DROP__MAX},
			{"DAD for its address from ::", ip6Frame(allNodes6, macA, zeroV6, 58, icmp6(135, guardLL)), tbpf.TrestleTrDropReasonTR_DROP__MAX},
			{"DAD for another's address from ::", ip6Frame(allNodes6, macA, zeroV6, 58, icmp6(135, otherV6)), ndR},
			{"NA from ::", ip6Frame(allNodes6, macA, zeroV6, 58, icmp6(136, guardV6)), ipR},
			{"MLDv2 report from :: (behind hop-by-hop)", ip6Frame(allNodes6, macA, zeroV6, 0, hopByHop(58, mld2)), tbpf.TrestleTrDropReasonTR_DROP__MAX},
			{"UDP from ::", ip6Frame(allNodes6, macA, zeroV6, 17, udp(546, 547)), ipR},
			{"a later fragment from its address", ip6Frame(allNodes6, macA, guardV6, 44, append(fragLater[:], make([]byte, 16)...)), tbpf.TrestleTrDropReasonTR_DROP__MAX},
			{"ICMPv6 past more extension headers than read", ip6Frame(allNodes6, macA, guardV6, 0,
				hopByHop(60, hopByHop(60, hopByHop(60, hopByHop(60, hopByHop(58, icmp6(136, guardV6))))))), ndR},
			{"IPv4 behind three tags", func() []byte {
				b := ip4Frame(bcast, macA, otherV4, 17, 1, 2)
				tags := []byte{0x81, 0, 0, 10, 0x81, 0, 0, 20, 0x81, 0, 0, 30}
				return append(append(append([]byte{}, b[:12]...), tags...), b[12:]...)
			}(), ipR},
			{"not IP (LLDP-like EtherType)", frame(bcast, macA, 0x88b5, 46), tbpf.TrestleTrDropReasonTR_DROP__MAX},
		}
		want := map[tbpf.DropReason]uint64{}
		for _, c := range cases {
			if c.drop == tbpf.TrestleTrDropReasonTR_DROP__MAX {
				r.wantVerdict(r.run(1, c.data), m.redirect, c.name)
				continue
			}
			r.wantVerdict(r.run(1, c.data), m.drop, c.name)
			want[c.drop]++
			for _, reason := range []tbpf.DropReason{arpR, ndR, ipR} {
				r.wantDrops(1, reason, want[reason], c.name)
			}
		}

		// A port without ip_guard pays nothing and checks nothing: the
		// forged frames pass there.
		r.wantVerdict(r.run(2, arpFrame(macB, 1, otherV4, guardV4)), m.redirect, "forged ARP from an unguarded port")
		r.wantVerdict(r.run(2, ip4Frame(bcast, macB, netip.MustParseAddr("198.51.100.1"), 17, 1, 2)), m.redirect, "any IPv4 from an unguarded port")

		// The decision memo never vouches for a guarded port's frame: a
		// stream to a known station from its address, then a frame of
		// the same addresses with a forged source, is dropped.
		r.wantVerdict(r.run(2, ip4Frame(macA, macB, otherV4, 17, 1, 2)), m.redirect, "B to A")
		for i := 0; i < 3; i++ {
			r.wantVerdict(r.run(1, ip4Frame(macB, macA, guardV4, 17, 1, 2)), m.redirect, "A to B from its address")
		}
		r.wantVerdict(r.run(1, ip4Frame(macB, macA, otherV4, 17, 1, 2)), m.drop, "A to B with a forged source after a stream")
		r.wantDrops(1, ipR, want[ipR]+1, "forged after a stream")

		// The addresses change: the one dropped is no longer taken, the
		// new one is, and those kept stay.
		r.setPort(PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1, Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD, GuardIPs: guardIPsOf(otherV4, guardV6)}})
		r.wantVerdict(r.run(1, arpFrame(macA, 1, guardV4, otherV4)), m.drop, "ARP from an address unbound")
		r.wantVerdict(r.run(1, arpFrame(macA, 1, otherV4, guardV4)), m.redirect, "ARP from an address bound since")
		r.wantVerdict(r.run(1, ip6Frame(allNodes6, macA, guardV6, 17, udp(1, 2))), m.redirect, "IPv6 from an address kept")

		// ip_guard off: everything passes, and the port's addresses are gone.
		r.setPort(PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1})
		r.wantVerdict(r.run(1, arpFrame(macA, 1, guardV4, otherV4)), m.redirect, "ARP after ip_guard off")
		if ips, err := r.dp.guardIPs(1); err != nil || len(ips) != 0 {
			t.Errorf("slot 1's addresses after ip_guard off: %v (%v), want none", ips, err)
		}
		// And a deleted port leaves none behind.
		r.setPort(PortInfo{Ifindex: r.port[3], Bridge: 1, Slot: 3, Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD, GuardIPs: guardIPsOf(guardV4)}})
		if err := r.ns.Do(func() error { return r.dp.DelPort(r.port[3], 3) }); err != nil {
			t.Fatal(err)
		}
		if ips, err := r.dp.guardIPs(3); err != nil || len(ips) != 0 {
			t.Errorf("slot 3's addresses after its port was deleted: %v (%v), want none", ips, err)
		}
	})
}

func TestIPGuardRefusesNoAddress(t *testing.T) {
	r := newRig(t, modes[0], 1024, [4]uint32{})
	err := r.ns.Do(func() error {
		return r.dp.SetPort(PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1, Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD}})
	})
	if err == nil {
		t.Fatal("ip_guard without an address was taken")
	}
	// The port is as it was.
	if p, ok, err := r.dp.Port(r.port[1]); err != nil || !ok || p.IPGuard() {
		t.Errorf("port after a refused write: %+v %v %v", p, ok, err)
	}
}

// BenchmarkIPGuard is the check's cost on a port with ip_guard: the same
// frames from port 1 without it and with it (ARP and IPv4 from its
// address, IPv6 from its address); a forward from a guarded port never
// takes the decision memo, so "forward" is the pipeline's whole path.
// go test -run '^$' -bench IPGuard ./internal/datapath (as root).
func BenchmarkIPGuard(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			for _, guard := range []bool{false, true} {
				for _, c := range []struct {
					name  string
					frame []byte
				}{
					{"forward-ipv4", ip4Frame(macB, macA, guardV4, 17, 1, 2)},
					{"flood-arp", arpFrame(macA, 1, guardV4, otherV4)},
					{"flood-ipv6", ip6Frame(allNodes6, macA, guardV6, 17, make([]byte, 8))},
				} {
					b.Run(fmt.Sprintf("guard=%t/%s", guard, c.name), func(b *testing.B) {
						r := newRig(b, m, 1024, [4]uint32{})
						if guard {
							r.setPort(PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1, Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD, GuardIPs: guardIPsOf(guardV4, guardV6, guardLL)}})
						}
						r.run(1, ipv4(bcast, macA))
						r.run(2, ipv4(bcast, macB))
						b.ResetTimer()
						per := r.bench(1, c.frame, b.N)
						b.ReportMetric(float64(per.Nanoseconds()), "ns/frame")
					})
				}
			}
		})
	}
}
