package overlay

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// recv is a host that must receive want copies of a frame.
type recv struct {
	name string
	ns   *testutil.NS
	want int
}

// sendCount sends frame (marked with marker) from host from's eth0 and
// checks that each of rs receives exactly its want copies: it waits for
// the copies that must arrive, then a moment for any that must not.
func sendCount(t *testing.T, from *testutil.NS, frame []byte, marker string, rs ...recv) {
	t.Helper()
	caps := make([]*testutil.Capturer, len(rs))
	for i, r := range rs {
		caps[i] = r.ns.Capture(t, "eth0")
	}
	if err := from.RawSend("eth0", frame); err != nil {
		t.Fatalf("%s: %v", marker, err)
	}
	match := harness.HasMarker(marker)
	for i, r := range rs {
		if r.want > 0 {
			caps[i].WaitFor(match, r.want, 5*time.Second)
		}
	}
	time.Sleep(300 * time.Millisecond) // for copies that must not arrive
	for i, r := range rs {
		got := 0
		for _, f := range caps[i].Stop() {
			if match(f) {
				got++
			}
		}
		if got != r.want {
			t.Errorf("%s: %s received %d copies, want %d", marker, r.name, got, r.want)
		}
	}
}

// overlayCounts are trestle's rx and tx packets of each site's overlay
// port of vni.
func overlayCounts(vni uint32, sites ...*site) [][2]uint64 {
	cs := make([][2]uint64, len(sites))
	for i, s := range sites {
		c := s.Stats(fmt.Sprintf("tvx%d", vni)).Counters
		cs[i] = [2]uint64{c.Get("rx_packets"), c.Get("tx_packets")}
	}
	return cs
}

// linkRx and linkTx are the packets the kernel counts received and sent by
// ifname in the site's switch namespace.
func (s *site) linkRx(t *testing.T, ifname string) uint64 { return s.linkPackets(t, ifname)[0] }
func (s *site) linkTx(t *testing.T, ifname string) uint64 { return s.linkPackets(t, ifname)[1] }

// linkPackets is ifname's received and sent packets, as `ip -s link` says.
func (s *site) linkPackets(t *testing.T, ifname string) [2]uint64 {
	t.Helper()
	out := s.SW.MustExec(t, "ip", "-j", "-s", "link", "show", "dev", ifname)
	type count struct {
		Packets uint64 `json:"packets"`
	}
	var ls []struct {
		Stats64 struct {
			RX count `json:"rx"`
			TX count `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(out), &ls); err != nil || len(ls) != 1 {
		t.Fatalf("ip -s link show %s: %v\n%s", ifname, err, out)
	}
	return [2]uint64{ls[0].Stats64.RX.Packets, ls[0].Stats64.TX.Packets}
}

// The lines of a site's overlay state (state).
func routeLine(vni uint32, prefix, nexthop string) string {
	return fmt.Sprintf("bgpd: VNI %d route %s via %s", vni, prefix, nexthop)
}
func type2(mac net.HardwareAddr) string { return fmt.Sprintf("[2]:[0]:[48]:[%s]", mac) }
func type3(vtep string) string          { return fmt.Sprintf("[3]:[0]:[32]:[%s]", vtep) }
func zebraLine(vni uint32, mac net.HardwareAddr, where string) string {
	return fmt.Sprintf("zebra: VNI %d MAC %s %s", vni, mac, where)
}
func remoteLine(br string, vlan uint16, mac net.HardwareAddr, port, vtep string) string {
	return fmt.Sprintf("trestle: %s VLAN %d %s on %s behind %s", br, vlan, mac, port, vtep)
}
func floodLine(vni uint32, vteps []string) string {
	return fmt.Sprintf("trestle: VNI %d flood list %v", vni, vteps)
}

// state is what the site's overlay holds, a line a fact, sorted: bgpd's
// routes of each VNI with their next hops (`show bgp l2vpn evpn route vni
// all`: route distinguishers are left out, their numbers depend on the
// order zebra saw the VNIs in), zebra's MACs of each VNI, local or behind
// their VTEP (`show evpn mac vni all`), and trestle's remote entries and
// flood lists. What cannot be read is a line saying so.
func (s *site) state(t *testing.T) []string {
	t.Helper()
	var lines []string
	vni := func(key string) uint32 {
		n, _ := strconv.ParseUint(key, 10, 32)
		return uint32(n)
	}
	out := s.vtysh(t, "show bgp l2vpn evpn route vni all json")
	var routes map[string]map[string]json.RawMessage // VNI, prefix (and other keys)
	if err := json.Unmarshal([]byte(out), &routes); err != nil {
		lines = append(lines, "bgpd: unparsed: "+strings.TrimSpace(out))
	}
	for v, rs := range routes {
		for prefix, raw := range rs {
			if !strings.HasPrefix(prefix, "[") {
				continue
			}
			var r struct {
				Paths [][]struct {
					Nexthops []struct{ IP string }
				}
			}
			if err := json.Unmarshal(raw, &r); err != nil {
				lines = append(lines, "bgpd: unparsed: "+string(raw))
			}
			for _, ps := range r.Paths {
				for _, p := range ps {
					for _, nh := range p.Nexthops {
						lines = append(lines, routeLine(vni(v), prefix, nh.IP))
					}
				}
			}
		}
	}
	out = s.vtysh(t, "show evpn mac vni all json")
	var macs map[string]struct { // by VNI
		MACs map[string]struct {
			Type, RemoteVTEP, Intf string
		}
	}
	if err := json.Unmarshal([]byte(out), &macs); err != nil {
		lines = append(lines, "zebra: unparsed: "+strings.TrimSpace(out))
	}
	for v, ms := range macs {
		for m, e := range ms.MACs {
			mac, _ := net.ParseMAC(m)
			lines = append(lines, zebraLine(vni(v), mac, strings.TrimSpace(e.Type+" "+e.Intf+e.RemoteVTEP)))
		}
	}
	for _, e := range s.FDB() {
		if e.VTEP != "" {
			mac, _ := net.ParseMAC(e.MAC)
			lines = append(lines, remoteLine(e.Bridge, e.VLAN, mac, e.Port, e.VTEP))
		}
	}
	for _, v := range s.layout.vnis() {
		if o := s.overlay(v); o != nil {
			lines = append(lines, floodLine(v, slices.Sorted(slices.Values(o.FloodList))))
		}
	}
	slices.Sort(lines)
	return lines
}

// diffLines says which lines want has and got lacks, and which got has
// beyond.
func diffLines(got, want []string) string {
	var b strings.Builder
	for _, l := range want {
		if !slices.Contains(got, l) {
			fmt.Fprintf(&b, "\n  missing: %s", l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			fmt.Fprintf(&b, "\n  extra:   %s", l)
		}
	}
	return b.String()
}

// TestOverlayThreeHosts: three sites, each with both hosts on VNI 1000,
// over one bridged underlay and an iBGP full mesh: each site has the
// type-3 routes of both others and both in its flood list; a broadcast
// from a host of site 1 reaches its other host and each remote host once,
// leaves site 1's overlay port in one copy and comes back into the
// overlay nowhere; known unicast from site 1 to site 3 reaches site 3's
// host only, and site 2's vxlan device receives nothing of it.
func TestOverlayThreeHosts(t *testing.T) {
	t.Parallel()
	ss := newSites(t, false, alternate, oneVNI, oneVNI, oneVNI)
	a, b, c := ss[0], ss[1], ss[2]
	waitFlood(t, ss...)
	for _, s := range ss {
		st := s.state(t)
		for _, o := range others(ss, s) {
			if l := routeLine(1000, type3(o.vtep), o.vtep); !slices.Contains(st, l) {
				t.Errorf("site %d lacks %q:\n%s", s.n, l, strings.Join(st, "\n"))
			}
		}
	}

	// The hosts have been quiet (no IPv6, no ping yet): the broadcast is
	// the only frame in the overlay.
	before := overlayCounts(1000, ss...)
	sendCount(t, a.Host(1), harness.Marked(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, a.mac(1), "three-bcast"), "three-bcast",
		recv{"site 1's h1 (the sender)", a.Host(1), 0},
		recv{"site 1's h2", a.Host(2), 1},
		recv{"site 2's h1", b.Host(1), 1},
		recv{"site 2's h2", b.Host(2), 1},
		recv{"site 3's h1", c.Host(1), 1},
		recv{"site 3's h2", c.Host(2), 1})
	after := overlayCounts(1000, ss...)
	// Site 1's overlay port: one copy out (the kernel replicates it to
	// each VTEP), none in; the others' one in, none out.
	for i, s := range ss {
		want := [2]uint64{1, 0}
		if s == a {
			want = [2]uint64{0, 1}
		}
		if got := [2]uint64{after[i][0] - before[i][0], after[i][1] - before[i][1]}; got != want {
			t.Errorf("site %d: tvx1000 rx, tx packets went up by %v, want %v", s.n, got, want)
		}
	}

	// Known unicast: once each side has the other's host remote behind its
	// VTEP, a frame from site 1's h1 to site 3's h1.
	pingFirst(t, a.Host(1), c.ip(1))
	for _, pr := range [][2]*site{{a, c}, {c, a}} {
		s, o := pr[0], pr[1]
		eventually(t, 5*time.Second, fmt.Sprintf("site %d: %s remote behind %s", s.n, o.mac(1), o.vtep), func() (bool, string) {
			e, ok := s.entry("br0", o.mac(1))
			return ok && e.Port == "tvx1000" && e.VTEP == o.vtep, fmt.Sprintf("%+v", e)
		})
	}
	kernelRx, trestleRx := b.linkRx(t, "tvx1000"), overlayCounts(1000, b)[0][0]
	sendCount(t, a.Host(1), harness.Marked(c.mac(1), a.mac(1), "three-unicast"), "three-unicast",
		recv{"site 1's h2", a.Host(2), 0},
		recv{"site 2's h1", b.Host(1), 0},
		recv{"site 2's h2", b.Host(2), 0},
		recv{"site 3's h1", c.Host(1), 1},
		recv{"site 3's h2", c.Host(2), 0})
	if now := b.linkRx(t, "tvx1000"); now != kernelRx {
		t.Errorf("site 2's vxlan device received %d packets during the unicast from site 1 to site 3", now-kernelRx)
	}
	if now := overlayCounts(1000, b)[0][0]; now != trestleRx {
		t.Errorf("site 2's overlay port counted %d packets in during the unicast from site 1 to site 3", now-trestleRx)
	}
}

// segment is the bridge and VLAN that carry vni at the site.
func (s *site) segment(vni uint32) (string, uint16) {
	switch {
	case s.layout == vlanAware:
		return "br0", map[uint32]uint16{1000: 10, 2000: 20}[vni]
	case vni == 2000:
		return "br1", 0
	}
	return "br0", 0
}

// TestOverlaySameMAC: one MAC in two VNIs is two stations. Site 1 (one
// VLAN-aware bridge: VLAN 10 is VNI 1000, VLAN 20 VNI 2000) has it on h1
// in VNI 1000, site 2 (a bridge a VNI) on h2 in VNI 2000: each site's
// table holds it twice, on its host's port in the one VNI and on the
// overlay port behind the other's VTEP in the other; zebra has it local in
// one VNI and remote in the other; and frames in each VNI, to the MAC or
// broadcast, reach that VNI's hosts only. On the VLAN-aware bridge each
// overlay port carries its VLAN: remote entries are in their VLAN, and a
// host of VLAN 10 reaches no host of VNI 2000.
func TestOverlaySameMAC(t *testing.T) {
	t.Parallel()
	a, b := newPair(t, false, vlanAware)
	waitFlood(t, a, b)
	m := net.HardwareAddr{2, 0, 0, 0, 0xee, 1}
	a.setMAC(t, 1, m)
	b.setMAC(t, 2, m)
	pingFirst(t, a.Host(1), b.ip(1))
	pingFirst(t, b.Host(2), a.ip(2))

	// host is the site's host of a VNI; home the site where m lives in it.
	host := map[uint32]int{1000: 1, 2000: 2}
	home := map[uint32]*site{1000: a, 2000: b}
	entryLine := func(br string, vlan uint16, port, vtep string) string {
		return fmt.Sprintf("%s VLAN %d on %s behind %q", br, vlan, port, vtep)
	}
	for _, pr := range [][2]*site{{a, b}, {b, a}} {
		s, o := pr[0], pr[1]
		var wantFDB, wantZebra []string
		for _, vni := range []uint32{1000, 2000} {
			br, vlan := s.segment(vni)
			if home[vni] == s {
				wantFDB = append(wantFDB, entryLine(br, vlan, harness.PortName(host[vni]), ""))
				wantZebra = append(wantZebra, zebraLine(vni, m, fmt.Sprintf("local tad%d", vni)))
			} else {
				wantFDB = append(wantFDB, entryLine(br, vlan, fmt.Sprintf("tvx%d", vni), o.vtep))
				wantZebra = append(wantZebra, zebraLine(vni, m, "remote "+o.vtep))
			}
		}
		slices.Sort(wantFDB)
		slices.Sort(wantZebra)
		eventually(t, 10*time.Second, fmt.Sprintf("site %d: %s twice, in each VNI", s.n, m), func() (bool, string) {
			// Site 2's br1 ages in 3s: the two stations speak again.
			_ = a.Host(1).Ping(b.ip(1), 1)
			_ = b.Host(2).Ping(a.ip(2), 1)
			var fdb, zebra []string
			for _, e := range s.FDB() {
				if e.MAC == m.String() {
					fdb = append(fdb, entryLine(e.Bridge, e.VLAN, e.Port, e.VTEP))
				}
			}
			for _, l := range s.state(t) {
				if strings.HasPrefix(l, "zebra:") && strings.Contains(l, m.String()) {
					zebra = append(zebra, l)
				}
			}
			slices.Sort(fdb)
			return slices.Equal(fdb, wantFDB) && slices.Equal(zebra, wantZebra), "table:" + diffLines(fdb, wantFDB) + "\nzebra:" + diffLines(zebra, wantZebra)
		})
	}

	eventually(t, 5*time.Second, "site 1: site 2's h1 remote in VLAN 10", func() (bool, string) {
		e, ok := a.entry("br0", b.mac(1))
		return ok && e.VLAN == 10 && e.Port == "tvx1000" && e.VTEP == b.vtep, fmt.Sprintf("%+v", e)
	})
	if err := a.Host(1).Ping(b.ip(2), 2); err == nil {
		t.Errorf("site 1's h1 (VLAN 10, VNI 1000) reached site 2's h2 (VNI 2000)")
	}

	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	sendCount(t, b.Host(1), harness.Marked(m, b.mac(1), "vni1000-to-m"), "vni1000-to-m",
		recv{"site 1's h1 (m in VNI 1000)", a.Host(1), 1},
		recv{"site 1's h2", a.Host(2), 0},
		recv{"site 2's h2 (m in VNI 2000)", b.Host(2), 0})
	sendCount(t, a.Host(2), harness.Marked(m, a.mac(2), "vni2000-to-m"), "vni2000-to-m",
		recv{"site 2's h2 (m in VNI 2000)", b.Host(2), 1},
		recv{"site 2's h1", b.Host(1), 0},
		recv{"site 1's h1 (m in VNI 1000)", a.Host(1), 0})
	sendCount(t, a.Host(1), harness.Marked(bcast, m, "vni1000-bcast"), "vni1000-bcast",
		recv{"site 2's h1", b.Host(1), 1},
		recv{"site 1's h2", a.Host(2), 0},
		recv{"site 2's h2", b.Host(2), 0})
	sendCount(t, b.Host(2), harness.Marked(bcast, m, "vni2000-bcast"), "vni2000-bcast",
		recv{"site 1's h2", a.Host(2), 1},
		recv{"site 1's h1", a.Host(1), 0},
		recv{"site 2's h1", b.Host(1), 0})
}

// endState is the state of site s of a pair with o, each a bridge a VNI,
// once their h1s have spoken: both VTEPs' type-3 routes in each VNI and
// both h1s' type-2 routes in VNI 1000; zebra's own h1 local and o's remote;
// o's h1 remote in trestle's table; o's VTEP in each flood list.
func endState(s, o *site) []string {
	var l []string
	for _, x := range []*site{s, o} {
		l = append(l, routeLine(1000, type2(x.mac(1)), x.vtep), routeLine(1000, type3(x.vtep), x.vtep), routeLine(2000, type3(x.vtep), x.vtep))
	}
	l = append(l,
		zebraLine(1000, s.mac(1), "local tad1000"),
		zebraLine(1000, o.mac(1), "remote "+o.vtep),
		remoteLine("br0", 0, o.mac(1), "tvx1000", o.vtep),
		floodLine(1000, []string{o.vtep}),
		floodLine(2000, []string{o.vtep}))
	slices.Sort(l)
	return l
}

// TestOverlayStartOrder: the same end state whatever the order of start.
// Both sites trestle first, then FRR restarted on both (FRR after
// trestle); and both FRR first. Each time, once a ping crossed, each
// site's routes, zebra's MACs, trestle's remote entries and flood lists
// (state) are the one set endState says, so every order ends the same.
func TestOverlayStartOrder(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		o    order
	}{{"trestle-first", trestleFirst}, {"frr-first", frrFirst}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ss := newSites(t, false, func(int) order { return c.o }, bridgePerVNI, bridgePerVNI)
			converged := func(what string) {
				t.Helper()
				waitFlood(t, ss...)
				pingFirst(t, ss[0].Host(1), ss[1].ip(1))
				for _, s := range ss {
					want := endState(s, others(ss, s)[0])
					eventually(t, 30*time.Second, fmt.Sprintf("site %d's end state, %s", s.n, what), func() (bool, string) {
						got := s.state(t)
						return slices.Equal(got, want), diffLines(got, want)
					})
				}
			}
			converged(c.name)
			if c.o == trestleFirst {
				for _, s := range ss {
					s.stopFRR(t)
				}
				for _, s := range ss {
					s.startFRR(t)
				}
				converged(c.name + ", FRR restarted")
			}
		})
	}
}
