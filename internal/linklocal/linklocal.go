// Package linklocal is the IPv6 link-local address a host gives itself
// from its MAC (modified EUI-64, RFC 4291 appendix A), as the kernel does
// with its default addr_gen_mode. A leaf shared by the configuration (an
// ip_guard port's addresses) and the CNI plugin (the addresses it binds a
// container's port to), so that the plugin needs nothing of the
// configuration's checker.
package linklocal

import (
	"net"
	"net/netip"
)

// EUI64 is the link-local address fe80::/64 with the modified EUI-64
// interface identifier of the 48-bit MAC mac; fe80:: for any other length.
func EUI64(mac net.HardwareAddr) netip.Addr {
	var a [16]byte
	a[0], a[1] = 0xfe, 0x80
	if len(mac) == 6 {
		a[8], a[9], a[10] = mac[0]^0x02, mac[1], mac[2]
		a[11], a[12] = 0xff, 0xfe
		a[13], a[14], a[15] = mac[3], mac[4], mac[5]
	}
	return netip.AddrFrom16(a)
}
