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
// bridges with mac_move_limit 3 within 60s) is frozen where it began, and
// the fabric follows the freeze (docs/overlay.md, "MAC mobility across the
// fabric").
//
// A station M speaks first on site 1's h2; a tenant on site 2's h2 takes
// its address (frames with source M), and the two take turns: four moves
// at site 1 (onto the fabric as zebra says M is site 2's, back to port-h2
// as site 1's h2 speaks), each followed by every site. The fourth is past
// the limit: site 1 freezes M on port-h2, where it was before the moves
// (fdb show marks it frozen, the event mac_frozen says where and after how
// many moves). Site 2 saw as many moves, but M began there as a remote
// address: it is no port's of site 2 to hold, and its daemon says so.
// Then:
//
//   - the tenant's next frame with source M is dropped where it enters
//     site 1 (its overlay port counts src_static), as is one from site 1's
//     h1; site 1's other hosts never see them;
//   - site 1 advertises its frozen entry again whenever zebra takes the
//     tenant's route for newer, so every site ends with M behind site 1,
//     and traffic to M from each site (the Linux one too) reaches site 1's
//     h2 alone;
//   - `trestle fdb del` releases it: the tenant's next frame takes M, and
//     every site follows.
func TestOverlayMACFrozen(t *testing.T) {
	t.Parallel()
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
	eventually(t, 10*time.Second, "site 1 freezes M on port-h2", func() (bool, string) {
		e, ok := a.entry("br0", m)
		return ok && e.Frozen && e.Static && e.Port == "port-h2" && e.VTEP == "", fmt.Sprintf("%+v (%v)", e, ok)
	})
	if out, err := a.CLI("fdb", "show", "br0"); err != nil || !strings.Contains(out, "frozen") {
		t.Errorf("site 1's fdb show does not mark M frozen (%v):\n%s", err, out)
	}
	var evs []ctl.Event
	a.CLIJSON(&evs, "events")
	var ev *ctl.Event
	for i := range evs {
		if evs[i].Event == ctl.EventMACFrozen && evs[i].MAC == m.String() {
			ev = &evs[i]
		}
	}
	if ev == nil || ev.Port != "port-h2" || ev.Bridge != "br0" || ev.Count != mobilityLimit+1 || ev.Limit != mobilityLimit {
		t.Errorf("site 1's mac_frozen event %+v, want M on port-h2 of br0 after %d moves, limit %d; events:\n%+v", ev, mobilityLimit+1, mobilityLimit, evs)
	}
	// Site 2 counted the moves too, from the fabric: nothing of its own to
	// hold.
	eventually(t, 5*time.Second, "site 2's daemon says M moved past the limit from no port it can hold", func() (bool, string) {
		out := b.Daemon.Out.String()
		return strings.Contains(out, "not frozen") && strings.Contains(out, m.String()), "its log has no such line"
	})
	if e, ok := b.entry("br0", m); ok && e.Frozen {
		t.Errorf("site 2 froze M: %+v", e)
	}

	// The tenant's frame, and one from site 1's h1: dropped where they
	// enter site 1, counted, seen by none of its hosts.
	for _, tc := range []struct {
		name       string
		from       *site
		host       int
		port       string // where it enters site 1
		site1Hosts []int  // site 1's hosts that must not see it
	}{
		{"the tenant at site 2", b, 2, "tvx1000", []int{1, 2}},
		{"site 1's h1", a, 1, "port-h1", []int{2}},
	} {
		before := a.Stats(tc.port).Drops["src_static"]
		seq++
		marker := fmt.Sprintf("mobility-%d", seq)
		rs := []recv{}
		for _, i := range tc.site1Hosts {
			rs = append(rs, recv{fmt.Sprintf("site 1's h%d", i), a.Host(i), 0})
		}
		sendCount(t, tc.from.Host(tc.host), harness.Marked(bcast, m, marker), marker, rs...)
		eventually(t, 5*time.Second, fmt.Sprintf("%s's frame with source M dropped on site 1's %s as src_static", tc.name, tc.port), func() (bool, string) {
			d := a.Stats(tc.port).Drops["src_static"] - before
			return d >= 1, fmt.Sprintf("+%d", d)
		})
		if e, _ := a.entry("br0", m); !e.Frozen || e.Port != "port-h2" {
			t.Errorf("site 1 after %s's frame: %+v, want M still frozen on port-h2", tc.name, e)
		}
	}

	// The fabric ends at the frozen place: site 1 advertised its static
	// entry again over the tenant's newer route.
	waitAt(t, "M behind site 1 at every site after the tenant's frame", 1000, m, atSite1)
	for _, s := range ss {
		seq++
		marker := fmt.Sprintf("mobility-%d", seq)
		sendCount(t, s.Host(1), harness.Marked(m, s.mac(1), marker), marker,
			recv{"site 1's h2 (M frozen there)", a.Host(2), 1},
			recv{"site 2's h2 (the tenant)", b.Host(2), 0})
	}
	t.Logf("zebra at site 1: %s", a.vtysh(t, "show evpn mac vni 1000 mac "+m.String()))
	t.Logf("zebra at site 2: %s", b.vtysh(t, "show evpn mac vni 1000 mac "+m.String()))

	// fdb del releases it: the tenant's next frame takes it, and every
	// site follows.
	if out, err := a.CLI("fdb", "del", "br0", m.String()); err != nil {
		t.Fatalf("site 1: fdb del: %v\n%s", err, out)
	}
	eventually(t, 5*time.Second, "site 1 releases M", func() (bool, string) {
		e, ok := a.entry("br0", m)
		return !ok || !e.Frozen && !e.Static, fmt.Sprintf("%+v", e)
	})
	speak(b, 2)
	waitAt(t, "the tenant takes M once site 1 released it", 1000, m, atSite2)
}
