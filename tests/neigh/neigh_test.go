// Package neigh tests the neighbour table and neigh_suppress end to end:
// the switch answers a host's ARP and neighbour discovery for an address
// its table holds, and the request reaches no other host.
package neigh

import (
	"bytes"
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
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// isRequestFor says whether f is a flooded ARP request (broadcast) or a
// neighbour solicitation (multicast) for ip: what suppression keeps from
// every port but the asker's. (A unicast one, a host's check of an entry
// it has, goes to its station as any frame does.)
func isRequestFor(ip string) func([]byte) bool {
	want := net.ParseIP(ip)
	return func(f []byte) bool {
		p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		if eth == nil || eth.DstMAC[0]&1 == 0 {
			return false
		}
		if a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP); ok {
			return a.Operation == layers.ARPRequest && net.IP(a.DstProtAddress).Equal(want)
		}
		if ns, ok := p.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation); ok {
			return ns.TargetAddress.Equal(want)
		}
		return false
	}
}

// enableIPv6 gives host i back the IPv6 the lab turned off, with fd00::i
// on dev.
func enableIPv6(t *testing.T, l *harness.Lab, i int, dev string) {
	t.Helper()
	h := l.Host(i)
	if err := h.IPv6On(dev); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Exec("ip", "-6", "addr", "add", fmt.Sprintf("fd00::%d/64", i), "dev", dev, "nodad"); err != nil {
		t.Fatal(err)
	}
}

// bound is the port keys that bind host i's addresses (its IPv4 one and
// fd00::i) to its port, and so put them in the neighbour table.
func bound(i int) string {
	return fmt.Sprintf("locked = true\nallowed_macs = [%q]\nip_guard = true\nallowed_ips = [%q, \"fd00::%d\"]\n",
		harness.HostMAC(i), harness.HostIP(i), i)
}

// noRequestsFor fails the test if a capture holds a flooded request for
// one of ips.
func noRequestsFor(t *testing.T, caps map[int]*testutil.Capturer, ips ...string) {
	t.Helper()
	for i, c := range caps {
		for _, ip := range ips {
			for _, f := range c.Frames() {
				if isRequestFor(ip)(f) {
					t.Errorf("h%d saw a request for %s: % x", i, ip, f)
				}
			}
		}
	}
}

// h1AsksH2 has h1 ping h2 in both families (and then does more, if
// more is not nil, while h2's and h3's captures run): no request for h2's
// addresses reaches h2 or h3, and port-h1 counts at least the two it
// answered as suppressed.
func h1AsksH2(t *testing.T, l *harness.Lab, more func(caps map[int]*testutil.Capturer)) {
	t.Helper()
	caps := map[int]*testutil.Capturer{}
	for i := 2; i <= 3; i++ {
		caps[i] = l.Host(i).Capture(t, "eth0")
	}
	before := l.Stats(harness.PortName(1)).Counters.Get("suppressed")
	if err := l.Host(1).Ping(harness.HostIP(2), 2); err != nil {
		t.Errorf("ping h1 -> h2: %v", err)
	}
	if err := l.Host(1).Ping("fd00::2", 2); err != nil {
		t.Errorf("ping -6 h1 -> h2: %v", err)
	}
	if more != nil {
		more(caps)
	}
	noRequestsFor(t, caps, harness.HostIP(2), "fd00::2")
	if sup := l.Stats(harness.PortName(1)).Counters.Get("suppressed") - before; sup < 2 {
		t.Errorf("port-h1 suppressed %d requests, want at least 2 (an ARP request and a solicitation)", sup)
	}
}

// TestNeighSuppress, both modes: h2's port binds its addresses
// (allowed_ips with allowed_macs), which the daemon puts in the
// neighbour table (trestle neigh show). On a bridge with neigh_suppress,
// h1's ping of h2, over IPv4 and IPv6, works while no ARP request nor
// neighbour solicitation for h2's addresses reaches h2 or h3: the switch
// answered them (suppressed, on h1's port). A target the table does not
// hold (h3) is asked as before: h3 sees the request and answers.
func TestNeighSuppress(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 3)
		l.WriteConfig(l.Config("neigh_suppress = true\n", func(i int) string {
			s := fmt.Sprintf("mode = %q\n", mode)
			if i == 2 {
				s += bound(2)
			}
			return s
		}))
		for i := 1; i <= 2; i++ {
			enableIPv6(t, l, i, "eth0")
		}
		l.Start()

		// The table: h2's addresses, its EUI-64 link-local one among them.
		var ns []ctl.NeighEntry
		l.CLIJSON(&ns, "neigh", "show", "br0")
		got := map[string]ctl.NeighEntry{}
		for _, n := range ns {
			got[n.IP] = n
		}
		for _, ip := range []string{harness.HostIP(2), "fd00::2", "fe80::ff:fe00:2"} {
			n, ok := got[ip]
			if !ok || n.MAC != harness.HostMAC(2).String() || n.Port != harness.PortName(2) || n.Origin != ctl.NeighStatic || n.VLAN != 0 || n.Bridge != "br0" {
				t.Errorf("neigh show: %s is %+v (%t), want at %s on %s, static", ip, n, ok, harness.HostMAC(2), harness.PortName(2))
			}
		}
		if len(ns) != 3 {
			t.Errorf("neigh show: %d entries, want 3: %+v", len(ns), ns)
		}
		if out, err := l.CLI("neigh", "show"); err != nil || !strings.Contains(out, "IP") || !strings.Contains(out, "fd00::2") {
			t.Errorf("neigh show (%v):\n%s", err, out)
		}

		h1AsksH2(t, l, func(caps map[int]*testutil.Capturer) {
			// And a target the table does not hold: flooded, answered by h3.
			if err := l.Host(1).Ping(harness.HostIP(3), 2); err != nil {
				t.Errorf("ping h1 -> h3: %v", err)
			}
			if n := caps[3].WaitFor(isRequestFor(harness.HostIP(3)), 1, 2*time.Second); n < 1 {
				t.Errorf("h3 saw no ARP request for its address: the unknown target was not flooded")
			}
		})
		if s := l.Stats(harness.PortName(3)).Counters.Get("suppressed"); s != 0 {
			t.Errorf("port-h3 suppressed %d, want 0", s)
		}
		// h1 holds h2's MAC from the switch's answers.
		for _, ip := range []string{harness.HostIP(2), "fd00::2"} {
			if out, err := l.Host(1).Exec("ip", "neigh", "show", ip); err != nil || !strings.Contains(out, harness.HostMAC(2).String()) {
				t.Errorf("h1's neighbour entry of %s (%v): %q, want %s", ip, err, out, harness.HostMAC(2))
			}
		}
	})
}

// TestNeighSuppressVLAN, both modes: on a VLAN-aware bridge, h1 asks
// through a trunk, tagged VLAN 10, for h2 on an access port of VLAN 10:
// the switch answers tagged, as the request came (at tc the tag is the
// skb's, outside the bytes: the kernel takes it out on the way in), with
// the bytes h2 would send, and the requests reach neither h2 nor h3
// (VLAN 20). The same request in VLAN 20, where the table does not hold
// the address, is flooded there.
func TestNeighSuppressVLAN(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 3)
		keys := map[int]string{1: "trunk = [10, 20]\n", 2: "vlan = 10\n" + bound(2), 3: "vlan = 20\n"}
		l.WriteConfig(l.Config("neigh_suppress = true\n", func(i int) string {
			return fmt.Sprintf("mode = %q\n%s", mode, keys[i])
		}))
		l.Start()

		var ns []ctl.NeighEntry
		l.CLIJSON(&ns, "neigh", "show")
		for _, n := range ns {
			if n.VLAN != 10 || n.Port != harness.PortName(2) {
				t.Errorf("neigh show: %+v, want every entry in VLAN 10 on %s", n, harness.PortName(2))
			}
		}
		if len(ns) != 3 {
			t.Errorf("neigh show: %d entries, want 3: %+v", len(ns), ns)
		}
		caps := map[int]*testutil.Capturer{}
		for i := 1; i <= 3; i++ {
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		h1, h2 := harness.HostMAC(1), harness.HostMAC(2)
		ip1, ip2 := netip.MustParseAddr(harness.HostIP(1)), netip.MustParseAddr(harness.HostIP(2))
		v6a, v6b := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
		zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
		v10 := []frame.Tag{frame.CTag(10)}
		for _, c := range []struct {
			name       string
			req, reply []byte
		}{
			{"ARP", frame.ARP(v10, frame.Broadcast(), h1, layers.ARPRequest, h1, ip1, zero, ip2),
				frame.ARP(v10, h1, h2, layers.ARPReply, h2, ip2, h1, ip1)},
			{"NS", frame.NS(v10, h1, v6a, v6b, h1), frame.NA(v10, h1, h2, v6b, v6a)},
		} {
			if err := l.Host(1).RawSend("eth0", c.req); err != nil {
				t.Fatal(err)
			}
			if n := caps[1].WaitFor(func(f []byte) bool { return bytes.Equal(f, c.reply) }, 1, 2*time.Second); n < 1 {
				t.Errorf("%s: h1 got no answer % x; it got:\n%s", c.name, c.reply, harness.HexFrames(caps[1].Frames()))
			}
		}
		noRequestsFor(t, map[int]*testutil.Capturer{2: caps[2], 3: caps[3]}, harness.HostIP(2), "fd00::2")
		if s := l.Stats(harness.PortName(1)).Counters.Get("suppressed"); s != 2 {
			t.Errorf("port-h1 suppressed %d requests, want 2", s)
		}
		// VLAN 20 holds no such address: flooded to h3, untagged there.
		req20 := frame.ARP([]frame.Tag{frame.CTag(20)}, frame.Broadcast(), h1, layers.ARPRequest, h1, ip1, zero, ip2)
		if err := l.Host(1).RawSend("eth0", req20); err != nil {
			t.Fatal(err)
		}
		if n := caps[3].WaitFor(isRequestFor(harness.HostIP(2)), 1, 2*time.Second); n < 1 {
			t.Errorf("the request in VLAN 20 did not reach h3")
		}
	})
}
