package overlay

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// sviAddr is the Linux site's address on its bridge of VNI 1000 (the SVI
// of a bridge that is not VLAN-aware is the bridge itself), in the
// stations' subnet, off the stations' numbering.
const sviAddr = "10.78.0.254"

// suppressLinux turns ARP suppression on at the Linux site in VNI 1000:
// neigh_suppress on the vxlan device's bridge port (the bridge answers a
// request for a station behind that port from its neighbour table, where
// zebra installs the MAC+IP routes of other VTEPs), and gives the bridge
// an address in the stations' subnet, from which it learns its station's
// neighbour entry: the local neighbour zebra advertises as a MAC+IP route.
func (s *site) suppressLinux(t *testing.T) {
	t.Helper()
	br, _ := s.segment(1000)
	s.SW.MustExec(t, "bridge", "link", "set", "dev", s.linuxVNI(1000).VXLAN, "neigh_suppress", "on")
	s.SW.MustExec(t, "ip", "addr", "add", sviAddr+"/24", "dev", br)
	pingFirst(t, s.SW, s.ip(1))
}

// TestOverlayMixedNeighSuppress: ARP suppression across a mixed fabric, a
// trestle site (site 1: one bridge with neigh_suppress, h1 bound to its
// address) and a Linux site (site 2: the Linux bridge with vxlan1000 and
// FRR, neigh_suppress on the vxlan port, an address on the bridge). Each
// site's station becomes a MAC+IP route that the other installs: site 2's
// bridge has site 1's h1 as zebra's extern_learn neighbour, and trestle's
// neighbour table has site 2's h1 as a remote entry behind site 2's VTEP.
// Each switch then answers an ARP request for the other's station on the
// asker's port: trestle's port counts it as suppressed, and no request
// reaches the other site's hosts.
func TestOverlayMixedNeighSuppress(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, overlayMixedNeigh)
}

// overlayMixedNeigh is TestOverlayMixedNeighSuppress with trestle's host
// ports in mode.
func overlayMixedNeigh(t *testing.T, mode string) {
	ss := build(t, lab.SitesOpts{}, []string{mode, ""}, oneVNI, linuxBridge)
	a, c := ss[0], ss[1]
	a.WriteConfig(a.neighConfig())
	a.Start()
	a.startFRR(t)
	c.startLinux(t)
	waitFlood(t, ss...)
	c.suppressLinux(t)

	// Site 1's h1 at the Linux site: zebra's remote neighbour of br0.
	eventually(t, 30*time.Second, fmt.Sprintf("site 2's br0 has %s at %s from zebra", a.ip(1), a.mac(1)), func() (bool, string) {
		out, err := c.SW.Exec("ip", "neigh", "show", a.ip(1), "dev", "br0")
		return err == nil && strings.Contains(out, a.mac(1).String()) && strings.Contains(out, "extern_learn"), fmt.Sprintf("%q (%v); zebra: %s", out, err, c.vtysh(t, "show evpn arp-cache vni all"))
	})
	// Site 2's h1 at trestle's: a remote entry behind the Linux VTEP.
	a.waitRemoteNeigh(t, c.ip(1), c.mac(1), c.vtep)

	// trestle answers for the Linux site's station: site 1's h2 asks.
	before := a.Stats("port-h2").Counters.Get("suppressed")
	askLocally(t, a.Host(2), "site 1's h2", c.ip(1), c.mac(1), map[string]*testutil.Capturer{"site 2's h1": c.Host(1).Capture(t, "eth0"), "site 2's underlay": c.SW.Capture(t, "ul0")})
	if sup := a.Stats("port-h2").Counters.Get("suppressed") - before; sup < 1 {
		t.Errorf("site 1's port-h2 suppressed %d, want the ARP request at least", sup)
	}
	// The Linux bridge answers for trestle's station: site 2's h1 asks.
	// (trestle's switch would answer a request that crossed as well: the
	// underlay shows that none did.)
	askLocally(t, c.Host(1), "site 2's h1", a.ip(1), a.mac(1), map[string]*testutil.Capturer{"site 1's h1": a.Host(1).Capture(t, "eth0"), "site 1's h2": a.Host(2).Capture(t, "eth0"), "site 1's underlay": a.SW.Capture(t, "ul0")})
}
