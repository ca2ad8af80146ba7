package overlay

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/tests/harness"
)

// TestOverlaySticky: a station bound by allowed_macs cannot be taken
// across the fabric. Site 1's h1 is on a locked port with its MAC in
// allowed_macs; site 2 is trestle too, site 3 the Linux bridge with FRR
// (all in VNI 1000). Site 1's zebra advertises the station sticky, and
// both other sites hold it sticky: site 2's trestle as a static entry of
// its overlay port, site 3's kernel as zebra's static sticky entry on its
// vxlan device. Then tenants attack: site 2's h2 and site 3's h1 send
// frames with the station's MAC as source. Site 2 drops the tenant's
// (src_static, counted on its port) and none reaches any host; site 1
// drops those that come across the fabric from site 3 (src_static,
// counted on its overlay port); no site moves the MAC, and no zebra
// takes it as local. Frames to the station from both other sites still
// reach it at site 1, and not the tenants.
func TestOverlaySticky(t *testing.T) {
	// Not beside the package's parallel tests: its six sites (both
	// modes at once) and their BGP churn load the machine enough that
	// TestOverlayFRRRestart's stream loses frames. Its modes still run
	// side by side.
	harness.ForModes(t, overlaySticky)
}

func overlaySticky(t *testing.T, mode string) {
	m := stationMAC(1, 1)
	a, b, c := threeSites(t, mode, func(a *site) {
		a.portExtra = map[int]string{1: fmt.Sprintf("locked = true\nallowed_macs = [%q]\n", m)}
	})

	pingFirst(t, a.Host(1), b.ip(1))
	pingFirst(t, a.Host(1), c.ip(1))
	waitAt(t, "the station advertised", 1000, m, map[*site]string{a: "local port-h1", b: "remote " + a.vtep, c: "remote " + a.vtep})
	eventually(t, 10*time.Second, "the station sticky at every site", func() (bool, string) {
		za, zb, zc := a.evpnMAC(t, 1000, m), b.evpnMAC(t, 1000, m), c.evpnMAC(t, 1000, m)
		e, _ := b.entry("br0", m)
		k := c.kernelStation(t, m)
		ok := za.Type == "local" && za.Sticky && zb.Type == "remote" && zb.Sticky && zc.Type == "remote" && zc.Sticky &&
			e.Static && e.Port == "tvx1000" && e.VTEP == a.vtep && k.State == "static" && slices.Contains(k.Flags, "sticky")
		return ok, fmt.Sprintf("zebra: site 1 %+v, site 2 %+v, site 3 %+v; site 2's table %+v; site 3's bridge %+v", za, zb, zc, e, k)
	})
	if out, _ := b.CLI("fdb", "show"); !strings.Contains(out, "sticky "+a.vtep) {
		t.Errorf("site 2's fdb show does not say the station is sticky behind site 1:\n%s", out)
	}

	// The attacks: a burst of frames with the station's MAC as source
	// from site 2's tenant (h2) and from site 3's (h1).
	const n = 5
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	tenantDrops := b.Stats(harness.PortName(2)).Drops["src_static"]
	fabricDrops := a.Stats("tvx1000").Drops["src_static"]
	for i := range n {
		marker := fmt.Sprintf("sticky-%s-2-%d", mode, i)
		sendCount(t, b.Host(2), harness.Marked(bcast, m, marker), marker,
			recv{"site 2's h1", b.Host(1), 0}, recv{"site 1's h1 (the station)", a.Host(1), 0}, recv{"site 3's h1", c.Host(1), 0})
	}
	if got := b.Stats(harness.PortName(2)).Drops["src_static"] - tenantDrops; got != n {
		t.Errorf("site 2's tenant port: src_static drops +%d, want +%d", got, n)
	}
	for i := range n {
		// The Linux bridge floods the tenant's frame (its sticky entry
		// keeps the MAC where it is, nothing drops the frame): site 2
		// cannot tell it from the station's (both come from its overlay
		// port), site 1 drops it.
		marker := fmt.Sprintf("sticky-%s-3-%d", mode, i)
		sendCount(t, c.Host(1), harness.Marked(bcast, m, marker), marker,
			recv{"site 1's h1 (the station)", a.Host(1), 0}, recv{"site 1's h2", a.Host(2), 0})
	}
	if got := a.Stats("tvx1000").Drops["src_static"] - fabricDrops; got != n {
		t.Errorf("site 1's overlay port: src_static drops +%d, want +%d", got, n)
	}
	time.Sleep(time.Second) // for a move, a route, a sync that must not come
	for s, w := range map[*site]string{a: "local port-h1", b: "remote " + a.vtep, c: "remote " + a.vtep} {
		if got := s.at(t, 1000, m); got != w {
			t.Errorf("site %d has the station %q after the attacks, want %q", s.n, got, w)
		}
		if z := s.evpnMAC(t, 1000, m); (z.Type == "local") != (s == a) {
			t.Errorf("zebra at site %d has the station %+v after the attacks", s.n, z)
		}
	}

	// The station's traffic still reaches it, from everywhere.
	for _, s := range []*site{b, c} {
		marker := fmt.Sprintf("sticky-%s-to-station-%d", mode, s.n)
		rs := []recv{{"site 1's h1 (the station)", a.Host(1), 1}}
		if s == b {
			rs = append(rs, recv{"site 2's h2 (the tenant)", b.Host(2), 0})
		}
		sendCount(t, s.Host(1), harness.Marked(m, s.mac(1), marker), marker, rs...)
	}
	pingFirst(t, b.Host(1), a.ip(1))
	pingFirst(t, c.Host(1), a.ip(1))
}

// kernelStation is the Linux site's bridge entry of mac in VNI 1000 (not
// the vxlan device's own).
func (s *site) kernelStation(t *testing.T, mac net.HardwareAddr) kernelEntry {
	t.Helper()
	for _, e := range s.kernelFDB(t, 1000) {
		if e.MAC == mac.String() && e.Master != "" {
			return e
		}
	}
	return kernelEntry{}
}

// threeSites builds and starts a fabric of two trestle sites (VNI 1000 on
// bridge br0 with both hosts, in mode) and the Linux site, configure
// having adjusted site 1's config first, and waits for its flood lists.
func threeSites(t *testing.T, mode string, configure func(a *site)) (a, b, c *site) {
	ss := build(t, lab.SitesOpts{}, []string{mode, mode, ""}, oneVNI, oneVNI, linuxBridge)
	a, b, c = ss[0], ss[1], ss[2]
	configure(a)
	a.start(t, trestleFirst)
	c.startLinux(t)
	b.start(t, frrFirst)
	waitFlood(t, ss...)
	return a, b, c
}
