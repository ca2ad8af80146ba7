package overlay

import (
	"net"
	"net/netip"
	"slices"
	"testing"

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
	s := Spec{VNI: 4242, VTEP: netip.MustParseAddr("192.0.2.1"), DstPort: 4789}
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
		// Ensure again adopts: the same devices.
		again, err := k.Ensure(s)
		if err != nil || again != dev {
			t.Errorf("Ensure again = %+v, %v; want %+v", again, err, dev)
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
		for _, name := range []string{n.Bridge, n.VXLAN, n.Adv, n.AdvPeer} {
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
