package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/ctl"
)

// ipamTimeout bounds a call of the IPAM plugin (host-local answers in
// milliseconds; dhcp may wait for a lease).
const ipamTimeout = 2 * time.Minute

// ipamDo passes a verb on to the network's IPAM plugin (invoke.DelegateDel,
// ...), bounded by ipamTimeout.
func ipamDo(verb func(context.Context, string, []byte, invoke.Exec) error, n *NetConf, args *skel.CmdArgs) error {
	ctx, cancel := context.WithTimeout(context.Background(), ipamTimeout)
	defer cancel()
	return verb(ctx, n.IPAM.Type, args.StdinData, nil)
}

// call sends one request to the daemon; a daemon that does not answer is
// the spec's "try again later" (code 11), so that runtimes retry.
func call(n *NetConf, req ctl.Request, out any) error {
	err := ctl.Call(n.Socket, req, out)
	if errors.Is(err, ctl.ErrNoDaemon) {
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("the trestle daemon does not answer on %s: try again later", n.Socket), err.Error())
	}
	return err
}

// ownedPort finds the run-time port of an owner on the network's bridge.
func ownedPort(n *NetConf, own string) (ctl.PortEntry, bool, error) {
	var ps []ctl.PortEntry
	if err := call(n, ctl.Request{Cmd: ctl.CmdPortList, Bridge: n.Bridge}, &ps); err != nil {
		return ctl.PortEntry{}, false, err
	}
	for _, p := range ps {
		if p.Owner == own {
			return p, true, nil
		}
	}
	return ctl.PortEntry{}, false, nil
}

// undo is the steps an ADD has taken, to be taken back in reverse order
// when a later one fails.
type undo []func()

func (u *undo) push(f func()) { *u = append(*u, f) }

func (u undo) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// chainedInterface is the host-side TAP or veth of a previous result (an
// interface with no sandbox, as a tap plugin or a VM's launcher reports
// it), or nil; an error when the one it names is not the sandbox's to
// give (chainedRefusal).
func chainedInterface(prev *current.Result, netns, ifname string) (*current.Interface, error) {
	for _, i := range prev.Interfaces {
		if i.Sandbox != "" {
			continue
		}
		l, err := netlink.LinkByName(i.Name)
		if err != nil {
			continue
		}
		if t := l.Type(); t == "tuntap" || t == "veth" {
			if why := chainedRefusal(l, netns, ifname); why != "" {
				return nil, fmt.Errorf("%s: %s", i.Name, why)
			}
			return i, nil
		}
	}
	return nil, nil
}

// chainedRefusal says why a previous result's host interface l is not
// this sandbox's to attach, or "". A previous plugin, or whoever wrote the
// network's config, could otherwise name any veth or TAP of the host: the
// node's uplink, another sandbox's host veth, an overlay's devices, whose
// frames would then be switched as a tenant's. An interface with a master
// belongs to that master (a bridge, a bond); one with an address of the
// host is the host's own (a VPN's TAP, a routed link): a VM's TAP or a
// sandbox's host veth carries none. A veth is taken only when its peer is
// CNI_IFNAME in this sandbox's namespace, and that namespace is not the
// host's (this process's), which leaves out the host's own veths and the
// overlay's. The daemon refuses the rest: an interface that is a port
// already, and the overlay's objects by name (a TAP could be given one).
func chainedRefusal(l netlink.Link, netns, ifname string) string {
	if m := l.Attrs().MasterIndex; m != 0 {
		return fmt.Sprintf("it has a master (ifindex %d): it is that device's port, not the sandbox's to give", m)
	}
	if a, err := hostAddr(l); err != nil {
		return fmt.Sprintf("its addresses cannot be read: %v", err)
	} else if a != "" {
		return fmt.Sprintf("it has the host's address %s: it is the host's own interface, not the sandbox's to give", a)
	}
	v, ok := l.(*netlink.Veth)
	if !ok {
		return "" // a TAP with no master: a VM's, handed over by its launcher
	}
	if same, err := ownNetns(netns); err != nil {
		return fmt.Sprintf("the sandbox's namespace %s cannot be read: %v", netns, err)
	} else if same {
		return fmt.Sprintf("the sandbox's namespace %s is the host's: a chained veth is the host end of a sandbox's own interface, and both ends of this one are the host's", netns)
	}
	peer, err := netlink.VethPeerIndex(v)
	if err != nil {
		return fmt.Sprintf("its veth peer cannot be read: %v", err)
	}
	mine := false
	err = ns.WithNetNSPath(netns, func(ns.NetNS) error {
		c, err := netlink.LinkByName(ifname)
		if err != nil {
			return nil
		}
		mine = c.Attrs().Index == peer && c.Attrs().ParentIndex == l.Attrs().Index
		return nil
	})
	switch {
	case err != nil:
		return fmt.Sprintf("the sandbox's namespace %s cannot be entered: %v", netns, err)
	case !mine:
		return fmt.Sprintf("its veth peer is not %s in the sandbox's namespace %s: a chained veth is the host end of the sandbox's own interface", ifname, netns)
	}
	return ""
}

// hostAddr is an address the host gave l ("" when none): any IPv4
// address, or an IPv6 one that is not link-local (the kernel gives every
// interface with IPv6 on one of those, a VM's TAP too).
func hostAddr(l netlink.Link) (string, error) {
	as, err := netlink.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return "", err
	}
	for _, a := range as {
		if a.IP.To4() != nil || !a.IP.IsLinkLocalUnicast() {
			return a.IPNet.String(), nil
		}
	}
	return "", nil
}

// ownNetns says whether the namespace at path is this process's (the
// host's, where the daemon runs).
func ownNetns(path string) (bool, error) {
	var mine, theirs unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &mine); err != nil {
		return false, err
	}
	if err := unix.Stat(path, &theirs); err != nil {
		return false, err
	}
	return mine.Dev == theirs.Dev && mine.Ino == theirs.Ino, nil
}

// prevResult parses the previous result, nil if there is none.
func prevResult(n *NetConf) (*current.Result, error) {
	if n.RawPrevResult == nil {
		return nil, nil
	}
	if err := version.ParsePrevResult(&n.NetConf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("prevResult: %v", err), "")
	}
	r, err := current.NewResultFromResult(n.PrevResult)
	if err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("prevResult: %v", err), "")
	}
	return r, nil
}

func cmdAdd(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData, args.Args)
	if err != nil {
		return err
	}
	prev, err := prevResult(n)
	if err != nil {
		return err
	}
	own := owner(n.Name, args.ContainerID, args.IfName)
	if prev != nil {
		return addChained(n, prev, own, args.Netns, args.IfName)
	}

	netns, err := ns.GetNS(args.Netns)
	if err != nil {
		return types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("open netns %q: %v", args.Netns, err), "")
	}
	defer netns.Close()

	var u undo
	done := false
	// early is the IPAM plugin's answer to come (ipamAdd), until taken.
	var early chan ipamAnswer
	takeIPAM := func() ipamAnswer {
		ia := <-early
		early = nil
		if ia.err == nil {
			u.push(func() { _ = ipamDo(invoke.DelegateDel, n, args) })
		}
		return ia
	}
	defer func() {
		if !done {
			if early != nil {
				takeIPAM() // taken back with the rest
			}
			u.run()
		}
	}()

	// The container's interface name is free, or the ADD makes nothing
	// (no address is asked for).
	err = netns.Do(func(ns.NetNS) error {
		if _, err := netlink.LinkByName(args.IfName); err == nil {
			return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("an interface %s is already in %s: ADD makes it (is the container attached already?)", args.IfName, args.Netns), "")
		}
		return nil
	})
	if err != nil {
		return err
	}

	// The IPAM plugin's addresses, asked for while the veth is made and
	// the daemon attaches it, unless the plugin needs the port to forward
	// first (dhcp): an address plugin of local state (host-local, static)
	// is a process to start and answer, about as long as the two, and the
	// ADD waits for the longest, not for all three one after the other
	// (docs/performance.md "Pod churn").
	if n.IPAM.Type != "" && !ipamNeedsNetwork(n.IPAM.Type) {
		early = make(chan ipamAnswer, 1)
		go func() {
			r, err := ipamAdd(n, args)
			early <- ipamAnswer{r, err}
		}()
	}

	// The veth: made in the container's namespace with its host end in
	// this one, the container end up so that the port has a carrier.
	hostName := hostVethName(args.ContainerID, args.IfName)
	var hostIf, contIf net.Interface
	err = netns.Do(func(hostNS ns.NetNS) error {
		// From here any interface of that name is this ADD's, and
		// deleting it deletes its peer too.
		u.push(func() {
			_ = netns.Do(func(ns.NetNS) error { return ip.DelLinkByName(args.IfName) })
		})
		var err error
		if hostIf, contIf, err = ip.SetupVethWithName(args.IfName, hostName, n.MTU, n.mac, hostNS); err != nil {
			return fmt.Errorf("make the veth %s (host end %s): %w", args.IfName, hostName, err)
		}
		l, err := netlink.LinkByName(args.IfName)
		if err != nil {
			return fmt.Errorf("find %s: %w", args.IfName, err)
		}
		// Duplicate address detection holds an IPv6 address back for
		// seconds on a fresh link, its link-local one too; like the
		// bridge plugin, only with enabledad. Set before the link is up,
		// when the link-local address comes.
		dad := "0"
		if n.EnableDAD {
			dad = "1"
		}
		_, _ = sysctl.Sysctl(fmt.Sprintf("net/ipv6/conf/%s/accept_dad", args.IfName), dad)
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", args.IfName, err)
		}
		return nil
	})
	if err != nil {
		return err
	}

	// The mark that makes the host end this owner's, for DEL and GC.
	if err := markHostEnd(hostName, own); err != nil {
		return err
	}

	// With ipguard the port is bound to the IPAM plugin's addresses, so
	// the daemon is asked once they are known (the ADD then waits for
	// both, one after the other).
	var ia ipamAnswer
	var guard []string
	if n.IPGuard {
		if early == nil {
			return confError(types.ErrInvalidNetworkConfig, "%s: ipguard: binds the port to the addresses the IPAM plugin gives, and the network has no ipam", n.Name)
		}
		if ia = takeIPAM(); ia.err != nil {
			return ia.err
		}
		ir, err := current.NewResultFromResult(ia.r)
		if err != nil {
			return fmt.Errorf("the %s IPAM plugin's result: %w", n.IPAM.Type, err)
		}
		if len(ir.IPs) == 0 {
			return fmt.Errorf("ipguard: the %s IPAM plugin gave no address to bind the port to", n.IPAM.Type)
		}
		guard = n.guardIPs(contIf.HardwareAddr.String(), ir)
	}
	// The port: the daemon answers once it forwards.
	portErr := call(n, ctl.Request{Cmd: ctl.CmdPortAdd, Bridge: n.Bridge, Port: hostName, Args: n.portArgs(contIf.HardwareAddr.String(), guard), Owner: own}, nil)
	if portErr == nil {
		u.push(func() { _ = ctl.Call(n.Socket, ctl.Request{Cmd: ctl.CmdPortDel, Bridge: n.Bridge, Owner: own}, nil) })
	}
	if early != nil {
		ia = takeIPAM() // taken back with the rest if the port failed
	}
	if portErr != nil {
		return fmt.Errorf("add %s to bridge %s: %w", hostName, n.Bridge, portErr)
	}

	result := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: hostName, Mac: hostIf.HardwareAddr.String()},
			{Name: args.IfName, Mac: contIf.HardwareAddr.String(), Mtu: contIf.MTU, Sandbox: args.Netns},
		},
		DNS: n.DNS,
	}
	if n.IPAM.Type != "" {
		if ipamNeedsNetwork(n.IPAM.Type) {
			// After the port forwards, so that dhcp's requests reach
			// the network.
			if ia.r, ia.err = ipamAdd(n, args); ia.err == nil {
				u.push(func() { _ = ipamDo(invoke.DelegateDel, n, args) })
			}
		}
		if ia.err != nil {
			return ia.err
		}
		// The container's interface is given its addresses once its
		// port forwards, whichever came first.
		if err := configureIPAM(n, args, netns, result, ia.r); err != nil {
			return err
		}
	}
	done = true
	return types.PrintResult(result, n.CNIVersion)
}

// ipamAnswer is the IPAM plugin's answer to an ADD.
type ipamAnswer struct {
	r   types.Result
	err error
}

// ipamNeedsNetwork says whether an IPAM plugin must reach the network
// through the port to answer an ADD: dhcp asks a server there. The others
// of the containernetworking plugins (host-local, static) answer from
// local state, and are asked while the port is attached.
func ipamNeedsNetwork(typ string) bool { return typ == "dhcp" }

// ipamAdd asks the IPAM plugin for addresses; a failed ADD reserved none.
func ipamAdd(n *NetConf, args *skel.CmdArgs) (types.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ipamTimeout)
	defer cancel()
	return invoke.DelegateAdd(ctx, n.IPAM.Type, args.StdinData, nil)
}

// configureIPAM puts the IPAM plugin's answer r in the result and its
// addresses and routes on the container's interface.
func configureIPAM(n *NetConf, args *skel.CmdArgs, netns ns.NetNS, result *current.Result, r types.Result) error {
	ir, err := current.NewResultFromResult(r)
	if err != nil {
		return fmt.Errorf("the %s IPAM plugin's result: %w", n.IPAM.Type, err)
	}
	if len(ir.IPs) == 0 {
		return fmt.Errorf("the %s IPAM plugin gave no address", n.IPAM.Type)
	}
	for _, c := range ir.IPs {
		c.Interface = current.Int(1) // the container's
	}
	result.IPs, result.Routes = ir.IPs, ir.Routes
	if ir.DNS.Nameservers != nil || ir.DNS.Domain != "" || ir.DNS.Search != nil || ir.DNS.Options != nil {
		result.DNS = ir.DNS
	}
	return netns.Do(func(ns.NetNS) error {
		_, _ = sysctl.Sysctl(fmt.Sprintf("net/ipv4/conf/%s/arp_notify", args.IfName), "1")
		if err := ipam.ConfigureIface(args.IfName, result); err != nil {
			return fmt.Errorf("configure %s: %w", args.IfName, err)
		}
		return nil
	})
}

// addChained attaches the host-side TAP or veth of the previous result
// and passes that result on.
func addChained(n *NetConf, prev *current.Result, own, netns, ifname string) error {
	hostIf, err := chainedInterface(prev, netns, ifname)
	if err != nil {
		return confError(types.ErrInvalidNetworkConfig, "%s: the previous plugin's result: %v", n.Name, err)
	}
	if hostIf == nil {
		return confError(types.ErrInvalidNetworkConfig, "%s: the previous plugin's result has no host-side TAP or veth (an interface with no sandbox) to attach: trestle goes first in a chain, or after a plugin that makes one", n.Name)
	}
	if n.IPAM.Type != "" {
		return confError(types.ErrInvalidNetworkConfig, "%s: ipam: trestle attaches the previous plugin's %s and configures no interface: give the addresses in the plugin that made it", n.Name, hostIf.Name)
	}
	mac := sandboxMAC(prev, "", "")
	if n.MacSpoofChk && mac == "" {
		return confError(types.ErrInvalidNetworkConfig, "%s: macspoofchk: the previous plugin's result names no interface in a sandbox with a MAC, the address to lock %s to", n.Name, hostIf.Name)
	}
	var guard []string
	if n.IPGuard {
		if len(prev.IPs) == 0 || mac == "" {
			return confError(types.ErrInvalidNetworkConfig, "%s: ipguard: the previous plugin's result gives no address (or no interface in a sandbox with a MAC) to bind %s to", n.Name, hostIf.Name)
		}
		guard = n.guardIPs(mac, prev)
	}
	if err := call(n, ctl.Request{Cmd: ctl.CmdPortAdd, Bridge: n.Bridge, Port: hostIf.Name, Args: n.portArgs(mac, guard), Owner: own}, nil); err != nil {
		return fmt.Errorf("add %s to bridge %s: %w", hostIf.Name, n.Bridge, err)
	}
	return types.PrintResult(prev, n.CNIVersion)
}

// sandboxMAC is the MAC of the container's interface in a result: the one
// named ifname in netns, else (a chained result, or ifname "") the first
// in a sandbox that has one; "" when none has.
func sandboxMAC(r *current.Result, netns, ifname string) string {
	first := ""
	for _, i := range r.Interfaces {
		switch {
		case i.Sandbox == "" || i.Mac == "":
		case ifname != "" && i.Sandbox == netns && i.Name == ifname:
			return i.Mac
		case first == "":
			first = i.Mac
		}
	}
	return first
}

// cmdDel takes back what ADD made, and succeeds for whatever is gone
// already. A network configuration ADD refuses made nothing, so DEL of it
// has nothing to do. The daemon down: the veth goes, and the daemon drops
// the port of a vanished interface when it starts.
func cmdDel(args *skel.CmdArgs) error {
	n, err := parseConf(args.StdinData, args.Args)
	if err != nil {
		return nil
	}
	own := owner(n.Name, args.ContainerID, args.IfName)
	// A socket the node does not allow is not asked (an ADD of it made
	// no port); the rest goes as for any other.
	ask := n.checkSocket() == nil
	// The IPAM plugin's DEL runs beside the port's and the veth's: none
	// of them needs another done first, and the DEL waits for the longest
	// rather than all three (docs/performance.md "Pod churn"). An IPAM
	// plugin that is not there reserved nothing (an ADD that failed to
	// find it).
	var ipamDone chan error
	if _, ferr := invoke.FindInPath(n.IPAM.Type, filepath.SplitList(os.Getenv("CNI_PATH"))); n.IPAM.Type != "" && ferr == nil {
		ipamDone = make(chan error, 1)
		go func() { ipamDone <- ipamDo(invoke.DelegateDel, n, args) }()
	}
	// The port goes first, then the veth. Side by side they measured
	// slower (a DEL's median 1.11x the bridge plugin's against 1.00x in
	// turn, its p99 1.36x against 1.06x): the veth's link event, read
	// before the port's removal, made full applies, and the removal's tc
	// and map writes met the delete's in the kernel.
	var errs []error
	if ask {
		errs = delPort(n, own)
	}
	// The veth: deleting the host end deletes the container's (and a
	// vanished netns took both). A chained TAP is not ours to delete, and
	// neither is an interface of this name that this owner's ADD did not
	// mark.
	if err := delOwnLink(hostVethName(args.ContainerID, args.IfName), own); err != nil {
		errs = append(errs, err)
	}
	if ipamDone != nil {
		if err := <-ipamDone; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// hostMark is the alias (IFLA_IFALIAS) an ADD gives the host end of the
// veth it made for own: the kernel keeps it with the interface, through
// restarts of the daemon, and `ip link` shows it. An owner too long for an
// alias (255 bytes) is marked by its SHA-256.
func hostMark(own string) string {
	m := "trestle-cni " + own
	if len(m) > 255 {
		h := sha256.Sum256([]byte(own))
		m = "trestle-cni sha256:" + hex.EncodeToString(h[:])
	}
	return m
}

// markHostEnd gives the host end name the mark of own.
func markHostEnd(name, own string) error {
	l, err := netlink.LinkByName(name)
	if err == nil {
		err = netlink.LinkSetAlias(l, hostMark(own))
	}
	if err != nil {
		return fmt.Errorf("mark the host end %s as %s's: %w", name, own, err)
	}
	return nil
}

// delOwnLink deletes the veth name when it bears the mark of own: an ADD
// of own made it. Any other interface of that name (made by someone else,
// or by another network's ADD for the same container and interface) is
// left as it is, and so is one that is not there, or that goes while it
// is deleted (the teardown of its peer's namespace took both ends):
// ip.DelLinkByName says ENODEV then, as a failure. None is a failure: DEL
// succeeds for what is not its own to take back.
func delOwnLink(name, own string) error {
	l, err := netlink.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up %s: %w", name, err)
	}
	if l.Type() != "veth" || l.Attrs().Alias != hostMark(own) {
		return nil
	}
	if err := netlink.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

// delPort removes the run-time ports of own on the network's bridge. No
// daemon, or none left (gone already, or its bridge is), is no failure.
func delPort(n *NetConf, own string) []error {
	err := ctl.Call(n.Socket, ctl.Request{Cmd: ctl.CmdPortDel, Bridge: n.Bridge, Owner: own}, nil)
	if err == nil || errors.Is(err, ctl.ErrNoDaemon) {
		return nil
	}
	var ps []ctl.PortEntry
	if lerr := ctl.Call(n.Socket, ctl.Request{Cmd: ctl.CmdPortList}, &ps); lerr != nil {
		return []error{fmt.Errorf("remove the port of %s: %w", own, err)}
	}
	var errs []error
	for _, p := range ps {
		if p.Owner == own {
			errs = append(errs, fmt.Errorf("remove port %s of %s from bridge %s: %w", p.Name, own, p.Bridge, err))
		}
	}
	return errs
}

// cmdCheck compares the attachment with the previous result: the
// container's interface and its veth peer, the port (bridge, state,
// VLANs, protection), the IPAM plugin's view, the addresses and routes.
func cmdCheck(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData, args.Args)
	if err != nil {
		return err
	}
	prev, err := prevResult(n)
	if err != nil {
		return err
	}
	if prev == nil {
		return confError(types.ErrInvalidNetworkConfig, "%s: CHECK needs the prevResult of the ADD", n.Name)
	}
	own := owner(n.Name, args.ContainerID, args.IfName)
	port, found, err := ownedPort(n, own)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("bridge %s has no port of %s", n.Bridge, own)
	}
	mac := sandboxMAC(prev, args.Netns, args.IfName)
	if d := n.checkPort(port, mac, n.guardIPs(mac, prev)); d != "" {
		return fmt.Errorf("port %s of bridge %s: %s", port.Name, n.Bridge, d)
	}

	var hostIf, contIf *current.Interface
	hostName := hostVethName(args.ContainerID, args.IfName)
	for _, i := range prev.Interfaces {
		switch {
		case i.Sandbox == "" && i.Name == hostName:
			hostIf = i
		case i.Sandbox == args.Netns && i.Name == args.IfName:
			contIf = i
		}
	}
	if hostIf == nil {
		ch, err := chainedInterface(prev, args.Netns, args.IfName)
		if err != nil {
			return err
		}
		if ch != nil && contIf == nil {
			// Chained: the previous plugin's interface is the port.
			if port.Interface != ch.Name {
				return fmt.Errorf("port of %s is %s, the previous result's interface is %s", own, port.Interface, ch.Name)
			}
			return nil
		}
		return fmt.Errorf("the previous result has no host interface %s", hostName)
	}
	if contIf == nil {
		return fmt.Errorf("the previous result has no interface %s in %s", args.IfName, args.Netns)
	}
	if port.Interface != hostName {
		return fmt.Errorf("port of %s is %s, want %s", own, port.Interface, hostName)
	}
	hl, err := netlink.LinkByName(hostName)
	if err != nil {
		return fmt.Errorf("host end %s: %w", hostName, err)
	}
	if a := hl.Attrs().Alias; a != hostMark(own) {
		return fmt.Errorf("host end %s is marked %q, not as %s's (%q): this owner's ADD did not make it", hostName, a, own, hostMark(own))
	}

	netns, err := ns.GetNS(args.Netns)
	if err != nil {
		return types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("open netns %q: %v", args.Netns, err), "")
	}
	defer netns.Close()
	err = netns.Do(func(ns.NetNS) error {
		l, peer, err := ip.GetVethPeerIfindex(args.IfName)
		if err != nil {
			return err
		}
		if peer != hl.Attrs().Index {
			return fmt.Errorf("%s's peer is ifindex %d, not %s (%d)", args.IfName, peer, hostName, hl.Attrs().Index)
		}
		if contIf.Mac != "" && l.Attrs().HardwareAddr.String() != contIf.Mac {
			return fmt.Errorf("%s has MAC %s, the previous result %s", args.IfName, l.Attrs().HardwareAddr, contIf.Mac)
		}
		if n.MTU != 0 && l.Attrs().MTU != n.MTU {
			return fmt.Errorf("%s has MTU %d, want %d", args.IfName, l.Attrs().MTU, n.MTU)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n.IPAM.Type != "" {
		if err := ipamDo(invoke.DelegateCheck, n, args); err != nil {
			return err
		}
	}
	return netns.Do(func(ns.NetNS) error {
		if err := ip.ValidateExpectedInterfaceIPs(args.IfName, prev.IPs); err != nil {
			return err
		}
		return ip.ValidateExpectedRoute(prev.Routes)
	})
}

// cmdStatus: ready for ADDs while the daemon answers, the bridge exists
// and has room for a port (code 50 otherwise), and the IPAM plugin is.
func cmdStatus(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData, args.Args)
	if err != nil {
		return err
	}
	var st ctl.Status
	if err := ctl.Call(n.Socket, ctl.Request{Cmd: ctl.CmdShow}, &st); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("the trestle daemon does not answer on %s", n.Socket), err.Error())
	}
	if err := room(st, n.Bridge, n.Socket); err != nil {
		return err
	}
	if n.IPAM.Type != "" {
		return ipamDo(invoke.DelegateStatus, n, args)
	}
	return nil
}

// room says why the daemon (status st, on socket) takes no port in bridge
// (code 50), or nil: no such bridge, or it or the switch is full.
func room(st ctl.Status, bridge, socket string) error {
	total, ours := 0, -1
	for i, b := range st.Bridges {
		total += len(b.Ports)
		if b.Name == bridge {
			ours = i
		}
	}
	if ours < 0 {
		return types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("the trestle daemon on %s has no bridge %s", socket, bridge), "")
	}
	if p := len(st.Bridges[ours].Ports); p >= tbpf.MaxBridgePorts {
		return types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("bridge %s has no room: it has %d ports, the most a bridge takes", bridge, p), "")
	}
	if total >= tbpf.MaxPortsAll {
		return types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("bridge %s has no room: the bridges have %d ports, the most the switch takes", bridge, total), "")
	}
	return nil
}

// cmdGC removes this network's ports (and their veths) whose attachments
// are not in cni.dev/valid-attachments, and no other network's; it goes on
// past an error and reports them all, and passes GC on to the IPAM plugin.
func cmdGC(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData, args.Args)
	if err != nil {
		return err
	}
	valid := map[string]bool{}
	for _, a := range n.ValidAttachments {
		valid[a.ContainerID+"\x00"+a.IfName] = true
	}
	var ps []ctl.PortEntry
	if err := call(n, ctl.Request{Cmd: ctl.CmdPortList, Bridge: n.Bridge}, &ps); err != nil {
		return err
	}
	var errs []error
	for _, p := range ps {
		network, cid, ifname, ok := parseOwner(p.Owner)
		if !ok || network != n.Name || valid[cid+"\x00"+ifname] {
			continue
		}
		if err := ctl.Call(n.Socket, ctl.Request{Cmd: ctl.CmdPortDel, Bridge: n.Bridge, Owner: p.Owner}, nil); err != nil {
			errs = append(errs, fmt.Errorf("remove port %s of %s: %w", p.Name, p.Owner, err))
		}
		if name := hostVethName(cid, ifname); p.Interface == name {
			if err := delOwnLink(name, p.Owner); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if n.IPAM.Type != "" {
		if err := ipamDo(invoke.DelegateGC, n, args); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
