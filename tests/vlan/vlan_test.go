package vlan

// VLAN end-to-end tests (issue 11): hosts send hand-built frames, tagged or
// not, through a VLAN-aware bridge in xdp and in tc mode, and every host
// captures what reaches it. The capturer puts back the tag the kernel moves
// into metadata, so each frame is compared byte for byte with what must
// arrive: the same frame, with the tag pushed, removed or kept as the ports'
// VLANs say, and nothing at the hosts that must not see it.

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/tests/harness"
)

// TestVLANAccessIsolation: access ports of VLANs 10 and 20 exchange no
// unicast, broadcast or multicast; another access port of VLAN 10 receives
// VLAN 10's frames unchanged.
func TestVLANAccessIsolation(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l, caps := harness.VLANLab(t, mode, "", "vlan = 10", "vlan = 20", "vlan = 10")
		h1, h2, h3 := harness.HostMAC(1), harness.HostMAC(2), harness.HostMAC(3)
		var cases []harness.VCase
		add := func(name string, from int, dst, src net.HardwareAddr, recv ...int) {
			f := harness.VFrame(dst, src, name)
			c := harness.VCase{Name: name, From: from, Frame: f, Recv: map[int][]byte{}}
			for _, h := range recv {
				c.Recv[h] = f
			}
			cases = append(cases, c)
		}
		// Every host is learned first (h2 in VLAN 20 only).
		add("h2-bcast", 2, harness.VLANBcast(), h2)
		add("h3-bcast", 3, harness.VLANBcast(), h3, 1)
		add("h1-bcast", 1, harness.VLANBcast(), h1, 3)
		add("h1-mcast", 1, harness.VLANMcast(), h1, 3)
		add("h1-unknown", 1, harness.VLANUnknown(), h1, 3)
		add("h1-to-h3", 1, h3, h1, 3)
		// h2's address is unknown in VLAN 10: flooded there, not sent to h2.
		add("h1-to-h2", 1, h2, h1, 3)
		add("h2-mcast", 2, harness.VLANMcast(), h2)
		add("h2-unknown", 2, harness.VLANUnknown(), h2)
		add("h2-to-h1", 2, h1, h2)
		add("h2-to-h3", 2, h3, h2)
		harness.VLANRun(t, l, caps, cases)

		for i, vid := range []uint16{10, 20, 10} {
			if e, ok := l.FDBEntry(harness.HostMAC(i + 1)); !ok || e.VLAN != vid || e.Port != harness.PortName(i+1) {
				t.Errorf("h%d learned as %+v (found %v), want vlan %d on %s", i+1, e, ok, vid, harness.PortName(i+1))
			}
		}
		if n := len(l.FDB()); n != 3 {
			t.Errorf("fdb has %d entries, want 3: %+v", n, l.FDB())
		}

		// show says each port's VLAN; stats --per-vlan counts per VLAN: in
		// VLAN 10, 6 frames in, 6 copies out (each to the one other
		// member), 5 floods; in VLAN 20, 5 frames in, floods that reach no
		// port: each counted once, as a no_egress drop on port-h2, not as
		// a flood too (docs/reliability.md: rx = forwarded + flooded +
		// dropped).
		st := l.Show()
		if !st.Bridges[0].VLANAware {
			t.Errorf("show: the bridge is not VLAN-aware")
		}
		for i, p := range st.Bridges[0].Ports {
			if want := []uint16{10, 20, 10}[i]; p.VLAN != want || len(p.Trunk) != 0 {
				t.Errorf("show: %s has vlan %d trunk %q, want access VLAN %d", p.Interface, p.VLAN, p.Trunk, want)
			}
		}
		var vs []ctl.VLANStats
		l.CLIJSON(&vs, "stats", "--per-vlan")
		got := map[uint16]ctl.VLANStats{}
		for _, v := range vs {
			got[v.VLAN] = v
		}
		if v := got[10]; v.Counters.Get("rx_packets") != 6 || v.Counters.Get("tx_packets") != 6 || v.Counters.Get("flooded") != 5 || !slices.Equal(v.Ports, []string{harness.PortName(1), harness.PortName(3)}) {
			t.Errorf("stats --per-vlan, VLAN 10: %+v, want rx 6 tx 6 flooded 5 on %s and %s", v, harness.PortName(1), harness.PortName(3))
		}
		if v := got[20]; v.Counters.Get("rx_packets") != 5 || v.Counters.Get("tx_packets") != 0 || v.Counters.Get("flooded") != 0 || len(vs) != 2 {
			t.Errorf("stats --per-vlan, VLAN 20: %+v (of %d VLANs), want rx 5 tx 0 flooded 0, and 2 VLANs", v, len(vs))
		}
		if d := l.Stats(harness.PortName(2)).Drops; d["no_egress"] != 5 {
			t.Errorf("%s drops %v, want 5 no_egress (VLAN 20's floods with no other member)", harness.PortName(2), d)
		}
		l.Stop()
	})
}

// TestVLANTrunkTagging: an access port's untagged frames leave a trunk
// tagged with its VLAN; a trunk's tagged frames leave access ports untagged
// and other trunks with their tag (PCP included) unchanged.
func TestVLANTrunkTagging(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l, caps := harness.VLANLab(t, mode, "", "vlan = 10", "trunk = [10, 20]", "vlan = 20", `trunk = [10, "20-29"]`)
		h1, h2, h3, h4 := harness.HostMAC(1), harness.HostMAC(2), harness.HostMAC(3), harness.HostMAC(4)
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "a10", From: 1, Frame: harness.VFrame(harness.VLANBcast(), h1, "a10"), Recv: map[int][]byte{
				2: harness.VFrame(harness.VLANBcast(), h1, "a10", harness.CTag(10)),
				4: harness.VFrame(harness.VLANBcast(), h1, "a10", harness.CTag(10)),
			}},
			{Name: "a20", From: 3, Frame: harness.VFrame(harness.VLANBcast(), h3, "a20"), Recv: map[int][]byte{
				2: harness.VFrame(harness.VLANBcast(), h3, "a20", harness.CTag(20)),
				4: harness.VFrame(harness.VLANBcast(), h3, "a20", harness.CTag(20)),
			}},
			{Name: "t10", From: 2, Frame: harness.VFrame(harness.VLANBcast(), h2, "t10", harness.CTagP(3, 10)), Recv: map[int][]byte{
				1: harness.VFrame(harness.VLANBcast(), h2, "t10"),
				4: harness.VFrame(harness.VLANBcast(), h2, "t10", harness.CTagP(3, 10)),
			}},
			{Name: "t20", From: 4, Frame: harness.VFrame(harness.VLANBcast(), h4, "t20", harness.CTagP(6, 20)), Recv: map[int][]byte{
				2: harness.VFrame(harness.VLANBcast(), h4, "t20", harness.CTagP(6, 20)),
				3: harness.VFrame(harness.VLANBcast(), h4, "t20"),
			}},
			// Known unicast, both ways.
			{Name: "t10-to-h1", From: 2, Frame: harness.VFrame(h1, h2, "t10-to-h1", harness.CTag(10)), Recv: map[int][]byte{
				1: harness.VFrame(h1, h2, "t10-to-h1"),
			}},
			{Name: "a10-to-h2", From: 1, Frame: harness.VFrame(h2, h1, "a10-to-h2"), Recv: map[int][]byte{
				2: harness.VFrame(h2, h1, "a10-to-h2", harness.CTag(10)),
			}},
			{Name: "t20-to-h3", From: 2, Frame: harness.VFrame(h3, h2, "t20-to-h3", harness.CTagP(1, 20)), Recv: map[int][]byte{
				3: harness.VFrame(h3, h2, "t20-to-h3"),
			}},
			{Name: "a20-to-h4", From: 3, Frame: harness.VFrame(h4, h3, "a20-to-h4"), Recv: map[int][]byte{
				4: harness.VFrame(h4, h3, "a20-to-h4", harness.CTag(20)),
			}},
			// A flood that leaves an access port before a trunk (h1 comes
			// before h2 in the bridge): the trunk's copy keeps PCP 2.
			{Name: "t10-from-h4", From: 4, Frame: harness.VFrame(harness.VLANBcast(), h4, "t10-from-h4", harness.CTagP(2, 10)), Recv: map[int][]byte{
				1: harness.VFrame(harness.VLANBcast(), h4, "t10-from-h4"),
				2: harness.VFrame(harness.VLANBcast(), h4, "t10-from-h4", harness.CTagP(2, 10)),
			}},
			{Name: "t10-to-h4", From: 2, Frame: harness.VFrame(h4, h2, "t10-to-h4", harness.CTagP(3, 10)), Recv: map[int][]byte{
				4: harness.VFrame(h4, h2, "t10-to-h4", harness.CTagP(3, 10)),
			}},
			// VLAN 25 is on h4's trunk only: nobody else receives it.
			{Name: "t25", From: 4, Frame: harness.VFrame(harness.VLANBcast(), h4, "t25", harness.CTag(25))},
		})
		l.Stop()
	})
}

// TestVLANNative: a trunk's native VLAN is untagged both ways, and accepted
// tagged too; its other VLANs stay tagged.
func TestVLANNative(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l, caps := harness.VLANLab(t, mode, "", "vlan = 10", "trunk = [10, 20]\nnative = 10", "vlan = 20")
		h1, h2, h3 := harness.HostMAC(1), harness.HostMAC(2), harness.HostMAC(3)
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "n-in", From: 2, Frame: harness.VFrame(harness.VLANBcast(), h2, "n-in"), Recv: map[int][]byte{
				1: harness.VFrame(harness.VLANBcast(), h2, "n-in"),
			}},
			{Name: "n-out", From: 1, Frame: harness.VFrame(harness.VLANBcast(), h1, "n-out"), Recv: map[int][]byte{
				2: harness.VFrame(harness.VLANBcast(), h1, "n-out"),
			}},
			{Name: "n-out-uc", From: 1, Frame: harness.VFrame(h2, h1, "n-out-uc"), Recv: map[int][]byte{
				2: harness.VFrame(h2, h1, "n-out-uc"),
			}},
			{Name: "n-tagged-in", From: 2, Frame: harness.VFrame(h1, h2, "n-tagged-in", harness.CTagP(4, 10)), Recv: map[int][]byte{
				1: harness.VFrame(h1, h2, "n-tagged-in"),
			}},
			{Name: "n-prio-in", From: 2, Frame: harness.VFrame(harness.VLANBcast(), h2, "n-prio-in", harness.CTagP(2, 0)), Recv: map[int][]byte{
				1: harness.VFrame(harness.VLANBcast(), h2, "n-prio-in"),
			}},
			{Name: "v20-out", From: 3, Frame: harness.VFrame(harness.VLANBcast(), h3, "v20-out"), Recv: map[int][]byte{
				2: harness.VFrame(harness.VLANBcast(), h3, "v20-out", harness.CTag(20)),
			}},
			{Name: "v20-in", From: 2, Frame: harness.VFrame(harness.VLANBcast(), h2, "v20-in", harness.CTag(20)), Recv: map[int][]byte{
				3: harness.VFrame(harness.VLANBcast(), h2, "v20-in"),
			}},
		})
		l.Stop()
	})
}

// TestVLANDrops: a VID the trunk does not carry, a tag on an access port and
// an untagged frame on a trunk without native are dropped and counted.
func TestVLANDrops(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l, caps := harness.VLANLab(t, mode, "", "vlan = 10", "trunk = [10, 20]", "vlan = 10")
		h1, h2, h3 := harness.HostMAC(1), harness.HostMAC(2), harness.HostMAC(3)
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "ok", From: 1, Frame: harness.VFrame(harness.VLANBcast(), h1, "ok"), Recv: map[int][]byte{
				2: harness.VFrame(harness.VLANBcast(), h1, "ok", harness.CTag(10)),
				3: harness.VFrame(harness.VLANBcast(), h1, "ok"),
			}},
			{Name: "vid30", From: 2, Frame: harness.VFrame(harness.VLANBcast(), h2, "vid30", harness.CTag(30)), Reason: "vlan_not_carried"},
			{Name: "vid30-uc", From: 2, Frame: harness.VFrame(h1, h2, "vid30-uc", harness.CTag(30)), Reason: "vlan_not_carried"},
			{Name: "access-own-vid", From: 3, Frame: harness.VFrame(harness.VLANBcast(), h3, "access-own-vid", harness.CTag(10)), Reason: "vlan_tagged_on_access"},
			{Name: "access-vid20", From: 3, Frame: harness.VFrame(harness.VLANBcast(), h3, "access-vid20", harness.CTagP(7, 20)), Reason: "vlan_tagged_on_access"},
			{Name: "untagged-trunk", From: 2, Frame: harness.VFrame(harness.VLANBcast(), h2, "untagged-trunk"), Reason: "vlan_untagged"},
			{Name: "prio-trunk", From: 2, Frame: harness.VFrame(h1, h2, "prio-trunk", harness.CTagP(5, 0)), Reason: "vlan_untagged"},
			{Name: "ok-after", From: 2, Frame: harness.VFrame(h1, h2, "ok-after", harness.CTag(10)), Recv: map[int][]byte{
				1: harness.VFrame(h1, h2, "ok-after"),
			}},
		})
		// Dropped frames teach nothing: h2's only entry is from "ok-after".
		for _, e := range l.FDB() {
			if e.MAC == h2.String() && e.VLAN != 10 {
				t.Errorf("a dropped frame was learned: %+v", e)
			}
		}
		l.Stop()
	})
}

// TestVLANPriorityTagged: a priority-tagged frame (VID 0, PCP 5) on an access
// port joins its VLAN; it leaves a trunk tagged with PCP 5 kept and an
// access port untagged.
func TestVLANPriorityTagged(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l, caps := harness.VLANLab(t, mode, "", "vlan = 10", "trunk = [10, 20]", "vlan = 10", "vlan = 20")
		h1, h3 := harness.HostMAC(1), harness.HostMAC(3)
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "prio-bcast", From: 1, Frame: harness.VFrame(harness.VLANBcast(), h1, "prio-bcast", harness.CTagP(5, 0)), Recv: map[int][]byte{
				2: harness.VFrame(harness.VLANBcast(), h1, "prio-bcast", harness.CTagP(5, 10)),
				3: harness.VFrame(harness.VLANBcast(), h1, "prio-bcast"),
			}},
			// Flooded to h1 (access) before h2 (trunk).
			{Name: "prio-bcast-h3", From: 3, Frame: harness.VFrame(harness.VLANBcast(), h3, "prio-bcast-h3", harness.CTagP(5, 0)), Recv: map[int][]byte{
				1: harness.VFrame(harness.VLANBcast(), h3, "prio-bcast-h3"),
				2: harness.VFrame(harness.VLANBcast(), h3, "prio-bcast-h3", harness.CTagP(5, 10)),
			}},
			{Name: "learn-h2", From: 2, Frame: harness.VFrame(h1, harness.HostMAC(2), "learn-h2", harness.CTag(10)), Recv: map[int][]byte{
				1: harness.VFrame(h1, harness.HostMAC(2), "learn-h2"),
			}},
			{Name: "prio-to-h2", From: 1, Frame: harness.VFrame(harness.HostMAC(2), h1, "prio-to-h2", harness.CTagP(5, 0)), Recv: map[int][]byte{
				2: harness.VFrame(harness.HostMAC(2), h1, "prio-to-h2", harness.CTagP(5, 10)),
			}},
			{Name: "prio-uc", From: 3, Frame: harness.VFrame(h1, h3, "prio-uc", harness.CTagP(5, 0)), Recv: map[int][]byte{
				1: harness.VFrame(h1, h3, "prio-uc"),
			}},
		})
		if e, ok := l.FDBEntry(h1); !ok || e.VLAN != 10 {
			t.Errorf("h1 (priority-tagged) learned as %+v (found %v), want vlan 10", e, ok)
		}
		l.Stop()
	})
}

// TestVLANQinQ: an 802.1ad frame on an access port belongs to the port's
// VLAN: its bytes pass untouched to access ports, and a trunk gets them with
// a C-tag pushed outside the S-tag.
func TestVLANQinQ(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l, caps := harness.VLANLab(t, mode, "", "vlan = 10", "trunk = [10, 20]", "vlan = 10", "vlan = 20")
		h1, h2, h3 := harness.HostMAC(1), harness.HostMAC(2), harness.HostMAC(3)
		s100 := harness.STag(100)
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "qinq-bcast", From: 1, Frame: harness.VFrame(harness.VLANBcast(), h1, "qinq-bcast", s100), Recv: map[int][]byte{
				2: harness.VFrame(harness.VLANBcast(), h1, "qinq-bcast", harness.CTag(10), s100),
				3: harness.VFrame(harness.VLANBcast(), h1, "qinq-bcast", s100),
			}},
			{Name: "qinq-uc", From: 3, Frame: harness.VFrame(h1, h3, "qinq-uc", harness.STag(4000)), Recv: map[int][]byte{
				1: harness.VFrame(h1, h3, "qinq-uc", harness.STag(4000)),
			}},
			// Flooded to h1 (access) before h2 (trunk).
			{Name: "qinq-bcast-h3", From: 3, Frame: harness.VFrame(harness.VLANBcast(), h3, "qinq-bcast-h3", s100), Recv: map[int][]byte{
				1: harness.VFrame(harness.VLANBcast(), h3, "qinq-bcast-h3", s100),
				2: harness.VFrame(harness.VLANBcast(), h3, "qinq-bcast-h3", harness.CTag(10), s100),
			}},
			// And back: the trunk's C-tag comes off, the S-tag stays.
			{Name: "qinq-from-trunk", From: 2, Frame: harness.VFrame(harness.VLANBcast(), h2, "qinq-from-trunk", harness.CTag(10), s100), Recv: map[int][]byte{
				1: harness.VFrame(harness.VLANBcast(), h2, "qinq-from-trunk", s100),
				3: harness.VFrame(harness.VLANBcast(), h2, "qinq-from-trunk", s100),
			}},
		})
		if e, ok := l.FDBEntry(h1); !ok || e.VLAN != 10 {
			t.Errorf("h1 (802.1ad frames) learned as %+v (found %v), want vlan 10", e, ok)
		}
		l.Stop()
	})
}

// TestVLANFDB: the same MAC in two VLANs is two entries; a static entry of
// VLAN 20 on a trunk takes VLAN 20's unicast to it, tagged, and only there.
func TestVLANFDB(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		static := net.HardwareAddr{0x02, 0x5a, 0, 0, 0, 0x20}
		l, caps := harness.VLANLab(t, mode, fmt.Sprintf("\n[[bridge.static]]\nmac = %q\nport = \"port-h2\"\nvlan = 20\n", static),
			"vlan = 10", "trunk = [10, 20]", "vlan = 20", "vlan = 20")
		twice := net.HardwareAddr{0x02, 0x77, 0, 0, 0, 0x01}
		h1, h2, h3 := harness.HostMAC(1), harness.HostMAC(2), harness.HostMAC(3)
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "twice-10", From: 1, Frame: harness.VFrame(harness.VLANBcast(), twice, "twice-10"), Recv: map[int][]byte{
				2: harness.VFrame(harness.VLANBcast(), twice, "twice-10", harness.CTag(10)),
			}},
			{Name: "twice-20", From: 3, Frame: harness.VFrame(harness.VLANBcast(), twice, "twice-20"), Recv: map[int][]byte{
				2: harness.VFrame(harness.VLANBcast(), twice, "twice-20", harness.CTag(20)),
				4: harness.VFrame(harness.VLANBcast(), twice, "twice-20"),
			}},
			// Each copy of the address is known in its VLAN.
			{Name: "to-twice-10", From: 2, Frame: harness.VFrame(twice, h2, "to-twice-10", harness.CTag(10)), Recv: map[int][]byte{
				1: harness.VFrame(twice, h2, "to-twice-10"),
			}},
			{Name: "to-twice-20", From: 2, Frame: harness.VFrame(twice, h2, "to-twice-20", harness.CTag(20)), Recv: map[int][]byte{
				3: harness.VFrame(twice, h2, "to-twice-20"),
			}},
			{Name: "to-static-20", From: 3, Frame: harness.VFrame(static, h3, "to-static-20"), Recv: map[int][]byte{
				2: harness.VFrame(static, h3, "to-static-20", harness.CTag(20)),
			}},
			// The static entry is VLAN 20's: in VLAN 10 the address is
			// unknown and flooded there.
			{Name: "to-static-10", From: 1, Frame: harness.VFrame(static, h1, "to-static-10"), Recv: map[int][]byte{
				2: harness.VFrame(static, h1, "to-static-10", harness.CTag(10)),
			}},
		})
		var got []string
		for _, e := range l.FDB() {
			switch e.MAC {
			case twice.String():
				got = append(got, fmt.Sprintf("%s vlan %d static %v", e.Port, e.VLAN, e.Static))
			case static.String():
				if e.VLAN != 20 || e.Port != "port-h2" || !e.Static {
					t.Errorf("static entry listed as %+v, want static vlan 20 on port-h2", e)
				}
			}
		}
		slices.Sort(got)
		if want := []string{"port-h1 vlan 10 static false", "port-h3 vlan 20 static false"}; !slices.Equal(got, want) {
			t.Errorf("entries of %s: %q, want %q", twice, got, want)
		}
		if _, ok := l.FDBEntry(static); !ok {
			t.Errorf("fdb show does not list the static entry")
		}
		if s := l.Stats("port-h3"); s.Counters.Get("moved") != 0 {
			t.Errorf("the address in a second VLAN counted as a move: %+v", s)
		}
		l.Stop()
	})
}

// TestVLANReloadKeepsStream: a reload that moves one port from VLAN 20 to 30
// loses none of a stream of frames between two other ports, and the moved
// port's frames then travel in VLAN 30.
func TestVLANReloadKeepsStream(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		ports := []string{"vlan = 10", "vlan = 10", "vlan = 20", "trunk = [10, 20, 30]"}
		l, caps := harness.VLANLab(t, mode, "", ports...)
		h1, h2, h3 := harness.HostMAC(1), harness.HostMAC(2), harness.HostMAC(3)
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "learn-h1", From: 1, Frame: harness.VFrame(h2, h1, "learn-h1"), Recv: map[int][]byte{
				2: harness.VFrame(h2, h1, "learn-h1"), 4: harness.VFrame(h2, h1, "learn-h1", harness.CTag(10)),
			}},
			{Name: "learn-h2", From: 2, Frame: harness.VFrame(h1, h2, "learn-h2"), Recv: map[int][]byte{
				1: harness.VFrame(h1, h2, "learn-h2"),
			}},
			{Name: "h3-in-20", From: 3, Frame: harness.VFrame(harness.VLANBcast(), h3, "h3-in-20"), Recv: map[int][]byte{
				4: harness.VFrame(harness.VLANBcast(), h3, "h3-in-20", harness.CTag(20)),
			}},
		})

		if err := caps[2].SetReceiveBuffer(16 << 20); err != nil {
			t.Fatal(err)
		}
		if _, err := caps[2].SocketDrops(); err != nil { // resets the count
			t.Fatal(err)
		}
		sender := l.Host(1).RawSender(t, "eth0")
		stop := make(chan struct{})
		var sent int
		var sendErr error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ; ; sent++ {
				select {
				case <-stop:
					return
				default:
				}
				f := harness.VFrame(h2, h1, "stream")
				binary.BigEndian.PutUint32(f[len(f)-4:], uint32(sent))
				if sendErr = sender.Send(f); sendErr != nil {
					return
				}
				if sent%8 == 7 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
		time.Sleep(300 * time.Millisecond)
		ports[2] = "vlan = 30"
		l.WriteConfig(l.Config("", func(i int) string { return fmt.Sprintf("mode = %q\n%s\n", mode, ports[i-1]) }))
		start := time.Now()
		out, err := l.CLI("reload")
		took := time.Since(start)
		time.Sleep(300 * time.Millisecond)
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatalf("reload: %v\n%s", err, out)
		}
		if sendErr != nil {
			t.Fatalf("stream: %v", sendErr)
		}
		isStream := harness.HasVMarker("stream")
		caps[2].WaitFor(isStream, sent, 3*time.Second)
		time.Sleep(100 * time.Millisecond) // for duplicates
		got := caps[2].WaitFor(isStream, 0, 0)
		sockDrops, _ := caps[2].SocketDrops()
		t.Logf("%s: reload took %v; %d frames sent h1 -> h2 around it, %d received", mode, took.Round(time.Millisecond), sent, got)
		if log := l.Daemon.Out.String(); strings.Contains(log, "port removed") || strings.Count(log, `"port up"`) != 4 {
			t.Errorf("the reload detached or re-attached ports:\n%s", log)
		}
		if sent < 1000 {
			t.Errorf("only %d frames sent: the stream was too slow to say anything", sent)
		}
		if got != sent {
			seen := make([]bool, sent)
			dup := 0
			for _, f := range caps[2].Frames() {
				if isStream(f) {
					if seq := int(binary.BigEndian.Uint32(f[len(f)-4:])); seq < sent {
						if seen[seq] {
							dup++
						}
						seen[seq] = true
					}
				}
			}
			var missing []int
			for i, s := range seen {
				if !s {
					missing = append(missing, i)
				}
			}
			s1, s2 := l.Stats(harness.PortName(1)), l.Stats(harness.PortName(2))
			t.Errorf("%d of %d frames lost across the reload (capture socket drops %d, duplicates %d); missing sequence numbers %v\nport-h1 %+v\nport-h2 %+v\ndaemon:\n%s",
				sent-got, sent, sockDrops, dup, summarize(missing), s1, s2, l.Daemon.Out.String())
		}
		for _, h := range []int{3, 4} {
			if n := caps[h].WaitFor(isStream, 0, 0); n != 0 {
				t.Errorf("h%d received %d frames of the h1 -> h2 stream", h, n)
			}
		}
		for _, h := range []int{1, 2} {
			if e, ok := l.FDBEntry(harness.HostMAC(h)); !ok || e.VLAN != 10 || e.Port != harness.PortName(h) {
				t.Errorf("h%d's entry after the reload: %+v (found %v)", h, e, ok)
			}
		}
		// h3 is in VLAN 30 now.
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "h3-in-30", From: 3, Frame: harness.VFrame(harness.VLANBcast(), h3, "h3-in-30"), Recv: map[int][]byte{
				4: harness.VFrame(harness.VLANBcast(), h3, "h3-in-30", harness.CTag(30)),
			}},
			{Name: "t30-to-h3", From: 4, Frame: harness.VFrame(h3, harness.HostMAC(4), "t30-to-h3", harness.CTag(30)), Recv: map[int][]byte{
				3: harness.VFrame(h3, harness.HostMAC(4), "t30-to-h3"),
			}},
			{Name: "t20-after", From: 4, Frame: harness.VFrame(harness.VLANBcast(), harness.HostMAC(4), "t20-after", harness.CTag(20))},
		})
		l.Stop()
	})
}

// summarize writes sorted ints as ranges: 1-5,9.
func summarize(xs []int) string {
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, fmt.Sprint(xs[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", xs[i], xs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// A host whose stack tags its frames hands the tag to its veth beside the
// frame (tx-vlan offload, on by default): tc sees it there, XDP does not, and
// an XDP redirect would carry the frame on untagged. For a port at XDP the
// daemon turns the offload off on the veth peer, so the tag travels in the
// bytes; with the offload turned back on behind its back, the same frames
// reach the trunk untagged and are dropped there, which is what the daemon's
// setting prevents. The host tags with a tc program (lab.TagHost), as an
// 802.1Q device would (this kernel has none).
func TestVLANTagOffloadAtXDP(t *testing.T) {
	t.Parallel()
	l := harness.NewLab(t, 2)
	l.WriteConfig(l.Config("", func(i int) string {
		return "mode = \"xdp\"\n" + []string{"vlan = 10\n", "trunk = [10, 20]\n"}[i-1]
	}))
	l.Start()
	for _, p := range l.Show().Bridges[0].Ports {
		if p.State != "up" || p.Mode != "xdp" {
			t.Fatalf("port %s: %s %s (%s)", p.Interface, p.State, p.Mode, p.Reason)
		}
		if !strings.Contains(p.Peer, "tx-vlan-hw-insert off (was on)") {
			t.Errorf("port %s: peer %q: the daemon did not turn tx-vlan-hw-insert off", p.Interface, p.Peer)
		}
	}
	tagger, err := lab.TagHost(l.Host(2).Path, "eth0", 10)
	if err != nil {
		t.Fatal(err)
	}
	defer tagger.Close()
	if err := l.Host(2).Ping(harness.HostIP(1), 3); err != nil {
		t.Fatalf("h2 (tagging 10 on the trunk) -> h1 (access 10): %v", err)
	}
	if err := l.Host(1).Ping(harness.HostIP(2), 3); err != nil {
		t.Fatalf("h1 -> h2: %v", err)
	}
	// The offload back on: the tags stay beside the frames, XDP sees them
	// untagged, and the trunk (no native VLAN) drops them.
	l.Host(2).MustExec(t, "ethtool", "-K", "eth0", "tx-vlan-hw-insert", "on")
	before := l.Stats(harness.PortName(2)).Drops["vlan_untagged"]
	if err := l.Host(2).Ping(harness.HostIP(1), 2); err == nil {
		t.Errorf("h2 -> h1 still answered with the tag offloaded: the test shows nothing")
	}
	if after := l.Stats(harness.PortName(2)).Drops["vlan_untagged"]; after <= before {
		t.Errorf("with the tag offloaded, the trunk's vlan_untagged drops stayed at %d", after)
	}
	l.Stop()
}
