package testutil

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// maxIfName is the longest interface name the kernel accepts (IFNAMSIZ-1).
const maxIfName = 15

// Veth creates a veth pair with end a in namespace na and end b in nb, sets
// both up and, when addrB is not "", assigns that CIDR address to b. The pair
// is created by a netlink socket inside na with its peer placed directly in
// nb, so it never exists in the caller's namespace. It is removed with the
// namespaces. na and nb may be the same namespace.
func Veth(t testing.TB, na *NS, a string, nb *NS, b string, addrB string) {
	t.Helper()
	for _, name := range []string{a, b} {
		if name == "" || len(name) > maxIfName {
			t.Fatalf("veth %s/%s: interface name %q must be 1..%d bytes", a, b, name, maxIfName)
		}
	}
	ha, err := na.handle()
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Close()
	peerNS, err := netns.GetFromPath(nb.Path)
	if err != nil {
		t.Fatalf("veth %s/%s: open netns %s: %v", a, b, nb.Name, err)
	}
	defer peerNS.Close()

	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: a},
		PeerName:      b,
		PeerNamespace: netlink.NsFd(peerNS),
	}
	if err := ha.LinkAdd(v); err != nil {
		t.Fatalf("create veth %s (netns %s) <-> %s (netns %s): %v", a, na.Name, b, nb.Name, err)
	}
	// Look both ends up again by name: the object LinkAdd filled in does
	// not describe the peer, which now lives in another namespace.
	if err := na.linkUp(a); err != nil {
		t.Fatal(err)
	}
	if err := nb.linkUp(b); err != nil {
		t.Fatal(err)
	}
	if addrB != "" {
		nb.AddrAdd(t, b, addrB)
	}
}

// AddrAdd assigns a CIDR address ("10.250.0.1/24", "fd00::1/64") to ifname in
// the namespace. IPv6 addresses skip duplicate address detection, so they
// are usable at once instead of staying tentative for about a second.
func (n *NS) AddrAdd(t testing.TB, ifname, cidr string) {
	t.Helper()
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		t.Fatalf("netns %s: parse address %q: %v", n.Name, cidr, err)
	}
	if addr.IP.To4() == nil {
		addr.Flags |= unix.IFA_F_NODAD
	}
	h, err := n.handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := linkByName(h, ifname)
	if err != nil {
		t.Fatalf("netns %s: look up %s: %v", n.Name, ifname, err)
	}
	if err := h.AddrAdd(l, addr); err != nil {
		t.Fatalf("netns %s: add %s to %s: %v", n.Name, cidr, ifname, err)
	}
}

// MAC returns the hardware address of ifname in the namespace.
func (n *NS) MAC(t testing.TB, ifname string) net.HardwareAddr {
	t.Helper()
	h, err := n.handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := linkByName(h, ifname)
	if err != nil {
		t.Fatalf("netns %s: look up %s: %v", n.Name, ifname, err)
	}
	return l.Attrs().HardwareAddr
}
