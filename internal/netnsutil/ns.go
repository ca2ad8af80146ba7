package netnsutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/instance"
)

// The one namespace harness of the tests (internal/testutil, tests/harness)
// and the lab (internal/lab): a named namespace and what is done to the
// links in it. Each of them adds its own life cycle (a test's cleanups; a
// lab run's Net, closed on exit, on Ctrl-C and on failure, and swept when
// its process is gone) and its own unique prefix; the namespaces, veths and
// addresses are made here, one way.

// NetnsDir is where `ip netns` keeps its bind mounts.
const NetnsDir = "/run/netns"

// MaxIfName is the longest interface name the kernel accepts (IFNAMSIZ-1).
const MaxIfName = 15

// NS is a named network namespace, known to `ip netns`, so that `ip netns
// exec` and `ip -n` work on it.
type NS struct {
	Name string // as known to `ip netns`
	Path string // its bind mount, /run/netns/NAME
}

// Add creates the namespace name with `ip netns add` and brings its
// loopback up. On an error after it was made, it is deleted again.
func Add(name string) (*NS, error) {
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("create namespace %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	n := &NS{Name: name, Path: filepath.Join(NetnsDir, name)}
	if err := n.LinkUp("lo"); err != nil {
		return nil, errors.Join(err, n.Delete())
	}
	return n, nil
}

// Delete deletes the namespace (`ip netns del`), which removes every link
// in it.
func (n *NS) Delete() error {
	if out, err := exec.Command("ip", "netns", "del", n.Name).CombinedOutput(); err != nil {
		return fmt.Errorf("delete namespace %s: %v: %s", n.Name, err, bytes.TrimSpace(out))
	}
	return nil
}

// Do runs f on a locked, throwaway thread inside the namespace (Do).
// Only what f does on its own goroutine happens in the namespace:
// goroutines started by f run elsewhere. Sockets created inside f stay in
// the namespace for their whole life.
func (n *NS) Do(f func() error) error { return Do(n.Path, f) }

// Handle is a netlink handle whose sockets live in the namespace.
func (n *NS) Handle() (*netlink.Handle, error) {
	var h *netlink.Handle
	err := n.Do(func() (err error) {
		h, err = netlink.NewHandle()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlink handle in namespace %s: %w", n.Name, err)
	}
	return h, nil
}

// RetryIntr retries f while the kernel reports that a netlink dump was
// interrupted by a concurrent change (another test's, or the lab's, links
// coming and going).
func RetryIntr(f func() error) error {
	var err error
	for range 5 {
		if err = f(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return err
		}
	}
	return err
}

// LinkByName looks a link up through h, retrying an interrupted dump.
func LinkByName(h *netlink.Handle, name string) (netlink.Link, error) {
	var l netlink.Link
	err := RetryIntr(func() (err error) {
		l, err = h.LinkByName(name)
		return err
	})
	return l, err
}

// withLink runs f with a handle in the namespace and its link name.
func (n *NS) withLink(name string, f func(h *netlink.Handle, l netlink.Link) error) error {
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := LinkByName(h, name)
	if err != nil {
		return fmt.Errorf("look up %s in namespace %s: %w", name, n.Name, err)
	}
	return f(h, l)
}

// Link is the link name of the namespace as netlink says it is now.
func (n *NS) Link(name string) (netlink.Link, error) {
	var out netlink.Link
	err := n.withLink(name, func(_ *netlink.Handle, l netlink.Link) error { out = l; return nil })
	return out, err
}

// LinkUp sets an interface of the namespace up.
func (n *NS) LinkUp(name string) error {
	return n.withLink(name, func(h *netlink.Handle, l netlink.Link) error {
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up in namespace %s: %w", name, n.Name, err)
		}
		return nil
	})
}

// MAC is the hardware address of an interface of the namespace.
func (n *NS) MAC(name string) (net.HardwareAddr, error) {
	l, err := n.Link(name)
	if err != nil {
		return nil, err
	}
	return l.Attrs().HardwareAddr, nil
}

// AddrAdd assigns a CIDR address ("10.250.0.1/24", "fd00::1/64") to an
// interface of the namespace. IPv6 addresses skip duplicate address
// detection, so they are usable at once instead of staying tentative for
// about a second.
func (n *NS) AddrAdd(name, cidr string) error {
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		return fmt.Errorf("namespace %s: parse address %q: %w", n.Name, cidr, err)
	}
	if addr.IP.To4() == nil {
		addr.Flags |= unix.IFA_F_NODAD
	}
	return n.withLink(name, func(h *netlink.Handle, l netlink.Link) error {
		if err := h.AddrAdd(l, addr); err != nil {
			return fmt.Errorf("namespace %s: add %s to %s: %w", n.Name, cidr, name, err)
		}
		return nil
	})
}

// Sysctl sets a sysctl inside the namespace by writing /proc/sys from a
// thread in it (net.* sysctls resolve against the writing thread's
// namespace). key is dotted ("net.ipv4.ip_forward") or a path below
// /proc/sys ("net/ipv4/conf/eth0.100/forwarding"), which is needed when a
// component contains a dot.
func (n *NS) Sysctl(key, value string) error {
	rel := key
	if !strings.Contains(rel, "/") {
		rel = strings.ReplaceAll(rel, ".", "/")
	}
	path := filepath.Join("/proc/sys", filepath.Clean("/"+rel))
	if err := n.Do(func() error { return os.WriteFile(path, []byte(value), 0) }); err != nil {
		return fmt.Errorf("namespace %s: sysctl %s=%s: %w", n.Name, key, value, err)
	}
	return nil
}

// NoIPv6 turns IPv6 off in the namespace: its router, neighbour and
// listener solicitations would be frames no test sent (noise in counters
// and captures, and refreshes of table entries a test waits to see age).
func (n *NS) NoIPv6() error {
	for _, k := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
		if err := n.Sysctl(k, "1"); err != nil {
			return err
		}
	}
	return nil
}

// IPv6On turns IPv6 back on in the namespace for device dev (NoIPv6
// turned it off): for the namespace's new devices and for dev.
func (n *NS) IPv6On(dev string) error {
	for _, k := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6", "net/ipv6/conf/" + dev + "/disable_ipv6"} {
		if err := n.Sysctl(k, "0"); err != nil {
			return err
		}
	}
	return nil
}

// Command is `ip netns exec NAME name args...`. ip execs the program
// itself, so the command's PID is the program's PID.
func (n *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// NetOnly is a command that joins only the network namespace (nsenter
// --net), keeping the caller's mount namespace: `ip netns exec` mounts a
// /sys of its own, which hides the host's BPF filesystem that a daemon
// with persist pins to.
func (n *NS) NetOnly(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + n.Path, "--", name}, args...)...)
}

// VethOpts shapes a veth pair.
type VethOpts struct {
	MACA, MACB net.HardwareAddr // nil: the kernel's choice
	// Queues is the number of receive and transmit queues of each end; 0
	// is the kernel's default, one per CPU (a sender's CPU then picks the
	// queue: the lab asks for 1, as a DUT that polls queue 0 only, Open
	// vSwitch's AF_XDP port, would miss what the other CPUs send).
	Queues int
}

// Veth creates a veth pair, a in na and b in nb (which may be na), and
// sets both up. It is created by a netlink socket inside na with its peer
// placed directly in nb, so it never exists in the caller's namespace; it
// goes with the namespaces.
func Veth(na *NS, a string, nb *NS, b string, o VethOpts) error {
	for _, name := range []string{a, b} {
		if name == "" || len(name) > MaxIfName {
			return fmt.Errorf("veth %s/%s: interface name %q must be 1..%d bytes", a, b, name, MaxIfName)
		}
	}
	peerNS, err := netns.GetFromPath(nb.Path)
	if err != nil {
		return fmt.Errorf("veth %s/%s: open namespace %s: %w", a, b, nb.Name, err)
	}
	defer peerNS.Close()
	h, err := na.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a}, PeerName: b, PeerNamespace: netlink.NsFd(peerNS)}
	if q := o.Queues; q > 0 {
		v.NumTxQueues, v.NumRxQueues = q, q
		v.PeerNumTxQueues, v.PeerNumRxQueues = uint32(q), uint32(q)
	}
	if o.MACA != nil {
		v.HardwareAddr = o.MACA
	}
	if o.MACB != nil {
		v.PeerHardwareAddr = o.MACB
	}
	if err := h.LinkAdd(v); err != nil {
		return fmt.Errorf("create veth %s (in %s) <-> %s (in %s): %w", a, na.Name, b, nb.Name, err)
	}
	// Look both ends up again by name: the object LinkAdd filled in does
	// not describe the peer, which now lives in another namespace.
	if err := na.LinkUp(a); err != nil {
		return err
	}
	return nb.LinkUp(b)
}

// A Host is a namespace at the end of a switch's port: the one topology
// of the tests and the lab. The host's end of the veth is If, with MAC
// (nil: the kernel's) and CIDR ("": none); the switch's end is Port.
type Host struct {
	NS   *NS
	If   string
	MAC  net.HardwareAddr
	CIDR string
	Port string
}

// Attach joins a host to the switch's namespace sw: a veth (Veth, queues
// as VethOpts.Queues) from sw's Port to the host's If, the host's MAC on
// its end from the start, then its address.
func Attach(sw *NS, h Host, queues int) error {
	if err := Veth(sw, h.Port, h.NS, h.If, VethOpts{MACB: h.MAC, Queues: queues}); err != nil {
		return err
	}
	if h.CIDR == "" {
		return nil
	}
	return h.NS.AddrAdd(h.If, h.CIDR)
}

var spawnReqs = make(chan spawnReq)

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var startSpawner sync.Once

// Start starts cmd so that it dies with this process (SIGKILL), even if
// the process dies without cleaning up. Pdeathsig fires when the thread
// that forked the child ends, not the process, and Go ends threads (a
// goroutine locked to its thread that exits, such as Do's when it cannot
// leave a namespace, or the lab generator's pinned senders): so children
// are forked from one spawner thread that never ends.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	startSpawner.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawnReqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnReqs <- spawnReq{cmd, done}
	return <-done
}

// RemoveGone deletes the namespace name, left by a process that is gone,
// and what trestle daemons with persist pinned in it: their datapaths
// outlive the namespace's interfaces, named by its cookie
// (instance.DownNetns). It returns what it removed: the namespace's name,
// then the pin directories.
func RemoveGone(name string) ([]string, error) {
	n := &NS{Name: name, Path: filepath.Join(NetnsDir, name)}
	var cookie uint64
	_ = n.Do(func() (err error) { cookie, err = instance.NetnsCookie(); return err })
	if err := n.Delete(); err != nil {
		return nil, err
	}
	pins, err := instance.DownNetns(cookie, true)
	if err != nil {
		err = fmt.Errorf("namespace %s: %w", name, err)
	}
	return append([]string{name}, pins...), err
}
