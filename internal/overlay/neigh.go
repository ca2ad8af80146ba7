package overlay

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/netnsutil"
)

// MAC+IP routes (EVPN type-2 with an IP, docs/overlay.md, "ARP
// suppression across the fabric"). zebra takes a VNI's IP neighbours from
// the IP neighbour table of the VNI's SVI, which for a bridge that is not
// VLAN-aware, as tbrVNI, is the bridge device itself (zebra's
// netlink_ipneigh_change, FRR 8.4):
//
//   - an entry without NTF_EXT_LEARNED in a valid state is a local
//     neighbour: zebra advertises it as a MAC+IP route, once its MAC is a
//     local one (the advertise port's entry). trestle writes its
//     neighbour table's local entries so, NUD_NOARP: valid and "locally
//     active" for zebra, never probed by the kernel (the bridge has no
//     address to probe from), and deleted when the table drops them (zebra
//     ignores the deletion of a NUD_PERMANENT entry, so permanent is not
//     used);
//   - an entry with NTF_EXT_LEARNED is zebra's own: a remote neighbour it
//     installed from a MAC+IP route of another VTEP. trestle reads those
//     into its neighbour table as remote entries and never writes or
//     deletes them.
//
// IPv4 and IPv6: the bridge has IPv6 for its neighbour table alone
// (neighOnlyIPv6: no address, so none of the host's own DAD, MLD or
// router solicitations enter the overlay, and nothing taken from the
// overlay's router advertisements). The other devices the daemon makes
// have IPv6 off (noIPv6).

// IPNeigh is an IP neighbour of a VNI's bridge.
type IPNeigh struct {
	IP     netip.Addr
	MAC    net.HardwareAddr
	Remote bool // NTF_EXT_LEARNED: zebra's, from a MAC+IP route
}

// IPNeighKernel is a Kernel that holds the VNIs' bridges' IP neighbours.
type IPNeighKernel interface {
	IPNeighs(bridge int) ([]IPNeigh, error)
	SetIPNeigh(bridge int, ip netip.Addr, mac net.HardwareAddr) error
	DelIPNeigh(bridge int, ip netip.Addr) error
}

// IPNeighs implements IPNeighKernel.
func (Netlink) IPNeighs(bridge int) ([]IPNeigh, error) {
	// Each dump is tried again when a change interrupted it (zebra
	// writing neighbours meanwhile): a partial one would read as
	// withdrawals.
	var ns, ns6 []netlink.Neigh
	if err := netnsutil.RetryIntr(func() (err error) { ns, err = netlink.NeighList(bridge, unix.AF_INET); return err }); err != nil {
		return nil, err
	}
	// A kernel without IPv6 (or a bridge with IPv6 off) has no IPv6
	// neighbours: none is no error. One still interrupted is.
	err := netnsutil.RetryIntr(func() (err error) { ns6, err = netlink.NeighList(bridge, unix.AF_INET6); return err })
	switch {
	case errors.Is(err, netlink.ErrDumpInterrupted):
		return nil, err
	case err == nil:
		ns = append(ns, ns6...)
	}
	var out []IPNeigh
	for _, n := range ns {
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok || n.LinkIndex != bridge || len(n.HardwareAddr) != 6 || n.State&(unix.NUD_FAILED|unix.NUD_INCOMPLETE) != 0 {
			continue
		}
		out = append(out, IPNeigh{IP: a.Unmap(), MAC: n.HardwareAddr, Remote: n.Flags&unix.NTF_EXT_LEARNED != 0})
	}
	return out, nil
}

// SetIPNeigh implements IPNeighKernel: a local neighbour, NUD_NOARP.
func (Netlink) SetIPNeigh(bridge int, ip netip.Addr, mac net.HardwareAddr) error {
	return netlink.NeighSet(&netlink.Neigh{LinkIndex: bridge, Family: family(ip), IP: ip.AsSlice(), HardwareAddr: mac, State: unix.NUD_NOARP})
}

// family is ip's address family.
func family(ip netip.Addr) int {
	if ip.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// DelIPNeigh implements IPNeighKernel; one already gone is no error.
func (Netlink) DelIPNeigh(bridge int, ip netip.Addr) error {
	err := netlink.NeighDel(&netlink.Neigh{LinkIndex: bridge, Family: family(ip), IP: ip.AsSlice()})
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// SyncNeighs makes VNI vni's local IP neighbours local (IPv4 and IPv6
// but for IPv4-mapped IPv6 addresses, which are left out), writing what is missing or differs and deleting the local
// ones no longer wanted, and returns its remote ones (zebra's). A kernel
// without IP neighbours, or a VNI not held, has none.
func (m *Manager) SyncNeighs(vni uint32, local map[netip.Addr]net.HardwareAddr) (map[netip.Addr]net.HardwareAddr, error) {
	k, ok := m.k.(IPNeighKernel)
	if !ok {
		return nil, nil
	}
	m.mu.Lock()
	v := m.vnis[vni]
	br := 0
	if v != nil {
		br = v.Dev.Bridge
	}
	m.mu.Unlock()
	if br == 0 {
		return nil, nil
	}
	have, err := k.IPNeighs(br)
	if err != nil {
		return nil, fmt.Errorf("VNI %d: read the IP neighbours of its bridge: %w", vni, err)
	}
	remote := map[netip.Addr]net.HardwareAddr{}
	mine := map[netip.Addr]net.HardwareAddr{}
	for _, n := range have {
		if n.Remote {
			remote[n.IP] = n.MAC
		} else {
			mine[n.IP] = n.MAC
		}
	}
	var errs []error
	for ip, mac := range local {
		if ip.Is4In6() || remote[ip] != nil && remote[ip].String() == mac.String() {
			continue
		}
		if old, ok := mine[ip]; ok && old.String() == mac.String() {
			continue
		}
		if err := k.SetIPNeigh(br, ip, mac); err != nil {
			errs = append(errs, fmt.Errorf("VNI %d: write neighbour %s at %s: %w", vni, ip, mac, err))
		}
	}
	for ip := range mine {
		if _, ok := local[ip]; !ok {
			if err := k.DelIPNeigh(br, ip); err != nil {
				errs = append(errs, fmt.Errorf("VNI %d: delete neighbour %s: %w", vni, ip, err))
			}
		}
	}
	return remote, errors.Join(errs...)
}
