package overlay

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/linklocal"
	"github.com/trestle/trestle/internal/testutil"
)

// Host i of site n has, beside its IPv4 address, the IPv6 address
// fd78::n:i, in one /64 across the fabric.
func stationIP6(n, i int) string { return fmt.Sprintf("fd78::%d:%d", n, i) }

func (s *site) ip6(i int) string { return stationIP6(s.n, i) }

// sviAddr and sviAddr6 are the Linux site's addresses on its bridge of
// VNI 1000 (the SVI of a bridge that is not VLAN-aware is the bridge
// itself), in the stations' subnets, off the stations' numbering.
const (
	sviAddr  = "10.78.0.254"
	sviAddr6 = "fd78::254"
)

// neighConfig is a site's config of one VNI (1000) on br0 with
// neigh_suppress: h1 bound to its addresses (ip_guard, allowed_ips with
// its allowed_macs: the neighbour table's static entries; its IPv4, its
// IPv6 and its link-local address), h2 not.
func (s *site) neighConfig() string {
	return fmt.Sprintf(`[daemon]
socket = %q
vtep = %q
frr_vty_dir = %q

[[bridge]]
name = "br0"
neigh_suppress = true

[[bridge.port]]
interface = "port-h1"
mode = %q
locked = true
allowed_macs = [%q]
ip_guard = true
allowed_ips = [%q, %q, %q]

[[bridge.port]]
interface = "port-h2"
mode = %q

[[bridge.port]]
vxlan = 1000
`, s.Sock, s.vtep, s.fr.FRR, s.hostMode, s.mac(1), s.ip(1), s.ip6(1), linklocal.EUI64(s.mac(1)), s.hostMode)
}

// enableIPv6 gives site s's host i the IPv6 the lab turned off, with
// its address ip6(i) (no duplicate address detection: the test sends the
// solicitations it wants to see).
func (s *site) enableIPv6(t *testing.T, i int) {
	t.Helper()
	h := s.Host(i)
	if err := h.IPv6On("eth0"); err != nil {
		t.Fatal(err)
	}
	h.MustExec(t, "ip", "-6", "addr", "add", s.ip6(i)+"/64", "dev", "eth0", "nodad")
}

// linuxIPv6 turns IPv6 on for the Linux site's bridge of VNI 1000, before
// its FRR starts: zebra installs the other VTEPs' IPv6 neighbours there,
// and does not try again one the kernel refused.
func (s *site) linuxIPv6(t *testing.T) func() {
	return func() {
		br, _ := s.segment(1000)
		if err := s.SW.Sysctl("net/ipv6/conf/"+br+"/disable_ipv6", "0"); err != nil {
			t.Fatal(err)
		}
	}
}

// suppressLinux turns ARP and ND suppression on at the Linux site in VNI
// 1000: neigh_suppress on the vxlan device's bridge port (the bridge
// answers a request for a station behind that port from its neighbour
// tables, where zebra installs the MAC+IP routes of other VTEPs), and
// gives the bridge addresses in the stations' subnets, from which it
// learns its station's neighbour entries: the local neighbours zebra
// advertises as MAC+IP routes.
func (s *site) suppressLinux(t *testing.T) {
	t.Helper()
	br, _ := s.segment(1000)
	s.SW.MustExec(t, "bridge", "link", "set", "dev", s.linuxVNI(1000).VXLAN, "neigh_suppress", "on")
	s.SW.MustExec(t, "ip", "addr", "add", sviAddr+"/24", "dev", br)
	s.SW.MustExec(t, "ip", "-6", "addr", "add", sviAddr6+"/64", "dev", br, "nodad")
	pingFirst(t, s.SW, s.ip(1))
	pingFirst(t, s.SW, s.ip6(1))
}

// isARPRequestFor says whether f is a broadcast ARP request for ip.
func isARPRequestFor(ip string) func([]byte) bool {
	want := net.ParseIP(ip)
	return func(f []byte) bool {
		p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
		return ok && a.Operation == layers.ARPRequest && net.IP(a.DstProtAddress).Equal(want)
	}
}

// isNSFor says whether f is a neighbour solicitation for ip (inside
// VXLAN too: gopacket decodes the underlay's frames to the inner one).
func isNSFor(ip string) func([]byte) bool {
	want := net.ParseIP(ip)
	return func(f []byte) bool {
		p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		ns, ok := p.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
		return ok && ns.TargetAddress.Equal(want)
	}
}

// TestOverlayNeighSuppress: ARP and ND suppression across a mixed fabric
// of three sites, MAC+IP routes both ways in both families. Sites 1 and
// 2 run trestle (one bridge with neigh_suppress, h1 bound to its
// addresses; site 1's host ports at tc, site 2's in XDP), site 3 the Linux
// bridge with vxlan1000 and FRR (neigh_suppress on the vxlan port,
// addresses on the bridge, IPv6 on before its FRR starts). Each site's h1 becomes MAC+IP routes (IPv4
// and IPv6) that the others install: trestle's neighbour tables hold the
// other sites' stations as remote entries behind their VTEPs (`neigh
// show`), the Linux bridge as zebra's extern_learn neighbours. Then:
//
//   - an ARP request or a neighbour solicitation for another site's
//     station is answered on the asker's site, and no request leaves it
//     (its underlay device sees none): trestle's port counts it as
//     suppressed, and the Linux bridge answers for trestle's stations;
//   - each trestle site's h2, bound to no address, is learned from its
//     own requests, crosses as a MAC+IP route, and is answered for at
//     the other trestle site;
//   - a request for an unknown address, a gratuitous ARP, an ARP probe
//     and a duplicate address detection's solicitation (the last two for
//     known addresses) are never answered, and reach the other sites.
func TestOverlayNeighSuppress(t *testing.T) {
	t.Parallel()
	ss := build(t, lab.SitesOpts{}, []string{"tc", "xdp", ""}, oneVNI, oneVNI, linuxBridge)
	a, b, c := ss[0], ss[1], ss[2]
	for _, s := range ss {
		s.enableIPv6(t, 1)
	}
	a.enableIPv6(t, 2)
	b.enableIPv6(t, 2)
	for _, s := range []*site{a, b} {
		s.WriteConfig(s.neighConfig())
		s.Start()
		s.startFRR(t)
	}
	c.startLinux(t, c.linuxIPv6(t))
	waitFlood(t, ss...)
	c.suppressLinux(t)

	// The routes: each trestle site has the two others' h1 as remote
	// entries, both families; the Linux site has both trestle sites' h1
	// from zebra.
	for _, s := range []*site{a, b} {
		for _, o := range others(ss, s) {
			s.waitRemoteNeigh(t, o.ip(1), o.mac(1), o.vtep)
			s.waitRemoteNeigh(t, o.ip6(1), o.mac(1), o.vtep)
		}
		if out, err := s.CLI("neigh", "show"); err != nil || !strings.Contains(out, "remote "+others(ss, s)[0].vtep) {
			t.Errorf("site %d: neigh show (%v):\n%s", s.n, err, out)
		}
		// The VNI's bridge holds IPv6 neighbours with no address of its
		// own: nothing of the host's IPv6 enters the overlay.
		if out, err := s.SW.Exec("ip", "-6", "addr", "show", "dev", "tbr1000"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("site %d: tbr1000 has IPv6 addresses (%v): %q, want none", s.n, err, out)
		}
	}
	for _, o := range []*site{a, b} {
		for _, ip := range []string{o.ip(1), o.ip6(1)} {
			eventually(t, 30*time.Second, fmt.Sprintf("site 3's br0 has %s at %s from zebra", ip, o.mac(1)), func() (bool, string) {
				out, err := c.SW.Exec("ip", "neigh", "show", ip, "dev", "br0")
				return err == nil && strings.Contains(out, o.mac(1).String()) && strings.Contains(out, "extern_learn"), fmt.Sprintf("%q (%v); zebra: %s", out, err, c.vtysh(t, "show evpn arp-cache vni all"))
			})
		}
	}

	// Answered where asked: each trestle site's h2 asks for the two
	// others' h1, the Linux site's h1 for both trestle sites' h1.
	for _, s := range []*site{a, b} {
		before := s.Stats("port-h2").Counters.Get("suppressed")
		for _, o := range others(ss, s) {
			who := fmt.Sprintf("site %d's h2", s.n)
			far := func() map[string]*testutil.Capturer {
				return map[string]*testutil.Capturer{fmt.Sprintf("site %d's underlay", s.n): s.SW.Capture(t, "ul0"), fmt.Sprintf("site %d's h1", o.n): o.Host(1).Capture(t, "eth0")}
			}
			askLocally(t, s.Host(2), who, o.ip(1), o.mac(1), far())
			askLocally(t, s.Host(2), who, o.ip6(1), o.mac(1), far())
		}
		if sup := s.Stats("port-h2").Counters.Get("suppressed") - before; sup < 4 {
			t.Errorf("site %d's port-h2 suppressed %d, want the 4 requests at least", s.n, sup)
		}
	}
	for _, o := range []*site{a, b} {
		far := func() map[string]*testutil.Capturer {
			return map[string]*testutil.Capturer{"site 3's underlay": c.SW.Capture(t, "ul0"), fmt.Sprintf("site %d's h1", o.n): o.Host(1).Capture(t, "eth0")}
		}
		askLocally(t, c.Host(1), "site 3's h1", o.ip(1), o.mac(1), far())
		askLocally(t, c.Host(1), "site 3's h1", o.ip6(1), o.mac(1), far())
	}

	// Learned, not configured: each trestle site's h2 (no allowed_ips)
	// was learned from its own requests above (`neigh show`: learned),
	// and crosses the fabric as h1 does: site 2 answers for site 1's h2.
	for _, s := range []*site{a, b} {
		o := a
		if s == a {
			o = b
		}
		o.waitRemoteNeigh(t, s.ip(2), s.mac(2), s.vtep)
		o.waitRemoteNeigh(t, s.ip6(2), s.mac(2), s.vtep)
	}
	var learned []ctl.NeighEntry
	a.CLIJSON(&learned, "neigh", "show", "br0")
	for _, n := range learned {
		if n.IP == a.ip(2) && (n.Origin != ctl.NeighLearned || n.Port != "port-h2") {
			t.Errorf("site 1: %+v, want h2's address learned on port-h2", n)
		}
	}
	farA := func() map[string]*testutil.Capturer {
		return map[string]*testutil.Capturer{"site 2's underlay": b.SW.Capture(t, "ul0"), "site 1's h2": a.Host(2).Capture(t, "eth0")}
	}
	askLocally(t, b.Host(2), "site 2's h2", a.ip(2), a.mac(2), farA())
	askLocally(t, b.Host(2), "site 2's h2", a.ip6(2), a.mac(2), farA())

	// Never answered, always flooded: from site 1's hosts, requests for
	// an unknown address in both families, h1's gratuitous ARP, an ARP
	// probe and a DAD solicitation for site 2's h1. Each reaches site 2's
	// and site 3's h1, and site 1's switch answers none (its port counts
	// no suppression; site 2's h1 may answer the probe and the DAD itself,
	// as the owner of the address does).
	unknown, unknown6 := netip.MustParseAddr("10.78.0.99"), netip.MustParseAddr("fd78::99")
	ip := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	h1, h2 := a.mac(1), a.mac(2)
	zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
	for _, tc := range []struct {
		name  string
		from  int
		frame []byte
		seen  func([]byte) bool
	}{
		{"an ARP request for an unknown address", 2, frame.ARP(nil, frame.Broadcast(), h2, layers.ARPRequest, h2, ip(a.ip(2)), zero, unknown), isARPRequestFor(unknown.String())},
		{"a solicitation for an unknown address", 2, frame.NS(nil, h2, ip(a.ip6(2)), unknown6, h2), isNSFor(unknown6.String())},
		{"h1's gratuitous ARP", 1, frame.ARP(nil, frame.Broadcast(), h1, layers.ARPRequest, h1, ip(a.ip(1)), zero, ip(a.ip(1))), isARPRequestFor(a.ip(1))},
		{"an ARP probe for site 2's h1", 2, frame.ARP(nil, frame.Broadcast(), h2, layers.ARPRequest, h2, netip.IPv4Unspecified(), zero, ip(b.ip(1))), isARPRequestFor(b.ip(1))},
		{"a DAD solicitation for site 2's h1", 2, frame.NS(nil, h2, netip.IPv6Unspecified(), ip(b.ip6(1)), nil), isNSFor(b.ip6(1))},
	} {
		port := fmt.Sprintf("port-h%d", tc.from)
		before := a.Stats(port).Counters.Get("suppressed")
		heard := map[string]*testutil.Capturer{"site 2's h1": b.Host(1).Capture(t, "eth0"), "site 3's h1": c.Host(1).Capture(t, "eth0")}
		if err := a.Host(tc.from).RawSender(t, "eth0").Send(tc.frame); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for who, cp := range heard {
			if n := cp.WaitFor(tc.seen, 1, 3*time.Second); n < 1 {
				t.Errorf("%s did not reach %s: it was not flooded", tc.name, who)
			}
		}
		if n := a.Stats(port).Counters.Get("suppressed") - before; n != 0 {
			t.Errorf("%s: site 1's %s suppressed %d, want none: it is never answered", tc.name, port, n)
		}
	}
}

// waitRemoteNeigh waits until site s's neighbour table has ip at mac in
// br0 as a remote entry of the overlay port of VNI 1000, behind vtep.
func (s *site) waitRemoteNeigh(t *testing.T, ip string, mac net.HardwareAddr, vtep string) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("site %d: a remote neighbour entry of %s at %s behind %s", s.n, ip, mac, vtep), func() (bool, string) {
		var ns []ctl.NeighEntry
		s.CLIJSON(&ns, "neigh", "show", "br0")
		for _, n := range ns {
			if n.IP == ip {
				return n.MAC == mac.String() && n.Origin == ctl.NeighRemote && n.VTEP == vtep && n.Port == "tvx1000", fmt.Sprintf("%+v", n)
			}
		}
		return false, fmt.Sprintf("%+v", ns)
	})
}

// askLocally has asker (named who) forget its neighbours and ping ip (of
// either family): its ARP request or neighbour solicitation is answered,
// the asker has ip at mac, and no request for ip reaches any of far
// (captures started before, by name: another site's hosts, the asker's
// site's underlay device, where a request that crossed leaves in VXLAN):
// the answer came from the asker's own switch.
func askLocally(t *testing.T, asker *testutil.NS, who, ip string, mac net.HardwareAddr, far map[string]*testutil.Capturer) {
	t.Helper()
	family, request, what := "-4", isARPRequestFor(ip), "ARP requests"
	if strings.Contains(ip, ":") {
		family, request, what = "-6", isNSFor(ip), "neighbour solicitations"
	}
	asker.MustExec(t, "ip", family, "neigh", "flush", "dev", "eth0")
	if err := asker.Ping(ip, 2); err != nil {
		t.Errorf("%s to %s: %v", who, ip, err)
	}
	if out, err := asker.Exec("ip", family, "neigh", "show", ip); err != nil || !strings.Contains(out, mac.String()) {
		t.Errorf("%s's neighbour entry of %s (%v): %q, want %s", who, ip, err, out, mac)
	}
	for name, c := range far {
		if n := c.WaitFor(request, 0, 500*time.Millisecond); n != 0 {
			t.Errorf("%s saw %d %s for %s: it crossed the fabric", name, n, what, ip)
		}
	}
}
