package datapath

import (
	"encoding/binary"
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// ra_guard and dhcp_guard (bpf/lib/ipguard.h) through BPF_PROG_TEST_RUN,
// in both builds: each server's message dropped with its reason, each
// client's and host's frame passed, alone and beside ip_guard.

// svcGuard gives port 1 ra_guard and dhcp_guard.
func svcGuard(t *testing.T, r *rig) {
	r.setPort(PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1, Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_RA_GUARD | tbpf.TrestleTrPortFlagsTR_PORT_DHCP_GUARD}})
}

// udp6 is a UDP header from sport to dport, then a DHCPv6 message of type
// typ (its first byte).
func udp6(sport, dport uint16, typ uint8) []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint16(b, sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], 12)
	b[8] = typ
	return b
}

func TestServiceGuards(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		raR := tbpf.TrestleTrDropReasonTR_DROP_RA_GUARD
		dhcpR := tbpf.TrestleTrDropReasonTR_DROP_DHCP_GUARD
		ipR := tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_IP
		pass := tbpf.TrestleTrDropReasonTR_DROP__MAX
		var fragFirst, fragLater [8]byte
		fragFirst[0] = 17
		fragLater[0] = 17
		binary.BigEndian.PutUint16(fragLater[2:], 8<<3)
		later4 := func(f []byte) []byte { f[14+6] = 0x00; f[14+7] = 8; return f } // offset 64 bytes

		both := tbpf.TrestleTrPortFlagsTR_PORT_RA_GUARD | tbpf.TrestleTrPortFlagsTR_PORT_DHCP_GUARD
		for _, g := range []struct {
			name  string
			flags tbpf.PortFlag
		}{
			{"ra_guard", tbpf.TrestleTrPortFlagsTR_PORT_RA_GUARD},
			{"dhcp_guard", tbpf.TrestleTrPortFlagsTR_PORT_DHCP_GUARD},
			{"both", both},
			{"both with ip_guard", both | tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD},
		} {
			t.Run(g.name, func(t *testing.T) {
				r := newRig(t, m, 1024, [4]uint32{})
				pol := tbpf.PortPolicy{Flags: g.flags}
				if pol.Has(tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD) {
					pol.GuardIPs = guardIPsOf(guardV4, guardV6, guardLL)
				}
				r.setPort(PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1, Policy: pol})
				ra := pass
				if pol.Has(tbpf.TrestleTrPortFlagsTR_PORT_RA_GUARD) {
					ra = raR
				}
				dhcp := pass
				if pol.Has(tbpf.TrestleTrPortFlagsTR_PORT_DHCP_GUARD) {
					dhcp = dhcpR
				}
				// Hidden past the extension headers read: ip_guard's
				// reason when it has it, else the first guard's.
				hidden := pass
				switch {
				case pol.Has(tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD):
					hidden = tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_ND
				case ra != pass:
					hidden = raR
				case dhcp != pass:
					hidden = dhcpR
				}
				deep := func(nh uint8, payload []byte) []byte {
					return hopByHop(60, hopByHop(60, hopByHop(60, hopByHop(60, hopByHop(nh, payload)))))
				}
				cases := []struct {
					name string
					data []byte
					drop tbpf.DropReason
				}{
					{"router advertisement", ip6Frame(allNodes6, macA, guardLL, 58, icmp6(134, zeroV6)), ra},
					{"redirect", ip6Frame(allNodes6, macA, guardLL, 58, icmp6(137, otherV6)), ra},
					{"router advertisement behind hop-by-hop", ip6Frame(allNodes6, macA, guardLL, 0, hopByHop(58, icmp6(134, zeroV6))), ra},
					{"router solicitation", ip6Frame(allNodes6, macA, guardLL, 58, icmp6(133, zeroV6)), pass},
					{"neighbour solicitation", ip6Frame(allNodes6, macA, guardLL, 58, icmp6(135, otherV6)), pass},
					{"ICMPv6 past more extension headers than read", ip6Frame(allNodes6, macA, guardLL, 0, deep(58, icmp6(134, zeroV6))), hidden},
					{"DHCP offer, 67 -> 68", ip4Frame(bcast, macA, guardV4, 17, 67, 68), dhcp},
					{"DHCP offer in a first fragment", func() []byte { f := ip4Frame(bcast, macA, guardV4, 17, 67, 68); f[14+6] = 0x20; return f }(), dhcp},
					{"a later fragment from 67", later4(ip4Frame(bcast, macA, guardV4, 17, 67, 68)), pass},
					{"DHCP to a relay, 67 -> 67", ip4Frame(bcast, macA, guardV4, 17, 67, 67), pass},
					{"DHCP request from a client with an address, 68 -> 67", ip4Frame(bcast, macA, guardV4, 17, 68, 67), pass},
					{"TCP 67 -> 68", ip4Frame(bcast, macA, guardV4, 6, 67, 68), pass},
					{"DHCPv6 ADVERTISE", ip6Frame(allNodes6, macA, guardLL, 17, udp6(547, 546, 2)), dhcp},
					{"DHCPv6 REPLY", ip6Frame(allNodes6, macA, guardLL, 17, udp6(547, 546, 7)), dhcp},
					{"DHCPv6 RECONFIGURE", ip6Frame(allNodes6, macA, guardLL, 17, udp6(547, 546, 10)), dhcp},
					{"DHCPv6 RELAY-REPL", ip6Frame(allNodes6, macA, guardLL, 17, udp6(547, 547, 13)), dhcp},
					{"DHCPv6 ADVERTISE behind hop-by-hop", ip6Frame(allNodes6, macA, guardLL, 0, hopByHop(17, udp6(547, 546, 2))), dhcp},
					{"DHCPv6 SOLICIT from a client", ip6Frame(allNodes6, macA, guardLL, 17, udp6(546, 547, 1)), pass},
					{"DHCPv6 REQUEST from a client", ip6Frame(allNodes6, macA, guardLL, 17, udp6(546, 547, 3)), pass},
					{"DHCPv6 RELAY-FORW from a relay", ip6Frame(allNodes6, macA, guardLL, 17, udp6(547, 547, 12)), pass},
					{"a later IPv6 fragment", ip6Frame(allNodes6, macA, guardLL, 44, append(fragLater[:], udp6(547, 546, 2)...)), pass},
					{"a first IPv6 fragment of an ADVERTISE", ip6Frame(allNodes6, macA, guardLL, 44, append(fragFirst[:], udp6(547, 546, 2)...)), dhcp},
					{"UDP past more extension headers than read", ip6Frame(allNodes6, macA, guardLL, 0, deep(17, udp6(547, 546, 2))), hidden},
					{"ARP", arpFrame(macA, 1, guardV4, otherV4), pass},
				}
				if pol.Has(tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD) {
					// ip_guard's check comes first: a forged source is its drop.
					cases = append(cases, struct {
						name string
						data []byte
						drop tbpf.DropReason
					}{"DHCP offer from a forged source", ip4Frame(bcast, macA, otherV4, 17, 67, 68), ipR})
				}
				want := map[tbpf.DropReason]uint64{}
				for _, c := range cases {
					if c.drop == pass {
						r.wantVerdict(r.run(1, c.data), m.redirect, c.name)
						continue
					}
					r.wantVerdict(r.run(1, c.data), m.drop, c.name)
					want[c.drop]++
					for _, reason := range []tbpf.DropReason{raR, dhcpR, ipR} {
						r.wantDrops(1, reason, want[reason], c.name)
					}
				}

				// A port without the guards forwards the same messages.
				r.wantVerdict(r.run(2, ip6Frame(allNodes6, macB, guardLL, 58, icmp6(134, zeroV6))), m.redirect, "RA from an unguarded port")
				r.wantVerdict(r.run(2, ip4Frame(bcast, macB, guardV4, 17, 67, 68)), m.redirect, "DHCP offer from an unguarded port")

				// The decision memo never vouches for a guarded port's
				// frame: a stream of client frames to a known station,
				// then a server's message of the same addresses.
				r.wantVerdict(r.run(2, ip4Frame(macA, macB, otherV4, 17, 1, 2)), m.redirect, "B to A")
				for i := 0; i < 3; i++ {
					r.wantVerdict(r.run(1, ip4Frame(macB, macA, guardV4, 17, 68, 67)), m.redirect, "A to B, a client's")
				}
				if dhcp != pass {
					r.wantVerdict(r.run(1, ip4Frame(macB, macA, guardV4, 17, 67, 68)), m.drop, "A to B, a server's, after a stream")
				}

				// The guards off: the messages pass.
				r.setPort(PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1})
				r.wantVerdict(r.run(1, ip6Frame(allNodes6, macA, guardLL, 58, icmp6(134, zeroV6))), m.redirect, "RA with the guards off")
				r.wantVerdict(r.run(1, ip4Frame(bcast, macA, guardV4, 17, 67, 68)), m.redirect, "DHCP offer with the guards off")
			})
		}
	})
}
