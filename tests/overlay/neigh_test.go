package overlay

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/testutil"
)

// neighConfig is a site's config of one VNI (1000) on br0 with
// neigh_suppress: h1 bound to its address (ip_guard, allowed_ips with its
// allowed_macs: the neighbour table's static entry), h2 not.
func (s *site) neighConfig() string {
	return fmt.Sprintf(`[daemon]
socket = %q
vtep = %q

[[bridge]]
name = "br0"
neigh_suppress = true

[[bridge.port]]
interface = "port-h1"
mode = %q
locked = true
allowed_macs = [%q]
ip_guard = true
allowed_ips = [%q]

[[bridge.port]]
interface = "port-h2"
mode = %q

[[bridge.port]]
vxlan = 1000
`, s.Sock, s.vtep, s.hostMode, s.mac(1), s.ip(1), s.hostMode)
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

// TestOverlayNeighSuppress: MAC+IP routes both ways. Each site's bound
// station (h1, allowed_ips) is given to its FRR as a local neighbour of the
// VNI's bridge, and arrives at the other site as a remote entry of its
// neighbour table (`neigh show`: origin remote, the VTEP); there the switch
// answers an ARP request for it (neigh_suppress) on the asker's port, and
// no request crosses the fabric: the other site's hosts see none.
func TestOverlayNeighSuppress(t *testing.T) {
	t.Parallel()
	sites := build(t, lab.SitesOpts{}, []string{"tc", "xdp"}, oneVNI, oneVNI)
	for _, s := range sites {
		s.WriteConfig(s.neighConfig())
		s.Start()
		s.startFRR(t)
	}
	waitFlood(t, sites...)
	for _, s := range sites {
		o := others(sites, s)[0]
		s.waitRemoteNeigh(t, o.ip(1), o.mac(1), o.vtep)
		if out, err := s.CLI("neigh", "show"); err != nil || !strings.Contains(out, "remote "+o.vtep) {
			t.Errorf("site %d: neigh show (%v):\n%s", s.n, err, out)
		}
	}

	// Site 2's h2 asks for site 1's h1: answered on site 2.
	a, b := sites[0], sites[1]
	before := b.Stats("port-h2").Counters.Get("suppressed")
	askLocally(t, b.Host(2), "site 2's h2", a.ip(1), a.mac(1), map[string]*testutil.Capturer{"site 1's h1": a.Host(1).Capture(t, "eth0"), "site 1's h2": a.Host(2).Capture(t, "eth0")})
	if sup := b.Stats("port-h2").Counters.Get("suppressed") - before; sup < 1 {
		t.Errorf("site 2's port-h2 suppressed %d, want the ARP request at least", sup)
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

// askLocally has asker (named who) forget its neighbours and ping ip:
// its ARP request is answered, the asker has ip at mac, and no request for
// ip reaches any of far (captures started before, by name: the other
// site's hosts, its underlay device, where a request that crossed arrives
// in VXLAN): the answer came from the asker's own switch.
func askLocally(t *testing.T, asker *testutil.NS, who, ip string, mac net.HardwareAddr, far map[string]*testutil.Capturer) {
	t.Helper()
	asker.MustExec(t, "ip", "neigh", "flush", "dev", "eth0")
	if err := asker.Ping(ip, 2); err != nil {
		t.Errorf("%s to %s: %v", who, ip, err)
	}
	if out, err := asker.Exec("ip", "neigh", "show", ip); err != nil || !strings.Contains(out, mac.String()) {
		t.Errorf("%s's neighbour entry of %s (%v): %q, want %s", who, ip, err, out, mac)
	}
	for name, c := range far {
		if n := c.WaitFor(isARPRequestFor(ip), 0, 500*time.Millisecond); n != 0 {
			t.Errorf("%s saw %d ARP requests for %s: it crossed the fabric", name, n, ip)
		}
	}
}
