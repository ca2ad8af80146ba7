package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// TestIPGuard (issue 29), both modes: h1's port has ip_guard with its IPv4
// address and fd00::1. ARP with a forged sender address is dropped and
// counted (ip_guard_arp), and h3's neighbour table does not take it; ARP
// from its own passes, and ping works; an IPv4 frame with a forged source
// is dropped (ip_guard_ip), one from its own reaches h2; a neighbour
// advertisement with a forged target is dropped (ip_guard_nd), one of its
// own passes; a DHCP discover from 0.0.0.0 passes. h2's port, without
// ip_guard, forwards a forged frame as before.
func TestIPGuard(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 3)
		config := func(guard string) string {
			return l.Config("", func(i int) string {
				extra := map[int]string{1: guard}[i]
				return fmt.Sprintf("mode = %q\n%s", mode, extra)
			})
		}
		l.WriteConfig(config(fmt.Sprintf("ip_guard = true\nallowed_ips = [%q, \"fd00::1\"]\n", harness.HostIP(1))))
		l.Start()
		l.PingAll()
		for _, p := range l.Show().Bridges[0].Ports {
			if want := p.Name == harness.PortName(1); p.IPGuard != want {
				t.Errorf("show %s: ip_guard %t, want %t", p.Name, p.IPGuard, want)
			}
		}
		if out, err := l.CLI("show"); err != nil || !strings.Contains(out, "ip_guard ("+harness.HostIP(1)+", fd00::1)") {
			t.Errorf("show says no ip_guard of port-h1 (%v):\n%s", err, out)
		}

		caps := map[int]*testutil.Capturer{}
		for i := 1; i <= 3; i++ {
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		forgedIP := "10.78.0.99"
		h2, h3 := harness.HostIP(2), harness.HostIP(3)
		recv := func(f []byte, hosts ...int) map[int][]byte {
			m := map[int][]byte{}
			for _, h := range hosts {
				m[h] = f
			}
			return m
		}
		arpOwn := harness.ARPFrame(t, harness.HostMAC(1), layers.ARPRequest, harness.HostIP(1), h3, "arp-own")
		arpProbe := harness.ARPFrame(t, harness.HostMAC(1), layers.ARPRequest, "0.0.0.0", harness.HostIP(1), "arp-probe")
		ipOwn := harness.UDP4Frame(t, harness.HostMAC(2), harness.HostMAC(1), harness.HostIP(1), h2, 1000, 2000, "ip-own")
		dhcp := harness.UDP4Frame(t, harness.VLANBcast(), harness.HostMAC(1), "0.0.0.0", "255.255.255.255", 68, 67, "dhcp")
		naOwn := harness.NAFrame(t, harness.HostMAC(1), "fd00::1", "fd00::1", "na-own")
		forgedH2 := harness.UDP4Frame(t, harness.HostMAC(3), harness.HostMAC(2), forgedIP, h3, 1, 2, "unguarded")
		harness.VLANRun(t, l, caps, []harness.VCase{
			// A forged reply that would tell h3 that h2's address is at h1.
			{Name: "arp-forged-reply", From: 1, Frame: harness.ARPFrame(t, harness.HostMAC(1), layers.ARPReply, h2, h3, "arp-forged-reply"), Recv: map[int][]byte{}, Reason: "ip_guard_arp"},
			{Name: "arp-forged-request", From: 1, Frame: harness.ARPFrame(t, harness.HostMAC(1), layers.ARPRequest, forgedIP, h3, "arp-forged-request"), Recv: map[int][]byte{}, Reason: "ip_guard_arp"},
			{Name: "arp-own", From: 1, Frame: arpOwn, Recv: recv(arpOwn, 2, 3)},
			{Name: "arp-probe", From: 1, Frame: arpProbe, Recv: recv(arpProbe, 2, 3)},
			{Name: "ip-forged", From: 1, Frame: harness.UDP4Frame(t, harness.HostMAC(2), harness.HostMAC(1), forgedIP, h2, 1000, 2000, "ip-forged"), Recv: map[int][]byte{}, Reason: "ip_guard_ip"},
			{Name: "ip-own", From: 1, Frame: ipOwn, Recv: recv(ipOwn, 2)},
			{Name: "dhcp", From: 1, Frame: dhcp, Recv: recv(dhcp, 2, 3)},
			{Name: "na-forged", From: 1, Frame: harness.NAFrame(t, harness.HostMAC(1), "fd00::1", "fd00::2", "na-forged"), Recv: map[int][]byte{}, Reason: "ip_guard_nd"},
			{Name: "na-own", From: 1, Frame: naOwn, Recv: recv(naOwn, 2, 3)},
			{Name: "unguarded", From: 2, Frame: forgedH2, Recv: recv(forgedH2, 3)},
		})
		// h3 did not learn h2's address at h1's MAC.
		if out, err := l.Host(3).Exec("ip", "neigh", "show", h2); err != nil || strings.Contains(out, harness.HostMAC(1).String()) {
			t.Errorf("h3's neighbour entry of h2 after the forged reply (%v): %s", err, out)
		}
		for i := 1; i <= 3; i++ {
			for j := 1; j <= 3; j++ {
				if i != j {
					if err := l.Host(i).Ping(harness.HostIP(j), 1); err != nil {
						t.Errorf("h%d to h%d after the forged frames: %v", i, j, err)
					}
				}
			}
		}

		// A reload that changes h1's addresses: the one it no longer has
		// is dropped, the new one passes; then one that turns ip_guard
		// off: the forged address passes too.
		reload := func(guard string) {
			t.Helper()
			l.WriteConfig(config(guard))
			if out, err := l.CLI("reload"); err != nil {
				t.Fatalf("reload: %v\n%s", err, out)
			}
		}
		reload(fmt.Sprintf("ip_guard = true\nallowed_ips = [%q]\n", forgedIP))
		arpNew := harness.ARPFrame(t, harness.HostMAC(1), layers.ARPRequest, forgedIP, h3, "arp-new")
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "arp-old", From: 1, Frame: harness.ARPFrame(t, harness.HostMAC(1), layers.ARPRequest, harness.HostIP(1), h3, "arp-old"), Recv: map[int][]byte{}, Reason: "ip_guard_arp"},
			{Name: "arp-new", From: 1, Frame: arpNew, Recv: recv(arpNew, 2, 3)},
		})
		reload("")
		arpOff := harness.ARPFrame(t, harness.HostMAC(1), layers.ARPRequest, "10.78.0.98", h3, "arp-off")
		harness.VLANRun(t, l, caps, []harness.VCase{{Name: "arp-off", From: 1, Frame: arpOff, Recv: recv(arpOff, 2, 3)}})
		l.Stop()
	})
}
