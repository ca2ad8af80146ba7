package datapath

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Filter table tests: each match field passes and blocks what it should, in
// both builds, through BPF_PROG_TEST_RUN, on the rig's bridge (slots 1-3)
// with the filter stage on; station B is learned on slot 2 and D on slot
// 3, so that a frame from A on slot 1 is forwarded to a known egress port.

// pkt describes a test frame.
type pkt struct {
	src, dst     net.HardwareAddr
	vid          uint16 // 802.1Q tag; 0: untagged
	etype        uint16 // 0: IPv4 or IPv6 from the addresses
	proto        uint8
	sip, dip     string
	sport, dport uint16
	icmpType     uint8
	tcpFlags     uint8 // 0: SYN
	// IPv6: extension headers between the IPv6 header and the transport
	// header, by type (hop-by-hop 0, routing 43, fragment 44, AH 51,
	// destination options 60), each of its smallest size; fragOff: the
	// fragment header's offset in 8-byte units (IPv4: the header's).
	ext     []uint8
	fragOff uint16
	cut     int // bytes cut from the frame's end
	// dstLen: the destination options headers' length in bytes (a
	// multiple of 8 from 8, 0: 8), options that a receiver skips.
	dstLen int
	// l4Len: the transport bytes the IP header says the datagram
	// carries, the rest of the frame padding (0: all of them).
	l4Len int
}

// dstOpts is a destination options (or hop-by-hop) header of n bytes (a
// multiple of 8) naming next: options of up to 255 bytes of a type a
// receiver skips (RFC 8200, 4.2: the high bits 00), then PadN, which
// Linux takes only up to 7 bytes (RFC 4942, 2.1.9.5).
func dstOpts(next uint8, n int) []byte {
	h := []byte{next, uint8(n/8 - 1)}
	for left := n - 2; left > 0; {
		switch {
		case left == 1:
			h, left = append(h, 0), 0 // Pad1
		case left <= 7:
			h = append(h, 1, uint8(left-2)) // PadN
			h, left = append(h, make([]byte, left-2)...), 0
		default:
			l := min(left-2, 255)
			if left-2-l > 0 && left-2-l < 2 {
				l-- // leave room for a whole option after
			}
			h = append(h, 0x1e, uint8(l)) // an experimental option (RFC 4727): skipped
			h, left = append(h, make([]byte, l)...), left-2-l
		}
	}
	return h
}

// bytes builds the frame: Ethernet, an optional tag, IPv4 or IPv6, and a
// TCP, UDP or ICMP header (ICMP echo carrying id sport).
func (p pkt) bytes() []byte {
	b := append([]byte{}, p.dst...)
	b = append(b, p.src...)
	if p.vid != 0 {
		b = binary.BigEndian.AppendUint16(b, 0x8100)
		b = binary.BigEndian.AppendUint16(b, p.vid)
	}
	if p.etype != 0 && p.sip == "" {
		b = binary.BigEndian.AppendUint16(b, p.etype)
		return append(b, make([]byte, 46)...)
	}
	s, d := netip.MustParseAddr(p.sip), netip.MustParseAddr(p.dip)
	var l4 []byte
	switch p.proto {
	case 6:
		l4 = make([]byte, 20)
		l4[12] = 5 << 4
		l4[13] = 0x02 // SYN
		if p.tcpFlags != 0 {
			l4[13] = p.tcpFlags
		}
	case 1, 58:
		l4 = make([]byte, 8)
		l4[0] = p.icmpType
		binary.BigEndian.PutUint16(l4[4:], p.sport)
	default:
		l4 = make([]byte, 8)
	}
	if p.proto == 6 || p.proto == 17 {
		binary.BigEndian.PutUint16(l4, p.sport)
		binary.BigEndian.PutUint16(l4[2:], p.dport)
	}
	l4 = append(l4, make([]byte, 18)...)
	l4Len := len(l4)
	if p.l4Len != 0 {
		l4Len = p.l4Len
	}
	if s.Is4() {
		b = binary.BigEndian.AppendUint16(b, 0x0800)
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+l4Len))
		binary.BigEndian.PutUint16(ip[6:], p.fragOff)
		ip[8] = 64
		ip[9] = p.proto
		copy(ip[12:], s.AsSlice())
		copy(ip[16:], d.AsSlice())
		return p.trim(append(append(b, ip...), l4...))
	}
	// The extension headers, each naming the next.
	var ext []byte
	for i, t := range p.ext {
		next := p.proto
		if i+1 < len(p.ext) {
			next = p.ext[i+1]
		}
		switch t {
		case 44:
			h := []byte{next, 0, 0, 0, 0, 0, 0, 1}
			binary.BigEndian.PutUint16(h[2:], p.fragOff<<3)
			ext = append(ext, h...)
		case 51: // AH: length in 4-byte units, minus 2: 12 bytes of header and 12 of ICV
			ext = append(ext, append([]byte{next, 4}, make([]byte, 22)...)...)
		case 60:
			ext = append(ext, dstOpts(next, max(p.dstLen, 8))...)
		default: // options of 8 bytes: PadN
			ext = append(ext, next, 0, 1, 4, 0, 0, 0, 0)
		}
	}
	first := p.proto
	if len(p.ext) > 0 {
		first = p.ext[0]
	}
	b = binary.BigEndian.AppendUint16(b, 0x86dd)
	ip := make([]byte, 40)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(ext)+l4Len))
	ip[6] = first
	ip[7] = 64
	copy(ip[8:], s.AsSlice())
	copy(ip[24:], d.AsSlice())
	return p.trim(append(append(append(b, ip...), ext...), l4...))
}

func (p pkt) trim(b []byte) []byte { return b[:len(b)-p.cut] }

func udp4(sip, dip string, sport, dport uint16) pkt {
	return pkt{src: macA, dst: macB, proto: 17, sip: sip, dip: dip, sport: sport, dport: dport}
}

// filterRig is a rig with the filter stage on, B learned on slot 2 and D
// on slot 3.
func filterRig(t testing.TB, m tmode) *rig {
	r := newRig(t, m, 1024, [4]uint32{})
	if err := r.ns.Do(func() error { return r.dp.SetFilterStage(true) }); err != nil {
		t.Fatal(err)
	}
	r.run(2, ipv4(bcast, macB))
	r.run(3, ipv4(bcast, macD))
	return r
}

// setFilter puts f on the rig's bridge (nil: off).
func (r *rig) setFilter(f *Filter) {
	r.t.Helper()
	var ports []PortInfo
	for slot := 1; slot <= 3; slot++ {
		ports = append(ports, PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot)})
	}
	b := BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, Filter: f}
	if b.FilterWalks() {
		b.Reach = ports
	}
	if err := r.ns.Do(func() error { return r.dp.SetBridge(b) }); err != nil {
		r.t.Fatalf("set filter: %v", err)
	}
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestFilterMatches(t *testing.T) {
	block := func(r FilterRule) FilterRule { r.Block = true; return r }
	tcp4 := func(sport, dport uint16) pkt {
		return pkt{src: macA, dst: macB, proto: 6, sip: "10.0.0.1", dip: "10.0.0.2", sport: sport, dport: dport}
	}
	icmp4 := func(typ uint8) pkt {
		return pkt{src: macA, dst: macB, proto: 1, sip: "10.0.0.1", dip: "10.0.0.2", icmpType: typ, sport: 7}
	}
	udp6 := func(sip string) pkt {
		return pkt{src: macA, dst: macB, proto: 17, sip: sip, dip: "2001:db8::2", sport: 1, dport: 2}
	}
	type probe struct {
		name string
		slot int
		p    pkt
		pass bool
	}
	cases := []struct {
		name   string
		f      Filter
		probes []probe
	}{
		{"default block", Filter{DefaultBlock: true}, []probe{
			{"udp", 1, udp4("10.0.0.1", "10.0.0.2", 1, 2), false}}},
		{"default pass", Filter{}, []probe{
			{"udp", 1, udp4("10.0.0.1", "10.0.0.2", 1, 2), true}}},
		{"proto", Filter{Rules: []FilterRule{block(FilterRule{Proto: 17, HasProto: true})}}, []probe{
			{"udp", 1, udp4("10.0.0.1", "10.0.0.2", 1, 2), false},
			{"tcp", 1, tcp4(1, 2), true},
			{"udp6", 1, udp6("2001:db8::1"), false}}},
		{"src prefix", Filter{Rules: []FilterRule{block(FilterRule{Src: pfx("10.0.0.0/8")})}}, []probe{
			{"inside", 1, udp4("10.1.2.3", "192.168.0.2", 1, 2), false},
			{"outside", 1, udp4("192.168.0.1", "10.0.0.2", 1, 2), true}}},
		{"dst address", Filter{Rules: []FilterRule{block(FilterRule{Dst: pfx("10.0.0.2/32")})}}, []probe{
			{"it", 1, udp4("10.0.0.1", "10.0.0.2", 1, 2), false},
			{"next", 1, udp4("10.0.0.1", "10.0.0.3", 1, 2), true}}},
		{"dst port range", Filter{Rules: []FilterRule{block(FilterRule{Proto: 17, HasProto: true, DstPort: PortRange{1000, 2000}})}}, []probe{
			{"999", 1, udp4("10.0.0.1", "10.0.0.2", 1, 999), true},
			{"1000", 1, udp4("10.0.0.1", "10.0.0.2", 1, 1000), false},
			{"1500", 1, udp4("10.0.0.1", "10.0.0.2", 1, 1500), false},
			{"2000", 1, udp4("10.0.0.1", "10.0.0.2", 1, 2000), false},
			{"2001", 1, udp4("10.0.0.1", "10.0.0.2", 1, 2001), true}}},
		{"src port", Filter{Rules: []FilterRule{block(FilterRule{Proto: 6, HasProto: true, SrcPort: PortRange{53, 53}})}}, []probe{
			{"53", 1, tcp4(53, 80), false},
			{"54", 1, tcp4(54, 80), true},
			{"udp 53", 1, udp4("10.0.0.1", "10.0.0.2", 53, 80), true}}},
		{"ethertype", Filter{Rules: []FilterRule{block(FilterRule{EtherType: 0x0806})}}, []probe{
			{"arp", 1, pkt{src: macA, dst: macB, etype: 0x0806}, false},
			{"ipv4", 1, udp4("10.0.0.1", "10.0.0.2", 1, 2), true}}},
		{"src mac", Filter{Rules: []FilterRule{block(FilterRule{SrcMAC: macC})}}, []probe{
			{"C", 1, pkt{src: macC, dst: macB, proto: 17, sip: "10.0.0.1", dip: "10.0.0.2"}, false},
			{"A", 1, udp4("10.0.0.1", "10.0.0.2", 1, 2), true}}},
		{"dst mac", Filter{Rules: []FilterRule{block(FilterRule{DstMAC: macB})}}, []probe{
			{"B", 1, udp4("10.0.0.1", "10.0.0.2", 1, 2), false},
			{"D", 1, pkt{src: macA, dst: macD, proto: 17, sip: "10.0.0.1", dip: "10.0.0.2"}, true}}},
		{"in", Filter{Rules: []FilterRule{block(FilterRule{In: 1})}}, []probe{
			{"slot 1", 1, udp4("10.0.0.1", "10.0.0.2", 1, 2), false},
			{"slot 3", 3, pkt{src: macC, dst: macB, proto: 17, sip: "10.0.0.1", dip: "10.0.0.2"}, true}}},
		{"out", Filter{Rules: []FilterRule{block(FilterRule{Out: 2})}}, []probe{
			{"to B", 1, udp4("10.0.0.1", "10.0.0.2", 1, 2), false},
			{"to D", 1, pkt{src: macA, dst: macD, proto: 17, sip: "10.0.0.1", dip: "10.0.0.2"}, true}}},
		{"icmp type", Filter{Rules: []FilterRule{block(FilterRule{Proto: 1, HasProto: true, ICMPType: 8, HasICMPType: true})}}, []probe{
			{"echo", 1, icmp4(8), false},
			{"reply", 1, icmp4(0), true}}},
		{"ipv6 prefix", Filter{Rules: []FilterRule{block(FilterRule{Src: pfx("2001:db8::/32"), Proto: 17, HasProto: true})}}, []probe{
			{"inside", 1, udp6("2001:db8::1"), false},
			{"outside", 1, udp6("2001:db9::1"), true},
			{"ipv4", 1, udp4("10.0.0.1", "10.0.0.2", 1, 2), true}}},
		{"first match decides", Filter{Rules: []FilterRule{
			{Proto: 17, HasProto: true, DstPort: PortRange{53, 53}},
			block(FilterRule{Proto: 17, HasProto: true})}}, []probe{
			{"53", 1, udp4("10.0.0.1", "10.0.0.2", 1, 53), true},
			{"54", 1, udp4("10.0.0.1", "10.0.0.2", 1, 54), false}}},
		{"first match across shapes", Filter{Rules: []FilterRule{
			block(FilterRule{Src: pfx("10.0.0.0/8")}),
			{Proto: 17, HasProto: true, DstPort: PortRange{53, 53}}}, DefaultBlock: true}, []probe{
			{"10/8 to 53", 1, udp4("10.0.0.1", "10.0.0.2", 1, 53), false},
			{"other to 53", 1, udp4("192.168.0.1", "10.0.0.2", 1, 53), true},
			{"other to 54", 1, udp4("192.168.0.1", "10.0.0.2", 1, 54), false}}},
	}
	forEachMode(t, func(t *testing.T, m tmode) {
		r := filterRig(t, m)
		for _, c := range cases {
			r.setFilter(&c.f)
			for _, p := range c.probes {
				before := r.drops(p.slot, tbpf.TrestleTrDropReasonTR_DROP_FILTERED)
				got := r.run(p.slot, p.p.bytes())
				dropped := r.drops(p.slot, tbpf.TrestleTrDropReasonTR_DROP_FILTERED) - before
				if p.pass && (got != m.redirect || dropped != 0) {
					t.Errorf("%s, %s: verdict %d (filtered %d), want it passed", c.name, p.name, got, dropped)
				}
				if !p.pass && (got != m.drop || dropped != 1) {
					t.Errorf("%s, %s: verdict %d (filtered %d), want it blocked", c.name, p.name, got, dropped)
				}
			}
			// Put B and D back where they were (a probe from another
			// port may have moved them).
			r.setFilter(nil)
			r.run(2, ipv4(bcast, macB))
			r.run(3, ipv4(bcast, macD))
			r.run(1, ipv4(bcast, macA))
		}
	})
}

func TestFilterKeepState(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := filterRig(t, m)
		r.setFilter(&Filter{DefaultBlock: true, Rules: []FilterRule{
			{In: 1, Proto: 17, HasProto: true, DstPort: PortRange{5000, 5000}, KeepState: true}}})
		out := udp4("10.0.0.1", "10.0.0.2", 4000, 5000)
		back := pkt{src: macB, dst: macA, proto: 17, sip: "10.0.0.2", dip: "10.0.0.1", sport: 5000, dport: 4000}
		other := back
		other.sport = 5001
		r.wantVerdict(r.run(1, out.bytes()), m.redirect, "the opening frame")
		r.wantVerdict(r.run(2, back.bytes()), m.redirect, "the reply")
		r.wantVerdict(r.run(2, other.bytes()), m.drop, "a frame of no connection")
		r.wantVerdict(r.run(1, out.bytes()), m.redirect, "the next frame out")

		states, err := r.dp.States()
		if err != nil {
			t.Fatal(err)
		}
		if len(states) != 1 {
			t.Fatalf("states: %+v, want one", states)
		}
		s := states[0]
		if s.From.String() != "10.0.0.1:4000" || s.To.String() != "10.0.0.2:5000" || s.Proto != 17 || !s.Replied || s.Rule != 0 || s.Bridge != 1 {
			t.Errorf("state %+v: want 10.0.0.1:4000 -> 10.0.0.2:5000, udp, replied, rule 0, bridge 1", s)
		}
		c, ok, err := r.dp.FilterCounters(1)
		if err != nil || !ok {
			t.Fatalf("counters: %v %v", ok, err)
		}
		if c.Rules[0].Packets != 1 || c.State.Packets != 2 || c.Default.Packets != 1 {
			t.Errorf("counters %+v: want the rule 1, state 2, default 1", c)
		}
		if c.Rules[0].Bytes != uint64(len(out.bytes())) {
			t.Errorf("rule bytes %d, want %d", c.Rules[0].Bytes, len(out.bytes()))
		}

		// The rules change: the connection stays (pf's states outlive a
		// reload), and the rule, unchanged, keeps its counts.
		r.setFilter(&Filter{DefaultBlock: true, Rules: []FilterRule{
			{Proto: 1, HasProto: true},
			{In: 1, Proto: 17, HasProto: true, DstPort: PortRange{5000, 5000}, KeepState: true}}})
		r.wantVerdict(r.run(2, back.bytes()), m.redirect, "the reply after a reload")
		if c, _, _ := r.dp.FilterCounters(1); len(c.Rules) != 2 || c.Rules[1].Packets != 1 || c.Rules[0].Packets != 0 || c.State.Packets != 3 {
			t.Errorf("after the reload: counters %+v, want the moved rule's 1 kept, the new rule 0, state 3", c)
		}

		// Aging away the bridge's connections: the reply is blocked again,
		// once this CPU's memory of passing it (a second) is over.
		n, err := r.dp.AgeStates(func(uint16) bool { return false })
		if err != nil || n != 1 {
			t.Fatalf("AgeStates: %d, %v; want 1 removed", n, err)
		}
		time.Sleep(time.Duration(tbpf.TrestleTrStateTimeoutsTR_STATE_REFRESH_MS)*time.Millisecond + 100*time.Millisecond)
		r.wantVerdict(r.run(2, back.bytes()), m.drop, "the reply once its connection is gone")
	})
}

// A VLAN-aware bridge: the vlan key, on tagged frames.
func TestFilterVLAN(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 0)
		if err := r.ns.Do(func() error { return r.dp.SetFilterStage(true) }); err != nil {
			t.Fatal(err)
		}
		ports := []PortInfo{
			{Ifindex: r.port[1], Bridge: 1, Slot: 1, PVID: 10},
			{Ifindex: r.port[2], Bridge: 1, Slot: 2, PVID: 20},
			{Ifindex: r.port[3], Bridge: 1, Slot: 3, Trunk: true, VLANs: []uint16{10, 20}},
		}
		f := &Filter{Rules: []FilterRule{{Block: true, VLAN: 10, Proto: 17, HasProto: true}}}
		if err := r.ns.Do(func() error {
			return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, VLANAware: true, VLANs: []uint16{10, 20}, Filter: f})
		}); err != nil {
			t.Fatal(err)
		}
		// B lives in VLAN 10 on slot 1, D in VLAN 20 on slot 2.
		r.run(1, ipv4(bcast, macB))
		r.run(2, ipv4(bcast, macD))
		in10 := pkt{src: macA, dst: macB, vid: 10, proto: 17, sip: "10.0.0.1", dip: "10.0.0.2", sport: 1, dport: 2}
		in20 := pkt{src: macA, dst: macD, vid: 20, proto: 17, sip: "10.0.0.1", dip: "10.0.0.2", sport: 1, dport: 2}
		tcp10 := in10
		tcp10.proto = 6
		r.wantVerdict(r.run(3, in10.bytes()), m.drop, "udp tagged 10")
		r.wantVerdict(r.run(3, in20.bytes()), m.redirect, "udp tagged 20")
		r.wantVerdict(r.run(3, tcp10.bytes()), m.redirect, "tcp tagged 10")
		if n := r.drops(3, tbpf.TrestleTrDropReasonTR_DROP_FILTERED); n != 1 {
			t.Errorf("filtered on the trunk: %d, want 1", n)
		}
	})
}

// Rules on the egress port apply to each copy of a flood: the copy to a
// port they block is dropped (and counted once), the others go.
func TestFilterOutOnFlood(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := filterRig(t, m)
		r.setFilter(&Filter{Rules: []FilterRule{{Block: true, Out: 2}}})
		tx2, tx3 := r.stats(2).C[tbpf.TxPackets], r.stats(3).C[tbpf.TxPackets]
		got := r.run(1, pkt{src: macA, dst: bcast, proto: 17, sip: "10.0.0.1", dip: "10.0.0.255"}.bytes())
		if got == m.drop {
			t.Fatalf("broadcast dropped whole, want the copy to slot 3 sent")
		}
		if n := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_FILTERED); n != 1 {
			t.Errorf("filtered copies: %d, want 1 (slot 2's)", n)
		}
		if m.name == "tc" || got == m.redirect {
			// One copy left: it goes as a forward, counted where it leaves.
			if d2, d3 := r.stats(2).C[tbpf.TxPackets]-tx2, r.stats(3).C[tbpf.TxPackets]-tx3; d2 != 0 || d3 != 1 {
				t.Errorf("sent to slot 2: %d, slot 3: %d; want 0 and 1", d2, d3)
			}
		}
	})
}

// BenchmarkFilter is the filter stage's cost a forwarded frame (UDP, 64
// bytes) through BPF_PROG_TEST_RUN, against the same frame with the
// filter off in the same build, and by the rule set: the matching rule
// after n rules of one shape (one lookup whatever n), after rules of n
// shapes (n lookups), and a frame of a tracked connection:
// go test -run '^$' -bench Filter ./internal/datapath (as root).
func BenchmarkFilter(b *testing.B) {
	f := udp4("10.0.0.1", "10.0.0.2", 4000, 5201).bytes()
	last := FilterRule{Proto: 17, HasProto: true, DstPort: PortRange{5201, 5201}}
	oneShape := func(n int) *Filter {
		fl := &Filter{DefaultBlock: true}
		for i := 0; i < n-1; i++ {
			fl.Rules = append(fl.Rules, FilterRule{Block: true, Proto: 17, HasProto: true, DstPort: PortRange{uint16(10000 + i), uint16(10000 + i)}})
		}
		fl.Rules = append(fl.Rules, last)
		return fl
	}
	shapes := func(n int) *Filter {
		fl := &Filter{DefaultBlock: true}
		for i := 0; i < n-1; i++ {
			// Source prefixes of n-1 lengths, none matching 10.0.0.1.
			fl.Rules = append(fl.Rules, FilterRule{Block: true, Src: pfx(netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(i), 0}), 24-i%16).Masked().String())})
		}
		fl.Rules = append(fl.Rules, last)
		return fl
	}
	state := oneShape(1)
	state.Rules[0].KeepState = true
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			for _, c := range []struct {
				name string
				f    *Filter
			}{
				{"off", nil},
				{"rules-1", oneShape(1)},
				{"rules-100-one-shape", oneShape(100)},
				{"rules-1000-one-shape", oneShape(1000)},
				{"shapes-4", shapes(4)},
				{"shapes-16", shapes(16)},
				{"state-hit", state},
			} {
				b.Run(c.name, func(b *testing.B) {
					r := filterRig(b, m)
					r.setFilter(c.f)
					if got := r.run(1, f); got != m.redirect {
						b.Fatalf("verdict %d: the frame must pass", got)
					}
					b.ResetTimer()
					per := r.bench(1, f, b.N)
					b.ReportMetric(float64(per.Nanoseconds()), "ns/frame")
				})
			}
		})
	}
}
