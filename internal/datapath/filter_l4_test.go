package datapath

import (
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// The filter reads through IPv6 extension headers to the transport header,
// and a frame whose transport header it cannot read (a non-first fragment,
// too many extension headers, a header cut short) matches only rules
// without port or ICMP keys, never as port 0, and is counted by why.
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
	icmp6 := pkt{src: macA, dst: macB, proto: 58, sip: "2001:db8::1", dip: "2001:db8::2", icmpType: 128, sport: 7, ext: []uint8{hop}}
	six := []uint8{hop, dst, rt, dst, ah, dst}
	seven := append([]uint8{dst}, six...)

	blockPort := &Filter{Rules: []FilterRule{
		{Block: true, Proto: 6, HasProto: true, DstPort: PortRange{22, 22}},
		{Block: true, Proto: 17, HasProto: true, DstPort: PortRange{53, 53}},
		{Block: true, Proto: 58, HasProto: true, ICMPType: 128, HasICMPType: true}}}
	// Only ports below 100 pass: a frame of no ports must not pass as port 0.
	passLow := &Filter{DefaultBlock: true, Rules: []FilterRule{
		{Proto: 6, HasProto: true, DstPort: PortRange{0, 100}}}}
	blockTCP := &Filter{Rules: []FilterRule{{Block: true, Proto: 6, HasProto: true}}}

	type probe struct {
		name string
		p    pkt
		pass bool
		why  FilterUnread // what it adds to the bridge's unread counts
	}
	cases := []struct {
		name   string
		f      *Filter
		probes []probe
	}{
		{"a port rule sees through extension headers", blockPort, []probe{
			{"no header", tcp6(22), false, FilterUnread{}},
			{"hop-by-hop", tcp6(22, hop), false, FilterUnread{}},
			{"destination options", tcp6(22, dst), false, FilterUnread{}},
			{"routing", tcp6(22, rt), false, FilterUnread{}},
			{"first fragment", tcp6(22, frag), false, FilterUnread{}},
			{"authentication header", tcp6(22, ah), false, FilterUnread{}},
			{"hop-by-hop, routing, fragment, destination options", tcp6(22, hop, rt, frag, dst), false, FilterUnread{}},
			{"six headers (the bound)", tcp6(22, six...), false, FilterUnread{}},
			{"udp after destination options", udp6(53, dst), false, FilterUnread{}},
			{"icmpv6 type after hop-by-hop", icmp6, false, FilterUnread{}},
			{"another port through headers", tcp6(23, hop, dst), true, FilterUnread{}},
			// Unreadable: no port rule matches them.
			{"seven headers", tcp6(22, seven...), true, FilterUnread{ExtHeaders: 1}},
			{"non-first ipv6 fragment", fragOf(tcp6(22, frag), 100), true, FilterUnread{Fragment: 1}},
			{"non-first ipv4 fragment", fragOf(tcp4(22), 100), true, FilterUnread{Fragment: 1}},
			{"tcp header cut short", cut(tcp6(22, hop), 30), true, FilterUnread{Truncated: 1}},
		}},
		{"no port 0 for a frame without ports", passLow, []probe{
			{"port 80 through headers", tcp6(80, hop, dst), true, FilterUnread{}},
			{"port 200", tcp6(200, hop), false, FilterUnread{}},
			{"non-first ipv6 fragment", fragOf(tcp6(80, frag), 100), false, FilterUnread{Fragment: 1}},
			{"non-first ipv4 fragment", fragOf(tcp4(80), 100), false, FilterUnread{Fragment: 1}},
			{"seven headers", tcp6(80, seven...), false, FilterUnread{ExtHeaders: 1}},
		}},
		{"a rule without ports matches them all", blockTCP, []probe{
			{"hop-by-hop", tcp6(22, hop), false, FilterUnread{}},
			{"non-first ipv6 fragment (what it carries)", fragOf(tcp6(22, frag), 100), false, FilterUnread{Fragment: 1}},
			{"non-first ipv4 fragment", fragOf(tcp4(22), 100), false, FilterUnread{Fragment: 1}},
			{"udp through headers", udp6(22, hop, dst), true, FilterUnread{}},
		}},
	}
	forEachMode(t, func(t *testing.T, m tmode) {
		r := filterRig(t, m)
		for _, c := range cases {
			r.setFilter(c.f)
			for _, p := range c.probes {
				before := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_FILTERED)
				u0, err := r.dp.FilterUnread(1)
				if err != nil {
					t.Fatal(err)
				}
				got := r.run(1, p.p.bytes())
				dropped := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_FILTERED) - before
				if p.pass && (got != m.redirect || dropped != 0) {
					t.Errorf("%s, %s: verdict %d (filtered %d), want it passed", c.name, p.name, got, dropped)
				}
				if !p.pass && (got != m.drop || dropped != 1) {
					t.Errorf("%s, %s: verdict %d (filtered %d), want it blocked", c.name, p.name, got, dropped)
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
