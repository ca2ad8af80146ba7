package daemon

import (
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/frame"
)

// The learner's rules (neighlearn.go) against a fake table: each claim
// is a copy as the datapath sends it (tr_neigh_copy), made of a frame
// built as a host sends it.

// fakeLearnTable is an FDB to look addresses up in and a neighbour table.
type fakeLearnTable struct {
	fdb    map[string]uint16 // "vlan/mac" -> slot
	neighs map[datapath.NeighKey]datapath.Neigh
}

func newFakeLearnTable() *fakeLearnTable {
	return &fakeLearnTable{fdb: map[string]uint16{}, neighs: map[datapath.NeighKey]datapath.Neigh{}}
}

func fdbID(vlan uint16, mac net.HardwareAddr) string { return string(rune(vlan)) + "/" + mac.String() }

func (f *fakeLearnTable) LookupFDB(_, vlan uint16, mac net.HardwareAddr) (datapath.FDBEntry, bool, error) {
	s, ok := f.fdb[fdbID(vlan, mac)]
	return datapath.FDBEntry{VLAN: vlan, MAC: mac, Slot: s}, ok, nil
}

func (f *fakeLearnTable) PutNeigh(k datapath.NeighKey, n datapath.Neigh) error {
	f.neighs[k] = n
	return nil
}

func (f *fakeLearnTable) DelNeigh(k datapath.NeighKey) error {
	delete(f.neighs, k)
	return nil
}

func (f *fakeLearnTable) Neighs() ([]datapath.NeighEntry, error) {
	var out []datapath.NeighEntry
	for k, n := range f.neighs {
		out = append(out, datapath.NeighEntry{NeighKey: k, Neigh: n, Age: 10 * time.Second})
	}
	return out, nil
}

var (
	stA   = net.HardwareAddr{0x02, 0, 0, 0, 1, 0x0a}
	stB   = net.HardwareAddr{0x02, 0, 0, 0, 1, 0x0b}
	stC   = net.HardwareAddr{0x02, 0, 0, 0, 1, 0x0c}
	ipA   = netip.MustParseAddr("10.1.0.10")
	ipB   = netip.MustParseAddr("10.1.0.11")
	ip6A  = netip.MustParseAddr("fd01::10")
	ip6B  = netip.MustParseAddr("fd01::11")
	srvIP = netip.MustParseAddr("10.1.0.1")
	noMAC = net.HardwareAddr{0, 0, 0, 0, 0, 0}
)

// learnRig is a learner of bridge 1 ("br0") with ports 1 (a), 2 (b), 3
// (srv, the DHCP server's) and 4 (guarded: ip_guard with allowed_ips ipA,
// dhcp_guard), stA on port 1 and stB on port 2 in the FDB.
type learnRig struct {
	t      *testing.T
	l      *neighLearner
	tab    *fakeLearnTable
	events []ctl.Event
	now    time.Time
}

func newLearnRig(t *testing.T) *learnRig {
	r := &learnRig{t: t, tab: newFakeLearnTable(), now: time.Unix(1000, 0)}
	r.l = newNeighLearner(r.tab, slog.New(slog.DiscardHandler), func(e ctl.Event) { r.events = append(r.events, e) })
	r.l.clock = func() uint64 { return 1 }
	r.tab.fdb[fdbID(0, stA)] = 1
	r.tab.fdb[fdbID(0, stB)] = 2
	r.l.configure(map[uint16]*learnBridge{1: {name: "br0", aging: 300 * time.Second, portLimit: 4, ports: map[uint16]learnPort{
		1: {name: "a"}, 2: {name: "b"}, 3: {name: "srv"},
		4: {name: "guarded", ipGuard: true, guard: []netip.Addr{ipA}, dhcpGuard: true},
	}}}, r.now)
	return r
}

// send hands the learner the copy of f (untagged) from slot.
func (r *learnRig) send(slot uint16, f []byte) {
	r.t.Helper()
	m := datapath.SnoopMsg{Bridge: 1, Slot: slot, Neigh: true, Proto: uint16(f[12])<<8 | uint16(f[13]),
		Dst: net.HardwareAddr(f[:6]), Src: net.HardwareAddr(f[6:12]), Packet: f[14:]}
	r.l.handle(m, r.now)
}

func arpFrom(src net.HardwareAddr, op uint16, sha net.HardwareAddr, spa, tpa netip.Addr) []byte {
	return frame.ARP(nil, frame.Broadcast(), src, op, sha, spa, noMAC, tpa)
}

// has says what the table holds for addr: its MAC and slot, learned.
func (r *learnRig) has(addr netip.Addr, mac net.HardwareAddr, slot uint16) {
	r.t.Helper()
	n, ok := r.tab.neighs[datapath.NeighKey{Bridge: 1, Addr: addr}]
	if !ok || !n.Learned || n.MAC.String() != mac.String() || n.Slot != slot {
		r.t.Errorf("%v: %+v (held %v), want %v on slot %d, learned", addr, n, ok, mac, slot)
	}
}

func (r *learnRig) hasNot(addr netip.Addr) {
	r.t.Helper()
	if n, ok := r.tab.neighs[datapath.NeighKey{Bridge: 1, Addr: addr}]; ok {
		r.t.Errorf("%v: %+v, want none", addr, n)
	}
}

// refused says the last event refused addr's claim for why, and the
// count of why.
func (r *learnRig) refused(addr netip.Addr, why string, count uint64) {
	r.t.Helper()
	if len(r.events) == 0 {
		r.t.Fatalf("%v: no event, want neigh_refused %s", addr, why)
	}
	e := r.events[len(r.events)-1]
	if e.Event != ctl.EventNeighRefused || e.IP != addr.String() || e.Why != why || e.Bridge != "br0" {
		r.t.Errorf("event %+v, want neigh_refused of %v for %s", e, addr, why)
	}
	if c := r.l.bridges[1].counts.Refused[why]; c != count {
		r.t.Errorf("refused %s %d, want %d", why, c, count)
	}
}

func TestNeighLearnARPAndND(t *testing.T) {
	r := newLearnRig(t)
	r.send(1, arpFrom(stA, layers.ARPRequest, stA, ipA, ipB))
	r.has(ipA, stA, 1)
	r.send(2, frame.ARP(nil, stA, stB, layers.ARPReply, stB, ipB, stA, ipA)) // a reply's sender
	r.has(ipB, stB, 2)
	r.send(1, frame.NS(nil, stA, ip6A, ip6B, stA)) // a solicitation's source with its option
	r.has(ip6A, stA, 1)
	r.send(2, frame.NA(nil, stA, stB, ip6B, ip6A)) // an advertisement's target with its option
	r.has(ip6B, stB, 2)
	// Claims of nothing: a probe, duplicate address detection, a
	// solicitation without its option.
	r.send(1, arpFrom(stA, layers.ARPRequest, stA, netip.IPv4Unspecified(), netip.MustParseAddr("10.1.0.50")))
	r.send(1, frame.NS(nil, stA, netip.IPv6Unspecified(), netip.MustParseAddr("fd01::50"), nil))
	r.send(1, frame.NS(nil, stA, netip.MustParseAddr("fd01::51"), ip6B, nil))
	r.hasNot(netip.MustParseAddr("fd01::51"))
	if len(r.tab.neighs) != 4 || len(r.events) != 0 || r.l.bridges[1].counts.Learned != 4 {
		t.Errorf("table %v, events %v, learned %d: want the 4 entries, no event", r.tab.neighs, r.events, r.l.bridges[1].counts.Learned)
	}
	// A port not of the bridge, another bridge: nothing.
	r.l.handle(datapath.SnoopMsg{Bridge: 2, Slot: 1, Neigh: true}, r.now)
	r.l.handle(datapath.SnoopMsg{Bridge: 1, Slot: 9, Neigh: true}, r.now)
}

func TestNeighLearnSpoofed(t *testing.T) {
	r := newLearnRig(t)
	// ARP whose sender is stB's, sent by stA: refused.
	r.send(1, arpFrom(stA, layers.ARPRequest, stB, ipB, ipA))
	r.hasNot(ipB)
	r.refused(ipB, refusedSpoofed, 1)
	// A solicitation whose option names another MAC than its source.
	r.send(1, frame.NS(nil, stA, ip6B, ip6A, stB))
	r.hasNot(ip6B)
	r.refused(ip6B, refusedSpoofed, 2)
	// An advertisement for ip6B with stB's MAC, from stA.
	na := frame.NA(nil, stC, stB, ip6B, ip6A)
	copy(na[6:12], stA)
	r.send(1, na)
	r.hasNot(ip6B)
}

func TestNeighLearnForeignMAC(t *testing.T) {
	r := newLearnRig(t)
	// stB is port 2's: from port 1, with ARP consistent, still refused.
	r.send(1, arpFrom(stB, layers.ARPRequest, stB, ipB, ipA))
	r.hasNot(ipB)
	r.refused(ipB, refusedForeign, 1)
	// stC is nowhere in the FDB: refused, unless the port's allowed_macs
	// bind it.
	r.send(1, arpFrom(stC, layers.ARPRequest, stC, netip.MustParseAddr("10.1.0.12"), ipA))
	r.refused(netip.MustParseAddr("10.1.0.12"), refusedForeign, 2)
	r.l.bridges[1].ports[1] = learnPort{name: "a", macs: []net.HardwareAddr{stC}}
	r.send(1, arpFrom(stC, layers.ARPRequest, stC, netip.MustParseAddr("10.1.0.12"), ipA))
	r.has(netip.MustParseAddr("10.1.0.12"), stC, 1)
}

func TestNeighLearnAddresses(t *testing.T) {
	r := newLearnRig(t)
	for i, a := range []string{"255.255.255.255", "127.0.0.1", "224.0.0.1"} {
		r.send(1, arpFrom(stA, layers.ARPRequest, stA, netip.MustParseAddr(a), ipB))
		r.hasNot(netip.MustParseAddr(a))
		r.refused(netip.MustParseAddr(a), refusedAddress, uint64(i+1))
	}
	// ip_guard: only within the port's addresses.
	r.tab.fdb[fdbID(0, stC)] = 4
	r.send(4, arpFrom(stC, layers.ARPRequest, stC, ipB, ipA))
	r.hasNot(ipB)
	r.refused(ipB, refusedIPGuard, 1)
	r.send(4, arpFrom(stC, layers.ARPRequest, stC, ipA, ipB))
	r.has(ipA, stC, 4)
}

func TestNeighLearnStaticWins(t *testing.T) {
	r := newLearnRig(t)
	r.send(1, arpFrom(stA, layers.ARPRequest, stA, ipA, ipB))
	r.has(ipA, stA, 1)
	// A port's allowed_ips (or the fabric) make ipA static for stC on
	// port 3: written over the learned entry, which the learner forgets.
	static := map[datapath.NeighKey]datapath.Neigh{{Bridge: 1, Addr: ipA}: {MAC: stC, Slot: 3}}
	if err := r.l.fix(static, func() error {
		r.tab.neighs[datapath.NeighKey{Bridge: 1, Addr: ipA}] = datapath.Neigh{MAC: stC, Slot: 3}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r.send(1, arpFrom(stA, layers.ARPRequest, stA, ipA, ipB))
	if n := r.tab.neighs[datapath.NeighKey{Bridge: 1, Addr: ipA}]; n.Learned || n.MAC.String() != stC.String() {
		t.Errorf("ipA: %+v, want the static entry of stC", n)
	}
	r.refused(ipA, refusedStatic, 1)
	// The ageing does not touch it.
	r.now = r.now.Add(time.Hour)
	r.l.tick(r.now)
	if _, ok := r.tab.neighs[datapath.NeighKey{Bridge: 1, Addr: ipA}]; !ok {
		t.Error("the static entry aged")
	}
}

func TestNeighLearnFirstClaimHolds(t *testing.T) {
	r := newLearnRig(t)
	r.send(1, arpFrom(stA, layers.ARPRequest, stA, ipA, ipB))
	// stB claims ipA while stA is on its port: refused, reported with the
	// holder, once a minute for the same claimer.
	r.send(2, arpFrom(stB, layers.ARPReply, stB, ipA, ipB))
	r.has(ipA, stA, 1)
	r.refused(ipA, refusedHeld, 1)
	if e := r.events[0]; e.Port != "b" || e.MAC != stB.String() {
		t.Errorf("event %+v, want port b, mac %v", e, stB)
	}
	r.send(2, arpFrom(stB, layers.ARPReply, stB, ipA, ipB))
	if len(r.events) != 1 || r.l.bridges[1].counts.Refused[refusedHeld] != 2 {
		t.Errorf("%d events, %d refused, want 1 and 2", len(r.events), r.l.bridges[1].counts.Refused[refusedHeld])
	}
	// Its holder gone from its port (its FDB entry aged): stB takes it.
	delete(r.tab.fdb, fdbID(0, stA))
	r.send(2, arpFrom(stB, layers.ARPReply, stB, ipA, ipB))
	r.has(ipA, stB, 2)
	if r.l.bridges[1].counts.Moved != 1 {
		t.Errorf("moved %d, want 1", r.l.bridges[1].counts.Moved)
	}
	// Unseen past neigh_aging, though its MAC is still on its port: stA
	// takes it back.
	r.tab.fdb[fdbID(0, stA)] = 1
	r.now = r.now.Add(301 * time.Second)
	r.send(1, arpFrom(stA, layers.ARPRequest, stA, ipA, ipB))
	r.has(ipA, stA, 1)
}

func TestNeighLearnPortLimit(t *testing.T) {
	r := newLearnRig(t)
	for i := range 5 {
		r.send(1, arpFrom(stA, layers.ARPRequest, stA, netip.AddrFrom4([4]byte{10, 1, 1, byte(i + 1)}), ipB))
	}
	r.hasNot(netip.MustParseAddr("10.1.1.5"))
	r.refused(netip.MustParseAddr("10.1.1.5"), refusedPortLimit, 1)
	// Another port has its own share; a refresh of a held address is no
	// new entry.
	r.send(2, arpFrom(stB, layers.ARPRequest, stB, ipB, ipA))
	r.has(ipB, stB, 2)
	r.send(1, arpFrom(stA, layers.ARPRequest, stA, netip.MustParseAddr("10.1.1.4"), ipB))
	if r.l.bridges[1].counts.Refused[refusedPortLimit] != 1 {
		t.Errorf("refused %d, want 1", r.l.bridges[1].counts.Refused[refusedPortLimit])
	}
	// One aged out: room again.
	delete(r.tab.fdb, fdbID(0, stA))
	r.tab.fdb[fdbID(0, stC)] = 1
	r.now = r.now.Add(10 * time.Second)
	r.l.tick(r.now) // stA left its port: its 4 entries go
	r.send(1, arpFrom(stC, layers.ARPRequest, stC, netip.MustParseAddr("10.1.1.5"), ipB))
	r.has(netip.MustParseAddr("10.1.1.5"), stC, 1)
}

func TestNeighLearnAging(t *testing.T) {
	r := newLearnRig(t)
	r.send(1, arpFrom(stA, layers.ARPRequest, stA, ipA, ipB))
	r.send(2, arpFrom(stB, layers.ARPRequest, stB, ipB, ipA))
	// Refreshed by its claims: stA's stays, stB's goes after neigh_aging.
	r.now = r.now.Add(200 * time.Second)
	r.send(1, arpFrom(stA, layers.ARPRequest, stA, ipA, ipB))
	r.l.tick(r.now)
	r.has(ipA, stA, 1)
	r.has(ipB, stB, 2)
	r.now = r.now.Add(101 * time.Second)
	r.l.tick(r.now)
	r.has(ipA, stA, 1)
	r.hasNot(ipB)
	// Its MAC moved to another port: the entry goes at the next look.
	r.tab.fdb[fdbID(0, stA)] = 2
	r.now = r.now.Add(5 * time.Second)
	r.l.tick(r.now)
	r.hasNot(ipA)
	if len(r.l.learned) != 0 {
		t.Errorf("learner holds %v", r.l.learned)
	}
}

func TestNeighLearnDHCP(t *testing.T) {
	r := newLearnRig(t)
	ack := func(src net.HardwareAddr, yi netip.Addr, ch net.HardwareAddr) []byte {
		return frame.DHCP(nil, frame.Broadcast(), src, srvIP, layers.DHCPMsgTypeAck, yi, ch)
	}
	srvMAC := net.HardwareAddr{0x02, 0, 0, 0, 1, 0x01}
	r.tab.fdb[fdbID(0, srvMAC)] = 3
	// From the server's port, for stB (on port 2): ipB is stB's, on port 2.
	r.send(3, ack(srvMAC, ipB, stB))
	r.has(ipB, stB, 2)
	// An offer binds nothing.
	r.send(3, frame.DHCP(nil, frame.Broadcast(), srvMAC, srvIP, layers.DHCPMsgTypeOffer, ipA, stA))
	r.hasNot(ipA)
	// From a port with dhcp_guard (the datapath drops these already):
	// refused.
	r.tab.fdb[fdbID(0, stC)] = 4
	r.send(4, ack(stC, ipA, stA))
	r.hasNot(ipA)
	r.refused(ipA, refusedDHCPGuard, 1)
	// For a chaddr on the server's own port, or unknown: refused.
	ipD := netip.MustParseAddr("10.1.0.20")
	r.send(1, ack(stA, ipD, stA))
	r.hasNot(ipD)
	r.refused(ipD, refusedForeign, 1)
	r.send(3, ack(srvMAC, ipA, net.HardwareAddr{0x02, 0, 0, 0, 9, 9}))
	r.hasNot(ipA)
	// For a client on an ip_guard port, within its addresses only.
	r.tab.fdb[fdbID(0, stC)] = 4
	r.send(3, ack(srvMAC, ipB, stC))
	r.refused(ipB, refusedIPGuard, 1)
	r.send(3, ack(srvMAC, ipA, stC))
	r.has(ipA, stC, 4)
}

func TestNeighLearnAdopt(t *testing.T) {
	tab := newFakeLearnTable()
	tab.neighs[datapath.NeighKey{Bridge: 1, Addr: ipA}] = datapath.Neigh{MAC: stA, Slot: 1, Learned: true}
	tab.neighs[datapath.NeighKey{Bridge: 1, Addr: ipB}] = datapath.Neigh{MAC: stB, Slot: 7, Learned: true} // a port gone
	tab.neighs[datapath.NeighKey{Bridge: 5, Addr: ipB}] = datapath.Neigh{MAC: stB, Slot: 1, Learned: true} // a bridge that no longer learns
	tab.neighs[datapath.NeighKey{Bridge: 1, Addr: ip6A}] = datapath.Neigh{MAC: stA, Slot: 3}               // static: not the learner's
	tab.fdb[fdbID(0, stA)] = 1
	l := newNeighLearner(tab, slog.New(slog.DiscardHandler), nil)
	now := time.Unix(1000, 0)
	l.configure(map[uint16]*learnBridge{1: {name: "br0", aging: 300 * time.Second, portLimit: 4, ports: map[uint16]learnPort{1: {name: "a"}}}}, now)
	if len(tab.neighs) != 2 || len(l.learned) != 1 {
		t.Fatalf("table %v, learner %v: want ipA adopted, the static kept, the rest gone", tab.neighs, l.learned)
	}
	if n := l.learned[datapath.NeighKey{Bridge: 1, Addr: ipA}]; n == nil || !n.seen.Equal(now.Add(-10*time.Second)) {
		t.Errorf("adopted %+v, want seen 10 s ago (its age)", n)
	}
	// Aged as the daemon's own: 290 s later it goes.
	l.tick(now.Add(290 * time.Second))
	if len(l.learned) != 0 {
		t.Errorf("learner holds %v after its aging", l.learned)
	}
	// A port that leaves takes its entries along.
	l.configure(map[uint16]*learnBridge{1: {name: "br0", aging: 300 * time.Second, portLimit: 4, ports: map[uint16]learnPort{1: {name: "a"}}}}, now)
	l.handle(datapath.SnoopMsg{Bridge: 1, Slot: 1, Neigh: true, Proto: 0x0806, Src: stA,
		Packet: arpFrom(stA, layers.ARPRequest, stA, ipA, ipB)[14:]}, now)
	if len(l.learned) != 1 {
		t.Fatalf("learner holds %v, want ipA", l.learned)
	}
	l.configure(map[uint16]*learnBridge{1: {name: "br0", aging: 300 * time.Second, portLimit: 4, ports: map[uint16]learnPort{}}}, now)
	if _, ok := tab.neighs[datapath.NeighKey{Bridge: 1, Addr: ipA}]; ok || len(l.learned) != 0 {
		t.Errorf("the port left, its entry stayed: %v", tab.neighs)
	}
}

// TestNeighLearnRoomForStatic: static and remote entries always find room
// in the table; the oldest learned entries give way.
func TestNeighLearnRoomForStatic(t *testing.T) {
	r := newLearnRig(t)
	for i := range 3 {
		r.send(1, arpFrom(stA, layers.ARPRequest, stA, netip.AddrFrom4([4]byte{10, 1, 1, byte(i + 1)}), ipB))
		r.now = r.now.Add(time.Second)
	}
	static := map[datapath.NeighKey]datapath.Neigh{}
	for i := range tbpf.MaxNeigh - 1 {
		static[datapath.NeighKey{Bridge: 2, Addr: netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)})}] = datapath.Neigh{MAC: stC, Slot: 1}
	}
	if err := r.l.fix(static, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	r.hasNot(netip.MustParseAddr("10.1.1.1"))
	r.hasNot(netip.MustParseAddr("10.1.1.2"))
	r.has(netip.MustParseAddr("10.1.1.3"), stA, 1)
}

// TestNeighLearnReportRate: a port that claims address after address is
// counted for every claim and reported at most refuseRate times a second
// (refuseBurst at once).
func TestNeighLearnReportRate(t *testing.T) {
	r := newLearnRig(t)
	for i := range 200 {
		r.send(1, arpFrom(stB, layers.ARPRequest, stB, netip.AddrFrom4([4]byte{10, 1, 2, byte(i)}), ipA)) // stB is port 2's
	}
	if n := r.l.bridges[1].counts.Refused[refusedForeign]; n != 200 || len(r.events) != refuseBurst {
		t.Errorf("refused %d, %d events; want 200 and %d", n, len(r.events), refuseBurst)
	}
	r.now = r.now.Add(time.Second)
	for i := range 200 {
		r.send(1, arpFrom(stB, layers.ARPRequest, stB, netip.AddrFrom4([4]byte{10, 1, 3, byte(i)}), ipA))
	}
	if len(r.events) != refuseBurst+refuseRate {
		t.Errorf("%d events a second later, want %d", len(r.events), refuseBurst+refuseRate)
	}
}

// TestNeighLearnMalformed: a copy cut anywhere, or of bytes flipped, is
// counted malformed or claims nothing, and never panics the daemon nor
// writes what it did not check.
func TestNeighLearnMalformed(t *testing.T) {
	r := newLearnRig(t)
	frames := [][]byte{
		arpFrom(stA, layers.ARPRequest, stA, ipA, ipB),
		frame.NS(nil, stA, ip6A, ip6B, stA),
		frame.NA(nil, stB, stA, ip6A, ip6B),
		frame.DHCP(nil, frame.Broadcast(), stB, srvIP, layers.DHCPMsgTypeAck, ipA, stA),
		frame.DHCPv6Reply(nil, stA, stB, netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fe80::a"), 3600, ip6A),
	}
	for _, f := range frames {
		for n := 14; n < len(f); n++ {
			r.send(1, f[:n])
		}
		for i := 14; i < len(f); i++ {
			g := slices.Clone(f)
			g[i] ^= 0xff
			r.send(1, g)
		}
	}
	if r.l.bridges[1].counts.Malformed == 0 {
		t.Error("no copy counted malformed")
	}
	for k, n := range r.tab.neighs {
		if n.MAC.String() != stA.String() || n.Slot != 1 {
			t.Errorf("%v: %+v, want only stA's claims on its port", k, n)
		}
	}
}

// TestNeighLearnVLANs: on a VLAN-aware bridge an address is a VLAN's: the
// same address in two VLANs is two stations' claims, and a MAC is the
// port's in the VLAN the frame came in.
func TestNeighLearnVLANs(t *testing.T) {
	r := newLearnRig(t)
	r.tab.fdb[fdbID(10, stA)] = 1
	r.tab.fdb[fdbID(20, stB)] = 2
	send := func(slot, vlan uint16, f []byte) {
		r.l.handle(datapath.SnoopMsg{Bridge: 1, VLAN: vlan, Slot: slot, Neigh: true, Proto: 0x0806, Src: net.HardwareAddr(f[6:12]), Packet: f[14:]}, r.now)
	}
	send(1, 10, arpFrom(stA, layers.ARPRequest, stA, ipA, ipB))
	send(2, 20, arpFrom(stB, layers.ARPRequest, stB, ipA, ipB)) // the same address, VLAN 20's
	send(2, 10, arpFrom(stB, layers.ARPRequest, stB, ipB, ipA)) // stB is not port 2's in VLAN 10
	for _, c := range []struct {
		vlan uint16
		mac  net.HardwareAddr
		slot uint16
	}{{10, stA, 1}, {20, stB, 2}} {
		if n, ok := r.tab.neighs[datapath.NeighKey{Bridge: 1, VLAN: c.vlan, Addr: ipA}]; !ok || n.MAC.String() != c.mac.String() || n.Slot != c.slot {
			t.Errorf("VLAN %d: %+v (%v), want %v on slot %d", c.vlan, n, ok, c.mac, c.slot)
		}
	}
	if _, ok := r.tab.neighs[datapath.NeighKey{Bridge: 1, VLAN: 10, Addr: ipB}]; ok || r.l.bridges[1].counts.Refused[refusedForeign] != 1 {
		t.Errorf("stB's claim in VLAN 10 taken, or not refused as foreign_mac: %v", r.tab.neighs)
	}
}

// TestNeighLearnDHCPv6: a REPLY from the server's port binds its IA_NA
// addresses to the MAC it was sent to, on that MAC's port; a released
// address (valid lifetime 0), a REPLY to a multicast MAC and one from a
// dhcp_guard port bind nothing.
func TestNeighLearnDHCPv6(t *testing.T) {
	r := newLearnRig(t)
	srvMAC := net.HardwareAddr{0x02, 0, 0, 0, 1, 0x01}
	srv6, ll := netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fe80::b")
	r.tab.fdb[fdbID(0, srvMAC)] = 3
	ip6C := netip.MustParseAddr("fd01::12")
	r.send(3, frame.DHCPv6Reply(nil, stB, srvMAC, srv6, ll, 3600, ip6B, ip6C))
	r.has(ip6B, stB, 2)
	r.has(ip6C, stB, 2)
	r.send(3, frame.DHCPv6Reply(nil, stA, srvMAC, srv6, ll, 0, ip6A))
	r.send(3, frame.DHCPv6Reply(nil, net.HardwareAddr{0x33, 0x33, 0, 1, 0, 2}, srvMAC, srv6, netip.MustParseAddr("ff02::1:2"), 3600, ip6A))
	r.hasNot(ip6A)
	r.tab.fdb[fdbID(0, stC)] = 4
	r.send(4, frame.DHCPv6Reply(nil, stA, stC, srv6, ll, 3600, ip6A))
	r.hasNot(ip6A)
	r.refused(ip6A, refusedDHCPGuard, 1)
}
