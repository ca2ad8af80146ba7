package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/frame"
)

// The querier's timers and election against a fake group table, with
// time and the sending injected: each frame sent is read back with
// gopacket.

// sentQuery is a query the querier sent, as read back.
type sentQuery struct {
	ifindex int
	vlan    uint16 // 0: untagged
	src     netip.Addr
	group   netip.Addr // unspecified: a general query
}

func (q sentQuery) String() string {
	return fmt.Sprintf("if%d/vlan%d %s->%s", q.ifindex, q.vlan, q.src, q.group)
}

// readQuery reads a query frame back, or says why it is none.
func readQuery(ifindex int, f []byte) (sentQuery, error) {
	q := sentQuery{ifindex: ifindex}
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		return q, el.Error()
	}
	if d, ok := p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q); ok {
		q.vlan = d.VLANIdentifier
	}
	if ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		q.src = ipOf(ip.SrcIP)
		m, ok := p.Layer(layers.LayerTypeIGMP).(*layers.IGMP)
		if !ok || m.Type != layers.IGMPMembershipQuery {
			return q, fmt.Errorf("not an IGMPv3 query: %v", p)
		}
		q.group = ipOf(m.GroupAddress)
		return q, nil
	}
	if ip, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
		q.src = ipOf(ip.SrcIP)
		m, ok := p.Layer(layers.LayerTypeMLDv2MulticastListenerQuery).(*layers.MLDv2MulticastListenerQueryMessage)
		if !ok {
			return q, fmt.Errorf("not an MLDv2 query: %v", p)
		}
		q.group = ipOf(m.MulticastAddress)
		return q, nil
	}
	return q, fmt.Errorf("not IP: %v", p)
}

// querierRig is a snooper with a querier bridge (id 1, br0) whose sent
// queries are kept.
type querierRig struct {
	t    *testing.T
	s    *snooper
	f    *fakeGroups
	sent []sentQuery
}

func newQuerierRig(t *testing.T, interval time.Duration, ports map[uint16]snoopPort) *querierRig {
	t.Helper()
	r := &querierRig{t: t, f: &fakeGroups{t: map[datapath.GroupKey][]uint16{}}}
	r.s = newSnooper(r.f, slog.New(slog.DiscardHandler))
	r.s.host = "test-host"
	r.s.send = func(ifindex int, f []byte) error {
		q, err := readQuery(ifindex, f)
		if err != nil {
			t.Errorf("sent out of ifindex %d: %v", ifindex, err)
		}
		r.sent = append(r.sent, q)
		return nil
	}
	r.s.configure(map[uint16]*snoopBridge{1: {name: "br0", ports: ports, q: &querierConf{interval: interval}}}, time.Unix(1000, 0))
	return r
}

// take returns the queries sent since the last take, sorted.
func (r *querierRig) take() []sentQuery {
	out := r.sent
	r.sent = nil
	slices.SortFunc(out, func(a, b sentQuery) int {
		if a.ifindex != b.ifindex {
			return a.ifindex - b.ifindex
		}
		if a.vlan != b.vlan {
			return int(a.vlan) - int(b.vlan)
		}
		if c := a.src.Compare(b.src); c != 0 {
			return c
		}
		return a.group.Compare(b.group)
	})
	return out
}

// want checks the queries sent since the last check.
func (r *querierRig) want(what string, want ...sentQuery) {
	r.t.Helper()
	if got := r.take(); !slices.Equal(got, want) {
		r.t.Errorf("%s: sent %v, want %v", what, got, want)
	}
}

var (
	any4 = netip.IPv4Unspecified()
	any6 = netip.IPv6Unspecified()
)

// ownLL is the rig's bridge's MLD source.
func ownLL() netip.Addr {
	_, a := querierAddrs("test-host", "br0")
	return a
}

// TestQuerierAddrs: the querier's MAC is unicast and locally
// administered, its IPv6 address that MAC's link-local EUI-64, and both
// differ between bridges and machines.
func TestQuerierAddrs(t *testing.T) {
	mac, ll := querierAddrs("h1", "br0")
	if mac[0]&1 != 0 || mac[0]&2 == 0 {
		t.Errorf("querier MAC %s: want unicast, locally administered", mac)
	}
	b := ll.As16()
	if !ll.IsLinkLocalUnicast() || b[8] != mac[0]^2 || b[11] != 0xff || b[12] != 0xfe || b[15] != mac[5] {
		t.Errorf("querier address %s of MAC %s: want its EUI-64 in fe80::/64", ll, mac)
	}
	if m2, _ := querierAddrs("h1", "br1"); m2.String() == mac.String() {
		t.Errorf("bridges br0 and br1 share the querier MAC %s", mac)
	}
	if m2, _ := querierAddrs("h2", "br0"); m2.String() == mac.String() {
		t.Errorf("two machines' br0 share the querier MAC %s", mac)
	}
}

// TestQuerierTimers: the startup queries (two, a quarter of the interval
// apart), then one an interval; out of the interface ports that forward
// (ifindex 0: a patch, overlay or span port, or one blocked); the own
// querier counts as a querier seen (reports to the router ports).
func TestQuerierTimers(t *testing.T) {
	r := newQuerierRig(t, 8*time.Second, map[uint16]snoopPort{1: {name: "a", ifindex: 11}, 2: {name: "b", ifindex: 12}, 3: {name: "patch", router: true}})
	t0 := time.Unix(1000, 0)
	general := func() []sentQuery {
		ll := ownLL()
		return []sentQuery{{11, 0, any4, any4}, {11, 0, ll, any6}, {12, 0, any4, any4}, {12, 0, ll, any6}}
	}
	r.s.tick(t0)
	r.want("at start", general()...)
	wantTable(t, r.f, "own querier", map[datapath.GroupKey][]uint16{{Bridge: 1, Group: any4}: {3}, {Bridge: 1, Group: any6}: {3}})
	r.s.tick(t0.Add(time.Second))
	r.want("1 s after")
	r.s.tick(t0.Add(2 * time.Second))
	r.want("the second startup query, a quarter of the interval after", general()...)
	for s := 3; s < 10; s++ {
		r.s.tick(t0.Add(time.Duration(s) * time.Second))
		r.want(fmt.Sprintf("%d s after", s))
	}
	r.s.tick(t0.Add(10 * time.Second))
	r.want("an interval after the startup", general()...)
	if c := r.s.snoopCounts()["br0"]; c.QueriesSent != 12 {
		t.Errorf("queries sent %d, want 12", c.QueriesSent)
	}
	qs := r.s.queriers("br0", t0.Add(10*time.Second))
	if len(qs) != 2 || !qs[0].Own || qs[0].Family != "igmp" || qs[0].Address != "0.0.0.0" || !qs[1].Own || qs[1].Address != ownLL().String() {
		t.Errorf("queriers %+v, want the bridge's own of each family", qs)
	}

	// Turned off: the own querier is no querier seen any more.
	r.s.configure(map[uint16]*snoopBridge{1: {name: "br0", ports: map[uint16]snoopPort{1: {name: "a", ifindex: 11}}}}, t0.Add(11*time.Second))
	r.s.tick(t0.Add(200 * time.Second))
	r.want("off")
	wantTable(t, r.f, "off", map[datapath.GroupKey][]uint16{})
}

// TestQuerierElection: a querier with a lower address silences the
// bridge's of its family (and only in its VLAN); a higher one, or an IGMP
// querier at 0.0.0.0, does not; the bridge's resumes once the other has
// been quiet for the other querier present interval.
func TestQuerierElection(t *testing.T) {
	// Port 3 sends no query (a patch port): its VLAN 30 has no querier
	// of the bridge's.
	ports := map[uint16]snoopPort{1: {name: "a", ifindex: 11, vlans: []uint16{10}, pvid: 10}, 2: {name: "b", ifindex: 12, vlans: []uint16{10, 20}},
		3: {name: "patch", vlans: []uint16{30}}}
	r := newQuerierRig(t, 4*time.Second, ports)
	var logged strings.Builder
	r.s.log = slog.New(slog.NewTextHandler(&logged, nil))
	t0 := time.Unix(1000, 0)
	ll := ownLL()
	r.s.tick(t0)
	r.want("at start, per VLAN, tagged where the port sends it tagged",
		sentQuery{11, 0, any4, any4}, sentQuery{11, 0, ll, any6},
		sentQuery{12, 10, any4, any4}, sentQuery{12, 10, ll, any6}, sentQuery{12, 20, any4, any4}, sentQuery{12, 20, ll, any6})

	heard := func(slot, vlan uint16, f []byte, at time.Time) {
		r.s.handle(datapath.SnoopMsg{Bridge: 1, Slot: slot, VLAN: vlan, Packet: ipOfFrame(f)}, at)
	}
	higher := netip.MustParseAddr("fe80::ffff:ffff:ffff:ffff")
	heard(1, 10, frame.MLDv1(layers.ICMPv6TypeMLDv1MulticastListenerQueryMessage, hostMAC, higher, netip.Addr{}), t0)
	heard(1, 10, frame.IGMPv3Query(hostMAC, any4), t0)
	r.s.tick(t0.Add(time.Second))
	r.want("a higher MLD querier and a switch's IGMP one from 0.0.0.0 silence nothing",
		sentQuery{11, 0, any4, any4}, sentQuery{11, 0, ll, any6},
		sentQuery{12, 10, any4, any4}, sentQuery{12, 10, ll, any6}, sentQuery{12, 20, any4, any4}, sentQuery{12, 20, ll, any6})
	if qs := r.s.queriers("br0", t0.Add(time.Second)); len(qs) != 4 || !qs[0].Own || !qs[1].Own {
		t.Errorf("queriers %+v, want the bridge's own in VLAN 10 still", qs)
	}

	// fe80::1 and 10.0.0.1 in VLAN 10: the bridge's queriers of VLAN 10
	// fall silent, VLAN 20's go on.
	t1 := t0.Add(2 * time.Second)
	heard(1, 10, frame.MLDv1(layers.ICMPv6TypeMLDv1MulticastListenerQueryMessage, hostMAC, netip.MustParseAddr("fe80::1"), netip.Addr{}), t1)
	heard(1, 10, frame.IGMPv3Query(hostMAC, netip.MustParseAddr("10.0.0.1")), t1)
	qs := r.s.queriers("br0", t1)
	if len(qs) != 4 || qs[0].Own || qs[0].Address != "10.0.0.1" || qs[0].Port != "a" || qs[1].Own || qs[1].Address != "fe80::1" || !qs[2].Own || !qs[3].Own {
		t.Errorf("queriers %+v, want 10.0.0.1 and fe80::1 in VLAN 10 by port a, the bridge's in VLAN 20", qs)
	}
	// The other querier present interval: 2 x 4 s + 2 s / 2 = 9 s. The
	// other querier goes on for 6 s, then stops.
	var got []sentQuery
	for s := 1; s <= 9+6; s++ {
		at := t1.Add(time.Duration(s) * time.Second)
		if s <= 6 && s%2 == 0 {
			heard(1, 10, frame.MLDv1(layers.ICMPv6TypeMLDv1MulticastListenerQueryMessage, hostMAC, netip.MustParseAddr("fe80::1"), netip.Addr{}), at)
			heard(1, 10, frame.IGMPv3Query(hostMAC, netip.MustParseAddr("10.0.0.1")), at)
		}
		r.s.tick(at)
		got = append(got, r.take()...)
		for _, q := range got {
			if q.vlan != 20 && s < 6+9 {
				t.Fatalf("%d s after the lower querier: the bridge sent %v into VLAN 10", s, q)
			}
		}
	}
	if !slices.Contains(got, sentQuery{11, 0, any4, any4}) || !slices.Contains(got, sentQuery{12, 10, ll, any6}) || !slices.Contains(got, sentQuery{12, 20, ll, any6}) {
		t.Errorf("sent %v: want VLAN 20's queries all along, and VLAN 10's again once the other querier was quiet 9 s", got)
	}
	if qs := r.s.queriers("br0", t1.Add(15*time.Second)); len(qs) != 4 || !qs[0].Own || !qs[1].Own {
		t.Errorf("queriers %+v, want the bridge's own again", qs)
	}
	for _, want := range []string{"another querier wins the election; the bridge's stops\" bridge=br0 vlan=10 querier=fe80::1", "querier=10.0.0.1", "the other querier went quiet; the bridge's queries again\" bridge=br0 vlan=10 was=fe80::1"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logged.String())
		}
	}
	// A query of the bridge's own come back (a loop) silences nothing.
	heard(2, 20, frame.MLDv2Query(nil, hostMAC, ll, netip.Addr{}, time.Second, 4*time.Second), t1.Add(16*time.Second))
	if qs := r.s.queriers("br0", t1.Add(16*time.Second)); len(qs) != 4 || !qs[3].Own {
		t.Errorf("queriers %+v after the bridge's own MLD query came back, want its own", qs)
	}
}

// TestQuerierLeave: a leave, with the bridge the querier, is answered by
// two group-specific queries out of its port only, a second apart; a
// member that does not answer is gone 2 s after the leave.
func TestQuerierLeave(t *testing.T) {
	r := newQuerierRig(t, 125*time.Second, map[uint16]snoopPort{1: {name: "a", ifindex: 11}, 2: {name: "b", ifindex: 12}})
	t0 := time.Unix(1000, 0)
	r.s.tick(t0)
	r.take()
	r.s.msg(1, frame.IGMPv2(frame.IGMPv2Report, hostMAC, host4, g4), t0)
	r.s.msg(2, frame.IGMPv2(frame.IGMPv2Report, hostMAC, host4, g4), t0)
	r.s.msg(1, frame.MLDv2(hostMAC, host6, frame.Record{Type: frame.ModeIsExclude, Group: g6}), t0)
	k4 := datapath.GroupKey{Bridge: 1, Group: g4}
	k6 := datapath.GroupKey{Bridge: 1, Group: g6}
	wantTable(t, r.f, "joined", map[datapath.GroupKey][]uint16{k4: {1, 2}, k6: {1}, {Bridge: 1, Group: any4}: nil, {Bridge: 1, Group: any6}: nil})

	t1 := t0.Add(10 * time.Second)
	r.s.msg(1, frame.IGMPv2(frame.IGMPLeave, hostMAC, host4, g4), t1)
	r.s.msg(1, frame.MLDv1(layers.ICMPv6TypeMLDv1MulticastListenerDoneMessage, hostMAC, host6, g6), t1)
	r.want("at the leaves", sentQuery{11, 0, any4, g4}, sentQuery{11, 0, ownLL(), g6})
	r.s.tick(t1.Add(time.Second))
	r.want("a second after", sentQuery{11, 0, any4, g4}, sentQuery{11, 0, ownLL(), g6})
	r.s.tick(t1.Add(2 * time.Second))
	r.want("two seconds after")
	wantTable(t, r.f, "left", map[datapath.GroupKey][]uint16{k4: {2}, {Bridge: 1, Group: any4}: nil, {Bridge: 1, Group: any6}: nil})
}

// TestQuerierPorts: the daemon's apply tells the querier its ports: the
// queries leave by the daemon's packet socket out of each forwarding port,
// not by a blocked one, and reloading without multicast_querier stops them.
func TestQuerierPorts(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "p3"} {
		w.sys.add(n, "veth")
	}
	f := &fakeGroups{t: map[datapath.GroupKey][]uint16{}}
	w.d.snoop = newSnooper(f, quietLog())
	w.d.snoop.send = func(ifindex int, fr []byte) error { return w.d.sendProbe(ifindex, fr) }
	var sent []int
	w.d.sendProbe = func(ifindex int, fr []byte) error {
		if _, err := readQuery(ifindex, fr); err != nil {
			t.Errorf("sent out of ifindex %d: %v", ifindex, err)
		}
		sent = append(sent, ifindex)
		return nil
	}
	apply := func(extra string) {
		t.Helper()
		body := strings.Replace(bridges("br0=p1,p2,p3"), "name = \"br0\"\n", "name = \"br0\"\nmulticast_snooping = true\n"+extra, 1)
		body = strings.Replace(body, "interface = \"p2\"\n", "interface = \"p2\"\nbpdu_guard = true\n", 1)
		w.applyAsFile(body)
	}
	apply("multicast_querier = true\n")
	b := w.d.bridges["br0"]
	w.d.edgeEvent(datapath.Move{BPDU: true, Bridge: b.id, ToSlot: w.port("br0", "p2").slot, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 0x99}})
	if w.port("br0", "p2").blocked == "" {
		t.Fatal("p2 not blocked by its BPDU")
	}
	now := time.Now()
	w.d.snoop.tick(now)
	p1, p3 := w.port("br0", "p1").ifindex, w.port("br0", "p3").ifindex
	slices.Sort(sent)
	if want := []int{p1, p1, p3, p3}; !slices.Equal(sent, want) {
		t.Errorf("queries sent out of ifindexes %v, want an IGMP and an MLD one out of p1 (%d) and p3 (%d), none out of blocked p2", sent, p1, p3)
	}
	st, err := w.d.status()
	if err != nil || len(st.Bridges) != 1 || !st.Bridges[0].MulticastQuerier || len(st.Bridges[0].Queriers) != 2 {
		t.Errorf("show (%v): %+v, want the querier on and its own of each family", err, st.Bridges)
	}

	sent = nil
	apply("")
	w.d.snoop.tick(now.Add(time.Hour))
	if len(sent) != 0 {
		t.Errorf("without multicast_querier, queries out of %v", sent)
	}
}

// TestQuerierFarPorts: beyond an overlay or patch port (far) is a switch
// of its own querier: while the bridge's querier is the one, reports go
// there too (the switches beyond learn the members here), and a leave
// that came by it is not asked about but ages; once a querier heard wins,
// reports go to its router port only.
func TestQuerierFarPorts(t *testing.T) {
	r := newQuerierRig(t, 125*time.Second, map[uint16]snoopPort{1: {name: "a", ifindex: 11}, 2: {name: "vx", far: true}})
	t0 := time.Unix(1000, 0)
	r.s.tick(t0)
	r.want("at start: none out of the far port", sentQuery{11, 0, any4, any4}, sentQuery{11, 0, ownLL(), any6})
	k4 := datapath.GroupKey{Bridge: 1, Group: g4}
	r.s.msg(2, frame.IGMPv2(frame.IGMPv2Report, hostMAC, host4, g4), t0)
	wantTable(t, r.f, "a member beyond", map[datapath.GroupKey][]uint16{k4: {2}, {Bridge: 1, Group: any4}: {2}, {Bridge: 1, Group: any6}: {2}})
	r.s.msg(2, frame.IGMPv2(frame.IGMPLeave, hostMAC, host4, g4), t0.Add(time.Second))
	r.s.tick(t0.Add(5 * time.Second))
	r.want("a leave from beyond: no query")
	wantTable(t, r.f, "a leave from beyond: the membership ages", map[datapath.GroupKey][]uint16{k4: {2}, {Bridge: 1, Group: any4}: {2}, {Bridge: 1, Group: any6}: {2}})

	r.s.msg(1, frame.IGMPv3Query(hostMAC, netip.MustParseAddr("10.0.0.1")), t0.Add(6*time.Second))
	wantTable(t, r.f, "a querier heard by a", map[datapath.GroupKey][]uint16{k4: {1, 2}, {Bridge: 1, Group: any4}: {1}, {Bridge: 1, Group: any6}: {1, 2}})
}

// TestQuerierElectionLinkLocal: an MLD query from an address that is not
// link-local (::1, a global one), which every host drops (RFC 3810
// 5.1.14), wins no election though its address is lower than the
// bridge's: a port that sends one does not leave the VLAN without an MLD
// querier.
func TestQuerierElectionLinkLocal(t *testing.T) {
	r := newQuerierRig(t, 4*time.Second, map[uint16]snoopPort{1: {name: "a", ifindex: 11}})
	t0 := time.Unix(1000, 0)
	r.s.tick(t0)
	r.take()
	for _, src := range []string{"::1", "2001:db8::1"} {
		q := frame.MLDv1(layers.ICMPv6TypeMLDv1MulticastListenerQueryMessage, hostMAC, netip.MustParseAddr(src), netip.Addr{})
		r.s.handle(datapath.SnoopMsg{Bridge: 1, Slot: 1, Packet: ipOfFrame(q)}, t0)
	}
	var got []sentQuery
	for s := 1; s <= 8; s++ {
		r.s.tick(t0.Add(time.Duration(s) * time.Second))
		got = append(got, r.take()...)
	}
	if !slices.Contains(got, sentQuery{11, 0, ownLL(), any6}) {
		t.Errorf("sent %v: want the bridge's MLD queries on, after queries from addresses no host takes", got)
	}
	if qs := r.s.queriers("br0", t0.Add(8*time.Second)); len(qs) != 2 || !qs[1].Own {
		t.Errorf("queriers %+v, want the bridge's own MLD querier", qs)
	}
}
