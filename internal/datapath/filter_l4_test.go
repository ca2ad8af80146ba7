package datapath

import (
	"slices"
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// The filter reads through IPv6 extension headers to the transport header.
// A non-first fragment, which has no transport header, matches only rules
// without port or ICMP keys, never as port 0. A frame whose transport
// header should be there and cannot be read (past the extension headers
// the filter reads or past 512 bytes, cut short by the frame or by the IP
// datagram's length: a tiny first fragment) fails closed: a block rule
// that names a protocol, ports or an ICMP type blocks it (unreadable) if
// its other keys match, and no pass rule with ports passes it. Each is
// counted by why.
func TestFilterTransportHeader(t *testing.T) {
	const (
		hop, rt, frag, ah, dst = 0, 43, 44, 51, 60
	)
	tcp6 := func(dport uint16, ext ...uint8) pkt {
		return pkt{src: macA, dst: macB, proto: 6, sip: "2001:db8::1", dip: "2001:db8::2", sport: 40000, dport: dport, ext: ext}
	}
	udp6 := func(dport uint16, ext ...uint8) pkt {
		p := tcp6(dport, ext...)
		p.proto = 17
		return p
	}
	tcp4 := func(dport uint16) pkt {
		return pkt{src: macA, dst: macB, proto: 6, sip: "10.0.0.1", dip: "10.0.0.2", sport: 40000, dport: dport}
	}
	fragOf := func(p pkt, off uint16) pkt { p.fragOff = off; return p }
	cut := func(p pkt, n int) pkt { p.cut = n; return p }
	// A first fragment (more fragments) whose datagram carries only 8
	// bytes of the TCP header, ports and sequence number, not its flags;
	// the frame is padded past them with the rest of a SYN's header.
	tiny := func(p pkt) pkt {
		if len(p.ext) == 0 {
			p.fragOff = 0x2000 // IPv4: more fragments, offset 0 (IPv6: its fragment header, offset 0)
		}
		p.l4Len = 8
		return p
	}
	long := func(p pkt, n int) pkt { p.dstLen = n; return p }
	icmp6 := pkt{src: macA, dst: macB, proto: 58, sip: "2001:db8::1", dip: "2001:db8::2", icmpType: 128, sport: 7, ext: []uint8{hop}}
	six := []uint8{hop, dst, rt, dst, ah, dst}
	seven := append([]uint8{dst}, six...)
	sevenDst := []uint8{dst, dst, dst, dst, dst, dst, dst}

	blockPort := &Filter{Rules: []FilterRule{
		{Block: true, Proto: 6, HasProto: true, DstPort: PortRange{22, 22}},
		{Block: true, Proto: 17, HasProto: true, DstPort: PortRange{53, 53}},
		{Block: true, Proto: 58, HasProto: true, ICMPType: 128, HasICMPType: true}}}
	// Only ports below 100 pass: a frame of no ports must not pass as port 0.
	passLow := &Filter{DefaultBlock: true, Rules: []FilterRule{
		{Proto: 6, HasProto: true, DstPort: PortRange{0, 100}}}}
	blockTCP := &Filter{Rules: []FilterRule{{Block: true, Proto: 6, HasProto: true}}}
	// The block rule is another port's (slot 3): its other keys decide.
	otherPort := &Filter{Rules: []FilterRule{{Block: true, In: 3, Proto: 6, HasProto: true, DstPort: PortRange{22, 22}}}}
	// An earlier rule without ports decides first.
	passFirst := &Filter{Rules: []FilterRule{
		{Src: pfx("2001:db8::1/128")},
		{Block: true, Proto: 6, HasProto: true, DstPort: PortRange{22, 22}}}}

	const (
		pass       = "pass"
		filtered   = "filtered"
		unreadable = "unreadable"
	)
	type probe struct {
		name string
		p    pkt
		want string       // pass, or the drop reason
		why  FilterUnread // what it adds to the bridge's unread counts
	}
	cases := []struct {
		name   string
		f      *Filter
		probes []probe
	}{
		{"a port rule sees through extension headers", blockPort, []probe{
			{"no header", tcp6(22), filtered, FilterUnread{}},
			{"hop-by-hop", tcp6(22, hop), filtered, FilterUnread{}},
			{"destination options", tcp6(22, dst), filtered, FilterUnread{}},
			{"routing", tcp6(22, rt), filtered, FilterUnread{}},
			{"first fragment", tcp6(22, frag), filtered, FilterUnread{}},
			{"authentication header", tcp6(22, ah), filtered, FilterUnread{}},
			{"hop-by-hop, routing, fragment, destination options", tcp6(22, hop, rt, frag, dst), filtered, FilterUnread{}},
			{"six headers (the bound)", tcp6(22, six...), filtered, FilterUnread{}},
			{"destination options of 448 bytes (within 512)", long(tcp6(22, dst), 448), filtered, FilterUnread{}},
			{"udp after destination options", udp6(53, dst), filtered, FilterUnread{}},
			{"icmpv6 type after hop-by-hop", icmp6, filtered, FilterUnread{}},
			{"another port through headers", tcp6(23, hop, dst), pass, FilterUnread{}},
			{"another port behind 448 bytes", long(tcp6(23, dst), 448), pass, FilterUnread{}},
			{"ipv4, another port", tcp4(80), pass, FilterUnread{}},
			// Unreadable: the port rules fail closed, whatever the port.
			{"seven headers", tcp6(22, seven...), unreadable, FilterUnread{ExtHeaders: 1}},
			{"seven destination options headers", tcp6(22, sevenDst...), unreadable, FilterUnread{ExtHeaders: 1}},
			{"seven headers, another port", tcp6(23, seven...), unreadable, FilterUnread{ExtHeaders: 1}},
			{"destination options of 520 bytes", long(tcp6(22, dst), 520), unreadable, FilterUnread{ExtHeaders: 1}},
			{"destination options of 520 bytes, another port", long(tcp6(23, dst), 520), unreadable, FilterUnread{ExtHeaders: 1}},
			{"tcp header cut short", cut(tcp6(22, hop), 30), unreadable, FilterUnread{Truncated: 1}},
			{"tiny ipv4 first fragment", tiny(tcp4(22)), unreadable, FilterUnread{Truncated: 1}},
			{"tiny ipv4 first fragment, another port", tiny(tcp4(80)), unreadable, FilterUnread{Truncated: 1}},
			{"tiny ipv6 first fragment", tiny(tcp6(22, frag)), unreadable, FilterUnread{Truncated: 1}},
			// A non-first fragment has no transport header: its first
			// fragment was judged by its ports.
			{"non-first ipv6 fragment", fragOf(tcp6(22, frag), 100), pass, FilterUnread{Fragment: 1}},
			{"non-first ipv4 fragment", fragOf(tcp4(22), 100), pass, FilterUnread{Fragment: 1}},
		}},
		{"no port 0 for a frame without ports", passLow, []probe{
			{"port 80 through headers", tcp6(80, hop, dst), pass, FilterUnread{}},
			{"port 200", tcp6(200, hop), filtered, FilterUnread{}},
			{"non-first ipv6 fragment", fragOf(tcp6(80, frag), 100), filtered, FilterUnread{Fragment: 1}},
			{"non-first ipv4 fragment", fragOf(tcp4(80), 100), filtered, FilterUnread{Fragment: 1}},
			{"seven headers", tcp6(80, seven...), filtered, FilterUnread{ExtHeaders: 1}},
			{"tiny ipv4 first fragment", tiny(tcp4(80)), filtered, FilterUnread{Truncated: 1}},
		}},
		{"a rule without ports matches them all", blockTCP, []probe{
			{"hop-by-hop", tcp6(22, hop), filtered, FilterUnread{}},
			{"non-first ipv6 fragment (what it carries)", fragOf(tcp6(22, frag), 100), filtered, FilterUnread{Fragment: 1}},
			{"non-first ipv4 fragment", fragOf(tcp4(22), 100), filtered, FilterUnread{Fragment: 1}},
			{"udp through headers", udp6(22, hop, dst), pass, FilterUnread{}},
			// The protocol is hidden too.
			{"seven headers", tcp6(22, seven...), unreadable, FilterUnread{ExtHeaders: 1}},
		}},
		{"a block rule's other keys still decide", otherPort, []probe{
			{"seven headers from another port", tcp6(22, seven...), pass, FilterUnread{ExtHeaders: 1}},
			{"tiny fragment from another port", tiny(tcp4(22)), pass, FilterUnread{Truncated: 1}},
		}},
		{"an earlier rule decides first", passFirst, []probe{
			{"seven headers from the passed source", tcp6(22, seven...), pass, FilterUnread{ExtHeaders: 1}},
		}},
	}
	reasons := map[string]tbpf.DropReason{filtered: tbpf.TrestleTrDropReasonTR_DROP_FILTERED, unreadable: tbpf.TrestleTrDropReasonTR_DROP_UNREADABLE}
	forEachMode(t, func(t *testing.T, m tmode) {
		r := filterRig(t, m)
		for _, c := range cases {
			r.setFilter(c.f)
			for _, p := range c.probes {
				before := map[string]uint64{}
				for n, reason := range reasons {
					before[n] = r.drops(1, reason)
				}
				u0, err := r.dp.FilterUnread(1)
				if err != nil {
					t.Fatal(err)
				}
				got := r.run(1, p.p.bytes())
				dropped := map[string]uint64{}
				for n, reason := range reasons {
					if d := r.drops(1, reason) - before[n]; d != 0 {
						dropped[n] = d
					}
				}
				if p.want == pass && (got != m.redirect || len(dropped) != 0) {
					t.Errorf("%s, %s: verdict %d (dropped %v), want it passed", c.name, p.name, got, dropped)
				}
				if p.want != pass && (got != m.drop || len(dropped) != 1 || dropped[p.want] != 1) {
					t.Errorf("%s, %s: verdict %d (dropped %v), want it dropped as %s", c.name, p.name, got, dropped, p.want)
				}
				u1, err := r.dp.FilterUnread(1)
				if err != nil {
					t.Fatal(err)
				}
				if d := (FilterUnread{u1.Fragment - u0.Fragment, u1.ExtHeaders - u0.ExtHeaders, u1.Truncated - u0.Truncated}); d != p.why {
					t.Errorf("%s, %s: counted unread %+v, want %+v", c.name, p.name, d, p.why)
				}
			}
		}
	})
}

// A block rule that names a protocol, ports or an ICMP type compiles to one
// entry more for each EtherType it implies, without them, for frames whose
// transport header could not be read; a pass rule, or a rule of addresses
// alone, to none.
func TestUnreadableEntries(t *testing.T) {
	cases := []struct {
		name string
		r    FilterRule
		want []uint16 // the EtherTypes of its unreadable entries
	}{
		{"block tcp 1000-2000 (eight prefixes)", FilterRule{Block: true, Proto: 6, HasProto: true, DstPort: PortRange{1000, 2000}}, []uint16{etherIPv4, etherIPv6}},
		{"block icmp echo", FilterRule{Block: true, Proto: 1, HasProto: true, ICMPType: 8, HasICMPType: true}, []uint16{etherIPv4}},
		{"block udp from an IPv6 prefix", FilterRule{Block: true, Proto: 17, HasProto: true, Src: pfx("2001:db8::/32")}, []uint16{etherIPv6}},
		{"pass tcp 22", FilterRule{Proto: 6, HasProto: true, DstPort: PortRange{22, 22}}, nil},
		{"block a source", FilterRule{Block: true, Src: pfx("10.0.0.0/8")}, nil},
	}
	for _, c := range cases {
		fc := &filterCopy{entries: map[tbpf.FilterKey]tbpf.FilterHit{}, rules: []uint16{7}}
		fs, err := compileFilter(2, &Filter{Rules: []FilterRule{c.r}}, fc)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// Their shape is marked, so that no readable frame looks it up.
		for _, tp := range fs.Tuples[:fs.Ntuples] {
			if want := tp.Mask.L4 == 0xff && tp.Mask.Proto == 0; (tp.Unreadable == 1) != want {
				t.Errorf("%s: shape %+v marked unreadable %d, want %v", c.name, tp.Mask, tp.Unreadable, want)
			}
		}
		var got []uint16
		for k, h := range fc.entries {
			if k.L4 != tbpf.L4Unreadable {
				continue
			}
			if h.Flags != tbpf.FilterBlock|tbpf.FilterUnread || h.Counter != 7 || k.Proto != 0 || k.Sport != 0 || k.Dport != 0 || k.IcmpType != 0 {
				t.Errorf("%s: unreadable entry %+v -> %+v, want the rule's counter, block and unread, no protocol or ports", c.name, k, h)
			}
			got = append(got, k.Ethertype)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: unreadable entries for EtherTypes %#x, want %#x", c.name, got, c.want)
		}
	}
}
