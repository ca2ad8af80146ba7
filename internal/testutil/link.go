package testutil

import (
	"net"
	"testing"

	"github.com/trestle/trestle/internal/netnsutil"
)

// Veth creates a veth pair with end a in namespace na and end b in nb, sets
// both up and, when addrB is not "", assigns that CIDR address to b. The pair
// is created by a netlink socket inside na with its peer placed directly in
// nb, so it never exists in the caller's namespace. It is removed with the
// namespaces. na and nb may be the same namespace. (netnsutil.Veth)
func Veth(t testing.TB, na *NS, a string, nb *NS, b string, addrB string) {
	t.Helper()
	if err := netnsutil.Veth(&na.NS, a, &nb.NS, b, netnsutil.VethOpts{}); err != nil {
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
	if err := n.NS.AddrAdd(ifname, cidr); err != nil {
		t.Fatal(err)
	}
}

// MAC returns the hardware address of ifname in the namespace.
func (n *NS) MAC(t testing.TB, ifname string) net.HardwareAddr {
	t.Helper()
	mac, err := n.NS.MAC(ifname)
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// Attach joins host to the switch's namespace sw: a veth from sw's port
// to the host's ifname, which has mac (nil: the kernel's) from the start
// and then cidr ("": none). It is the lab's topology step too
// (netnsutil.Attach).
func Attach(t testing.TB, sw *NS, port string, host *NS, ifname string, mac net.HardwareAddr, cidr string) {
	t.Helper()
	if err := netnsutil.Attach(&sw.NS, netnsutil.Host{NS: &host.NS, If: ifname, MAC: mac, CIDR: cidr, Port: port}, 0); err != nil {
		t.Fatal(err)
	}
}
