package overlay

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Netlink is the Kernel of the namespace the process runs in.
type Netlink struct{}

// Encapsulation: what VXLAN adds to a frame, outer IP header included: the
// header the datapath writes (bpf/types.h's TR_ENCAP_HLEN: Ethernet,
// IPv4, UDP, VXLAN), and over IPv6 the 20 bytes more of its header.
const (
	encap4 = tbpf.EncapHdrLen
	encap6 = encap4 + 40 - 20
)

// Ensure implements Kernel.
func (Netlink) Ensure(s Spec) (Devices, error) {
	var dev Devices
	n := NamesOf(s.VNI)
	underlay, err := underlayMTU(s.VTEP)
	if err != nil {
		return dev, err
	}
	mtu := s.MTU
	if mtu == 0 {
		mtu = underlay - encap4
		if s.VTEP.Is6() {
			mtu = underlay - encap6
		}
	}
	// The bridge: not VLAN-aware, no STP, no multicast snooping (which
	// would join the all-snoopers groups and report them into the
	// overlay), and IPv6 without an address of its own (neighOnlyIPv6).
	br, err := netlink.LinkByName(n.Bridge)
	if err != nil && !isNotFound(err) {
		return dev, fmt.Errorf("bridge %s: %w", n.Bridge, err)
	}
	if br != nil && br.Type() != "bridge" {
		return dev, fmt.Errorf("%s is a %s, not the bridge trestle makes: remove it", n.Bridge, br.Type())
	}
	if br == nil {
		// No VLAN filtering: the default, and this kernel is built
		// without it (asking for it off is refused).
		la := netlink.NewLinkAttrs()
		la.Name = n.Bridge
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil {
			return dev, fmt.Errorf("create bridge %s: %w", n.Bridge, err)
		}
		if br, err = netlink.LinkByName(n.Bridge); err != nil {
			return dev, fmt.Errorf("bridge %s: %w", n.Bridge, err)
		}
	}
	if snoops(br) {
		// Only the one setting: the bridge as read back also says VLAN
		// filtering off, which a kernel without it refuses to be told.
		off, la := false, netlink.NewLinkAttrs()
		la.Name, la.Index = n.Bridge, br.Attrs().Index
		if err := netlink.LinkModify(&netlink.Bridge{LinkAttrs: la, MulticastSnooping: &off}); err != nil {
			return dev, fmt.Errorf("bridge %s: turn multicast snooping off: %w", n.Bridge, err)
		}
	}
	neighOnlyIPv6(n.Bridge)
	if err := setUp(br); err != nil {
		return dev, fmt.Errorf("set %s up: %w", n.Bridge, err)
	}
	dev.Bridge = br.Attrs().Index

	// The vxlan device: VNI, local VTEP, UDP port and nolearning are
	// fixed when it is made, so one that differs is made again.
	vx, err := netlink.LinkByName(n.VXLAN)
	if err != nil && !isNotFound(err) {
		return dev, fmt.Errorf("vxlan device %s: %w", n.VXLAN, err)
	}
	if vx != nil {
		v, ok := vx.(*netlink.Vxlan)
		same := ok && v.VxlanId == int(s.VNI) && v.Port == s.DstPort && !v.Learning && !v.FlowBased && ipEqual(v.SrcAddr, s.VTEP)
		if !same {
			if err := netlink.LinkDel(vx); err != nil {
				return dev, fmt.Errorf("remove %s, which differs from its configuration: %w", n.VXLAN, err)
			}
			vx = nil
		}
	}
	if vx == nil {
		la := netlink.NewLinkAttrs()
		la.Name, la.MTU = n.VXLAN, mtu
		if err := netlink.LinkAdd(&netlink.Vxlan{LinkAttrs: la, VxlanId: int(s.VNI), SrcAddr: s.VTEP.AsSlice(), Port: s.DstPort, Learning: false}); err != nil {
			return dev, fmt.Errorf("create vxlan device %s: %w", n.VXLAN, err)
		}
		if vx, err = netlink.LinkByName(n.VXLAN); err != nil {
			return dev, fmt.Errorf("vxlan device %s: %w", n.VXLAN, err)
		}
	}
	if vx.Attrs().MTU != mtu {
		if err := netlink.LinkSetMTU(vx, mtu); err != nil {
			return dev, fmt.Errorf("set the MTU of %s to %d: %w", n.VXLAN, mtu, err)
		}
	}
	noIPv6(n.VXLAN)
	if vx.Attrs().MasterIndex != dev.Bridge {
		if err := netlink.LinkSetMasterByIndex(vx, dev.Bridge); err != nil {
			return dev, fmt.Errorf("put %s in %s: %w", n.VXLAN, n.Bridge, err)
		}
	}
	// Remote addresses are zebra's to write, never learned from frames.
	if err := ensureBrport(vx, false); err != nil {
		return dev, fmt.Errorf("%s: %w", n.VXLAN, err)
	}
	if err := setUp(vx); err != nil {
		return dev, fmt.Errorf("set %s up: %w", n.VXLAN, err)
	}
	dev.VXLAN, dev.MTU = vx.Attrs().Index, mtu

	// The advertise port: a veth whose peer is idle, that the bridge
	// never floods to and that learns nothing but what trestle writes.
	adv, err := netlink.LinkByName(n.Adv)
	if err != nil && !isNotFound(err) {
		return dev, fmt.Errorf("advertise port %s: %w", n.Adv, err)
	}
	if adv != nil && adv.Type() != "veth" {
		return dev, fmt.Errorf("%s is a %s, not the advertise port trestle makes: remove it", n.Adv, adv.Type())
	}
	if adv == nil {
		la := netlink.NewLinkAttrs()
		la.Name = n.Adv
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: n.AdvPeer}); err != nil {
			return dev, fmt.Errorf("create advertise port %s: %w", n.Adv, err)
		}
		if adv, err = netlink.LinkByName(n.Adv); err != nil {
			return dev, fmt.Errorf("advertise port %s: %w", n.Adv, err)
		}
	}
	noIPv6(n.Adv)
	noIPv6(n.AdvPeer)
	if adv.Attrs().MasterIndex != dev.Bridge {
		if err := netlink.LinkSetMasterByIndex(adv, dev.Bridge); err != nil {
			return dev, fmt.Errorf("put %s in %s: %w", n.Adv, n.Bridge, err)
		}
	}
	if err := ensureBrport(adv, true); err != nil {
		return dev, fmt.Errorf("%s: %w", n.Adv, err)
	}
	// Both ends up: zebra takes local MACs of ports that are up.
	if peer, err := netlink.LinkByName(n.AdvPeer); err == nil {
		_ = setUp(peer)
	}
	if err := setUp(adv); err != nil {
		return dev, fmt.Errorf("set %s up: %w", n.Adv, err)
	}
	dev.Adv = adv.Attrs().Index
	if s.Via.FD == 0 {
		return dev, nil
	}
	if dev.Tramp, dev.TrampPeer, err = ensureTramp(n, mtu, s.Via); err != nil {
		// Half a way in would take XDP redirects and lose them: none.
		if l, lerr := netlink.LinkByName(n.Tramp); lerr == nil {
			_ = netlink.LinkDel(l)
		}
		dev.Tramp, dev.TrampPeer = 0, 0
		return dev, fmt.Errorf("%w: %w", ErrNoWayIn, err)
	}
	return dev, nil
}

// trampMTU is the MTU of both ends of the xdp way in: the most a veth
// takes. An XDP redirect into a veth longer than its peer's MTU is dropped
// without a word; here every frame goes through, and trestle_via drops
// (and counts, as overlay_mtu) what is too long for the vxlan device.
const trampMTU = 65535

// ensureTramp makes the way in for the frames of xdp ports: a vxlan device
// has no ndo_xdp_xmit, so an XDP program cannot redirect into it. The
// frames go into a veth (Tramp) instead; its peer has GRO on, which makes
// the kernel deliver XDP redirects into the pair (and coalesces TCP
// segments again, for the vxlan device's GSO), and the datapath's
// trestle_via at its tc ingress (cls_bpf, direct action) checks each
// against the vxlan device's MTU and sends it on there. The pair is
// outside the VNI's bridge: zebra never sees it. It returns the ifindexes
// of both ends.
func ensureTramp(n Names, mtu int, via Prog) (tramp, peer int, err error) {
	tr, err := netlink.LinkByName(n.Tramp)
	if err != nil && !isNotFound(err) {
		return 0, 0, fmt.Errorf("xdp way in %s: %w", n.Tramp, err)
	}
	if tr != nil && tr.Type() != "veth" {
		return 0, 0, fmt.Errorf("%s is a %s, not the veth trestle makes: remove it", n.Tramp, tr.Type())
	}
	if tr == nil {
		la := netlink.NewLinkAttrs()
		la.Name, la.MTU = n.Tramp, trampMTU
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: n.TrampPeer}); err != nil {
			return 0, 0, fmt.Errorf("create xdp way in %s: %w", n.Tramp, err)
		}
		if tr, err = netlink.LinkByName(n.Tramp); err != nil {
			return 0, 0, fmt.Errorf("xdp way in %s: %w", n.Tramp, err)
		}
	}
	pl, err := netlink.LinkByName(n.TrampPeer)
	if err != nil {
		return 0, 0, fmt.Errorf("xdp way in %s: its peer %s: %w", n.Tramp, n.TrampPeer, err)
	}
	noIPv6(n.Tramp)
	noIPv6(n.TrampPeer)
	for _, l := range []netlink.Link{tr, pl} {
		if l.Attrs().MTU != trampMTU {
			if err := netlink.LinkSetMTU(l, trampMTU); err != nil {
				return 0, 0, fmt.Errorf("set the MTU of %s to %d: %w", l.Attrs().Name, trampMTU, err)
			}
		}
	}
	if err := peerGRO(n.TrampPeer); err != nil {
		return 0, 0, fmt.Errorf("xdp way in %s: %w", n.Tramp, err)
	}
	if err := ensureVia(pl, via); err != nil {
		return 0, 0, fmt.Errorf("xdp way in %s: %w", n.Tramp, err)
	}
	for _, l := range []netlink.Link{pl, tr} {
		if err := setUp(l); err != nil {
			return 0, 0, fmt.Errorf("set %s up: %w", l.Attrs().Name, err)
		}
	}
	return tr.Attrs().Index, pl.Attrs().Index, nil
}

// peerGRO turns GRO on on name unless it is (a change is a link event).
func peerGRO(name string) error {
	et, err := ethtool.NewEthtool()
	if err != nil {
		return fmt.Errorf("ethtool: %w", err)
	}
	defer et.Close()
	f, err := et.Features(name)
	if err != nil {
		return fmt.Errorf("read the features of %s: %w", name, err)
	}
	if f["rx-gro"] {
		return nil
	}
	if err := et.Change(name, map[string]bool{"rx-gro": true}); err != nil {
		return fmt.Errorf("turn GRO on on %s: %w", name, err)
	}
	return nil
}

// viaName names the filter, so that `tc filter show` says whose it is.
const viaName = "trestle_via"

// ensureVia makes l's tc ingress run prog on every frame: a clsact qdisc
// with one cls_bpf filter in direct-action mode. The filter of another
// program (an earlier daemon's build, taken over) is given prog in place,
// so that no frame goes unswitched; anything else found there is cleared
// first: the qdisc goes with its filters.
func ensureVia(l netlink.Link, prog Prog) error {
	idx := l.Attrs().Index
	f := &netlink.BpfFilter{
		FilterAttrs:  netlink.FilterAttrs{LinkIndex: idx, Parent: netlink.HANDLE_MIN_INGRESS, Priority: 1, Protocol: unix.ETH_P_ALL},
		Fd:           prog.FD,
		Name:         viaName,
		DirectAction: true,
	}
	fs, err := netlink.FilterList(l, netlink.HANDLE_MIN_INGRESS)
	if err == nil && len(fs) == 1 {
		if cur, ok := fs[0].(*netlink.BpfFilter); ok && cur.DirectAction && cur.Priority == f.Priority && cur.Protocol == f.Protocol {
			if cur.Id == int(prog.ID) {
				return nil
			}
			f.Handle = cur.Handle
			if err := netlink.FilterReplace(f); err != nil {
				return fmt.Errorf("give the tc ingress of %s this daemon's %s: %w", l.Attrs().Name, viaName, err)
			}
			return nil
		}
	}
	qd := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if err := netlink.QdiscDel(qd); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear the tc ingress of %s: %w", l.Attrs().Name, err)
	}
	if err := netlink.QdiscAdd(qd); err != nil {
		return fmt.Errorf("add clsact to %s: %w", l.Attrs().Name, err)
	}
	if err := netlink.FilterAdd(f); err != nil {
		return fmt.Errorf("attach %s to the tc ingress of %s: %w", viaName, l.Attrs().Name, err)
	}
	return nil
}

// underlayMTU is the MTU of the interface that has vtep: the underlay's.
// A VTEP on the loopback (as FRR advises for routed underlays) says
// nothing of the path, so the Ethernet default is taken then.
func underlayMTU(vtep netip.Addr) (int, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return 0, fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if !ipEqual(a.IP, vtep) {
			continue
		}
		l, err := netlink.LinkByIndex(a.LinkIndex)
		if err != nil {
			return 0, fmt.Errorf("the interface of vtep %s: %w", vtep, err)
		}
		if l.Attrs().Flags&net.FlagLoopback != 0 {
			return 1500, nil
		}
		return l.Attrs().MTU, nil
	}
	return 0, fmt.Errorf("vtep %s %w", vtep, ErrNoVTEP)
}

// HasAddr says whether a is an address of the namespace.
func HasAddr(a netip.Addr) (bool, error) {
	_, err := underlayMTU(a)
	if errors.Is(err, ErrNoVTEP) {
		return false, nil
	}
	return err == nil, err
}

func ipEqual(ip net.IP, a netip.Addr) bool {
	b, ok := netip.AddrFromSlice(ip)
	return ok && b.Unmap() == a.Unmap()
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}

// noIPv6 turns IPv6 off on a device the daemon made: no link-local
// address, so none of the host's own IPv6 (DAD, MLD) enters the overlay.
// A kernel without IPv6 has nothing to turn off.
func noIPv6(name string) {
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0)
}

// neighOnlyIPv6 gives a VNI's bridge IPv6 for its neighbour table alone,
// where zebra reads the local IPv6 neighbours it advertises as MAC+IP
// routes and writes the remote ones (neigh.go): no address (no link-local,
// so no DAD, no router solicitation, no MLD report of its own), and
// nothing taken from the overlay's frames (no router advertisement, no
// address made from a prefix, no redirect): a tenant's RA across the
// fabric gives the host no address and no route. The settings go before
// IPv6 is turned on, so no link-local address is ever made; a bridge an
// older build made with IPv6 off is switched the same way. forwarding
// off too: a device that forwards (the host's default, on a host that
// routes IPv6) joins all-routers and reports it from :: into the overlay,
// address or not; a later write of the host's all/forwarding turns it on
// again until the next Ensure. A kernel without IPv6 has nothing to set.
func neighOnlyIPv6(name string) {
	conf := "/proc/sys/net/ipv6/conf/" + name + "/"
	for _, kv := range [][2]string{{"accept_ra", "0"}, {"autoconf", "0"}, {"accept_redirects", "0"}, {"forwarding", "0"}, {"addr_gen_mode", "1"}, {"disable_ipv6", "0"}} {
		_ = os.WriteFile(conf+kv[0], []byte(kv[1]), 0)
	}
}

// snoops says whether bridge l says it snoops multicast. A kernel built
// without snooping says nothing, and is not told: it would ignore the
// setting, yet announce the change as a link event, and the daemon
// reconciles on link events (an apply that writes it again, each time).
func snoops(l netlink.Link) bool {
	b, ok := l.(*netlink.Bridge)
	return ok && b.MulticastSnooping != nil && *b.MulticastSnooping
}

// setUp sets l up unless it is: each change is a link event, and the
// daemon reconciles on link events.
func setUp(l netlink.Link) error {
	if l.Attrs().Flags&net.FlagUp != 0 {
		return nil
	}
	return netlink.LinkSetUp(l)
}

// ensureBrport turns learning off on a port of a VNI's bridge, and on the
// advertise port (noFlood) every kind of flood too, unless they are so
// already: a write makes the bridge tell a link change, and the daemon
// reconciles on those.
func ensureBrport(l netlink.Link, noFlood bool) error {
	pi, err := netlink.LinkGetProtinfo(l)
	if err != nil {
		return fmt.Errorf("read bridge port flags: %w", err)
	}
	flags := map[uint16]bool{}
	if pi.Learning {
		flags[unix.IFLA_BRPORT_LEARNING] = false
	}
	if noFlood {
		// The protinfo read has no multicast and broadcast flood
		// flags: set with unicast flood, which is off once all are.
		if pi.Flood {
			flags[unix.IFLA_BRPORT_UNICAST_FLOOD] = false
			flags[unix.IFLA_BRPORT_MCAST_FLOOD] = false
			flags[unix.IFLA_BRPORT_BCAST_FLOOD] = false
		}
	}
	if len(flags) == 0 {
		return nil
	}
	return setBrport(l.Attrs().Index, flags)
}

// setBrport sets bridge-port flags of a device in one message
// (IFLA_PROTINFO of AF_BRIDGE, as `ip link set DEV type bridge_slave`).
func setBrport(index int, flags map[uint16]bool) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_BRIDGE)
	msg.Index = int32(index)
	req.AddData(msg)
	pi := nl.NewRtAttr(unix.IFLA_PROTINFO|unix.NLA_F_NESTED, nil)
	keys := make([]uint16, 0, len(flags))
	for k := range flags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var b byte
		if flags[k] {
			b = 1
		}
		pi.AddRtAttr(int(k), []byte{b})
	}
	req.AddData(pi)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("set bridge port flags: %w", err)
	}
	return nil
}

// Remove implements Kernel: the vxlan device first (zebra withdraws the
// VNI), then the advertise port and the xdp way in (each veth's peer goes
// with it) and the bridge.
func (Netlink) Remove(vni uint32) error {
	n := NamesOf(vni)
	var errs []error
	for _, name := range []string{n.VXLAN, n.Adv, n.AdvPeer, n.Tramp, n.TrampPeer, n.Bridge} {
		l, err := netlink.LinkByName(name)
		if isNotFound(err) {
			continue
		}
		if err == nil {
			err = netlink.LinkDel(l)
		}
		if err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Owned implements Kernel: the VNIs of devices named as Names names them,
// of the types trestle makes.
func (Netlink) Owned() ([]uint32, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	seen := map[uint32]bool{}
	var out []uint32
	for _, l := range links {
		v, ok := VNIOf(l.Attrs().Name)
		if !ok || seen[v] {
			continue
		}
		n := NamesOf(v)
		want := map[string]string{n.Bridge: "bridge", n.VXLAN: "vxlan", n.Adv: "veth", n.AdvPeer: "veth", n.Tramp: "veth", n.TrampPeer: "veth"}[l.Attrs().Name]
		if l.Type() == want {
			seen[v] = true
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

// FDB implements Kernel.
func (Netlink) FDB(ifindex int) ([]Neigh, error) {
	ns, err := netlink.NeighList(ifindex, unix.AF_BRIDGE)
	if err != nil {
		return nil, err
	}
	out := make([]Neigh, 0, len(ns))
	for i := range ns {
		if ns[i].LinkIndex == ifindex {
			out = append(out, neighOf(&ns[i], false))
		}
	}
	return out, nil
}

func neighOf(n *netlink.Neigh, deleted bool) Neigh {
	out := Neigh{
		Ifindex: n.LinkIndex,
		MAC:     n.HardwareAddr,
		// The kernel marks a bridge's entry by its master (NDA_MASTER)
		// and a device's own by NTF_SELF; requests mark them by flag.
		Master:     n.MasterIndex != 0 || n.Flags&unix.NTF_MASTER != 0,
		ExtLearned: n.Flags&unix.NTF_EXT_LEARNED != 0,
		Sticky:     n.Flags&netlink.NTF_STICKY != 0,
		Deleted:    deleted,
	}
	if a, ok := netip.AddrFromSlice(n.IP); ok && len(n.IP) > 0 {
		out.Dst = a.Unmap()
	}
	return out
}

// SetLocal implements Kernel. NeighSet asks NLM_F_CREATE|NLM_F_REPLACE.
// A static address is written static sticky: the kernel takes no
// NTF_STICKY on an extern-learned entry (br_fdb_external_learn_add
// ignores it), and zebra reads a local MAC's stickiness from that flag
// alone (netlink_macfdb_change). NUD_NOARP keeps it from ageing.
func (Netlink) SetLocal(adv int, mac net.HardwareAddr, static bool) error {
	n := &netlink.Neigh{LinkIndex: adv, Family: unix.AF_BRIDGE, HardwareAddr: mac,
		Flags: unix.NTF_MASTER | unix.NTF_EXT_LEARNED, State: unix.NUD_REACHABLE}
	if static {
		n.Flags, n.State = unix.NTF_MASTER|netlink.NTF_STICKY, unix.NUD_NOARP
	}
	return netlink.NeighSet(n)
}

// DelLocal implements Kernel; an entry already gone is no error.
func (Netlink) DelLocal(adv int, mac net.HardwareAddr) error {
	err := netlink.NeighDel(&netlink.Neigh{LinkIndex: adv, Family: unix.AF_BRIDGE, HardwareAddr: mac, Flags: unix.NTF_MASTER})
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// Watch calls handle with each AF_BRIDGE neighbour event of the
// namespace, on the goroutine that reads them (an entry zebra withdraws is
// written back within the half millisecond before zebra takes the flood
// list too: each hand-off to another goroutine is a wait for a CPU), until
// done is closed. The channel it returns closes when the subscription
// fails (events were lost: read the FDBs again, Manager.Reload) or done is
// closed.
func Watch(done <-chan struct{}, handle func(Neigh)) (<-chan struct{}, error) {
	ended, err := subscribe(done, unix.RTNLGRP_NEIGH, func(m syscall.NetlinkMessage) {
		if m.Header.Type != unix.RTM_NEWNEIGH && m.Header.Type != unix.RTM_DELNEIGH {
			return
		}
		n, err := netlink.NeighDeserialize(m.Data)
		if err != nil || n.Family != unix.AF_BRIDGE {
			return
		}
		handle(neighOf(n, m.Header.Type == unix.RTM_DELNEIGH))
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("watch FDB entries: %w", err)
	}
	return ended, nil
}

// subscribe reads an rtnetlink multicast group of the namespace on a
// goroutine of its own, calling each with every message, until done is
// closed or a read fails; a read that finds messages lost (ENOBUFS) calls
// lost and goes on if lost is not nil. The channel closes when it ends.
func subscribe(done <-chan struct{}, group uint, each func(syscall.NetlinkMessage), lost func()) (<-chan struct{}, error) {
	s, err := nl.Subscribe(unix.NETLINK_ROUTE, group)
	if err != nil {
		return nil, err
	}
	ended := make(chan struct{})
	go func() {
		<-done
		s.Close()
	}()
	go func() {
		defer close(ended)
		for {
			msgs, _, err := s.Receive()
			if lost != nil && errors.Is(err, unix.ENOBUFS) {
				lost()
				continue
			}
			if err != nil {
				return
			}
			for _, m := range msgs {
				each(m)
			}
		}
	}()
	return ended, nil
}

// SetStale implements Kernel: a flood-list entry is appended (the kernel
// refuses to replace one), a MAC's replaces the device's entry.
func (Netlink) SetStale(vx int, mac net.HardwareAddr, dst netip.Addr) error {
	n := staleNeigh(vx, mac, dst)
	if isZeroMAC(mac) {
		return netlink.NeighAppend(n)
	}
	return netlink.NeighSet(n)
}

// DelStale implements Kernel; an entry already gone is no error.
func (Netlink) DelStale(vx int, mac net.HardwareAddr, dst netip.Addr) error {
	err := netlink.NeighDel(staleNeigh(vx, mac, dst))
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// staleNeigh is the vxlan device's own entry of mac behind dst as trestle
// writes it back: NUD_PERMANENT, as zebra writes its flood-list entries,
// so that zebra, which drops permanent entries when it reads the FDB,
// never takes it for a MAC of its own.
func staleNeigh(vx int, mac net.HardwareAddr, dst netip.Addr) *netlink.Neigh {
	return &netlink.Neigh{LinkIndex: vx, Family: unix.AF_BRIDGE, HardwareAddr: mac, IP: dst.AsSlice(),
		Flags: unix.NTF_SELF, State: unix.NUD_PERMANENT | unix.NUD_NOARP}
}

func isZeroMAC(mac net.HardwareAddr) bool {
	for _, b := range mac {
		if b != 0 {
			return false
		}
	}
	return true
}

// WatchZebra says (a value on the channel, one at a time) when zebra
// removes a nexthop object of its own (RTM_DELNEXTHOP, protocol zebra):
// what a zebra that exits does last to the kernel, after it withdrew the
// EVPN entries, which Manager.ZebraExited weighs. The channel closes when
// the subscription fails or done is closed.
func WatchZebra(done <-chan struct{}) (<-chan struct{}, error) {
	out := make(chan struct{}, 1)
	tell := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	ended, err := subscribe(done, unix.RTNLGRP_NEXTHOP, func(m syscall.NetlinkMessage) {
		// struct nhmsg: family, scope, protocol, ...
		if m.Header.Type == unix.RTM_DELNEXTHOP && len(m.Data) >= 3 && m.Data[2] == unix.RTPROT_ZEBRA {
			tell()
		}
	}, tell) // events lost: zebra's among them, maybe (the Manager weighs what zebra withdrew first)
	if err != nil {
		return nil, fmt.Errorf("watch nexthop objects: %w", err)
	}
	// The channel closes when the subscription ends; out is the reader's.
	go func() {
		<-ended
		close(out)
	}()
	return out, nil
}
