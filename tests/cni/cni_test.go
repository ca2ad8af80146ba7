// Package cni tests the CNI plugin (cmd/trestle-cni) as runtimes run it:
// cnitool drives it in the switch namespace, where the daemon runs, and
// the host-local IPAM plugin gives the addresses; each container is a
// namespace of its own, and frames between them go through trestle.
package cni

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/gopacket/gopacket/layers"

	"github.com/trestle/trestle/internal/linklocal"
	"github.com/trestle/trestle/internal/netnsutil"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// containerID is cnitool's container id for a netns path.
func containerID(netns string) string {
	s := sha512.Sum512([]byte(netns))
	return fmt.Sprintf("cnitool-%x", s[:10])
}

// hostName is the plugin's host end of an attachment ("tr" and 13 hex
// digits): the result's interface with no sandbox.
func hostName(t *testing.T, r *current.Result) string {
	t.Helper()
	for _, i := range r.Interfaces {
		if i.Sandbox == "" {
			return i.Name
		}
	}
	t.Fatalf("result has no host interface: %+v", r.Interfaces)
	return ""
}

const pods = "[[bridge]]\nname = \"pods\"\n"

// TestAddCheckDel: without IPAM, ADD makes the veth (container end eth0
// with the result's MAC, host end in the switch namespace) and a run-time
// port of the attachment's owner that forwards; CHECK passes; a second
// ADD of the same attachment fails and leaves the first as it was; DEL
// removes the port and the veth, and a second DEL succeeds.
func TestAddCheckDel(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	nw := l.network("plain", map[string]any{"bridge": "pods"})
	c := testutil.NewNS(t, "c1")
	r := l.add(nw, c)
	if len(r.Interfaces) != 2 || len(r.IPs) != 0 {
		t.Fatalf("result: %+v", r)
	}
	host, cont := r.Interfaces[0], r.Interfaces[1]
	if host.Sandbox != "" || cont.Sandbox != c.Path || cont.Name != "eth0" {
		t.Fatalf("interfaces: host %+v, container %+v", host, cont)
	}
	if mac := c.MAC(t, "eth0").String(); mac != cont.Mac {
		t.Errorf("eth0 has MAC %s, the result %s", mac, cont.Mac)
	}
	if !slices.Contains(links(t, l.SW), host.Name) {
		t.Errorf("no host end %s in the switch namespace", host.Name)
	}
	own := owner(nw, r)
	p, ok := l.port(own)
	if !ok || p.Bridge != "pods" || p.Origin != "run" || p.Interface != host.Name || p.State != "up" {
		t.Fatalf("port of %q: %+v (found %t), want %s up in pods", own, p, ok, host.Name)
	}
	l.must("check", nw, c)

	if out, err := l.cnitool("add", nw, c); err == nil || !strings.Contains(err.Error(), "already") {
		t.Errorf("second ADD: %v\n%s", err, out)
	}
	if p2, ok := l.port(own); !ok || p2.Interface != host.Name || p2.State != "up" {
		t.Errorf("after the second ADD, the port: %+v (found %t)", p2, ok)
	}
	l.must("check", nw, c)

	l.must("del", nw, c)
	if _, ok := l.port(own); ok {
		t.Errorf("port of %q still there after DEL", own)
	}
	if v := hostVeths(t, l.SW); len(v) != 0 {
		t.Errorf("host ends left after DEL: %v", v)
	}
	if slices.Contains(links(t, c), "eth0") {
		t.Error("eth0 left in the container after DEL")
	}
	l.must("del", nw, c)

	// CHECK sees a port that is gone; DEL then succeeds.
	r = l.add(nw, c)
	if out, err := l.CLI("port", "del", "pods", hostName(t, r)); err != nil {
		t.Fatalf("trestle port del: %v\n%s", err, out)
	}
	if out, err := l.cnitool("check", nw, c); err == nil || !strings.Contains(err.Error(), "no port") {
		t.Errorf("CHECK of an attachment whose port is gone: %v\n%s", err, out)
	}
	l.must("del", nw, c)
}

// TestIsolationAndRefusals: portIsolation makes protected ports, which
// reach an unprotected one and not each other; a key of the bridge
// plugin that trestle lacks is refused with code 2 before anything is
// made.
func TestIsolationAndRefusals(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	iso := l.network("iso", map[string]any{"bridge": "pods", "portIsolation": true})
	plain := l.network("plain", map[string]any{"bridge": "pods"})
	a, b, c := testutil.NewNS(t, "a"), testutil.NewNS(t, "b"), testutil.NewNS(t, "c")
	ra := l.add(iso, a)
	l.add(iso, b)
	l.add(plain, c)
	a.AddrAdd(t, "eth0", "10.98.0.1/24")
	b.AddrAdd(t, "eth0", "10.98.0.2/24")
	c.AddrAdd(t, "eth0", "10.98.0.3/24")
	if p, _ := l.port(owner(iso, ra)); !p.Protected {
		t.Errorf("port of an isolated network: %+v, want protected", p)
	}
	l.must("check", iso, a)
	for _, x := range []*testutil.NS{a, b} {
		if err := x.Ping("10.98.0.3", 2); err != nil {
			t.Errorf("protected %s to unprotected c: %v", x.Name, err)
		}
	}
	if err := a.Ping("10.98.0.2", 1); err == nil {
		t.Error("two protected ports reached each other")
	}

	d := testutil.NewNS(t, "d")
	for _, key := range []string{"hairpinMode", "ipMasq", "isGateway"} {
		env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=refused", "CNI_NETNS=" + d.Path, "CNI_IFNAME=eth0"}
		_, e := l.plugin(map[string]any{"bridge": "pods", key: true}, env...)
		if e == nil || e.Code != types.ErrUnsupportedField || !strings.Contains(e.Msg, key) {
			t.Errorf("ADD with %s: true: %+v, want code 2 naming it", key, e)
		}
	}
	if got := links(t, d); !slices.Equal(got, []string{"lo"}) {
		t.Errorf("a refused ADD left %v in the container", got)
	}
	for _, x := range []struct {
		nw string
		ns *testutil.NS
	}{{iso, a}, {iso, b}, {plain, c}} {
		l.must("del", x.nw, x.ns)
	}
}

// TestMacSpoofChk: macspoofchk locks the port to the container
// interface's MAC (issue 29): the container talks from its own MAC, CHECK
// passes, and a frame from any other source, another container's among
// them, is dropped at the port and counted, and moves no entry.
func TestMacSpoofChk(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	spoof := l.network("spoof", map[string]any{"bridge": "pods", "macspoofchk": true})
	plain := l.network("plain", map[string]any{"bridge": "pods"})
	a, b := testutil.NewNS(t, "a"), testutil.NewNS(t, "b")
	ra := l.add(spoof, a)
	rb := l.add(plain, b)
	a.AddrAdd(t, "eth0", "10.97.0.1/24")
	b.AddrAdd(t, "eth0", "10.97.0.2/24")
	ma, mb := a.MAC(t, "eth0"), b.MAC(t, "eth0")
	pa, _ := l.port(owner(spoof, ra))
	pb, _ := l.port(owner(plain, rb))
	if !pa.Locked || !slices.Equal(pa.AllowedMACs, []string{ma.String()}) {
		t.Fatalf("port of the macspoofchk network: %+v, want locked to %s", pa, ma)
	}
	if pb.Locked {
		t.Errorf("port of the plain network is locked")
	}
	l.must("check", spoof, a)
	if err := a.Ping("10.97.0.2", 2); err != nil {
		t.Errorf("a, from its own MAC, to b: %v", err)
	}
	if e, ok := l.FDBEntry(mb); !ok || e.Port != pb.Interface {
		t.Fatalf("b's entry: %+v (found %t), want on %s", e, ok, pb.Interface)
	}

	onB := b.Capture(t, "eth0")
	before := l.Stats(pa.Interface).Drops["locked"]
	forged := net.HardwareAddr{0x02, 0x66, 0, 0, 0, 0x01}
	for _, src := range []net.HardwareAddr{forged, mb} {
		if err := a.RawSend("eth0", harness.Marked(harness.VLANBcast(), src, "spoofed")); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.RawSend("eth0", harness.Marked(harness.VLANBcast(), ma, "own")); err != nil {
		t.Fatal(err)
	}
	if onB.WaitFor(harness.HasMarker("own"), 1, 3*time.Second) != 1 {
		t.Error("b did not get a's frame from its own MAC")
	}
	if n := onB.WaitFor(harness.HasMarker("spoofed"), 1, 500*time.Millisecond); n != 0 {
		t.Errorf("b got %d frames a sent from another source", n)
	}
	if got := l.Stats(pa.Interface).Drops["locked"] - before; got != 2 {
		t.Errorf("locked drops on a's port: %d more, want 2", got)
	}
	if _, ok := l.FDBEntry(forged); ok {
		t.Error("the forged source was learned")
	}
	if e, ok := l.FDBEntry(mb); !ok || e.Port != pb.Interface {
		t.Errorf("b's entry after a sent from b's MAC: %+v (found %t), want still on %s", e, ok, pb.Interface)
	}
	if err := b.Ping("10.97.0.1", 2); err != nil {
		t.Errorf("b to a after the attempts: %v", err)
	}
	l.must("del", spoof, a)
	l.must("del", plain, b)
	if _, ok := l.FDBEntry(ma); ok {
		t.Error("a's allowed MAC stayed in the table after DEL")
	}
}

// TestIPGuard: ipguard binds each container's port to the addresses
// host-local gave it and the EUI-64 link-local address of its MAC (issue
// 29): the containers ping each other over IPv4 and IPv6 (ARP and
// neighbour discovery of their own addresses pass), CHECK passes, and an
// ARP reply claiming the other's address, an IPv4 frame from a forged
// source and an advertisement of the other's IPv6 address are dropped at
// the port and counted, and never reach the other.
func TestIPGuard(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	nw := l.network("guard", map[string]any{"bridge": "pods", "ipguard": true, "ipam": l.hostLocal("10.93.0.0/24", "fd00:93::/64")})
	a, b := testutil.NewNS(t, "a"), testutil.NewNS(t, "b")
	ra, rb := l.add(nw, a), l.add(nw, b)
	ma, mb := a.MAC(t, "eth0"), b.MAC(t, "eth0")
	pa, _ := l.port(owner(nw, ra))
	if want := append(ips(ra), linklocal.EUI64(ma).String()); !pa.IPGuard || !slices.Equal(pa.AllowedIPs, want) {
		t.Fatalf("port of a: ip_guard %t allowed_ips %v, want true %v", pa.IPGuard, pa.AllowedIPs, want)
	}
	if !pa.RAGuard || !pa.DHCPGuard {
		t.Errorf("port of a: ra_guard %t dhcp_guard %t, want both (ipguard turns them on)", pa.RAGuard, pa.DHCPGuard)
	}
	l.must("check", nw, a)
	for _, ip := range ips(rb) {
		if err := a.Ping(ip, 2); err != nil {
			t.Errorf("ping %s from a: %v", ip, err)
		}
	}

	a4, b4, b6 := ips(ra)[0], ips(rb)[0], ips(rb)[1]
	onB := b.Capture(t, "eth0")
	before := l.Stats(pa.Interface).Drops
	for _, f := range [][]byte{
		harness.ARPFrame(t, ma, layers.ARPReply, b4, b4, "spoofed-arp"),
		harness.UDP4Frame(t, mb, ma, "10.93.0.250", b4, 1, 2, "spoofed-ip"),
		harness.NAFrame(t, ma, ips(ra)[1], b6, "spoofed-na"),
		harness.UDP4Frame(t, mb, ma, a4, b4, 1, 2, "own"),
	} {
		if err := a.RawSend("eth0", f); err != nil {
			t.Fatal(err)
		}
	}
	if onB.WaitFor(harness.HasVMarker("own"), 1, 3*time.Second) != 1 {
		t.Error("b did not get a's frame from its own address")
	}
	if n := onB.WaitFor(harness.HasVMarker("spoofed"), 1, 500*time.Millisecond); n != 0 {
		t.Errorf("b got %d frames a sent from addresses not its own", n)
	}
	after := l.Stats(pa.Interface).Drops
	for _, r := range []string{"ip_guard_arp", "ip_guard_ip", "ip_guard_nd"} {
		if got := after[r] - before[r]; got != 1 {
			t.Errorf("%s drops on a's port: %d more, want 1 (before %v, after %v)", r, got, before, after)
		}
	}
	for _, ip := range ips(ra) {
		if err := b.Ping(ip, 2); err != nil {
			t.Errorf("ping %s from b after the attempts: %v", ip, err)
		}
	}
	l.must("del", nw, a)
	l.must("del", nw, b)
}

// TestIPAM: host-local's addresses, IPv4, IPv6 and both, are on the
// containers' interfaces, CHECK passes, two containers ping each other
// through trestle, and DEL gives every address back.
func TestIPAM(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	for _, c := range []struct {
		name    string
		subnets []string
	}{
		{"v4", []string{"10.91.0.0/24"}},
		{"v6", []string{"fd00:91::/64"}},
		{"dual", []string{"10.92.0.0/24", "fd00:92::/64"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			nw := l.network(c.name, map[string]any{"bridge": "pods", "ipam": l.hostLocal(c.subnets...)})
			a, b := testutil.NewNS(t, c.name+"a"), testutil.NewNS(t, c.name+"b")
			ra, rb := l.add(nw, a), l.add(nw, b)
			for _, x := range []struct {
				ns *testutil.NS
				r  *current.Result
			}{{a, ra}, {b, rb}} {
				if len(x.r.IPs) != len(c.subnets) {
					t.Fatalf("%s: %d addresses, want %d: %+v", x.ns.Name, len(x.r.IPs), len(c.subnets), x.r.IPs)
				}
				var want []string
				for _, ip := range x.r.IPs {
					want = append(want, ip.Address.String())
				}
				if got := addrs(t, x.ns, "eth0"); !sameSet(got, want) {
					t.Errorf("%s eth0: %v, want the result's %v", x.ns.Name, got, want)
				}
				l.must("check", nw, x.ns)
			}
			for _, ip := range ips(rb) {
				if err := a.Ping(ip, 2); err != nil {
					t.Errorf("ping %s from a: %v", ip, err)
				}
			}
			l.must("del", nw, a)
			l.must("del", nw, b)
			if left := reservations(t, l, nw); len(left) != 0 {
				t.Errorf("host-local still holds %v after DEL", left)
			}
		})
	}
}

// TestOlderSpec: networks of spec versions before 1.1.0 work the same
// (the result is written in the network's version).
func TestOlderSpec(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	for i, v := range []string{"0.3.1", "0.4.0", "1.0.0"} {
		nw := l.networkOf(v, fmt.Sprintf("old%d", i), map[string]any{"bridge": "pods", "ipam": l.hostLocal(fmt.Sprintf("10.99.%d.0/24", i))})
		c := testutil.NewNS(t, fmt.Sprintf("old%d", i))
		out, err := l.cnitool("add", nw, c)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			CNIVersion string `json:"cniVersion"`
			IPs        []struct {
				Address string `json:"address"`
			} `json:"ips"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.CNIVersion != v || len(r.IPs) != 1 {
			t.Fatalf("spec %s: result %v %+v\n%s", v, err, r, out)
		}
		if got := addrs(t, c, "eth0"); !slices.Equal(got, []string{r.IPs[0].Address}) {
			t.Errorf("spec %s: eth0 has %v, the result %s", v, got, r.IPs[0].Address)
		}
		if v != "0.3.1" { // CHECK came with 0.4.0
			l.must("check", nw, c)
		}
		l.must("del", nw, c)
		if left := reservations(t, l, nw); len(left) != 0 {
			t.Errorf("spec %s: host-local keeps %v", v, left)
		}
	}
}

// reservations are the addresses host-local holds for a network.
func reservations(t *testing.T, l *lab, network string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(l.ipam, network))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if net.ParseIP(e.Name()) != nil {
			out = append(out, e.Name())
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestVLAN: an access port of VLAN 10 reaches another of VLAN 10 and not
// one of VLAN 20; a trunk carries VLAN 10 tagged both ways and, with vlan
// set too, 10 untagged as its native VLAN; port list and CHECK see the
// VLANs the network asks for.
func TestVLAN(t *testing.T) {
	t.Parallel()
	l := newLab(t, "[[bridge]]\nname = \"vl\"\n")
	a10 := l.network("a10", map[string]any{"bridge": "vl", "vlan": 10})
	a20 := l.network("a20", map[string]any{"bridge": "vl", "vlan": 20})
	trunk := l.network("trunk", map[string]any{"bridge": "vl", "vlanTrunk": []map[string]int{{"id": 10}, {"minID": 20, "maxID": 21}}})
	native := l.network("native", map[string]any{"bridge": "vl", "vlan": 10, "vlanTrunk": []map[string]int{{"id": 20}}})

	c1, c2, c3, c4, c5 := testutil.NewNS(t, "c1"), testutil.NewNS(t, "c2"), testutil.NewNS(t, "c3"), testutil.NewNS(t, "c4"), testutil.NewNS(t, "c5")
	r1 := l.add(a10, c1)
	l.add(a10, c2)
	l.add(a20, c3)
	r4 := l.add(trunk, c4)
	r5 := l.add(native, c5)
	c1.AddrAdd(t, "eth0", "10.10.0.1/24")
	c2.AddrAdd(t, "eth0", "10.10.0.2/24")
	c3.AddrAdd(t, "eth0", "10.10.0.3/24")
	c5.AddrAdd(t, "eth0", "10.10.0.5/24")

	if p, _ := l.port(owner(a10, r1)); p.VLAN != 10 || len(p.Trunk) != 0 {
		t.Errorf("access port: %+v, want VLAN 10", p)
	}
	if p, _ := l.port(owner(trunk, r4)); p.Trunk.String() != "10,20-21" || p.Native != 0 || p.VLAN != 0 {
		t.Errorf("trunk port: %+v, want trunk 10,20-21 and no native VLAN", p)
	}
	if p, _ := l.port(owner(native, r5)); p.Trunk.String() != "10,20" || p.Native != 10 {
		t.Errorf("trunk with vlan: %+v, want trunk 10,20 native 10", p)
	}
	all := []struct {
		nw string
		c  *testutil.NS
	}{{a10, c1}, {a10, c2}, {a20, c3}, {trunk, c4}, {native, c5}}
	for _, x := range all {
		l.must("check", x.nw, x.c)
	}
	for _, ip := range []string{"10.10.0.2", "10.10.0.5"} {
		if err := c1.Ping(ip, 2); err != nil {
			t.Errorf("VLAN 10: ping %s from c1: %v", ip, err)
		}
	}
	if err := c1.Ping("10.10.0.3", 1); err == nil {
		t.Error("c1 (VLAN 10) reached c3 (VLAN 20)")
	}

	// The trunk, with raw frames (a VLAN device needs the 8021q module).
	m1, m4 := c1.MAC(t, "eth0"), c4.MAC(t, "eth0")
	on4 := c4.Capture(t, "eth0")
	if err := c1.RawSend("eth0", harness.Marked(m4, m1, "to-trunk")); err != nil {
		t.Fatal(err)
	}
	if on4.WaitFor(taggedMarker(10, "to-trunk"), 1, 3*time.Second) != 1 {
		t.Error("the trunk did not get c1's frame tagged 10")
	}
	on1 := c1.Capture(t, "eth0")
	if err := c4.RawSend("eth0", tagged(m1, m4, 10, "from-trunk")); err != nil {
		t.Fatal(err)
	}
	if on1.WaitFor(harness.HasMarker("from-trunk"), 1, 3*time.Second) != 1 {
		t.Error("c1 did not get the trunk's frame of VLAN 10 untagged")
	}
	for _, x := range all {
		l.must("del", x.nw, x.c)
	}
}

// tagged is harness.Marked with an 802.1Q tag of vid.
func tagged(dst, src net.HardwareAddr, vid uint16, marker string) []byte {
	f := harness.Marked(dst, src, marker)
	return slices.Concat(f[:12], []byte{0x81, 0x00, byte(vid >> 8), byte(vid)}, f[12:])
}

// taggedMarker matches a frame tagged vid that carries marker.
func taggedMarker(vid uint16, marker string) func([]byte) bool {
	return func(f []byte) bool {
		return len(f) > 18 && f[12] == 0x81 && f[13] == 0 && (uint16(f[14])<<8|uint16(f[15]))&0xfff == vid && strings.HasPrefix(string(f[18:]), marker)
	}
}

// TestMTUAndMAC: mtu sets both ends; the MAC comes from runtimeConfig
// (CAP_ARGS), else args.cni.mac, else CNI_ARGS.
func TestMTUAndMAC(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	mtu := l.network("mtu", map[string]any{"bridge": "pods", "mtu": 1400})
	c := testutil.NewNS(t, "mtu")
	r := l.add(mtu, c)
	for _, x := range []struct {
		ns   *testutil.NS
		name string
	}{{c, "eth0"}, {l.SW, hostName(t, r)}} {
		if out := x.ns.MustExec(t, "ip", "-o", "link", "show", x.name); !strings.Contains(out, " mtu 1400 ") {
			t.Errorf("%s: %s, want mtu 1400", x.name, out)
		}
	}
	l.must("check", mtu, c)
	l.must("del", mtu, c)

	const envMAC, argsMAC, rtMAC = "02:00:00:00:aa:01", "02:00:00:00:aa:02", "02:00:00:00:aa:03"
	caps := map[string]any{"mac": true}
	plain := l.network("mac", map[string]any{"bridge": "pods", "capabilities": caps})
	withArgs := l.network("macargs", map[string]any{"bridge": "pods", "capabilities": caps, "args": map[string]any{"cni": map[string]any{"mac": argsMAC}}})
	for i, x := range []struct {
		nw   string
		env  []string
		want string
	}{
		{plain, []string{"CNI_ARGS=MAC=" + envMAC}, envMAC},
		{withArgs, []string{"CNI_ARGS=MAC=" + envMAC}, argsMAC},
		{withArgs, []string{"CNI_ARGS=MAC=" + envMAC, `CAP_ARGS={"mac": "` + rtMAC + `"}`}, rtMAC},
	} {
		c := testutil.NewNS(t, fmt.Sprintf("mac%d", i))
		r := l.add(x.nw, c, x.env...)
		if got := c.MAC(t, "eth0").String(); got != x.want || r.Interfaces[1].Mac != x.want {
			t.Errorf("%s %v: eth0 %s, result %s, want %s", x.nw, x.env, got, r.Interfaces[1].Mac, x.want)
		}
		l.must("check", x.nw, c, x.env...)
		l.must("del", x.nw, c, x.env...)
	}
}

// TestFailureCleanup: an ADD that fails at the port (no such bridge), at
// IPAM (no such plugin) or after it (a route host-local gives that cannot
// be set) leaves no veth, no port and no address reserved.
func TestFailureCleanup(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	badRoute := l.hostLocal("10.93.0.0/24")
	badRoute["routes"] = []map[string]string{{"dst": "10.200.0.0/16", "gw": "10.94.0.1"}}
	for _, x := range []struct {
		name string
		keys map[string]any
		want string
	}{
		{"nobridge", map[string]any{"bridge": "nosuch", "ipam": l.hostLocal("10.95.0.0/24")}, "nosuch"},
		{"noipam", map[string]any{"bridge": "pods", "ipam": map[string]any{"type": "no-such-ipam"}}, "no-such-ipam"},
		{"badroute", map[string]any{"bridge": "pods", "ipam": badRoute}, "route"},
	} {
		t.Run(x.name, func(t *testing.T) {
			nw := l.network(x.name, x.keys)
			c := testutil.NewNS(t, x.name)
			out, err := l.cnitool("add", nw, c)
			if err == nil || !strings.Contains(err.Error(), x.want) {
				t.Fatalf("ADD: %v, want a failure naming %q\n%s", err, x.want, out)
			}
			if got := links(t, c); !slices.Equal(got, []string{"lo"}) {
				t.Errorf("container keeps %v", got)
			}
			if v := hostVeths(t, l.SW); len(v) != 0 {
				t.Errorf("switch namespace keeps %v", v)
			}
			for _, p := range l.ports() {
				t.Errorf("port left: %+v", p)
			}
			if left := reservations(t, l, nw); len(left) != 0 {
				t.Errorf("host-local keeps %v reserved", left)
			}
			l.must("del", nw, c) // the runtime's DEL after a failed ADD
		})
	}
}

// TestDelGoneNetns: DEL after the container's namespace is gone succeeds,
// twice, and nothing is left: no port, no veth, no address.
func TestDelGoneNetns(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	nw := l.network("gone", map[string]any{"bridge": "pods", "ipam": l.hostLocal("10.96.0.0/24")})
	name := testutil.Prefix() + "-gone"
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() }) // gone already unless the test failed first
	c := &testutil.NS{NS: netnsutil.NS{Name: name, Path: "/run/netns/" + name}}
	r := l.add(nw, c)
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del %s: %v: %s", name, err, out)
	}
	l.must("del", nw, c)
	l.must("del", nw, c)
	if _, ok := l.port(owner(nw, r)); ok {
		t.Error("port left after DEL")
	}
	if v := hostVeths(t, l.SW); len(v) != 0 {
		t.Errorf("host ends left: %v", v)
	}
	if left := reservations(t, l, nw); len(left) != 0 {
		t.Errorf("host-local keeps %v", left)
	}
}

// TestGC: GC removes the ports (and veths) of its network whose
// attachments are not valid, and no other network's, and passes GC on to
// the IPAM plugin.
func TestGC(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	ga := l.network("ga", map[string]any{"bridge": "pods", "ipam": l.hostLocal("10.90.0.0/24")})
	gb := l.network("gb", map[string]any{"bridge": "pods"})
	var cs []*testutil.NS
	var rs []*current.Result
	for i := range 3 {
		c := testutil.NewNS(t, fmt.Sprintf("ga%d", i))
		cs, rs = append(cs, c), append(rs, l.add(ga, c))
	}
	cb := testutil.NewNS(t, "gb")
	rb := l.add(gb, cb)

	// The runtime's GC: c0's attachment is still valid.
	_, e := l.plugin(map[string]any{"name": ga, "bridge": "pods", "ipam": l.hostLocal("10.90.0.0/24"), "cni.dev/valid-attachments": []map[string]string{{"containerID": containerID(cs[0].Path), "ifname": "eth0"}}},
		"CNI_COMMAND=GC")
	if e != nil {
		t.Fatalf("GC: %+v", e)
	}
	owners := func() []string {
		var out []string
		for _, p := range l.ports() {
			out = append(out, p.Owner)
		}
		return out
	}
	if got, want := owners(), []string{owner(ga, rs[0]), owner(gb, rb)}; !sameSet(got, want) {
		t.Errorf("after GC keeping c0: ports of %q, want %q", got, want)
	}
	if v, want := hostVeths(t, l.SW), []string{hostName(t, rs[0]), hostName(t, rb)}; !sameSet(v, want) {
		t.Errorf("after GC: host ends %v, want %v", v, want)
	}
	// GC went on to host-local, which keeps c0's address only.
	if got, want := reservations(t, l, ga), ips(rs[0]); !sameSet(got, want) {
		t.Errorf("after GC: host-local holds %v, want %v", got, want)
	}
	// cnitool's GC passes no valid attachment: all of ga goes, gb stays.
	l.must("gc", ga, cs[0])
	if got, want := owners(), []string{owner(gb, rb)}; !sameSet(got, want) {
		t.Errorf("after cnitool gc: ports of %q, want %q", got, want)
	}
	if got := reservations(t, l, ga); len(got) != 0 {
		t.Errorf("after cnitool gc: host-local holds %v", got)
	}
	l.must("del", gb, cb)
}

// TestStatus: STATUS passes while the daemon answers and has the bridge,
// fails with code 50 otherwise; with the daemon down, ADD is "try again
// later" (code 11) and leaves nothing, and DEL succeeds.
func TestStatus(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	nw := l.network("st", map[string]any{"bridge": "pods"})
	c := testutil.NewNS(t, "st")
	l.must("status", nw, c)
	if _, e := l.plugin(map[string]any{"bridge": "nosuch"}, "CNI_COMMAND=STATUS"); e == nil || e.Code != types.ErrPluginNotAvailable || !strings.Contains(e.Msg, "nosuch") {
		t.Errorf("STATUS of a bridge the daemon lacks: %+v, want code 50", e)
	}
	if err := l.Daemon.Stop(); err != nil {
		t.Logf("daemon stopped: %v", err)
	}
	if out, err := l.cnitool("status", nw, c); err == nil {
		t.Errorf("cnitool status with the daemon down passed:\n%s", out)
	}
	if _, e := l.plugin(map[string]any{"bridge": "pods"}, "CNI_COMMAND=STATUS"); e == nil || e.Code != types.ErrPluginNotAvailable {
		t.Errorf("STATUS with the daemon down: %+v, want code 50", e)
	}
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=down", "CNI_NETNS=" + c.Path, "CNI_IFNAME=eth0"}
	if _, e := l.plugin(map[string]any{"bridge": "pods"}, env...); e == nil || e.Code != types.ErrTryAgainLater {
		t.Errorf("ADD with the daemon down: %+v, want code 11", e)
	}
	if got := links(t, c); !slices.Equal(got, []string{"lo"}) {
		t.Errorf("container keeps %v", got)
	}
	if v := hostVeths(t, l.SW); len(v) != 0 {
		t.Errorf("switch namespace keeps %v", v)
	}
	env[0] = "CNI_COMMAND=DEL"
	if _, e := l.plugin(map[string]any{"bridge": "pods"}, env...); e != nil {
		t.Errorf("DEL with the daemon down: %+v", e)
	}
}

// TestParallel: 20 ADDs at once, then 20 DELs at once (the runtime runs
// containers side by side): every one succeeds, each container gets its
// own address and port, two of them ping each other, and nothing is left.
func TestParallel(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	nw := l.network("par", map[string]any{"bridge": "pods", "ipam": l.hostLocal("10.97.0.0/24")})
	const n = 20
	cs := make([]*testutil.NS, n)
	for i := range cs {
		cs[i] = testutil.NewNS(t, fmt.Sprintf("p%d", i))
	}
	rs := make([]*current.Result, n)
	each := func(f func(i int) error) {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { errs[i] = f(i) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	each(func(i int) error {
		out, err := l.cnitool("add", nw, cs[i])
		if err != nil {
			return err
		}
		var r current.Result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			return err
		}
		rs[i] = &r
		return nil
	})
	seen := map[string]bool{}
	for i, r := range rs {
		if len(r.IPs) != 1 || seen[r.IPs[0].Address.IP.String()] {
			t.Errorf("container %d: addresses %+v (one each, none twice)", i, r.IPs)
		} else {
			seen[r.IPs[0].Address.IP.String()] = true
		}
	}
	ps := l.ports()
	if len(ps) != n {
		t.Errorf("%d ports, want %d", len(ps), n)
	}
	for _, p := range ps {
		if p.State != "up" || p.Origin != "run" {
			t.Errorf("port %+v, want up, run", p)
		}
	}
	if err := cs[0].Ping(ips(rs[n-1])[0], 2); err != nil {
		t.Errorf("ping between containers 0 and %d: %v", n-1, err)
	}
	each(func(i int) error { _, err := l.cnitool("del", nw, cs[i]); return err })
	if ps := l.ports(); len(ps) != 0 {
		t.Errorf("ports left after the DELs: %+v", ps)
	}
	if v := hostVeths(t, l.SW); len(v) != 0 {
		t.Errorf("host ends left: %v", v)
	}
	if left := reservations(t, l, nw); len(left) != 0 {
		t.Errorf("host-local keeps %v", left)
	}
}

// TestChainedTAP: after a plugin whose result holds a host-side TAP (as a
// VM's launcher makes), the plugin attaches that TAP instead of making a
// veth; frames go both ways between the TAP's holder and a container; DEL
// removes the port and leaves the TAP, which is not the plugin's.
func TestChainedTAP(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	tapName := testutil.Prefix() + "tap"
	tap := openTAP(t, l.SW, tapName)
	// The plugin before trestle: a script that reports the TAP.
	fixtures := t.TempDir()
	script := fmt.Sprintf(`#!/bin/sh
case "$CNI_COMMAND" in
ADD) echo '{"cniVersion": "1.1.0", "interfaces": [{"name": "%s"}]}' ;;
VERSION) echo '{"cniVersion": "1.1.0", "supportedVersions": ["1.0.0", "1.1.0"]}' ;;
esac
`, tapName)
	if err := os.WriteFile(filepath.Join(fixtures, "tap-fixture"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	vm := l.network("vm", map[string]any{"bridge": "pods"}, map[string]any{"type": "tap-fixture"})
	plain := l.network("plain", map[string]any{"bridge": "pods"})
	vmNS, c := testutil.NewNS(t, "vm"), testutil.NewNS(t, "c")
	path := []string{"CNI_PATH=" + pluginDir + ":" + toolsDir + ":" + fixtures}
	out, err := l.cnitool("add", vm, vmNS, path...)
	if err != nil {
		t.Fatal(err)
	}
	r := mustResult(t, out)
	if len(r.Interfaces) != 1 || r.Interfaces[0].Name != tapName {
		t.Errorf("chained result: %+v, want the TAP passed on", r.Interfaces)
	}
	own := fmt.Sprintf("%s %s eth0", vm, containerID(vmNS.Path))
	p, ok := l.port(own)
	if !ok || p.Interface != tapName || p.State != "up" {
		t.Fatalf("port of %q: %+v (found %t), want the TAP %s up", own, p, ok, tapName)
	}
	if v := hostVeths(t, l.SW); len(v) != 0 {
		t.Errorf("a veth was made: %v", v)
	}
	if _, err := l.cnitool("check", vm, vmNS, path...); err != nil {
		t.Error(err)
	}

	rc := l.add(plain, c)
	cmac, _ := net.ParseMAC(rc.Interfaces[1].Mac)
	vmMAC := net.HardwareAddr{2, 0, 0, 0, 0xbb, 1}
	capt := c.Capture(t, "eth0")
	if _, err := tap.Write(harness.Marked(cmac, vmMAC, "from-the-tap")); err != nil {
		t.Fatal(err)
	}
	if capt.WaitFor(harness.HasMarker("from-the-tap"), 1, 3*time.Second) != 1 {
		t.Error("the container did not get the TAP's frame")
	}
	got := make(chan bool, 1)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := tap.Read(buf)
			if err != nil {
				got <- false
				return
			}
			if harness.HasMarker("to-the-tap")(buf[:n]) {
				got <- true
				return
			}
		}
	}()
	if err := c.RawSend("eth0", harness.Marked(vmMAC, cmac, "to-the-tap")); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-got:
		if !ok {
			t.Error("reading the TAP failed")
		}
	case <-time.After(3 * time.Second):
		t.Error("the TAP did not get the container's frame")
	}

	if _, err := l.cnitool("del", vm, vmNS, path...); err != nil {
		t.Error(err)
	}
	if _, ok := l.port(own); ok {
		t.Error("the TAP's port is left after DEL")
	}
	if !slices.Contains(links(t, l.SW), tapName) {
		t.Error("DEL removed the TAP, which the plugin did not make")
	}
	l.must("del", plain, c)
}
