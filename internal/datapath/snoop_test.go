package datapath

import (
	"net/netip"
	"testing"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
	ethframe "github.com/trestle/trestle/internal/frame"
)

// multicast_snooping (bpf/lib/snoop.h) through BPF_PROG_TEST_RUN, in both
// builds: the group table's ports (members and router ports, as the daemon
// folds them), link-local groups and groups without an entry flooded, the
// IGMP and MLD messages copied to the snoop ring and sent by group 0's
// entry, and a bridge without the key that pays no heed to the table. At
// tc the copies are counted on the ports they leave by; XDP's devmap
// program, which asks each copy there, does not run in a test run (the
// namespace tests, tests/snoop, see its copies), so XDP shows the frame
// grouped and redirected over the program flood set.

var (
	grp4   = netip.MustParseAddr("239.1.1.1")
	grp6   = netip.MustParseAddr("ff3e::1:2")
	mdns4  = netip.MustParseAddr("224.0.0.251")
	node6  = netip.MustParseAddr("ff02::1")
	hostA  = netip.MustParseAddr("10.0.0.10")
	hostA6 = netip.MustParseAddr("fe80::a")
)

// snoopRig is the rig's bridge with multicast_snooping as on says.
func snoopRig(t *testing.T, m tmode, on bool) *rig {
	r := newRig(t, m, 1024, [4]uint32{})
	var ports []PortInfo
	for slot := 1; slot <= 3; slot++ {
		p := PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot), Policy: tbpf.PortPolicy{}.With(tbpf.TrestleTrPortFlagsTR_PORT_SNOOP, on)}
		r.setPort(p)
		ports = append(ports, p)
	}
	r.setBridge(BridgeInfo{Snoop: on}, ports...)
	return r
}

func (r *rig) setGroup(k GroupKey, slots ...uint16) {
	r.t.Helper()
	k.Bridge = 1
	if err := r.dp.SetGroup(k, slots); err != nil {
		r.t.Fatal(err)
	}
}

// snoopCase is a frame from a port, whether it goes to its group's ports
// only (grouped), and at tc the ports its copies leave by.
type snoopCase struct {
	name    string
	from    int
	data    []byte
	grouped bool
	to      []int // tc: the ports a copy left by
}

func (r *rig) runSnoop(cases []snoopCase) {
	r.t.Helper()
	for _, c := range cases {
		before := r.allStats()
		ret := r.run(c.from, c.data)
		want := r.m.redirect
		if r.m.name == "tc" && c.grouped {
			want = tcStolen // copies each cloned through the door, the frame consumed
		}
		r.wantVerdict(ret, want, c.name)
		g := r.stats(c.from).C[tbpf.TrestleTrCounterTR_CNT_GROUPED] - before[c.from].C[tbpf.TrestleTrCounterTR_CNT_GROUPED]
		if (g == 1) != c.grouped || g > 1 {
			r.t.Errorf("%s: grouped +%d, want grouped %v", c.name, g, c.grouped)
		}
		if r.m.name != "tc" {
			continue
		}
		got := r.sentBy(before)
		if len(got) != len(c.to) || (len(got) > 0 && got[0] != c.to[0]) || (len(got) > 1 && got[1] != c.to[1]) {
			r.t.Errorf("%s: sent by ports %v, want %v", c.name, got, c.to)
		}
	}
}

// allStats is the counters of slots 1-3, for sentBy.
func (r *rig) allStats() [4]tbpf.PortStats {
	var st [4]tbpf.PortStats
	for s := 1; s <= 3; s++ {
		st[s] = r.stats(s)
	}
	return st
}

// sentBy is the slots (1-3) that sent a frame since before.
func (r *rig) sentBy(before [4]tbpf.PortStats) []int {
	var got []int
	for s := 1; s <= 3; s++ {
		if r.stats(s).C[tbpf.TxPackets] > before[s].C[tbpf.TxPackets] {
			got = append(got, s)
		}
	}
	return got
}

func TestSnoopGroups(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := snoopRig(t, m, true)
		udp4 := ethframe.UDPTo(macA, hostA, grp4, make([]byte, 32))
		udp6 := ethframe.UDPTo(macA, hostA6, grp6, make([]byte, 32))
		r.runSnoop([]snoopCase{
			{"a group without an entry: flooded", 1, udp4, false, []int{2, 3}},
			{"an IPv6 group without an entry: flooded", 1, udp6, false, []int{2, 3}},
		})
		r.setGroup(GroupKey{Group: grp4}, 2)
		r.setGroup(GroupKey{Group: grp6}, 3)
		r.setGroup(GroupKey{Group: mdns4}, 2) // never the daemon's: link-local groups flood whatever the table says
		r.setGroup(GroupKey{Group: node6}, 2)
		r.runSnoop([]snoopCase{
			{"to the group's member", 1, udp4, true, []int{2}},
			{"to the IPv6 group's member", 1, udp6, true, []int{3}},
			{"a member's own frame: not back", 2, ethframe.UDPTo(macB, hostA, grp4, make([]byte, 32)), true, nil},
			{"224.0.0.251, link-local: flooded", 1, ethframe.UDPTo(macA, hostA, mdns4, make([]byte, 32)), false, []int{2, 3}},
			{"ff02::1, link-local: flooded", 1, ethframe.UDPTo(macA, hostA6, node6, make([]byte, 32)), false, []int{2, 3}},
			{"another group, of no entry: flooded", 1, ethframe.UDPTo(macA, hostA, netip.MustParseAddr("239.9.9.9"), nil), false, []int{2, 3}},
		})
		// The router port folded in (as the daemon writes it).
		r.setGroup(GroupKey{Group: grp4}, 2, 3)
		r.runSnoop([]snoopCase{{"to the member and the router port", 1, udp4, true, []int{2, 3}}})
		if err := r.dp.DelGroup(GroupKey{Bridge: 1, Group: grp4}); err != nil {
			t.Fatal(err)
		}
		r.runSnoop([]snoopCase{{"its entry gone: flooded", 1, udp4, false, []int{2, 3}}})
	})
}

func TestSnoopMessages(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := snoopRig(t, m, true)
		rd, err := r.dp.Snoop()
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		report := ethframe.IGMPv2(ethframe.IGMPv2Report, macB, hostA, grp4)
		mld := ethframe.MLDv2(macB, hostA6, ethframe.Record{Type: ethframe.ToExclude, Group: grp6})
		query := ethframe.IGMPv2(ethframe.IGMPQuery, macC, netip.MustParseAddr("10.0.0.1"), netip.Addr{})
		r.runSnoop([]snoopCase{
			{"an IGMPv2 report, no querier seen: flooded", 2, report, false, []int{1, 3}},
			{"an MLDv2 report, no querier seen: flooded", 2, mld, false, []int{1, 3}},
		})
		// A querier seen (by the daemon): reports go to the router ports,
		// queries still everywhere.
		r.setGroup(GroupKey{Group: netip.IPv4Unspecified()}, 3)
		r.runSnoop([]snoopCase{
			{"an IGMPv2 report: to the router port", 2, report, true, []int{3}},
			{"an MLDv2 report, no MLD querier: flooded", 2, mld, false, []int{1, 3}},
		})
		r.setGroup(GroupKey{Group: netip.IPv6Unspecified()}, 1)
		r.runSnoop([]snoopCase{
			{"an MLDv2 report: to the MLD router port", 2, mld, true, []int{1}},
			{"a query: flooded", 3, query, false, []int{1, 2}},
		})
		// Each message reached the ring, its IP packet whole, with its
		// bridge and port.
		for i, want := range [][]byte{report, mld, report, mld, mld, query} {
			msg, err := rd.Read(time.Now().Add(time.Second))
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			from := uint16(2)
			if i == 5 {
				from = 3
			}
			if msg.Bridge != 1 || msg.Slot != from || string(msg.Packet) != string(want[14:]) {
				t.Errorf("message %d: bridge %d slot %d packet % x, want bridge 1 slot %d packet % x", i, msg.Bridge, msg.Slot, msg.Packet, from, want[14:])
			}
		}
		if n, err := r.dp.SnoopLost(); err != nil || n != 0 {
			t.Errorf("snoop lost %d (%v), want 0", n, err)
		}
	})
}

// A bridge without multicast_snooping floods whatever the group table
// holds, and copies nothing to the ring.
func TestSnoopOff(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := snoopRig(t, m, false)
		rd, err := r.dp.Snoop()
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		r.setGroup(GroupKey{Group: grp4}, 2)
		r.setGroup(GroupKey{Group: netip.IPv4Unspecified()}, 3)
		r.runSnoop([]snoopCase{
			{"to a group in the table", 1, ethframe.UDPTo(macA, hostA, grp4, nil), false, []int{2, 3}},
			{"an IGMP report", 1, ethframe.IGMPv2(ethframe.IGMPv2Report, macA, hostA, grp4), false, []int{2, 3}},
		})
		if _, err := rd.Read(time.Now().Add(100 * time.Millisecond)); err == nil {
			t.Errorf("a bridge without snooping copied a message to the ring")
		}
	})
}
