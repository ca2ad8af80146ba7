package overlay

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/testutil"
)

// TestNetlink makes a VNI's objects in a namespace of its own and checks
// them as zebra needs them, writes and deletes a local address on the
// advertise port, reads a remote one written as zebra writes it, adopts
// and removes.
func TestNetlink(t *testing.T) {
	testutil.RequireNetns(t)
	under := testutil.NewNS(t, "under")
	ns := testutil.NewNS(t, "vtep")
	testutil.Veth(t, under, "u0", ns, "u1", "192.0.2.1/24")
	k := Netlink{}
	s := Spec{VNI: 4242, VTEP: netip.MustParseAddr("192.0.2.1"), DstPort: 4789, Via: testProg(t)}
	err := ns.Do(func() error {
		if _, err := k.Ensure(Spec{VNI: 7, VTEP: netip.MustParseAddr("198.51.100.7"), DstPort: 4789}); err == nil {
			t.Error("Ensure with a VTEP of no interface: no error")
		}
		dev, err := k.Ensure(s)
		if err != nil {
			return err
		}
		n := NamesOf(s.VNI)
		vx, err := netlink.LinkByName(n.VXLAN)
		if err != nil {
			return err
		}
		v, ok := vx.(*netlink.Vxlan)
		if !ok || v.VxlanId != 4242 || v.Port != 4789 || v.Learning || !ipEqual(v.SrcAddr, s.VTEP) || v.MTU != 1500-50 ||
			v.MasterIndex != dev.Bridge || v.Index != dev.VXLAN || v.Attrs().Flags&unix.IFF_UP == 0 {
			t.Errorf("vxlan device %+v, devices %+v", vx, dev)
		}
		br, err := netlink.LinkByName(n.Bridge)
		if err != nil {
			return err
		}
		if b, ok := br.(*netlink.Bridge); !ok || (b.VlanFiltering != nil && *b.VlanFiltering) {
			t.Errorf("bridge %+v: not a bridge, or VLAN-aware", br)
		}
		adv, err := netlink.LinkByName(n.Adv)
		if err != nil {
			return err
		}
		if adv.Attrs().MasterIndex != dev.Bridge {
			t.Errorf("advertise port %s is not in %s", n.Adv, n.Bridge)
		}
		if pi, err := netlink.LinkGetProtinfo(adv); err != nil || pi.Learning || pi.Flood {
			t.Errorf("advertise port's bridge-port flags %+v, %v: want learning and flood off", pi, err)
		}
		if pi, err := netlink.LinkGetProtinfo(vx); err != nil || pi.Learning {
			t.Errorf("vxlan port's bridge-port flags %+v, %v: want learning off", pi, err)
		}
		checkTramp(t, n, dev, s.Via)
		// Ensure again adopts: the same devices.
		again, err := k.Ensure(s)
		if err != nil || again != dev {
			t.Errorf("Ensure again = %+v, %v; want %+v", again, err, dev)
		}
		// A way in that runs another program (an earlier daemon's
		// build) is given this one's.
		old := s
		old.Via = testProg(t)
		if again, err := k.Ensure(old); err != nil || again != dev {
			t.Errorf("Ensure with another program = %+v, %v; want %+v", again, err, dev)
		}
		checkTramp(t, n, dev, old.Via)
		if again, err := k.Ensure(s); err != nil || again != dev {
			t.Errorf("Ensure with the first program again = %+v, %v; want %+v", again, err, dev)
		}
		checkTramp(t, n, dev, s.Via)
		// Without a program there is no way in to make.
		if _, err := k.Ensure(Spec{VNI: 4343, VTEP: s.VTEP, DstPort: 4789}); err != nil {
			return err
		}
		if _, err := netlink.LinkByName(NamesOf(4343).Tramp); err == nil {
			t.Errorf("a VNI made with no program has an xdp way in")
		}
		if err := k.Remove(4343); err != nil {
			return err
		}
		// A local address, as zebra reads it: extern-learned on the
		// advertise port, reachable.
		mac := netHW("02:00:00:00:42:01")
		if err := k.SetLocal(dev.Adv, mac, false); err != nil {
			return err
		}
		fdb, err := k.FDB(dev.Adv)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(fdb, func(n Neigh) bool { return n.MAC.String() == mac.String() && n.Master && n.ExtLearned }) {
			t.Errorf("advertise port's FDB %+v lacks %s extern-learned", fdb, mac)
		}
		if err := k.DelLocal(dev.Adv, mac); err != nil {
			return err
		}
		if err := k.DelLocal(dev.Adv, mac); err != nil {
			t.Errorf("deleting an entry already gone: %v", err)
		}
		// A remote address and a flood entry as zebra writes them.
		rmac := netHW("02:00:00:00:42:02")
		for _, m := range []string{"00:00:00:00:00:00", rmac.String()} {
			if err := netlink.NeighAppend(&netlink.Neigh{LinkIndex: dev.VXLAN, Family: unix.AF_BRIDGE, HardwareAddr: netHW(m),
				IP: netip.MustParseAddr("192.0.2.9").AsSlice(), Flags: unix.NTF_SELF, State: unix.NUD_NOARP | unix.NUD_PERMANENT}); err != nil {
				return err
			}
		}
		// and the bridge's entry on the vxlan port, extern-learned.
		if err := netlink.NeighSet(&netlink.Neigh{LinkIndex: dev.VXLAN, Family: unix.AF_BRIDGE, HardwareAddr: rmac,
			Flags: unix.NTF_MASTER | unix.NTF_EXT_LEARNED, State: unix.NUD_REACHABLE}); err != nil {
			return err
		}
		m := NewManager(k)
		if vnis, err := m.Adopt([]uint32{4242, 7}); err != nil || !slices.Equal(vnis, []uint32{4242}) {
			t.Errorf("Adopt = %v, %v", vnis, err)
		}
		if _, _, err := m.Ensure(s); err != nil {
			return err
		}
		st, _ := m.Status(4242)
		if st.RemoteVTEPs != 1 || len(st.FloodVTEPs) != 1 || len(st.Remotes) != 1 || st.Remotes[0].MAC.String() != rmac.String() {
			t.Errorf("status after adopting %+v", st)
		}
		if err := m.Remove(4242); err != nil {
			return err
		}
		for _, name := range []string{n.Bridge, n.VXLAN, n.Adv, n.AdvPeer, n.Tramp, n.TrampPeer} {
			if _, err := netlink.LinkByName(name); err == nil {
				t.Errorf("%s is left after Remove", name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func netHW(s string) net.HardwareAddr { return mac(s) }

// checkTramp checks a VNI's xdp way in: a veth pair out of the bridge, up,
// of the largest MTU a veth takes, GRO on at the far end (so that XDP
// redirects into it are delivered) and prog there, the one filter of its
// tc ingress.
func checkTramp(t *testing.T, n Names, dev Devices, prog Prog) {
	t.Helper()
	tr, err := netlink.LinkByName(n.Tramp)
	if err != nil {
		t.Errorf("xdp way in %s: %v", n.Tramp, err)
		return
	}
	peer, err := netlink.LinkByName(n.TrampPeer)
	if err != nil {
		t.Errorf("its peer %s: %v", n.TrampPeer, err)
		return
	}
	if tr.Attrs().Index != dev.Tramp || peer.Attrs().Index != dev.TrampPeer || tr.Attrs().MasterIndex != 0 || tr.Attrs().MTU != trampMTU || peer.Attrs().MTU != trampMTU ||
		tr.Attrs().Flags&unix.IFF_UP == 0 || peer.Attrs().Flags&unix.IFF_UP == 0 {
		t.Errorf("xdp way in %+v, peer %+v; devices %+v: want its indexes, no master, MTU %d, both up", tr.Attrs(), peer.Attrs(), dev, trampMTU)
	}
	et, err := ethtool.NewEthtool()
	if err != nil {
		t.Fatal(err)
	}
	defer et.Close()
	if f, err := et.Features(n.TrampPeer); err != nil || !f["rx-gro"] {
		t.Errorf("%s: rx-gro %v, %v; want on", n.TrampPeer, f["rx-gro"], err)
	}
	fs, err := netlink.FilterList(peer, netlink.HANDLE_MIN_INGRESS)
	if err != nil || len(fs) != 1 {
		t.Errorf("%s's tc ingress filters %+v, %v; want one", n.TrampPeer, fs, err)
		return
	}
	if f, ok := fs[0].(*netlink.BpfFilter); !ok || !f.DirectAction || f.Id != int(prog.ID) {
		t.Errorf("%s's tc ingress filter %+v; want program %d in direct action", n.TrampPeer, fs[0], prog.ID)
	}
}

// testProg loads a tc program that passes every frame.
func testProg(t *testing.T) Prog {
	t.Helper()
	p, id := testutil.LoadProgram(t, &ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	return Prog{FD: p.FD(), ID: uint32(id)}
}

// TestNetlinkBridgeIPv6: the VNI's bridge has IPv6 for its neighbour table
// alone, on a host that routes IPv6 too (forwarding on, as FRR hosts
// often are): no address, nothing taken from router advertisements,
// multicast snooping off, and no multicast group of its own that it would
// report into the overlay (a forwarding device joins all-routers,
// ff02::2, and sends MLD reports for it from ::).
func TestNetlinkBridgeIPv6(t *testing.T) {
	testutil.RequireNetns(t)
	under := testutil.NewNS(t, "under")
	ns := testutil.NewNS(t, "vtep")
	testutil.Veth(t, under, "u0", ns, "u1", "192.0.2.1/24")
	s := Spec{VNI: 4242, VTEP: netip.MustParseAddr("192.0.2.1"), DstPort: 4789}
	err := ns.Do(func() error {
		for _, k := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/forwarding", []byte("1"), 0); err != nil {
				t.Skipf("no IPv6 to route: %v", err)
			}
		}
		if _, err := (Netlink{}).Ensure(s); err != nil {
			return err
		}
		n := NamesOf(s.VNI)
		br, err := netlink.LinkByName(n.Bridge)
		if err != nil {
			return err
		}
		if b, ok := br.(*netlink.Bridge); !ok || b.MulticastSnooping == nil || *b.MulticastSnooping {
			t.Errorf("bridge %+v: multicast snooping not off", br)
		}
		for k, want := range map[string]string{"disable_ipv6": "0", "accept_ra": "0", "autoconf": "0", "accept_redirects": "0", "addr_gen_mode": "1", "forwarding": "0"} {
			b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + n.Bridge + "/" + k)
			if got := strings.TrimSpace(string(b)); err != nil || got != want {
				t.Errorf("%s's %s = %q (%v), want %s", n.Bridge, k, got, err, want)
			}
		}
		if as, err := netlink.AddrList(br, unix.AF_INET6); err != nil || len(as) != 0 {
			t.Errorf("%s's IPv6 addresses %v (%v), want none", n.Bridge, as, err)
		}
		b, err := os.ReadFile("/proc/thread-self/net/igmp6") // this thread's namespace
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			// index name group users flags timer; ff02::1 and ff01::1
			// are never reported (the kernel marks them so).
			f := strings.Fields(l)
			if len(f) > 2 && f[1] == n.Bridge && f[2] != "ff020000000000000000000000000001" && f[2] != "ff010000000000000000000000000001" {
				t.Errorf("%s is in multicast group %s, which it would report into the overlay", n.Bridge, f[2])
			}
		}
		// Its neighbour table takes both families, read back as local.
		m := netHW("02:00:00:00:42:03")
		want := []netip.Addr{netip.MustParseAddr("10.42.0.3"), netip.MustParseAddr("fd42::3")}
		for _, ip := range want {
			if err := (Netlink{}).SetIPNeigh(br.Attrs().Index, ip, m); err != nil {
				t.Errorf("SetIPNeigh %s: %v", ip, err)
			}
		}
		ns, err := Netlink{}.IPNeighs(br.Attrs().Index)
		var got []netip.Addr
		for _, n := range ns {
			if n.MAC.String() == m.String() && !n.Remote {
				got = append(got, n.IP)
			}
		}
		slices.SortFunc(got, func(a, b netip.Addr) int { return a.Compare(b) })
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("IPNeighs = %+v, %v; want %v local at %s", ns, err, want, m)
		}
		return Netlink{}.Remove(s.VNI)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSnoops: only a bridge that says it snoops is told not to; a
// kernel without snooping says nothing, and telling it would be a link
// event each apply.
func TestSnoops(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		name string
		l    netlink.Link
		want bool
	}{
		{"snooping", &netlink.Bridge{MulticastSnooping: &on}, true},
		{"not snooping", &netlink.Bridge{MulticastSnooping: &off}, false},
		{"a kernel without snooping", &netlink.Bridge{}, false},
		{"not a bridge", &netlink.Dummy{}, false},
	} {
		if got := snoops(tc.l); got != tc.want {
			t.Errorf("%s: snoops = %v, want %v", tc.name, got, tc.want)
		}
	}
}
