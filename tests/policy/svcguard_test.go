package policy

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// TestServiceGuards, both modes, written as the attack: h1's port has
// ra_guard and dhcp_guard, h2's neither. A rogue router advertisement, a
// rogue DHCP offer and a rogue DHCPv6 advertise from h1 reach no other
// host and are counted (ra_guard, dhcp_guard); h1's own DHCP discover and
// request, and its DHCPv6 solicit, reach the others (where the server
// would be); the same rogue messages from h2 reach h1 and h3.
func TestServiceGuards(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 3)
		l.WriteConfig(l.Config("", func(i int) string {
			extra := map[int]string{1: "ra_guard = true\ndhcp_guard = true\n"}[i]
			return fmt.Sprintf("mode = %q\n%s", mode, extra)
		}))
		l.Start()
		l.PingAll()
		for _, p := range l.Show().Bridges[0].Ports {
			if want := p.Name == harness.PortName(1); p.RAGuard != want || p.DHCPGuard != want {
				t.Errorf("show %s: ra_guard %t, dhcp_guard %t, want %t", p.Name, p.RAGuard, p.DHCPGuard, want)
			}
		}
		if out, err := l.CLI("show"); err != nil || !strings.Contains(out, "ra_guard; dhcp_guard") {
			t.Errorf("show says no guards of port-h1 (%v):\n%s", err, out)
		}

		caps := map[int]*testutil.Capturer{}
		for i := 1; i <= 3; i++ {
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		recv := func(f []byte, hosts ...int) map[int][]byte {
			m := map[int][]byte{}
			for _, h := range hosts {
				m[h] = f
			}
			return m
		}
		servers6 := "ff02::1:2"
		servers6MAC := net.HardwareAddr{0x33, 0x33, 0, 1, 0, 2}
		allNodesMAC := net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
		rogue := func(h int, tag string) (ra, offer, adv []byte) {
			mac := harness.HostMAC(h)
			ra = harness.RAFrame(t, mac, "fe80::1", "ra-"+tag)
			offer = harness.DHCP4Frame(t, mac, harness.HostIP(h), 67, 68, layers.DHCPMsgTypeOffer, "offer-"+tag)
			adv = harness.DHCPv6Frame(t, allNodesMAC, mac, "fe80::1", "ff02::1", 547, 546, layers.DHCPv6MsgTypeAdvertise, "adv-"+tag)
			return ra, offer, adv
		}
		ra1, offer1, adv1 := rogue(1, "guarded")
		ra2, offer2, adv2 := rogue(2, "unguarded")
		mac1 := harness.HostMAC(1)
		discover := harness.DHCP4Frame(t, mac1, "0.0.0.0", 68, 67, layers.DHCPMsgTypeDiscover, "discover")
		request := harness.DHCP4Frame(t, mac1, "0.0.0.0", 68, 67, layers.DHCPMsgTypeRequest, "request")
		solicit := harness.DHCPv6Frame(t, servers6MAC, mac1, "fe80::11", servers6, 546, 547, layers.DHCPv6MsgTypeSolicit, "solicit")
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "ra-guarded", From: 1, Frame: ra1, Recv: map[int][]byte{}, Reason: "ra_guard"},
			{Name: "offer-guarded", From: 1, Frame: offer1, Recv: map[int][]byte{}, Reason: "dhcp_guard"},
			{Name: "adv-guarded", From: 1, Frame: adv1, Recv: map[int][]byte{}, Reason: "dhcp_guard"},
			{Name: "discover", From: 1, Frame: discover, Recv: recv(discover, 2, 3)},
			{Name: "request", From: 1, Frame: request, Recv: recv(request, 2, 3)},
			{Name: "solicit", From: 1, Frame: solicit, Recv: recv(solicit, 2, 3)},
			{Name: "ra-unguarded", From: 2, Frame: ra2, Recv: recv(ra2, 1, 3)},
			{Name: "offer-unguarded", From: 2, Frame: offer2, Recv: recv(offer2, 1, 3)},
			{Name: "adv-unguarded", From: 2, Frame: adv2, Recv: recv(adv2, 1, 3)},
		})
		// Each guard's drops are an episode, logged as an event once.
		want := map[string]bool{"ra_guard": false, "dhcp_guard": false}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			var evs []ctl.Event
			l.CLIJSON(&evs, "events")
			for _, e := range evs {
				if _, ok := want[e.Reason]; ok && e.Event == ctl.EventGuard && e.Port == harness.PortName(1) && e.Count > 0 {
					want[e.Reason] = true
				}
			}
			if want["ra_guard"] && want["dhcp_guard"] || time.Now().After(deadline) {
				if !want["ra_guard"] || !want["dhcp_guard"] {
					t.Errorf("trestle events: guard events of %s %v, want both:\n%+v", harness.PortName(1), want, evs)
				}
				break
			}
		}
		l.Stop()
	})
}
