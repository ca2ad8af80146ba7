package overlay

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/tests/harness"
)

// linuxVNI is VNI vni of a Linux site: the bridge its hosts' segment
// names (br0 with h1 for VNI 1000, br1 with h2 for VNI 2000), the vxlan
// device vxlanVNI of the overlay's MTU, as the lab's overlay kind builds
// its Linux-bridge stand-in (lab.LinuxVNI).
func (s *site) linuxVNI(vni uint32) lab.LinuxVNI {
	br, _ := s.segment(vni)
	return lab.LinuxVNI{VNI: vni, Bridge: br, VXLAN: fmt.Sprintf("vxlan%d", vni), MTU: overlayMTU, Ports: []string{harness.PortName(vniHost(vni))}}
}

// vniHost is the host of a VNI at every site of the mixed fabric: h1 in
// VNI 1000, h2 in VNI 2000.
func vniHost(vni uint32) int {
	if vni == 2000 {
		return 2
	}
	return 1
}

// startLinux makes the Linux site's VNIs, then starts its FRR.
func (s *site) startLinux(t *testing.T, beforeFRR ...func()) {
	t.Helper()
	for _, vni := range s.layout.vnis() {
		if err := s.fr.SetupLinuxVNI(t.Context(), s.linuxVNI(vni)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range beforeFRR {
		f()
	}
	s.startFRR(t)
}

// kernelEntry is an entry of `bridge -j fdb show`.
type kernelEntry struct {
	MAC    string   `json:"mac"`
	Ifname string   `json:"ifname"`
	Dst    string   `json:"dst"`
	Master string   `json:"master"`
	Flags  []string `json:"flags"`
	State  string   `json:"state"`
}

// kernelFDB is the Linux site's FDB of VNI vni: the entries of its
// bridge's ports, the vxlan device's own (self) among them.
func (s *site) kernelFDB(t *testing.T, vni uint32) []kernelEntry {
	t.Helper()
	br, _ := s.segment(vni)
	out := s.SW.MustExec(t, "bridge", "-j", "fdb", "show", "br", br)
	var es []kernelEntry
	if err := json.Unmarshal([]byte(out), &es); err != nil {
		t.Fatalf("bridge -j fdb show br %s: %v\n%s", br, err, out)
	}
	return es
}

// kernelFlood is the Linux site's flood list of VNI vni, sorted: the
// VTEPs of the zero MAC on its vxlan device (zebra's, from type-3 routes).
func (s *site) kernelFlood(t *testing.T, vni uint32) []string {
	var list []string
	for _, e := range s.kernelFDB(t, vni) {
		if e.Ifname == s.linuxVNI(vni).VXLAN && e.MAC == "00:00:00:00:00:00" && e.Dst != "" {
			list = append(list, e.Dst)
		}
	}
	slices.Sort(list)
	return list
}

// at says where site s has mac in VNI vni: "local PORT" on a host's port,
// "remote VTEP" on the overlay behind a VTEP, "" nowhere. trestle's table
// (`trestle fdb show`: the segment's entry, its VTEP); the Linux bridge's
// (`bridge fdb show`: the bridge's entry on a port or the vxlan device,
// and the device's own entry of the MAC, which names the VTEP).
func (s *site) at(t *testing.T, vni uint32, mac net.HardwareAddr) string {
	t.Helper()
	if s.layout != linuxBridge {
		br, vlan := s.segment(vni)
		e, ok := s.entry(br, mac)
		switch {
		case !ok || e.VLAN != vlan:
			return ""
		case e.VTEP != "" && e.Port == fmt.Sprintf("tvx%d", vni):
			return "remote " + e.VTEP
		case e.VTEP == "":
			return "local " + e.Port
		}
		return fmt.Sprintf("%+v", e)
	}
	vx := s.linuxVNI(vni).VXLAN
	where, dst := "", ""
	for _, e := range s.kernelFDB(t, vni) {
		if e.MAC != mac.String() {
			continue
		}
		switch {
		case e.Master != "" && e.Ifname == vx:
			where = "remote"
		case e.Master != "":
			where = "local " + e.Ifname
		case e.Ifname == vx && slices.Contains(e.Flags, "self"):
			dst = e.Dst
		}
	}
	if where == "remote" {
		return "remote " + dst
	}
	return where
}

// waitAt waits until each site has mac of VNI vni where want says (at).
func waitAt(t *testing.T, what string, vni uint32, mac net.HardwareAddr, want map[*site]string) {
	t.Helper()
	eventually(t, 10*time.Second, what, func() (bool, string) {
		ok, last := true, ""
		for s, w := range want {
			got := s.at(t, vni, mac)
			ok = ok && got == w
			last += fmt.Sprintf(" site %d: %q (want %q);", s.n, got, w)
		}
		return ok, last
	})
}

// TestOverlayMixed: a fabric of two trestle sites (site 1 a VLAN-aware
// bridge, VLAN 10 on VNI 1000 and VLAN 20 on VNI 2000; site 2 a bridge a
// VNI) and a site that runs the Linux bridge with a vxlan device a VNI
// and FRR (site 3, the lab's overlay stand-in), in VNIs 1000 and 2000,
// with trestle's host ports in each mode. Every site has both others in
// each VNI's flood list; between every pair of sites, in each VNI, a ping
// crosses and each side has the other's host remote behind the other's
// VTEP (trestle's table for the Linux site's hosts, `bridge fdb show` for
// trestle's); a broadcast from each site's host of a VNI reaches that
// VNI's hosts at the other sites once and no other host; known unicast
// in VNI 1000 from each site to each other reaches its host only. A MAC
// moves from site 1 to the Linux site and back: every site follows it,
// and frames to it from the site it did not move between, and from the
// site it left, reach it at its new place only. A station whose port goes
// down, at the Linux site or at a trestle site, is withdrawn from every
// site.
func TestOverlayMixed(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, overlayMixed)
}

// overlayMixed is TestOverlayMixed with trestle's host ports in mode.
func overlayMixed(t *testing.T, mode string) {
	ss := build(t, lab.SitesOpts{}, []string{mode, mode, ""}, vlanAware, bridgePerVNI, linuxBridge)
	a, b, c := ss[0], ss[1], ss[2]
	a.start(t, trestleFirst)
	c.startLinux(t)
	b.start(t, frrFirst)
	waitFlood(t, ss...)

	vnis := []uint32{1000, 2000}
	for i, s := range ss {
		for _, o := range ss[i+1:] {
			for _, vni := range vnis {
				h := vniHost(vni)
				pingFirst(t, s.Host(h), o.ip(h))
				pingFirst(t, o.Host(h), s.ip(h))
				// Site 2's br1 ages in 3s: the hosts speak at each look.
				eventually(t, 10*time.Second, fmt.Sprintf("VNI %d: sites %d and %d have each other's host remote", vni, s.n, o.n), func() (bool, string) {
					_ = s.Host(h).Ping(o.ip(h), 1)
					sa, oa := s.at(t, vni, o.mac(h)), o.at(t, vni, s.mac(h))
					return sa == "remote "+o.vtep && oa == "remote "+s.vtep, fmt.Sprintf("site %d has site %d's host %q, site %d has site %d's %q", s.n, o.n, sa, o.n, s.n, oa)
				})
			}
		}
	}
	// zebra on the Linux site has trestle's hosts as remote MACs, and
	// zebra beside trestle the Linux site's: the routes crossed.
	for _, pr := range [][2]*site{{c, a}, {c, b}, {a, c}, {b, c}} {
		s, o := pr[0], pr[1]
		if m := s.evpnMAC(t, 1000, o.mac(1)); m.Type != "remote" || m.RemoteVTEP != o.vtep {
			t.Errorf("zebra at site %d: site %d's h1 %+v, want remote behind %s", s.n, o.n, m, o.vtep)
		}
	}
	if out, _ := a.CLI("fdb", "show"); !strings.Contains(out, "remote "+c.vtep) {
		t.Errorf("site 1's fdb show has no entry behind the Linux site's VTEP:\n%s", out)
	}

	// Raw frames: a broadcast from each site's host of each VNI reaches
	// the VNI's host at each other site once, and no host of the other
	// VNI (site 2's br1 may have aged: a broadcast floods all the same).
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	for _, s := range ss {
		for _, vni := range vnis {
			h := vniHost(vni)
			marker := fmt.Sprintf("mixed-%s-bcast-%d-%d", mode, s.n, vni)
			rs := []recv{{fmt.Sprintf("site %d's h%d (other VNI)", s.n, 3-h), s.Host(3 - h), 0}}
			for _, o := range others(ss, s) {
				rs = append(rs, recv{fmt.Sprintf("site %d's h%d", o.n, h), o.Host(h), 1}, recv{fmt.Sprintf("site %d's h%d (other VNI)", o.n, 3-h), o.Host(3 - h), 0})
			}
			sendCount(t, s.Host(h), harness.Marked(bcast, s.mac(h), marker), marker, rs...)
		}
	}
	// Known unicast in VNI 1000, from each site to each other: to its
	// host only, not flooded to the third.
	for _, s := range ss {
		for _, o := range others(ss, s) {
			third := others(others(ss, s), o)[0]
			marker := fmt.Sprintf("mixed-%s-unicast-%d-%d", mode, s.n, o.n)
			sendCount(t, s.Host(1), harness.Marked(o.mac(1), s.mac(1), marker), marker,
				recv{fmt.Sprintf("site %d's h1", o.n), o.Host(1), 1},
				recv{fmt.Sprintf("site %d's h1 (third site)", third.n), third.Host(1), 0})
		}
	}

	// A MAC moves from site 1 (trestle) to the Linux site, then back.
	m := a.mac(1)
	away1, away3 := net.HardwareAddr{2, 0, 0, 0, 1, 0x77}, net.HardwareAddr{2, 0, 0, 0, 3, 0x77}
	seq0 := a.evpnMAC(t, 1000, m)
	a.setMAC(t, 1, away1)
	c.setMAC(t, 1, m)
	pingFirst(t, c.Host(1), b.ip(1))
	waitAt(t, "m moved to the Linux site", 1000, m, map[*site]string{a: "remote " + c.vtep, b: "remote " + c.vtep, c: "local port-h1"})
	seq1 := c.evpnMAC(t, 1000, m)
	if seq1.Type != "local" || seq1.LocalSequence <= seq0.LocalSequence {
		t.Errorf("zebra at the Linux site after the move: %+v; before, at site 1: %+v: want local with a higher sequence", seq1, seq0)
	}
	sendCount(t, b.Host(1), harness.Marked(m, b.mac(1), "mixed-"+mode+"-to-3"), "mixed-"+mode+"-to-3",
		recv{"site 3's h1 (m now)", c.Host(1), 1}, recv{"site 1's h1 (m before)", a.Host(1), 0})
	sendCount(t, a.Host(1), harness.Marked(m, away1, "mixed-"+mode+"-1-to-3"), "mixed-"+mode+"-1-to-3",
		recv{"site 3's h1 (m now)", c.Host(1), 1}, recv{"site 2's h1", b.Host(1), 0})

	c.setMAC(t, 1, away3)
	a.setMAC(t, 1, m)
	pingFirst(t, a.Host(1), b.ip(1))
	waitAt(t, "m moved back to site 1", 1000, m, map[*site]string{a: "local port-h1", b: "remote " + a.vtep, c: "remote " + a.vtep})
	if seq2 := a.evpnMAC(t, 1000, m); seq2.Type != "local" || seq2.LocalSequence <= seq1.LocalSequence {
		t.Errorf("zebra at site 1 after the move back: %+v; at the Linux site before: %+v: want local with a higher sequence", seq2, seq1)
	}
	sendCount(t, b.Host(1), harness.Marked(m, b.mac(1), "mixed-"+mode+"-to-1"), "mixed-"+mode+"-to-1",
		recv{"site 1's h1 (m now)", a.Host(1), 1}, recv{"site 3's h1 (m before)", c.Host(1), 0})
	sendCount(t, c.Host(1), harness.Marked(m, away3, "mixed-"+mode+"-3-to-1"), "mixed-"+mode+"-3-to-1",
		recv{"site 1's h1 (m now)", a.Host(1), 1}, recv{"site 2's h1", b.Host(1), 0})

	// A station that leaves is withdrawn everywhere: its port goes down
	// at the Linux site (VNI 1000) and at site 1 (VNI 2000).
	waitAt(t, "the Linux site's h1 (now away3) advertised", 1000, away3, map[*site]string{a: "remote " + c.vtep, b: "remote " + c.vtep, c: "local port-h1"})
	waitAt(t, "site 1's h2 advertised", 2000, a.mac(2), map[*site]string{a: "local port-h2", b: "remote " + a.vtep, c: "remote " + a.vtep})
	c.Host(1).MustExec(t, "ip", "link", "set", "dev", "eth0", "down")
	waitAt(t, "the Linux site's h1 withdrawn once its port is down", 1000, away3, map[*site]string{a: "", b: "", c: ""})
	a.Host(2).MustExec(t, "ip", "link", "set", "dev", "eth0", "down")
	waitAt(t, "site 1's h2 withdrawn once its port is down", 2000, a.mac(2), map[*site]string{a: "", b: "", c: ""})
}
