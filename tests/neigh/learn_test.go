package neigh

import (
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// learnedIn waits up to 3 s for neigh show to hold each of ips as a
// learned entry of mac on port, and returns the table.
func learnedIn(t *testing.T, l *harness.Lab, mac net.HardwareAddr, port string, ips ...string) map[string]ctl.NeighEntry {
	t.Helper()
	var got map[string]ctl.NeighEntry
	for end := time.Now().Add(3 * time.Second); ; {
		var ns []ctl.NeighEntry
		l.CLIJSON(&ns, "neigh", "show", "br0")
		got = map[string]ctl.NeighEntry{}
		for _, n := range ns {
			got[n.IP] = n
		}
		all := true
		for _, ip := range ips {
			n, ok := got[ip]
			all = all && ok && n.Origin == ctl.NeighLearned && n.MAC == mac.String() && n.Port == port
		}
		if all {
			return got
		}
		if time.Now().After(end) {
			t.Errorf("neigh show: want %v learned at %s on %s; it holds %+v", ips, mac, port, got)
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// refusedEvent waits up to 3 s for a neigh_refused event of ip for why.
func refusedEvent(t *testing.T, l *harness.Lab, ip, why string) {
	t.Helper()
	var evs []ctl.Event
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		l.CLIJSON(&evs, "events")
		for _, e := range evs {
			if e.Event == ctl.EventNeighRefused && e.IP == ip && e.Why == why && e.Port == harness.PortName(3) {
				return
			}
		}
	}
	t.Errorf("no neigh_refused event of %s for %s from %s: %+v", ip, why, harness.PortName(3), evs)
}

// TestNeighLearn, both modes: no port binds an address (no allowed_ips),
// yet on a bridge with neigh_suppress the switch learns h2's addresses
// from its own ARP request and neighbour solicitation (its ping of h3),
// shows them (origin learned, with their age), and answers h1's requests
// for them itself: they reach neither h2 nor h3, and port-h1 counts them
// suppressed. h3 then claims h2's address, with its own MAC (held: the
// first claim holds while h2 is on its port) and with h2's as the ARP
// sender (spoofed): both are refused and reported, and the table still
// says h2. A DHCPACK and a DHCPv6 REPLY from h3's port (no dhcp_guard: a
// trusted server's) bind their addresses to their client, h1, on h1's
// port.
func TestNeighLearn(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 3)
		l.WriteConfig(l.Config("neigh_suppress = true\n", func(int) string { return "mode = \"" + mode + "\"\n" }))
		for i := 1; i <= 3; i++ {
			enableIPv6(t, l, i, "eth0")
		}
		l.Start()

		// h2 asks for h3: its request and solicitation teach the switch.
		if err := l.Host(2).Ping(harness.HostIP(3), 1); err != nil {
			t.Errorf("ping h2 -> h3: %v", err)
		}
		if err := l.Host(2).Ping("fd00::3", 1); err != nil {
			t.Errorf("ping -6 h2 -> h3: %v", err)
		}
		got := learnedIn(t, l, harness.HostMAC(2), harness.PortName(2), harness.HostIP(2), "fd00::2")
		if n := got[harness.HostIP(2)]; n.AgeSeconds < 0 || n.AgeSeconds > 60 || n.VLAN != 0 || n.Bridge != "br0" {
			t.Errorf("neigh show: %+v, want a fresh entry of br0", n)
		}

		h1AsksH2(t, l, nil)

		// h3 claims h2's address: with its own MAC, then naming h2's.
		h2, h3 := harness.HostMAC(2), harness.HostMAC(3)
		ip2 := netip.MustParseAddr(harness.HostIP(2))
		zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
		for _, f := range [][]byte{
			frame.ARP(nil, frame.Broadcast(), h3, layers.ARPRequest, h3, ip2, zero, ip2),
			frame.ARP(nil, frame.Broadcast(), h3, layers.ARPReply, h2, ip2, zero, ip2),
		} {
			if err := l.Host(3).RawSend("eth0", f); err != nil {
				t.Fatal(err)
			}
		}
		refusedEvent(t, l, harness.HostIP(2), "held")
		refusedEvent(t, l, harness.HostIP(2), "spoofed")
		learnedIn(t, l, h2, harness.PortName(2), harness.HostIP(2))

		// A DHCPACK from h3's port for h1: h1's address, on h1's port.
		yi := netip.MustParseAddr("10.78.0.77")
		ack := frame.DHCP(nil, frame.Broadcast(), h3, netip.MustParseAddr(harness.HostIP(3)), layers.DHCPMsgTypeAck, yi, harness.HostMAC(1))
		if err := l.Host(3).RawSend("eth0", ack); err != nil {
			t.Fatal(err)
		}
		learnedIn(t, l, harness.HostMAC(1), harness.PortName(1), yi.String())
		// And a DHCPv6 REPLY to h1's MAC: its IA_NA address, h1's.
		reply := frame.DHCPv6Reply(nil, harness.HostMAC(1), h3, netip.MustParseAddr("fe80::ff:fe00:3"), netip.MustParseAddr("fe80::ff:fe00:1"), 3600,
			netip.MustParseAddr("fd00::77"))
		if err := l.Host(3).RawSend("eth0", reply); err != nil {
			t.Fatal(err)
		}
		learnedIn(t, l, harness.HostMAC(1), harness.PortName(1), "fd00::77")
	})
}

// TestNeighLearnPersist: with persist, what the switch learned stays in
// the table across the daemon's restart, with its age, and the next daemon
// takes it back: h1's request for h2 is answered by the switch from it,
// before h2 has said anything again.
func TestNeighLearnPersist(t *testing.T) {
	t.Parallel()
	l := harness.NewPersistLab(t, 3, func(int) string { return "mode = \"tc\"\n" })
	l.WriteConfig(strings.Replace(l.Config("neigh_suppress = true\n", func(int) string { return "mode = \"tc\"\n" }),
		"[daemon]\n", "[daemon]\npersist = true\n", 1))
	l.StartNet(harness.Bin)
	if err := l.Host(2).Ping(harness.HostIP(3), 1); err != nil {
		t.Errorf("ping h2 -> h3: %v", err)
	}
	learnedIn(t, l, harness.HostMAC(2), harness.PortName(2), harness.HostIP(2))
	learnedAt := time.Now()

	out := l.Signal(syscall.SIGTERM)
	time.Sleep(2 * time.Second) // an age the entry must keep
	l.StartNet(harness.Bin)
	got := learnedIn(t, l, harness.HostMAC(2), harness.PortName(2), harness.HostIP(2))
	if age := got[harness.HostIP(2)].AgeSeconds; age < 2 || age > time.Since(learnedAt).Seconds()+1 {
		t.Errorf("the adopted entry's age %.1fs, want its age from before the restart (%.1fs)\nfirst daemon:\n%s", age, time.Since(learnedAt).Seconds(), out)
	}
	caps := map[int]*testutil.Capturer{2: l.Host(2).Capture(t, "eth0"), 3: l.Host(3).Capture(t, "eth0")}
	before := l.Stats(harness.PortName(1)).Counters.Get("suppressed")
	if err := l.Host(1).Ping(harness.HostIP(2), 1); err != nil {
		t.Errorf("ping h1 -> h2: %v", err)
	}
	noRequestsFor(t, caps, harness.HostIP(2))
	if sup := l.Stats(harness.PortName(1)).Counters.Get("suppressed") - before; sup < 1 {
		t.Errorf("port-h1 suppressed %d, want the ARP request answered from the adopted entry", sup)
	}
}
