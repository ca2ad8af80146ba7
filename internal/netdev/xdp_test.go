package netdev

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"

	"github.com/trestle/trestle/internal/testutil"
)

func attr(typ uint16, payload []byte) []byte {
	b := make([]byte, 4, 4+len(payload)+3)
	binary.NativeEndian.PutUint16(b[0:], uint16(4+len(payload)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// The kernel's answer: ifindex, a pad attribute before the 64-bit
// features, then others; a short or lying tail ends the walk.
func TestFindAttr(t *testing.T) {
	feat := make([]byte, 8)
	binary.NativeEndian.PutUint64(feat, uint64(XDPBasic|XDPNdoXmit))
	msg := append(append(attr(netdevAttrIfindex, []byte{7, 0, 0, 0}), attr(2, nil)...), attr(netdevAttrXDPFeat, feat)...)
	v, ok := findAttr(msg, netdevAttrXDPFeat)
	if !ok || XDPFeatures(binary.NativeEndian.Uint64(v)) != XDPBasic|XDPNdoXmit {
		t.Fatalf("features: %v %v", v, ok)
	}
	if _, ok := findAttr(msg[:len(msg)-3], netdevAttrXDPFeat); ok {
		t.Errorf("a cut attribute was read")
	}
	bad := attr(netdevAttrIfindex, []byte{1, 2, 3, 4})
	binary.NativeEndian.PutUint16(bad[0:], 200) // longer than the message
	if _, ok := findAttr(bad, netdevAttrIfindex); ok {
		t.Errorf("an attribute longer than the message was read")
	}
	if s := (XDPBasic | XDPRedirect | XDPNdoXmit).String(); s != "basic,redirect,ndo-xmit" {
		t.Errorf("String: %q", s)
	}
}

// What the kernel says of a veth follows its peer: ndo-xmit once the peer
// has GRO on; a bridge device has no XDP at all. Asked many times, the
// answer never fails (the library's generic netlink header sent garbage in
// its reserved field, which the kernel refused now and then).
func TestReadXDPFeatures(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNS(t, "xf")
	err := ns.Do(func() error {
		la := netlink.NewLinkAttrs()
		la.Name = "xa"
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "xb"}); err != nil {
			return err
		}
		bl := netlink.NewLinkAttrs()
		bl.Name = "xbr"
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: bl}); err != nil {
			return err
		}
		for _, n := range []string{"xa", "xb", "xbr"} {
			l, err := netlink.LinkByName(n)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
		}
		xa, _ := netlink.LinkByName("xa")
		br, _ := netlink.LinkByName("xbr")
		for i := 0; i < 200; i++ {
			for _, l := range []netlink.Link{xa, br} {
				if _, err := ReadXDPFeatures(l.Attrs().Index); err != nil {
					return fmt.Errorf("ask %d of %s: %w", i, l.Attrs().Name, err)
				}
			}
		}
		if f, _ := ReadXDPFeatures(br.Attrs().Index); f != 0 {
			t.Errorf("bridge device: %v, want none", f)
		}
		if f, _ := ReadXDPFeatures(xa.Attrs().Index); !f.Has(XDPBasic) || f.Has(XDPNdoXmit) {
			t.Errorf("veth whose peer has GRO off: %v, want basic and no ndo-xmit", f)
		}
		et, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer et.Close()
		if err := et.Change("xb", map[string]bool{"rx-gro": true}); err != nil {
			return err
		}
		if f, _ := ReadXDPFeatures(xa.Attrs().Index); !f.Has(XDPNdoXmit) {
			t.Errorf("veth whose peer has GRO on: %v, want ndo-xmit", f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
