package snoop

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// The querier end to end: the bridge's queries reach the hosts, whose
// kernels answer them, and a querier with a lower address silences it.

// queryFrom reads a frame as a general query: its family (4 or 6) and
// source, or 0.
func queryFrom(f []byte) (int, netip.Addr) {
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.NoCopy)
	if ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		if m, ok := p.Layer(layers.LayerTypeIGMP).(*layers.IGMP); ok && m.Type == layers.IGMPMembershipQuery {
			a, _ := netip.AddrFromSlice(ip.SrcIP)
			return 4, a.Unmap()
		}
		if m, ok := p.Layer(layers.LayerTypeIGMP).(*layers.IGMPv1or2); ok && m.Type == layers.IGMPMembershipQuery {
			a, _ := netip.AddrFromSlice(ip.SrcIP)
			return 4, a.Unmap()
		}
	}
	if ip, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
		if p.Layer(layers.LayerTypeMLDv2MulticastListenerQuery) != nil || p.Layer(layers.LayerTypeMLDv1MulticastListenerQuery) != nil {
			a, _ := netip.AddrFromSlice(ip.SrcIP)
			return 6, a
		}
	}
	return 0, netip.Addr{}
}

// bridgeQuery matches the bridge's own queries of family fam: IGMP from
// 0.0.0.0, MLD from a link-local address other than the test's querier's.
func bridgeQuery(fam int, other netip.Addr) func([]byte) bool {
	return func(f []byte) bool {
		got, src := queryFrom(f)
		if got != fam || src == other {
			return false
		}
		if fam == 4 {
			return src == netip.IPv4Unspecified()
		}
		return src.IsLinkLocalUnicast()
	}
}

// queriers is `trestle show br0 --json`'s queriers.
func queriers(l *harness.Lab) []ctl.Querier {
	var st ctl.Status
	l.CLIJSON(&st, "show", "br0")
	if len(st.Bridges) != 1 {
		l.T.Fatalf("show br0: %+v", st)
	}
	return st.Bridges[0].Queriers
}

// querierOf is the querier of family ("igmp", "mld") in qs, if any.
func querierOf(qs []ctl.Querier, family string) (ctl.Querier, bool) {
	for _, q := range qs {
		if q.Family == family && q.VLAN == 0 {
			return q, true
		}
	}
	return ctl.Querier{}, false
}

// querierLab is a lab of n hosts with IPv6 (MLD needs it) on a querier
// bridge that queries every 4 s, its ports in mode with portExtra's keys.
func querierLab(t *testing.T, mode string, n int, portExtra func(int) string) *harness.Lab {
	l := harness.NewLab(t, n)
	l.WriteConfig(l.Config("multicast_snooping = true\nmulticast_querier = true\nmulticast_query_interval = \"4s\"\n",
		func(i int) string {
			s := "mode = \"" + mode + "\"\n"
			if portExtra != nil {
				s += portExtra(i)
			}
			return s
		}))
	for i := 1; i <= n; i++ {
		enableIPv6(t, l, i)
	}
	return l
}

// TestQuerierQueries, both modes: with no other querier, the bridge's
// IGMP query (from 0.0.0.0) and MLD query (from a link-local address)
// reach the hosts, whose kernels answer with reports of the groups they
// joined before the switch ran (their unsolicited reports were lost), and
// mdb show fills. show names the bridge as the querier of both families.
func TestQuerierQueries(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := querierLab(t, mode, 3, nil)
		join(t, l.Host(2), "239.1.1.1", true)
		join(t, l.Host(3), "ff3e::1:2", true)
		// The hosts' unsolicited reports (two each, within 1 s) go
		// nowhere: the switch is not running yet.
		time.Sleep(3 * time.Second)
		caps := map[int]*testutil.Capturer{}
		for i := 1; i <= 3; i++ {
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		l.Start()
		for i := 1; i <= 3; i++ {
			if caps[i].WaitFor(bridgeQuery(4, netip.Addr{}), 1, 10*time.Second) < 1 {
				t.Errorf("h%d got no IGMP query from the bridge", i)
			}
			if caps[i].WaitFor(bridgeQuery(6, netip.Addr{}), 1, 10*time.Second) < 1 {
				t.Errorf("h%d got no MLD query from the bridge", i)
			}
		}
		for end := time.Now().Add(15 * time.Second); ; {
			var ms []ctl.MDBEntry
			l.CLIJSON(&ms, "mdb", "show", "br0")
			if member(ms, "239.1.1.1", harness.PortName(2)) && member(ms, "ff3e::1:2", harness.PortName(3)) {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("the hosts' answers to the bridge's queries: mdb show %+v", ms)
			}
			time.Sleep(200 * time.Millisecond)
		}
		qs := queriers(l)
		q4, ok4 := querierOf(qs, "igmp")
		q6, ok6 := querierOf(qs, "mld")
		if !ok4 || !q4.Own || q4.Address != "0.0.0.0" || !ok6 || !q6.Own || !netip.MustParseAddr(q6.Address).IsLinkLocalUnicast() {
			t.Errorf("show's queriers %+v, want the bridge's own of both families", qs)
		}
		// The bridge's querier is a querier seen: a report goes to the
		// router ports only (there are none), not to the other hosts.
		g := netip.MustParseAddr("239.5.5.5")
		if err := l.Host(1).RawSend("eth0", frame.IGMPv2(frame.IGMPv2Report, harness.HostMAC(1), netip.MustParseAddr(harness.HostIP(1)), g)); err != nil {
			t.Fatal(err)
		}
		waitMDB(t, l, "h1's report", func(ms []ctl.MDBEntry) bool { return member(ms, g.String(), harness.PortName(1)) })
		for i := 2; i <= 3; i++ {
			if n := len(framesOf(caps[i], reportOf(g))); n > 0 {
				t.Errorf("h%d got h1's report of %s: reports should go to router ports only once a querier is seen", i, g)
			}
		}
	})
}

// TestQuerierElection, both modes: h1 queries (IGMP from its address,
// MLD from fe80::1, both lower than the bridge's): the bridge sends no
// query while h1 goes on, show names h1's port; once h1 has been quiet
// for the other querier present interval (2 x 4 s + 1 s), the bridge
// queries again.
func TestQuerierElection(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := querierLab(t, mode, 2, nil)
		c := l.Host(2).Capture(t, "eth0")
		l.Start()
		ll := netip.MustParseAddr("fe80::1")
		if c.WaitFor(bridgeQuery(4, ll), 1, 10*time.Second) < 1 || c.WaitFor(bridgeQuery(6, ll), 1, 10*time.Second) < 1 {
			t.Fatalf("h2 got no queries from the bridge before h1 queried")
		}

		// h1 queries every second, as a querier would at a short interval.
		stop := make(chan struct{})
		done := make(chan struct{})
		q4 := frame.IGMPv3QueryOf(nil, harness.HostMAC(1), netip.MustParseAddr(harness.HostIP(1)), netip.Addr{}, time.Second, 4*time.Second)
		q6 := frame.MLDv2Query(nil, harness.HostMAC(1), ll, netip.Addr{}, time.Second, 4*time.Second)
		go func() {
			defer close(done)
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				for _, f := range [][]byte{q4, q6} {
					if err := l.Host(1).RawSend("eth0", f); err != nil {
						t.Errorf("h1's query: %v", err)
						return
					}
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
		// A second for the daemon to read h1's first queries (one of the
		// bridge's may be on its way); then none for 10 s, over two
		// intervals.
		time.Sleep(1500 * time.Millisecond)
		n4, n6 := len(framesOf(c, bridgeQuery(4, ll))), len(framesOf(c, bridgeQuery(6, ll)))
		time.Sleep(10 * time.Second)
		if m4, m6 := len(framesOf(c, bridgeQuery(4, ll))), len(framesOf(c, bridgeQuery(6, ll))); m4 != n4 || m6 != n6 {
			t.Errorf("while h1 queried, the bridge sent %d IGMP and %d MLD queries, want none", m4-n4, m6-n6)
		}
		qs := queriers(l)
		o4, _ := querierOf(qs, "igmp")
		o6, _ := querierOf(qs, "mld")
		if o4.Own || o4.Address != harness.HostIP(1) || o4.Port != harness.PortName(1) || o6.Own || o6.Address != "fe80::1" || o6.Port != harness.PortName(1) {
			t.Errorf("show's queriers %+v, want h1's of both families, by %s", qs, harness.PortName(1))
		}
		close(stop)
		<-done

		// Quiet for 9 s: the bridge's querier takes over again.
		if c.WaitFor(bridgeQuery(4, ll), n4+1, 15*time.Second) <= n4 || c.WaitFor(bridgeQuery(6, ll), n6+1, 15*time.Second) <= n6 {
			t.Errorf("the bridge did not query again after h1 stopped")
		}
	})
}

// TestQuerierVLANs, both modes: on a VLAN-aware bridge the queries go
// into each VLAN, untagged out of an access port (h1, VLAN 10) and tagged
// out of a trunk (h2, VLANs 10 and 20).
func TestQuerierVLANs(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := querierLab(t, mode, 2, func(i int) string {
			if i == 1 {
				return "vlan = 10\n"
			}
			return "trunk = [10, 20]\n"
		})
		caps := map[int]*testutil.Capturer{1: l.Host(1).Capture(t, "eth0"), 2: l.Host(2).Capture(t, "eth0")}
		l.Start()
		for _, c := range []struct {
			host, fam int
			vlan      uint16 // 0: untagged
		}{{1, 4, 0}, {1, 6, 0}, {2, 4, 10}, {2, 6, 10}, {2, 4, 20}, {2, 6, 20}} {
			match := func(f []byte) bool { return vlanOf(f) == c.vlan && bridgeQuery(c.fam, netip.Addr{})(f) }
			if caps[c.host].WaitFor(match, 1, 10*time.Second) < 1 {
				t.Errorf("h%d got no IPv%d query of the bridge in VLAN %d (0: untagged)", c.host, c.fam, c.vlan)
			}
		}
		for _, f := range framesOf(caps[1], bridgeQuery(4, netip.Addr{})) {
			if v := vlanOf(f); v != 0 {
				t.Errorf("h1, an access port of VLAN 10, got a query tagged %d", v)
			}
		}
	})
}

// vlanOf is a frame's outer VLAN tag's VID, 0 without one.
func vlanOf(f []byte) uint16 {
	if len(f) >= 16 && f[12] == 0x81 && f[13] == 0x00 {
		return uint16(f[14]&0x0f)<<8 | uint16(f[15])
	}
	return 0
}

// reportOf matches an IGMPv2 report of group.
func reportOf(group netip.Addr) func([]byte) bool {
	return func(f []byte) bool {
		p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.NoCopy)
		m, ok := p.Layer(layers.LayerTypeIGMP).(*layers.IGMPv1or2)
		return ok && m.Type == layers.IGMPMembershipReportV2 && m.GroupAddress.Equal(group.AsSlice())
	}
}

// framesOf are c's frames that match.
func framesOf(c *testutil.Capturer, match func([]byte) bool) [][]byte {
	var out [][]byte
	for _, f := range c.Frames() {
		if match(f) {
			out = append(out, f)
		}
	}
	return out
}
