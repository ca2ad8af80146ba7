package overlay

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/tests/harness"
)

// mobilityLimit and mobilityWindow are the trestle sites' mac_move_limit
// and mac_move_window in TestOverlayMACFrozen: a window the test stays
// well within.
const (
	mobilityLimit  = 3
	mobilityWindow = "60s"
)

// TestOverlayMACFrozen: a MAC that flaps across a mixed fabric of three
// sites (site 1 trestle with its host ports at tc, site 2 trestle at XDP,
// site 3 the Linux bridge with vxlan1000 and FRR; one VNI, trestle's
// bridges with mac_move_limit 3 within 60s) is frozen where it was at
// each trestle site, and the fabric stays with the station
// (docs/overlay.md, "MAC mobility across the fabric"); with FRR's
// duplicate-address detection at its defaults (on, no freeze), and
// configured as docs/overlay.md says (max-moves two past the limit, and a
// freeze).
//
// A station M speaks first on site 1's h2; a tenant on site 2's h2 takes
// its address (frames with source M), and the two take turns: four moves
// at each trestle site (at site 1 onto the fabric as zebra says M is site
// 2's, and back to port-h2 as site 1's h2 speaks; at site 2 the other way
// round), each followed by every site. The fourth is past the limit: site
// 1 freezes M on port-h2, site 2 on its overlay port (it was a remote
// station there), each where it was before the moves; fdb show marks it
// frozen, the event mac_frozen says where and after how many moves. Then:
//
//   - the tenant's next frame with source M is dropped as it enters site
//     2 (port-h2 counts src_static) and reaches no host anywhere, as one
//     from site 1's h1 is dropped at site 1's port-h1;
//   - every site has M at site 1, and traffic to M from each site (the
//     Linux one too) reaches site 1's h2 alone;
//   - no zebra holds M as a duplicate: trestle froze it first;
//   - `trestle fdb del` at both sites releases it (and, where FRR's own
//     count froze the tenant's next move, `clear evpn dup-addr`): the
//     tenant's next frame takes M, and every site follows.
func TestOverlayMACFrozen(t *testing.T) {
	t.Parallel()
	for _, frrFreeze := range []bool{false, true} {
		t.Run(map[bool]string{false: "frr-defaults", true: "frr-freeze"}[frrFreeze], func(t *testing.T) {
			t.Parallel()
			overlayMACFrozen(t, frrFreeze)
		})
	}
}

// dupAddrFreeze gives site s's FRR the duplicate-address detection
// docs/overlay.md asks for: the bridge's window, max-moves two past its
// limit (zebra's count must not freeze the move trestle freezes on), and
// a freeze.
func (s *site) dupAddrFreeze(t *testing.T) {
	t.Helper()
	out, err := s.fr.NS.Run(t.Context(), "vtysh", "--vty_socket", s.fr.FRR, "-c", "configure terminal", "-c", fmt.Sprintf("router bgp %d", s.fr.ASN),
		"-c", "address-family l2vpn evpn", "-c", fmt.Sprintf("dup-addr-detection max-moves %d time 60", mobilityLimit+2), "-c", "dup-addr-detection freeze 60")
	if err != nil {
		t.Fatalf("site %d: dup-addr-detection: %v\n%s", s.n, err, out)
	}
}

func overlayMACFrozen(t *testing.T, frrFreeze bool) {
	ss := build(t, lab.SitesOpts{}, []string{"tc", "xdp", ""}, oneVNI, oneVNI, linuxBridge)
	a, b, c := ss[0], ss[1], ss[2]
	for _, s := range []*site{a, b} {
		s.WriteConfig(strings.Replace(s.config(""), "name = \"br0\"\n",
			fmt.Sprintf("name = \"br0\"\nmac_move_limit = %d\nmac_move_window = %q\n", mobilityLimit, mobilityWindow), 1))
		s.Start()
		s.startFRR(t)
	}
	c.startLinux(t)
	waitFlood(t, ss...)
	if frrFreeze {
		for _, s := range ss {
			s.dupAddrFreeze(t)
		}
	}

	m := net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x01}
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	seq := 0
	// speak sends a broadcast with source M from host i of site s.
	speak := func(s *site, i int) {
		t.Helper()
		seq++
		if err := s.Host(i).RawSend("eth0", harness.Marked(bcast, m, fmt.Sprintf("mobility-%d", seq))); err != nil {
			t.Fatal(err)
		}
	}
	atSite1 := map[*site]string{a: "local port-h2", b: "remote " + a.vtep, c: "remote " + a.vtep}
	atSite2 := map[*site]string{a: "remote " + b.vtep, b: "local port-h2", c: "remote " + b.vtep}

	// The station, then the tenant and the station by turns: every site
	// follows each move, and the fourth at site 1 freezes M there.
	speak(a, 2)
	waitAt(t, "M at site 1", 1000, m, atSite1)
	for i := 1; i <= mobilityLimit+1; i++ {
		if i%2 == 1 {
			speak(b, 2)
			if i <= mobilityLimit {
				waitAt(t, fmt.Sprintf("move %d: the tenant at site 2 has M", i), 1000, m, atSite2)
			}
		} else {
			speak(a, 2)
			if i <= mobilityLimit {
				waitAt(t, fmt.Sprintf("move %d: M back at site 1", i), 1000, m, atSite1)
			}
		}
	}
	// Each site freezes M where it was before the moves: site 1 on
	// port-h2, site 2 on its overlay port (it was a remote station there).
	for _, w := range []struct {
		s    *site
		port string
		vtep string
	}{{a, "port-h2", ""}, {b, "tvx1000", a.vtep}} {
		s := w.s
		eventually(t, 10*time.Second, fmt.Sprintf("site %d freezes M on %s", s.n, w.port), func() (bool, string) {
			e, ok := s.entry("br0", m)
			return ok && e.Frozen && e.Static && e.Port == w.port && e.VTEP == w.vtep, fmt.Sprintf("%+v (%v)", e, ok)
		})
		if out, err := s.CLI("fdb", "show", "br0"); err != nil || !strings.Contains(out, "frozen") {
			t.Errorf("site %d's fdb show does not mark M frozen (%v):\n%s", s.n, err, out)
		}
		var evs []ctl.Event
		s.CLIJSON(&evs, "events")
		var ev *ctl.Event
		for i := range evs {
			if evs[i].Event == ctl.EventMACFrozen && evs[i].MAC == m.String() {
				ev = &evs[i]
			}
		}
		if ev == nil || ev.Port != w.port || ev.Bridge != "br0" || ev.Count != mobilityLimit+1 || ev.Limit != mobilityLimit {
			t.Errorf("site %d's mac_frozen event %+v, want M on %s of br0 after %d moves, limit %d; events:\n%+v", s.n, ev, w.port, mobilityLimit+1, mobilityLimit, evs)
		}
	}

	// The tenant's next frame with source M is dropped as it enters site
	// 2 and reaches no host anywhere; one from site 1's h1 is dropped as
	// it enters site 1.
	for _, tc := range []struct {
		name string
		from *site
		host int
	}{{"the tenant at site 2", b, 2}, {"site 1's h1", a, 1}} {
		port := fmt.Sprintf("port-h%d", tc.host)
		before := tc.from.Stats(port).Drops["src_static"]
		seq++
		marker := fmt.Sprintf("mobility-%d", seq)
		var rs []recv
		for _, s := range ss {
			for i := 1; i <= 2; i++ {
				if s != tc.from || i != tc.host {
					rs = append(rs, recv{fmt.Sprintf("site %d's h%d", s.n, i), s.Host(i), 0})
				}
			}
		}
		sendCount(t, tc.from.Host(tc.host), harness.Marked(bcast, m, marker), marker, rs...)
		if d := tc.from.Stats(port).Drops["src_static"] - before; d != 1 {
			t.Errorf("%s's frame with source M: site %d's %s counted %d src_static drops, want 1", tc.name, tc.from.n, port, d)
		}
	}

	// Every site has M where site 1 holds it, and traffic to it from each
	// (the Linux one too) reaches site 1's h2 alone.
	waitAt(t, "M behind site 1 at every site after the tenant's frame", 1000, m, atSite1)
	for _, s := range ss {
		seq++
		marker := fmt.Sprintf("mobility-%d", seq)
		sendCount(t, s.Host(1), harness.Marked(m, s.mac(1), marker), marker,
			recv{"site 1's h2 (M frozen there)", a.Host(2), 1},
			recv{"site 2's h2 (the tenant)", b.Host(2), 0})
	}
	for _, s := range ss {
		if out := s.vtysh(t, "show evpn mac vni 1000 duplicate"); strings.Contains(out, m.String()) {
			t.Errorf("site %d: zebra holds M as a duplicate address: trestle froze it first, FRR's detection should not have been reached:\n%s", s.n, out)
		}
	}

	// fdb del releases it at both sites: the tenant's next frame takes it,
	// and every site follows.
	for _, s := range []*site{a, b} {
		if out, err := s.CLI("fdb", "del", "br0", m.String()); err != nil {
			t.Fatalf("site %d: fdb del: %v\n%s", s.n, err, out)
		}
		eventually(t, 5*time.Second, fmt.Sprintf("site %d releases M", s.n), func() (bool, string) {
			e, ok := s.entry("br0", m)
			return !ok || !e.Frozen && !e.Static, fmt.Sprintf("%+v", e)
		})
	}
	speak(b, 2)
	if frrFreeze {
		// FRR counts on in its own window: the tenant's move may be
		// zebra's max-moves-th at site 2, frozen there unadvertised until
		// cleared, as trestle's was until fdb del.
		dup := false
		eventually(t, 10*time.Second, "the tenant's move advertised, or frozen by site 2's zebra", func() (bool, string) {
			out := b.vtysh(t, "show evpn mac vni 1000 duplicate")
			dup = strings.Contains(out, m.String())
			return dup || a.at(t, 1000, m) == atSite2[a], out
		})
		if dup {
			t.Logf("site 2's zebra froze the tenant's move after trestle's release: cleared")
			b.vtysh(t, "clear evpn dup-addr vni 1000 mac "+m.String())
			speak(b, 2)
		}
	}
	waitAt(t, "the tenant takes M once both sites released it", 1000, m, atSite2)
}
