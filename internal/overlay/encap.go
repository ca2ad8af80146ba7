package overlay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Encapsulation in the datapath (docs/overlay.md, "Encapsulation in the
// datapath"): a known unicast frame to a remote MAC (from an xdp or a tc
// port) is given its outer headers by the datapath itself and redirected into the underlay device,
// the way the vxlan device would send it, when the control plane has
// written the headers for that MAC. What the datapath writes in per frame
// is left zero here: the IPv4 total length and checksum, the UDP length
// and source port.

// HdrLen is the outer headers of IPv4 VXLAN: Ethernet, IPv4 (no options),
// UDP, VXLAN, as the datapath writes them (bpf/types.h's TR_ENCAP_HLEN).
const HdrLen = tbpf.EncapHdrLen

// NextHop is how the underlay reaches a VTEP: the device, its address and
// the neighbour's.
type NextHop struct {
	Ifindex int
	Src     net.HardwareAddr
	Dst     net.HardwareAddr
	MTU     int // the device's
}

// ErrUnresolved: the route or the neighbour of a VTEP is not known (yet):
// the vxlan device's own path (which resolves it) is taken meanwhile.
var ErrUnresolved = errors.New("next hop not resolved")

// usable neighbour states: the kernel would send to them.
const usable = unix.NUD_REACHABLE | unix.NUD_STALE | unix.NUD_DELAY | unix.NUD_PROBE | unix.NUD_PERMANENT | unix.NUD_NOARP

// ResolveNextHop looks up, in the namespace the process runs in, the route
// to vtep (from local, as the vxlan device sends) and the neighbour it
// goes through, as the kernel would for the vxlan device's packets. IPv4
// only; ErrUnresolved when the route or the neighbour's address is not
// known, or the device is no Ethernet device.
func ResolveNextHop(local, vtep netip.Addr) (NextHop, error) {
	if !vtep.Is4() || !local.Is4() {
		return NextHop{}, fmt.Errorf("%s: %w: IPv4 VTEPs only", vtep, ErrUnresolved)
	}
	rs, err := netlink.RouteGetWithOptions(vtep.AsSlice(), &netlink.RouteGetOptions{SrcAddr: local.AsSlice()})
	if err != nil || len(rs) == 0 {
		return NextHop{}, fmt.Errorf("route to %s: %v: %w", vtep, err, ErrUnresolved)
	}
	r := rs[0]
	via := vtep
	if gw, ok := netip.AddrFromSlice(r.Gw); ok && r.Gw != nil {
		via = gw.Unmap()
	}
	l, err := netlink.LinkByIndex(r.LinkIndex)
	if err != nil {
		return NextHop{}, fmt.Errorf("the device to %s: %v: %w", vtep, err, ErrUnresolved)
	}
	if len(l.Attrs().HardwareAddr) != 6 {
		return NextHop{}, fmt.Errorf("%s goes by %s, no Ethernet device: %w", vtep, l.Attrs().Name, ErrUnresolved)
	}
	ns, err := netlink.NeighList(r.LinkIndex, netlink.FAMILY_V4)
	if err != nil {
		return NextHop{}, fmt.Errorf("neighbours of %s: %v: %w", l.Attrs().Name, err, ErrUnresolved)
	}
	for _, n := range ns {
		a, ok := netip.AddrFromSlice(n.IP)
		if ok && a.Unmap() == via && len(n.HardwareAddr) == 6 && n.State&usable != 0 {
			return NextHop{Ifindex: r.LinkIndex, Src: l.Attrs().HardwareAddr, Dst: n.HardwareAddr, MTU: l.Attrs().MTU}, nil
		}
	}
	return NextHop{}, fmt.Errorf("neighbour %s on %s: %w", via, l.Attrs().Name, ErrUnresolved)
}

// Header is the outer headers of VNI vni's frames from local to vtep by
// next hop nh, to UDP port dstport: Ethernet (nh's addresses, IPv4), IPv4
// (TTL 64, don't fragment: a frame too long for the overlay is dropped
// before, never fragmented after), UDP (no checksum, as RFC 7348 allows
// over IPv4), VXLAN (the I flag, the VNI). The per-frame fields are zero.
func Header(nh NextHop, local, vtep netip.Addr, vni uint32, dstport uint16) [HdrLen]byte {
	var h [HdrLen]byte
	copy(h[0:6], nh.Dst)
	copy(h[6:12], nh.Src)
	binary.BigEndian.PutUint16(h[12:14], unix.ETH_P_IP)
	ip := h[14:34]
	ip[0] = 0x45                                // version 4, 5 words
	binary.BigEndian.PutUint16(ip[6:8], 0x4000) // don't fragment
	ip[8] = 64                                  // TTL
	ip[9] = unix.IPPROTO_UDP
	l4, v4 := local.As4(), vtep.As4()
	copy(ip[12:16], l4[:])
	copy(ip[16:20], v4[:])
	udp := h[34:42]
	binary.BigEndian.PutUint16(udp[2:4], dstport)
	vx := h[42:50]
	vx[0] = 0x08 // I: the VNI is valid
	vx[4], vx[5], vx[6] = byte(vni>>16), byte(vni>>8), byte(vni)
	return h
}

// HeaderVTEP is the remote VTEP a header made by Header goes to.
func HeaderVTEP(h [HdrLen]byte) netip.Addr { return netip.AddrFrom4([4]byte(h[30:34])) }
