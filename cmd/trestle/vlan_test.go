package main

// VLAN end-to-end tests (issue 11): hosts send hand-built frames, tagged or
// not, through a VLAN-aware bridge in xdp and in tc mode, and every host
// captures what reaches it. The capturer puts back the tag the kernel moves
// into metadata, so each frame is compared byte for byte with what must
// arrive: the same frame, with the tag pushed, removed or kept as the ports'
// VLANs say, and nothing at the hosts that must not see it.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/testutil"
)

const (
	tpidC = 0x8100 // 802.1Q C-tag
	tpidS = 0x88a8 // 802.1ad S-tag
)

// vtag is a tag of a test frame: TPID and TCI.
type vtag struct{ tpid, tci uint16 }

func ctag(vid uint16) vtag          { return vtag{tpidC, vid} }
func ctagP(pcp, vid uint16) vtag    { return vtag{tpidC, pcp<<13 | vid} }
func stag(vid uint16) vtag          { return vtag{tpidS, vid} }
func vlanBcast() net.HardwareAddr   { return net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} }
func vlanMcast() net.HardwareAddr   { return net.HardwareAddr{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03} }
func vlanUnknown() net.HardwareAddr { return net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x99} }

// vframe builds a frame dst, src, the tags outermost first, ethertype 0x88b5
// and a 46-byte payload that starts with <marker>.
func vframe(dst, src net.HardwareAddr, marker string, tags ...vtag) []byte {
	f := make([]byte, 0, 64+4*len(tags))
	f = append(f, dst[:6]...)
	f = append(f, src[:6]...)
	for _, t := range tags {
		f = binary.BigEndian.AppendUint16(f, t.tpid)
		f = binary.BigEndian.AppendUint16(f, t.tci)
	}
	f = binary.BigEndian.AppendUint16(f, 0x88b5)
	payload := make([]byte, 46)
	copy(payload, "<"+marker+">")
	return append(f, payload...)
}

func hasVMarker(marker string) func([]byte) bool {
	m := []byte("<" + marker + ">")
	return func(f []byte) bool { return bytes.Contains(f, m) }
}

// vlanLab starts a daemon in mode whose bridge has one port per element of
// ports, port-hI configured with ports[I-1] (TOML lines: vlan, trunk, native)
// and bridgeExtra added to the bridge table. Every host captures on eth0.
func vlanLab(t *testing.T, mode, bridgeExtra string, ports ...string) (*swlab, map[int]*testutil.Capturer) {
	t.Helper()
	l := newSwlab(t, len(ports))
	l.writeConfig(l.config(bridgeExtra, func(i int) string {
		return fmt.Sprintf("mode = %q\n%s\n", mode, ports[i-1])
	}))
	l.start()
	for _, p := range l.show().Bridges[0].Ports {
		if p.State != "up" || p.Mode != mode {
			t.Fatalf("port %s: state %s mode %s (%s), want up in %s", p.Interface, p.State, p.Mode, p.Reason, mode)
		}
	}
	caps := map[int]*testutil.Capturer{}
	for i := 1; i <= len(ports); i++ {
		caps[i] = l.host(i).Capture(t, "eth0")
	}
	return l, caps
}

// hcase is a case of an untagged frame from host from to dst, which hosts
// to receive as sent.
func hcase(name string, from int, dst net.HardwareAddr, to ...int) vcase {
	f := vframe(dst, hostMAC(from), name)
	vc := vcase{name: name, from: from, frame: f, recv: map[int][]byte{}}
	for _, i := range to {
		vc.recv[i] = f
	}
	return vc
}

// vcase is one frame sent and where it must arrive.
type vcase struct {
	name   string // the frame's marker
	from   int    // sending host
	frame  []byte
	recv   map[int][]byte // host -> the frame it receives once; every other host receives nothing
	reason string         // when recv is empty: the sending port counts one drop of this reason
}

// vlanRun sends the cases' frames in order, 20ms apart so that what a frame
// teaches the switch is known before the next, and checks that each host
// received exactly what its case says: one copy of the expected bytes, or
// nothing with the case's marker, and the drops counted on the sending port.
func vlanRun(t *testing.T, l *swlab, caps map[int]*testutil.Capturer, cases []vcase) {
	t.Helper()
	names := map[string]bool{}
	for _, c := range cases {
		if names[c.name] || !bytes.Contains(c.frame, []byte("<"+c.name+">")) {
			t.Fatalf("case %q: marker repeated or not in its frame", c.name)
		}
		names[c.name] = true
	}
	dropsBefore := map[int]map[string]uint64{}
	for _, c := range cases {
		if c.reason != "" && dropsBefore[c.from] == nil {
			dropsBefore[c.from] = l.stats(portName(c.from)).Drops
		}
	}
	for _, c := range cases {
		if err := l.host(c.from).RawSend("eth0", c.frame); err != nil {
			t.Fatalf("case %s: %v", c.name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range cases {
		for h, want := range c.recv {
			caps[h].WaitFor(func(f []byte) bool { return bytes.Equal(f, want) }, 1, 2*time.Second)
		}
	}
	time.Sleep(200 * time.Millisecond) // for frames that must not arrive
	for _, c := range cases {
		for h := 1; h <= len(caps); h++ {
			var got [][]byte
			for _, f := range caps[h].Frames() {
				if hasVMarker(c.name)(f) {
					got = append(got, f)
				}
			}
			want, ok := c.recv[h]
			switch {
			case !ok && len(got) > 0:
				t.Errorf("%s (from h%d): h%d received %d frames, want none:\n%s", c.name, c.from, h, len(got), hexFrames(got))
			case ok && (len(got) != 1 || !bytes.Equal(got[0], want)):
				t.Errorf("%s (from h%d): h%d received %d frames, want 1:\n  want %s\n%s", c.name, c.from, h, len(got), hex.EncodeToString(want), hexFrames(got))
			}
		}
	}
	want := map[int]map[string]uint64{}
	for _, c := range cases {
		if c.reason != "" {
			if want[c.from] == nil {
				want[c.from] = map[string]uint64{}
			}
			want[c.from][c.reason]++
		}
	}
	for h, reasons := range want {
		after := l.stats(portName(h)).Drops
		for reason, n := range reasons {
			if got := after[reason] - dropsBefore[h][reason]; got != n {
				t.Errorf("%s: %s drops went up by %d, want %d (drops before %v, after %v)", portName(h), reason, got, n, dropsBefore[h], after)
			}
		}
	}
}

func hexFrames(fs [][]byte) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  got  %s\n", hex.EncodeToString(f))
	}
	return b.String()
}

func forModes(t *testing.T, f func(t *testing.T, mode string)) {
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) { f(t, mode) })
	}
}

// TestVLANAccessIsolation: access ports of VLANs 10 and 20 exchange no
// unicast, broadcast or multicast; another access port of VLAN 10 receives
// VLAN 10's frames unchanged.
func TestVLANAccessIsolation(t *testing.T) {
	forModes(t, func(t *testing.T, mode string) {
		l, caps := vlanLab(t, mode, "", "vlan = 10", "vlan = 20", "vlan = 10")
		h1, h2, h3 := hostMAC(1), hostMAC(2), hostMAC(3)
		var cases []vcase
		add := func(name string, from int, dst, src net.HardwareAddr, recv ...int) {
			f := vframe(dst, src, name)
			c := vcase{name: name, from: from, frame: f, recv: map[int][]byte{}}
			for _, h := range recv {
				c.recv[h] = f
			}
			cases = append(cases, c)
		}
		// Every host is learned first (h2 in VLAN 20 only).
		add("h2-bcast", 2, vlanBcast(), h2)
		add("h3-bcast", 3, vlanBcast(), h3, 1)
		add("h1-bcast", 1, vlanBcast(), h1, 3)
		add("h1-mcast", 1, vlanMcast(), h1, 3)
		add("h1-unknown", 1, vlanUnknown(), h1, 3)
		add("h1-to-h3", 1, h3, h1, 3)
		// h2's address is unknown in VLAN 10: flooded there, not sent to h2.
		add("h1-to-h2", 1, h2, h1, 3)
		add("h2-mcast", 2, vlanMcast(), h2)
		add("h2-unknown", 2, vlanUnknown(), h2)
		add("h2-to-h1", 2, h1, h2)
		add("h2-to-h3", 2, h3, h2)
		vlanRun(t, l, caps, cases)

		for i, vid := range []uint16{10, 20, 10} {
			if e, ok := l.fdbEntry(hostMAC(i + 1)); !ok || e.VLAN != vid || e.Port != portName(i+1) {
				t.Errorf("h%d learned as %+v (found %v), want vlan %d on %s", i+1, e, ok, vid, portName(i+1))
			}
		}
		if n := len(l.fdb()); n != 3 {
			t.Errorf("fdb has %d entries, want 3: %+v", n, l.fdb())
		}

		// show says each port's VLAN; stats --vlan counts per VLAN: in
		// VLAN 10, 6 frames in, 6 copies out (each to the one other
		// member), 5 floods; in VLAN 20, 5 frames in, floods that reach no
		// port: each counted once, as a no_egress drop on port-h2, not as
		// a flood too (docs/reliability.md: rx = forwarded + flooded +
		// dropped).
		st := l.show()
		if !st.Bridges[0].VLANAware {
			t.Errorf("show: the bridge is not VLAN-aware")
		}
		for i, p := range st.Bridges[0].Ports {
			if want := []uint16{10, 20, 10}[i]; p.VLAN != want || p.Trunk != "" {
				t.Errorf("show: %s has vlan %d trunk %q, want access VLAN %d", p.Interface, p.VLAN, p.Trunk, want)
			}
		}
		var vs []ctl.VLANStats
		l.cliJSON(&vs, "stats", "--vlan")
		got := map[uint16]ctl.VLANStats{}
		for _, v := range vs {
			got[v.VLAN] = v
		}
		if v := got[10]; v.Counters.Get("rx_packets") != 6 || v.Counters.Get("tx_packets") != 6 || v.Counters.Get("flooded") != 5 || !slices.Equal(v.Ports, []string{portName(1), portName(3)}) {
			t.Errorf("stats --vlan, VLAN 10: %+v, want rx 6 tx 6 flooded 5 on %s and %s", v, portName(1), portName(3))
		}
		if v := got[20]; v.Counters.Get("rx_packets") != 5 || v.Counters.Get("tx_packets") != 0 || v.Counters.Get("flooded") != 0 || len(vs) != 2 {
			t.Errorf("stats --vlan, VLAN 20: %+v (of %d VLANs), want rx 5 tx 0 flooded 0, and 2 VLANs", v, len(vs))
		}
		if d := l.stats(portName(2)).Drops; d["no_egress"] != 5 {
			t.Errorf("%s drops %v, want 5 no_egress (VLAN 20's floods with no other member)", portName(2), d)
		}
		l.stop()
	})
}

// TestVLANTrunkTagging: an access port's untagged frames leave a trunk
// tagged with its VLAN; a trunk's tagged frames leave access ports untagged
// and other trunks with their tag (PCP included) unchanged.
func TestVLANTrunkTagging(t *testing.T) {
	forModes(t, func(t *testing.T, mode string) {
		l, caps := vlanLab(t, mode, "", "vlan = 10", "trunk = [10, 20]", "vlan = 20", `trunk = [10, "20-29"]`)
		h1, h2, h3, h4 := hostMAC(1), hostMAC(2), hostMAC(3), hostMAC(4)
		vlanRun(t, l, caps, []vcase{
			{name: "a10", from: 1, frame: vframe(vlanBcast(), h1, "a10"), recv: map[int][]byte{
				2: vframe(vlanBcast(), h1, "a10", ctag(10)),
				4: vframe(vlanBcast(), h1, "a10", ctag(10)),
			}},
			{name: "a20", from: 3, frame: vframe(vlanBcast(), h3, "a20"), recv: map[int][]byte{
				2: vframe(vlanBcast(), h3, "a20", ctag(20)),
				4: vframe(vlanBcast(), h3, "a20", ctag(20)),
			}},
			{name: "t10", from: 2, frame: vframe(vlanBcast(), h2, "t10", ctagP(3, 10)), recv: map[int][]byte{
				1: vframe(vlanBcast(), h2, "t10"),
				4: vframe(vlanBcast(), h2, "t10", ctagP(3, 10)),
			}},
			{name: "t20", from: 4, frame: vframe(vlanBcast(), h4, "t20", ctagP(6, 20)), recv: map[int][]byte{
				2: vframe(vlanBcast(), h4, "t20", ctagP(6, 20)),
				3: vframe(vlanBcast(), h4, "t20"),
			}},
			// Known unicast, both ways.
			{name: "t10-to-h1", from: 2, frame: vframe(h1, h2, "t10-to-h1", ctag(10)), recv: map[int][]byte{
				1: vframe(h1, h2, "t10-to-h1"),
			}},
			{name: "a10-to-h2", from: 1, frame: vframe(h2, h1, "a10-to-h2"), recv: map[int][]byte{
				2: vframe(h2, h1, "a10-to-h2", ctag(10)),
			}},
			{name: "t20-to-h3", from: 2, frame: vframe(h3, h2, "t20-to-h3", ctagP(1, 20)), recv: map[int][]byte{
				3: vframe(h3, h2, "t20-to-h3"),
			}},
			{name: "a20-to-h4", from: 3, frame: vframe(h4, h3, "a20-to-h4"), recv: map[int][]byte{
				4: vframe(h4, h3, "a20-to-h4", ctag(20)),
			}},
			// A flood that leaves an access port before a trunk (h1 comes
			// before h2 in the bridge): the trunk's copy keeps PCP 2.
			{name: "t10-from-h4", from: 4, frame: vframe(vlanBcast(), h4, "t10-from-h4", ctagP(2, 10)), recv: map[int][]byte{
				1: vframe(vlanBcast(), h4, "t10-from-h4"),
				2: vframe(vlanBcast(), h4, "t10-from-h4", ctagP(2, 10)),
			}},
			{name: "t10-to-h4", from: 2, frame: vframe(h4, h2, "t10-to-h4", ctagP(3, 10)), recv: map[int][]byte{
				4: vframe(h4, h2, "t10-to-h4", ctagP(3, 10)),
			}},
			// VLAN 25 is on h4's trunk only: nobody else receives it.
			{name: "t25", from: 4, frame: vframe(vlanBcast(), h4, "t25", ctag(25))},
		})
		l.stop()
	})
}

// TestVLANNative: a trunk's native VLAN is untagged both ways, and accepted
// tagged too; its other VLANs stay tagged.
func TestVLANNative(t *testing.T) {
	forModes(t, func(t *testing.T, mode string) {
		l, caps := vlanLab(t, mode, "", "vlan = 10", "trunk = [10, 20]\nnative = 10", "vlan = 20")
		h1, h2, h3 := hostMAC(1), hostMAC(2), hostMAC(3)
		vlanRun(t, l, caps, []vcase{
			{name: "n-in", from: 2, frame: vframe(vlanBcast(), h2, "n-in"), recv: map[int][]byte{
				1: vframe(vlanBcast(), h2, "n-in"),
			}},
			{name: "n-out", from: 1, frame: vframe(vlanBcast(), h1, "n-out"), recv: map[int][]byte{
				2: vframe(vlanBcast(), h1, "n-out"),
			}},
			{name: "n-out-uc", from: 1, frame: vframe(h2, h1, "n-out-uc"), recv: map[int][]byte{
				2: vframe(h2, h1, "n-out-uc"),
			}},
			{name: "n-tagged-in", from: 2, frame: vframe(h1, h2, "n-tagged-in", ctagP(4, 10)), recv: map[int][]byte{
				1: vframe(h1, h2, "n-tagged-in"),
			}},
			{name: "n-prio-in", from: 2, frame: vframe(vlanBcast(), h2, "n-prio-in", ctagP(2, 0)), recv: map[int][]byte{
				1: vframe(vlanBcast(), h2, "n-prio-in"),
			}},
			{name: "v20-out", from: 3, frame: vframe(vlanBcast(), h3, "v20-out"), recv: map[int][]byte{
				2: vframe(vlanBcast(), h3, "v20-out", ctag(20)),
			}},
			{name: "v20-in", from: 2, frame: vframe(vlanBcast(), h2, "v20-in", ctag(20)), recv: map[int][]byte{
				3: vframe(vlanBcast(), h2, "v20-in"),
			}},
		})
		l.stop()
	})
}

// TestVLANDrops: a VID the trunk does not carry, a tag on an access port and
// an untagged frame on a trunk without native are dropped and counted.
func TestVLANDrops(t *testing.T) {
	forModes(t, func(t *testing.T, mode string) {
		l, caps := vlanLab(t, mode, "", "vlan = 10", "trunk = [10, 20]", "vlan = 10")
		h1, h2, h3 := hostMAC(1), hostMAC(2), hostMAC(3)
		vlanRun(t, l, caps, []vcase{
			{name: "ok", from: 1, frame: vframe(vlanBcast(), h1, "ok"), recv: map[int][]byte{
				2: vframe(vlanBcast(), h1, "ok", ctag(10)),
				3: vframe(vlanBcast(), h1, "ok"),
			}},
			{name: "vid30", from: 2, frame: vframe(vlanBcast(), h2, "vid30", ctag(30)), reason: "vlan_not_carried"},
			{name: "vid30-uc", from: 2, frame: vframe(h1, h2, "vid30-uc", ctag(30)), reason: "vlan_not_carried"},
			{name: "access-own-vid", from: 3, frame: vframe(vlanBcast(), h3, "access-own-vid", ctag(10)), reason: "vlan_tagged_on_access"},
			{name: "access-vid20", from: 3, frame: vframe(vlanBcast(), h3, "access-vid20", ctagP(7, 20)), reason: "vlan_tagged_on_access"},
			{name: "untagged-trunk", from: 2, frame: vframe(vlanBcast(), h2, "untagged-trunk"), reason: "vlan_untagged"},
			{name: "prio-trunk", from: 2, frame: vframe(h1, h2, "prio-trunk", ctagP(5, 0)), reason: "vlan_untagged"},
			{name: "ok-after", from: 2, frame: vframe(h1, h2, "ok-after", ctag(10)), recv: map[int][]byte{
				1: vframe(h1, h2, "ok-after"),
			}},
		})
		// Dropped frames teach nothing: h2's only entry is from "ok-after".
		for _, e := range l.fdb() {
			if e.MAC == h2.String() && e.VLAN != 10 {
				t.Errorf("a dropped frame was learned: %+v", e)
			}
		}
		l.stop()
	})
}

// TestVLANPriorityTagged: a priority-tagged frame (VID 0, PCP 5) on an access
// port joins its VLAN; it leaves a trunk tagged with PCP 5 kept and an
// access port untagged.
func TestVLANPriorityTagged(t *testing.T) {
	forModes(t, func(t *testing.T, mode string) {
		l, caps := vlanLab(t, mode, "", "vlan = 10", "trunk = [10, 20]", "vlan = 10", "vlan = 20")
		h1, h3 := hostMAC(1), hostMAC(3)
		vlanRun(t, l, caps, []vcase{
			{name: "prio-bcast", from: 1, frame: vframe(vlanBcast(), h1, "prio-bcast", ctagP(5, 0)), recv: map[int][]byte{
				2: vframe(vlanBcast(), h1, "prio-bcast", ctagP(5, 10)),
				3: vframe(vlanBcast(), h1, "prio-bcast"),
			}},
			// Flooded to h1 (access) before h2 (trunk).
			{name: "prio-bcast-h3", from: 3, frame: vframe(vlanBcast(), h3, "prio-bcast-h3", ctagP(5, 0)), recv: map[int][]byte{
				1: vframe(vlanBcast(), h3, "prio-bcast-h3"),
				2: vframe(vlanBcast(), h3, "prio-bcast-h3", ctagP(5, 10)),
			}},
			{name: "learn-h2", from: 2, frame: vframe(h1, hostMAC(2), "learn-h2", ctag(10)), recv: map[int][]byte{
				1: vframe(h1, hostMAC(2), "learn-h2"),
			}},
			{name: "prio-to-h2", from: 1, frame: vframe(hostMAC(2), h1, "prio-to-h2", ctagP(5, 0)), recv: map[int][]byte{
				2: vframe(hostMAC(2), h1, "prio-to-h2", ctagP(5, 10)),
			}},
			{name: "prio-uc", from: 3, frame: vframe(h1, h3, "prio-uc", ctagP(5, 0)), recv: map[int][]byte{
				1: vframe(h1, h3, "prio-uc"),
			}},
		})
		if e, ok := l.fdbEntry(h1); !ok || e.VLAN != 10 {
			t.Errorf("h1 (priority-tagged) learned as %+v (found %v), want vlan 10", e, ok)
		}
		l.stop()
	})
}

// TestVLANQinQ: an 802.1ad frame on an access port belongs to the port's
// VLAN: its bytes pass untouched to access ports, and a trunk gets them with
// a C-tag pushed outside the S-tag.
func TestVLANQinQ(t *testing.T) {
	forModes(t, func(t *testing.T, mode string) {
		l, caps := vlanLab(t, mode, "", "vlan = 10", "trunk = [10, 20]", "vlan = 10", "vlan = 20")
		h1, h2, h3 := hostMAC(1), hostMAC(2), hostMAC(3)
		s100 := stag(100)
		vlanRun(t, l, caps, []vcase{
			{name: "qinq-bcast", from: 1, frame: vframe(vlanBcast(), h1, "qinq-bcast", s100), recv: map[int][]byte{
				2: vframe(vlanBcast(), h1, "qinq-bcast", ctag(10), s100),
				3: vframe(vlanBcast(), h1, "qinq-bcast", s100),
			}},
			{name: "qinq-uc", from: 3, frame: vframe(h1, h3, "qinq-uc", stag(4000)), recv: map[int][]byte{
				1: vframe(h1, h3, "qinq-uc", stag(4000)),
			}},
			// Flooded to h1 (access) before h2 (trunk).
			{name: "qinq-bcast-h3", from: 3, frame: vframe(vlanBcast(), h3, "qinq-bcast-h3", s100), recv: map[int][]byte{
				1: vframe(vlanBcast(), h3, "qinq-bcast-h3", s100),
				2: vframe(vlanBcast(), h3, "qinq-bcast-h3", ctag(10), s100),
			}},
			// And back: the trunk's C-tag comes off, the S-tag stays.
			{name: "qinq-from-trunk", from: 2, frame: vframe(vlanBcast(), h2, "qinq-from-trunk", ctag(10), s100), recv: map[int][]byte{
				1: vframe(vlanBcast(), h2, "qinq-from-trunk", s100),
				3: vframe(vlanBcast(), h2, "qinq-from-trunk", s100),
			}},
		})
		if e, ok := l.fdbEntry(h1); !ok || e.VLAN != 10 {
			t.Errorf("h1 (802.1ad frames) learned as %+v (found %v), want vlan 10", e, ok)
		}
		l.stop()
	})
}

// TestVLANFDB: the same MAC in two VLANs is two entries; a static entry of
// VLAN 20 on a trunk takes VLAN 20's unicast to it, tagged, and only there.
func TestVLANFDB(t *testing.T) {
	forModes(t, func(t *testing.T, mode string) {
		static := net.HardwareAddr{0x02, 0x5a, 0, 0, 0, 0x20}
		l, caps := vlanLab(t, mode, fmt.Sprintf("\n[[bridge.static]]\nmac = %q\nport = \"port-h2\"\nvlan = 20\n", static),
			"vlan = 10", "trunk = [10, 20]", "vlan = 20", "vlan = 20")
		twice := net.HardwareAddr{0x02, 0x77, 0, 0, 0, 0x01}
		h1, h2, h3 := hostMAC(1), hostMAC(2), hostMAC(3)
		vlanRun(t, l, caps, []vcase{
			{name: "twice-10", from: 1, frame: vframe(vlanBcast(), twice, "twice-10"), recv: map[int][]byte{
				2: vframe(vlanBcast(), twice, "twice-10", ctag(10)),
			}},
			{name: "twice-20", from: 3, frame: vframe(vlanBcast(), twice, "twice-20"), recv: map[int][]byte{
				2: vframe(vlanBcast(), twice, "twice-20", ctag(20)),
				4: vframe(vlanBcast(), twice, "twice-20"),
			}},
			// Each copy of the address is known in its VLAN.
			{name: "to-twice-10", from: 2, frame: vframe(twice, h2, "to-twice-10", ctag(10)), recv: map[int][]byte{
				1: vframe(twice, h2, "to-twice-10"),
			}},
			{name: "to-twice-20", from: 2, frame: vframe(twice, h2, "to-twice-20", ctag(20)), recv: map[int][]byte{
				3: vframe(twice, h2, "to-twice-20"),
			}},
			{name: "to-static-20", from: 3, frame: vframe(static, h3, "to-static-20"), recv: map[int][]byte{
				2: vframe(static, h3, "to-static-20", ctag(20)),
			}},
			// The static entry is VLAN 20's: in VLAN 10 the address is
			// unknown and flooded there.
			{name: "to-static-10", from: 1, frame: vframe(static, h1, "to-static-10"), recv: map[int][]byte{
				2: vframe(static, h1, "to-static-10", ctag(10)),
			}},
		})
		var got []string
		for _, e := range l.fdb() {
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
		if _, ok := l.fdbEntry(static); !ok {
			t.Errorf("fdb show does not list the static entry")
		}
		if s := l.stats("port-h3"); s.Counters.Get("moved") != 0 {
			t.Errorf("the address in a second VLAN counted as a move: %+v", s)
		}
		l.stop()
	})
}

// TestVLANReloadKeepsStream: a reload that moves one port from VLAN 20 to 30
// loses none of a stream of frames between two other ports, and the moved
// port's frames then travel in VLAN 30.
func TestVLANReloadKeepsStream(t *testing.T) {
	forModes(t, func(t *testing.T, mode string) {
		ports := []string{"vlan = 10", "vlan = 10", "vlan = 20", "trunk = [10, 20, 30]"}
		l, caps := vlanLab(t, mode, "", ports...)
		h1, h2, h3 := hostMAC(1), hostMAC(2), hostMAC(3)
		vlanRun(t, l, caps, []vcase{
			{name: "learn-h1", from: 1, frame: vframe(h2, h1, "learn-h1"), recv: map[int][]byte{
				2: vframe(h2, h1, "learn-h1"), 4: vframe(h2, h1, "learn-h1", ctag(10)),
			}},
			{name: "learn-h2", from: 2, frame: vframe(h1, h2, "learn-h2"), recv: map[int][]byte{
				1: vframe(h1, h2, "learn-h2"),
			}},
			{name: "h3-in-20", from: 3, frame: vframe(vlanBcast(), h3, "h3-in-20"), recv: map[int][]byte{
				4: vframe(vlanBcast(), h3, "h3-in-20", ctag(20)),
			}},
		})

		if err := caps[2].SetReceiveBuffer(16 << 20); err != nil {
			t.Fatal(err)
		}
		if _, err := caps[2].SocketDrops(); err != nil { // resets the count
			t.Fatal(err)
		}
		sender := l.host(1).RawSender(t, "eth0")
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
				f := vframe(h2, h1, "stream")
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
		l.writeConfig(l.config("", func(i int) string { return fmt.Sprintf("mode = %q\n%s\n", mode, ports[i-1]) }))
		start := time.Now()
		out, err := l.cli("reload")
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
		isStream := hasVMarker("stream")
		caps[2].WaitFor(isStream, sent, 3*time.Second)
		time.Sleep(100 * time.Millisecond) // for duplicates
		got := caps[2].WaitFor(isStream, 0, 0)
		sockDrops, _ := caps[2].SocketDrops()
		t.Logf("%s: reload took %v; %d frames sent h1 -> h2 around it, %d received", mode, took.Round(time.Millisecond), sent, got)
		if log := l.daemon.Out.String(); strings.Contains(log, "port removed") || strings.Count(log, `"port up"`) != 4 {
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
			s1, s2 := l.stats(portName(1)), l.stats(portName(2))
			t.Errorf("%d of %d frames lost across the reload (capture socket drops %d, duplicates %d); missing sequence numbers %v\nport-h1 %+v\nport-h2 %+v\ndaemon:\n%s",
				sent-got, sent, sockDrops, dup, summarize(missing), s1, s2, l.daemon.Out.String())
		}
		for _, h := range []int{3, 4} {
			if n := caps[h].WaitFor(isStream, 0, 0); n != 0 {
				t.Errorf("h%d received %d frames of the h1 -> h2 stream", h, n)
			}
		}
		for _, h := range []int{1, 2} {
			if e, ok := l.fdbEntry(hostMAC(h)); !ok || e.VLAN != 10 || e.Port != portName(h) {
				t.Errorf("h%d's entry after the reload: %+v (found %v)", h, e, ok)
			}
		}
		// h3 is in VLAN 30 now.
		vlanRun(t, l, caps, []vcase{
			{name: "h3-in-30", from: 3, frame: vframe(vlanBcast(), h3, "h3-in-30"), recv: map[int][]byte{
				4: vframe(vlanBcast(), h3, "h3-in-30", ctag(30)),
			}},
			{name: "t30-to-h3", from: 4, frame: vframe(h3, hostMAC(4), "t30-to-h3", ctag(30)), recv: map[int][]byte{
				3: vframe(h3, hostMAC(4), "t30-to-h3"),
			}},
			{name: "t20-after", from: 4, frame: vframe(vlanBcast(), hostMAC(4), "t20-after", ctag(20))},
		})
		l.stop()
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

// TestVLANBadConfig: bad VLAN keys are refused by check and by run with
// file:line: field.
func TestVLANBadConfig(t *testing.T) {
	dir := t.TempDir()
	base := "[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = \"veth-a\"\nvlan = 10\n[[bridge.port]]\ninterface = \"veth-b\"\n"
	for _, c := range []struct {
		name, extra, want string
	}{
		{"native not in trunk", "trunk = [10, \"20-29\"]\nnative = 30\n", ":9: bridge[0].port[1].native: 30 is not one of the port's trunk VLANs (10,20-29)"},
		{"vlan and trunk", "vlan = 20\ntrunk = [10, 20]\n", ":9: bridge[0].port[1].trunk: conflicts with vlan at line 8"},
		{"trunk repeats", "trunk = [10, 20, 10]\n", ":8: bridge[0].port[1].trunk[2]: 10 repeats 10"},
		{"static on a trunk without native", "trunk = [10]\n[[bridge.static]]\nmac = \"02:00:00:00:00:01\"\nport = \"veth-b\"\n",
			`:9: bridge[0].static[0].vlan: port "veth-b" is a trunk with no native VLAN: set vlan`},
		{"access vlan out of range", "vlan = 4095\n", ":8: bridge[0].port[1].vlan: 4095 is out of range 1..4094"},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".toml")
		if err := os.WriteFile(file, []byte(base+c.extra), 0o644); err != nil {
			t.Fatal(err)
		}
		out, code := runCLI(t, nil, "check", file)
		if code == 0 || !strings.Contains(out, file+c.want) {
			t.Errorf("check %s: exit %d, output %q; want an error with %q", c.name, code, out, file+c.want)
		}
	}

	// The daemon refuses such a file before it touches anything.
	testutil.RequireRoot(t)
	sw := testutil.NewNS(t, "sw")
	file := filepath.Join(dir, "run.toml")
	sock := filepath.Join(dir, "trestle.sock")
	body := fmt.Sprintf("[daemon]\nsocket = %q\n", sock) + base + "trunk = [10, 20]\nnative = 30\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := sw.Exec(trestleBin, "run", "--config", file)
	if err == nil {
		t.Fatalf("trestle run accepted a bad VLAN config:\n%s", out)
	}
	if want := file + ":11: bridge[0].port[1].native: 30 is not one of the port's trunk VLANs (10,20)"; !strings.Contains(out, want) {
		t.Errorf("trestle run with a bad VLAN config: output does not contain %q:\n%s", want, out)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("a rejected config still opened the control socket")
	}
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
	l := newSwlab(t, 2)
	l.writeConfig(l.config("", func(i int) string {
		return "mode = \"xdp\"\n" + []string{"vlan = 10\n", "trunk = [10, 20]\n"}[i-1]
	}))
	l.start()
	for _, p := range l.show().Bridges[0].Ports {
		if p.State != "up" || p.Mode != "xdp" {
			t.Fatalf("port %s: %s %s (%s)", p.Interface, p.State, p.Mode, p.Reason)
		}
		if !strings.Contains(p.Peer, "tx-vlan-hw-insert off (was on)") {
			t.Errorf("port %s: peer %q: the daemon did not turn tx-vlan-hw-insert off", p.Interface, p.Peer)
		}
	}
	tagger, err := lab.TagHost(l.host(2).Path, "eth0", 10)
	if err != nil {
		t.Fatal(err)
	}
	defer tagger.Close()
	if err := l.host(2).Ping(hostIP(1), 3); err != nil {
		t.Fatalf("h2 (tagging 10 on the trunk) -> h1 (access 10): %v", err)
	}
	if err := l.host(1).Ping(hostIP(2), 3); err != nil {
		t.Fatalf("h1 -> h2: %v", err)
	}
	// The offload back on: the tags stay beside the frames, XDP sees them
	// untagged, and the trunk (no native VLAN) drops them.
	l.host(2).MustExec(t, "ethtool", "-K", "eth0", "tx-vlan-hw-insert", "on")
	before := l.stats(portName(2)).Drops["vlan_untagged"]
	if err := l.host(2).Ping(hostIP(1), 2); err == nil {
		t.Errorf("h2 -> h1 still answered with the tag offloaded: the test shows nothing")
	}
	if after := l.stats(portName(2)).Drops["vlan_untagged"]; after <= before {
		t.Errorf("with the tag offloaded, the trunk's vlan_untagged drops stayed at %d", after)
	}
	l.stop()
}
