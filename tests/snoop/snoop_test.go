// Package snoop tests multicast snooping end to end: hosts join and leave
// groups with the kernel's own IGMPv2, IGMPv3 and MLDv2 reports and
// leaves (`ip addr add GROUP dev eth0 autojoin`), and a group's frames
// reach its members and the router ports only; groups without members
// and link-local groups reach every host, a query makes its port a router
// port, and neighbour discovery keeps working.
package snoop

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// member says whether mdb show lists port in group.
func member(ms []ctl.MDBEntry, group, port string) bool {
	for _, m := range ms {
		if m.Group == group && m.Port == port && !m.Router {
			return true
		}
	}
	return false
}

func router(ms []ctl.MDBEntry, port string) bool {
	for _, m := range ms {
		if m.Router && m.Port == port {
			return true
		}
	}
	return false
}

// waitMDB polls mdb show br0 until ok says yes, or fails after 5 s.
func waitMDB(t *testing.T, l *harness.Lab, what string, ok func([]ctl.MDBEntry) bool) {
	t.Helper()
	waitMDBOf(t, l, "br0", what, ok)
}

// waitMDBOf polls mdb show of bridge until ok says yes, or fails after 5 s.
func waitMDBOf(t *testing.T, l *harness.Lab, bridge, what string, ok func([]ctl.MDBEntry) bool) {
	t.Helper()
	var ms []ctl.MDBEntry
	for end := time.Now().Add(5 * time.Second); ; {
		ms = nil
		l.CLIJSON(&ms, "mdb", "show", bridge)
		if ok(ms) {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s: mdb show %+v", what, ms)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// send sends a UDP datagram from host i to group with the marker in it.
func send(t *testing.T, l *harness.Lab, i int, src, group, marker string) {
	t.Helper()
	f := frame.UDPTo(harness.HostMAC(i), netip.MustParseAddr(src), netip.MustParseAddr(group), []byte(marker))
	if err := l.Host(i).RawSend("eth0", f); err != nil {
		t.Fatal(err)
	}
}

func marked(marker string) func([]byte) bool {
	return func(f []byte) bool { return bytes.Contains(f, []byte(marker)) }
}

// delivered checks which hosts' captures got the marker: those of want
// (waited for), and none of the others (after the wait).
func delivered(t *testing.T, caps map[int]*testutil.Capturer, marker string, want ...int) {
	t.Helper()
	in := map[int]bool{}
	for _, i := range want {
		in[i] = true
		if caps[i].WaitFor(marked(marker), 1, 3*time.Second) < 1 {
			t.Errorf("%s: h%d did not get it", marker, i)
		}
	}
	time.Sleep(300 * time.Millisecond)
	for i, c := range caps {
		if in[i] {
			continue
		}
		for _, f := range c.Frames() {
			if marked(marker)(f) {
				t.Errorf("%s: h%d got it, want only %v", marker, i, want)
				break
			}
		}
	}
}

func join(t *testing.T, h *testutil.NS, group string, add bool) {
	t.Helper()
	op, fam, plen := "add", "-4", "/32"
	if !add {
		op = "del"
	}
	if netip.MustParseAddr(group).Is6() {
		fam, plen = "-6", "/128"
	}
	args := []string{fam, "addr", op, group + plen, "dev", "eth0"}
	if add {
		args = append(args, "autojoin")
	}
	if _, err := h.Exec("ip", args...); err != nil {
		t.Fatal(err)
	}
}

// TestSnoopIGMP, both modes: h2 reports 239.1.1.1 with IGMPv2 (its port
// has fast_leave), h3 239.1.1.2 with IGMPv3; h1 sends to both, to a
// group nobody joined and to a link-local one. Then h4 sends a query: its
// port is a router port and takes every group's frames. h2's leave ends
// its membership at once; h3's, with a querier seen, within 2 s.
func TestSnoopIGMP(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 4)
		l.WriteConfig(l.Config("multicast_snooping = true\n", func(i int) string {
			s := fmt.Sprintf("mode = %q\n", mode)
			if i == 2 {
				s += "fast_leave = true\n"
			}
			return s
		}))
		l.Start()
		if err := l.Host(2).Sysctl("net/ipv4/conf/eth0/force_igmp_version", "2"); err != nil {
			t.Fatal(err)
		}
		join(t, l.Host(2), "239.1.1.1", true)
		join(t, l.Host(3), "239.1.1.2", true)
		waitMDB(t, l, "IGMPv2 and IGMPv3 reports", func(ms []ctl.MDBEntry) bool {
			return member(ms, "239.1.1.1", harness.PortName(2)) && member(ms, "239.1.1.2", harness.PortName(3)) && len(ms) == 2
		})
		if out, err := l.CLI("mdb", "show"); err != nil || !bytes.Contains([]byte(out), []byte("239.1.1.2")) {
			t.Errorf("mdb show (%v):\n%s", err, out)
		}

		caps := map[int]*testutil.Capturer{}
		for i := 2; i <= 4; i++ {
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		src := harness.HostIP(1)
		send(t, l, 1, src, "239.1.1.1", "to-g1")
		send(t, l, 1, src, "239.1.1.2", "to-g2")
		send(t, l, 1, src, "239.9.9.9", "to-nobody")
		send(t, l, 1, src, "224.0.0.251", "to-mdns")
		delivered(t, caps, "to-g1", 2)
		delivered(t, caps, "to-g2", 3)
		delivered(t, caps, "to-nobody", 2, 3, 4)
		delivered(t, caps, "to-mdns", 2, 3, 4)
		if g := l.Stats(harness.PortName(1)).Counters.Get("grouped"); g < 2 {
			t.Errorf("port-h1 grouped %d, want at least 2", g)
		}

		// A querier on h4 (IGMPv3, so that h3 stays with version 3): its
		// port learned as a router port.
		q := frame.IGMPv3Query(harness.HostMAC(4), netip.MustParseAddr(harness.HostIP(4)))
		if err := l.Host(4).RawSend("eth0", q); err != nil {
			t.Fatal(err)
		}
		waitMDB(t, l, "a query", func(ms []ctl.MDBEntry) bool { return router(ms, harness.PortName(4)) })
		send(t, l, 1, src, "239.1.1.1", "to-g1-router")
		delivered(t, caps, "to-g1-router", 2, 4)

		// Fast leave: at once; the group, without members, floods again.
		join(t, l.Host(2), "239.1.1.1", false)
		waitMDB(t, l, "h2's leave", func(ms []ctl.MDBEntry) bool { return !member(ms, "239.1.1.1", harness.PortName(2)) })
		send(t, l, 1, src, "239.1.1.1", "to-g1-left")
		delivered(t, caps, "to-g1-left", 2, 3, 4)
		// A leave without fast_leave, a querier seen: within 2 s.
		join(t, l.Host(3), "239.1.1.2", false)
		waitMDB(t, l, "h3's leave", func(ms []ctl.MDBEntry) bool { return !member(ms, "239.1.1.2", harness.PortName(3)) })
	})
}

// enableIPv6 gives host i the IPv6 the lab turned off, with fd00::i.
func enableIPv6(t *testing.T, l *harness.Lab, i int) {
	t.Helper()
	h := l.Host(i)
	if err := h.IPv6On("eth0"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Exec("ip", "-6", "addr", "add", fmt.Sprintf("fd00::%d/64", i), "dev", "eth0", "nodad"); err != nil {
		t.Fatal(err)
	}
}

// TestSnoopMLD, both modes: h3 reports ff3e::1:2 with MLDv2; h1's
// datagrams to it reach h3 only, and to ff02::1 every host. ping6 works
// while snooping, before and after h2's MLD query makes its port a router
// port (neighbour discovery's groups are link-local: flooded whatever
// hosts report).
func TestSnoopMLD(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 3)
		l.WriteConfig(l.Config("multicast_snooping = true\n", func(i int) string { return fmt.Sprintf("mode = %q\n", mode) }))
		for i := 1; i <= 3; i++ {
			enableIPv6(t, l, i)
		}
		l.Start()
		if err := l.Host(1).Ping("fd00::2", 2); err != nil {
			t.Errorf("ping6 h1 -> h2 with snooping on: %v", err)
		}
		join(t, l.Host(3), "ff3e::1:2", true)
		waitMDB(t, l, "an MLDv2 report", func(ms []ctl.MDBEntry) bool { return member(ms, "ff3e::1:2", harness.PortName(3)) })

		caps := map[int]*testutil.Capturer{}
		for i := 2; i <= 3; i++ {
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		send(t, l, 1, "fd00::1", "ff3e::1:2", "to-g6")
		send(t, l, 1, "fd00::1", "ff02::1", "to-all-nodes")
		delivered(t, caps, "to-g6", 3)
		delivered(t, caps, "to-all-nodes", 2, 3)

		q := frame.MLDv1(130, harness.HostMAC(2), netip.MustParseAddr("fe80::2"), netip.Addr{})
		if err := l.Host(2).RawSend("eth0", q); err != nil {
			t.Fatal(err)
		}
		waitMDB(t, l, "an MLD query", func(ms []ctl.MDBEntry) bool { return router(ms, harness.PortName(2)) })
		send(t, l, 1, "fd00::1", "ff3e::1:2", "to-g6-router")
		delivered(t, caps, "to-g6-router", 2, 3)
		if err := l.Host(1).Ping("fd00::3", 2); err != nil {
			t.Errorf("ping6 h1 -> h3 with a querier seen: %v", err)
		}
	})
}
