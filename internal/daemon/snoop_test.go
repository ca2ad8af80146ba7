package daemon

import (
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/frame"
)

// Multicast snooping's control plane against a fake group table: messages
// as hosts send them (internal/frame), parsed with gopacket, into the
// entries the datapath forwards by.

type fakeGroups struct {
	t     map[datapath.GroupKey][]uint16
	room  int
	clear int
}

func (f *fakeGroups) SetGroup(k datapath.GroupKey, s []uint16) error {
	if _, ok := f.t[k]; !ok && f.room > 0 && len(f.t) >= f.room {
		return datapath.ErrGroupsFull
	}
	f.t[k] = slices.Clone(s)
	return nil
}
func (f *fakeGroups) DelGroup(k datapath.GroupKey) error { delete(f.t, k); return nil }
func (f *fakeGroups) ClearGroups() error                 { f.clear++; clear(f.t); return nil }
func (f *fakeGroups) Snoop() (snoopReader, error)        { return nil, nil }
func (f *fakeGroups) SnoopLost() (uint64, error)         { return 0, nil }

var (
	hostMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x10}
	host4   = netip.MustParseAddr("10.0.0.10")
	host6   = netip.MustParseAddr("fe80::10")
	g4      = netip.MustParseAddr("239.1.1.1")
	g4b     = netip.MustParseAddr("239.1.1.2")
	g6      = netip.MustParseAddr("ff3e::1:2")
	src6    = netip.MustParseAddr("fd00::5")
)

// ipOfFrame is the IP packet of an untagged frame, as the datapath copies it.
func ipOfFrame(f []byte) []byte { return f[14:] }

func newTestSnooper(t *testing.T, ports map[uint16]snoopPort) (*snooper, *fakeGroups) {
	t.Helper()
	f := &fakeGroups{t: map[datapath.GroupKey][]uint16{}}
	s := newSnooper(f, slog.New(slog.DiscardHandler))
	s.configure(map[uint16]*snoopBridge{1: {name: "br0", ports: ports}}, time.Unix(1000, 0))
	if f.clear != 1 {
		t.Fatalf("the table was emptied %d times at the first configure, want 1", f.clear)
	}
	return s, f
}

func (s *snooper) msg(slot uint16, f []byte, now time.Time) {
	s.handle(datapath.SnoopMsg{Bridge: 1, Slot: slot, Packet: ipOfFrame(f)}, now)
}

func wantTable(t *testing.T, f *fakeGroups, what string, want map[datapath.GroupKey][]uint16) {
	t.Helper()
	if len(f.t) != len(want) {
		t.Errorf("%s: table %v, want %v", what, f.t, want)
		return
	}
	for k, v := range want {
		if !slices.Equal(f.t[k], v) {
			t.Errorf("%s: %v holds %v, want %v (table %v)", what, k, f.t[k], v, f.t)
		}
	}
}

func TestSnoopMemberships(t *testing.T) {
	ports := map[uint16]snoopPort{1: {name: "a"}, 2: {name: "b", fastLeave: true}, 3: {name: "c"}, 4: {name: "r", router: true}}
	s, f := newTestSnooper(t, ports)
	t0 := time.Unix(1000, 0)
	k4 := datapath.GroupKey{Bridge: 1, Group: g4}
	k4b := datapath.GroupKey{Bridge: 1, Group: g4b}
	k6 := datapath.GroupKey{Bridge: 1, Group: g6}

	s.msg(1, frame.IGMPv2(frame.IGMPv2Report, hostMAC, host4, g4), t0)
	s.msg(2, frame.IGMPv3(hostMAC, host4, frame.Record{Type: frame.ToExclude, Group: g4}, frame.Record{Type: frame.ModeIsInclude, Group: g4b, Sources: []netip.Addr{host4}}), t0)
	s.msg(3, frame.MLDv2(hostMAC, host6, frame.Record{Type: frame.ModeIsInclude, Group: g6, Sources: []netip.Addr{src6}}), t0)
	// Link-local groups take no room: they are flooded anyway.
	s.msg(3, frame.IGMPv2(frame.IGMPv2Report, hostMAC, host4, netip.MustParseAddr("224.0.0.251")), t0)
	s.msg(3, frame.MLDv1(layers.ICMPv6TypeMLDv1MulticastListenerReportMessage, hostMAC, host6, netip.MustParseAddr("ff02::1:ff00:10")), t0)
	wantTable(t, f, "joined", map[datapath.GroupKey][]uint16{k4: {1, 2, 4}, k4b: {2, 4}, k6: {3, 4}})
	if e := s.entries("br0", t0); len(e) != 5 || e[3].Group != g6.String() || !slices.Equal(e[3].Sources, []string{src6.String()}) || !e[4].Router {
		t.Errorf("mdb show: %+v", e)
	}

	// Fast leave: at once. A leave of a port without it, no querier: it
	// stays (a BLOCK of its last source is one), until it ages.
	s.msg(2, frame.IGMPv2(frame.IGMPLeave, hostMAC, host4, g4), t0)
	s.msg(1, frame.IGMPv2(frame.IGMPLeave, hostMAC, host4, g4), t0)
	s.msg(3, frame.MLDv2(hostMAC, host6, frame.Record{Type: frame.BlockSources, Group: g6, Sources: []netip.Addr{src6}}), t0)
	wantTable(t, f, "left", map[datapath.GroupKey][]uint16{k4: {1, 4}, k4b: {2, 4}, k6: {3, 4}})

	// A query on port 3: a querier, port 3 a router port; reports go to
	// the router ports (group 0), and a leave now ends a membership in 2 s.
	s.msg(3, frame.IGMPv2(frame.IGMPQuery, hostMAC, netip.MustParseAddr("10.0.0.1"), netip.Addr{}), t0)
	wantTable(t, f, "queried", map[datapath.GroupKey][]uint16{k4: {1, 3, 4}, k4b: {2, 3, 4}, k6: {3, 4}, {Bridge: 1, Group: netip.IPv4Unspecified()}: {3, 4}})
	s.msg(1, frame.IGMPv2(frame.IGMPLeave, hostMAC, host4, g4), t0)
	s.tick(t0.Add(3 * time.Second))
	wantTable(t, f, "left with a querier", map[datapath.GroupKey][]uint16{k4b: {2, 3, 4}, k6: {3, 4}, {Bridge: 1, Group: netip.IPv4Unspecified()}: {3, 4}})

	// Aging: the router port and the querier after 255 s, memberships after 260 s.
	s.tick(t0.Add(256 * time.Second))
	wantTable(t, f, "querier gone", map[datapath.GroupKey][]uint16{k4b: {2, 4}, k6: {3, 4}})
	s.tick(t0.Add(261 * time.Second))
	wantTable(t, f, "aged", map[datapath.GroupKey][]uint16{})

	// A port that leaves the bridge takes its memberships along; a bridge
	// that stops snooping, its entries.
	s.msg(1, frame.IGMPv2(frame.IGMPv2Report, hostMAC, host4, g4), t0)
	s.configure(map[uint16]*snoopBridge{1: {name: "br0", ports: map[uint16]snoopPort{2: {name: "b"}, 4: {name: "r", router: true}}}}, t0)
	wantTable(t, f, "port gone", map[datapath.GroupKey][]uint16{})
	s.msg(2, frame.IGMPv2(frame.IGMPv2Report, hostMAC, host4, g4), t0)
	s.configure(nil, t0)
	wantTable(t, f, "bridge gone", map[datapath.GroupKey][]uint16{})
	if s.entries("", t0); len(s.bridges) != 0 {
		t.Errorf("a bridge that stopped snooping left state")
	}
}

// A tenant's flood of reports: its port holds maxPortGroups, the others
// still join; a full table refuses, counted.
func TestSnoopBounds(t *testing.T) {
	s, f := newTestSnooper(t, map[uint16]snoopPort{1: {name: "a"}, 2: {name: "b"}})
	t0 := time.Unix(1000, 0)
	for i := 0; i < maxPortGroups+10; i++ {
		g := netip.AddrFrom4([4]byte{239, 2, byte(i >> 8), byte(i)})
		s.msg(1, frame.IGMPv2(frame.IGMPv2Report, hostMAC, host4, g), t0)
	}
	s.msg(2, frame.IGMPv2(frame.IGMPv2Report, hostMAC, host4, g4), t0)
	if len(f.t) != maxPortGroups+1 {
		t.Errorf("%d entries, want %d (port 1's bound and port 2's group)", len(f.t), maxPortGroups+1)
	}
	if c := s.snoopCounts()["br0"]; c.Refused != 10 || c.Reports != maxPortGroups+11 {
		t.Errorf("counts %+v, want 10 refused of %d reports", c, maxPortGroups+11)
	}
	f.room = len(f.t)
	s.msg(2, frame.IGMPv2(frame.IGMPv2Report, hostMAC, host4, g4b), t0)
	if c := s.snoopCounts()["br0"]; c.Refused != 11 {
		t.Errorf("a full table's refusal not counted: %+v", c)
	}
	s.handle(datapath.SnoopMsg{Bridge: 1, Slot: 2, Packet: []byte{0x45, 0, 0}}, t0)
	if c := s.snoopCounts()["br0"]; c.Malformed != 1 {
		t.Errorf("a cut message not counted malformed: %+v", c)
	}
}

func TestParseSnoop(t *testing.T) {
	cases := []struct {
		name string
		f    []byte
		want []snoopOp
	}{
		{"IGMPv2 report", frame.IGMPv2(frame.IGMPv2Report, hostMAC, host4, g4), []snoopOp{{kind: opJoin, group: g4}}},
		{"IGMPv2 leave", frame.IGMPv2(frame.IGMPLeave, hostMAC, host4, g4), []snoopOp{{kind: opLeave, group: g4}}},
		{"IGMP query", frame.IGMPv2(frame.IGMPQuery, hostMAC, host4, netip.Addr{}), []snoopOp{{kind: opQuery, src: host4}}},
		{"IGMPv3 TO_IN {}", frame.IGMPv3(hostMAC, host4, frame.Record{Type: frame.ToInclude, Group: g4}), []snoopOp{{kind: opInclude, group: g4, sources: []netip.Addr{}}}},
		{"MLDv1 done", frame.MLDv1(layers.ICMPv6TypeMLDv1MulticastListenerDoneMessage, hostMAC, host6, g6), []snoopOp{{kind: opLeave, group: g6}}},
		{"MLD query", frame.MLDv1(layers.ICMPv6TypeMLDv1MulticastListenerQueryMessage, hostMAC, host6, netip.Addr{}), []snoopOp{{kind: opQuery, src: host6}}},
		{"MLDv2 allow", frame.MLDv2(hostMAC, host6, frame.Record{Type: frame.AllowSources, Group: g6, Sources: []netip.Addr{src6}}), []snoopOp{{kind: opAllow, group: g6, sources: []netip.Addr{src6}}}},
	}
	for _, c := range cases {
		got, err := parseSnoop(ipOfFrame(c.f))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !slices.EqualFunc(got, c.want, func(a, b snoopOp) bool {
			return a.kind == b.kind && a.group == b.group && a.src == b.src && slices.Equal(a.sources, b.sources)
		}) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
