package daemon

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/netdev"
	"github.com/trestle/trestle/internal/netnsutil"
)

// System is the daemon's view of the interfaces of its namespace and of the
// veth peers it prepares: netlink and ethtool in the daemon, a fake in the
// unit tests of reconcile.
type System interface {
	// LinkByName and LinkByIndex report an interface as it is now, or
	// errNoLink.
	LinkByName(name string) (Link, error)
	LinkByIndex(index int) (Link, error)
	// Subscribe sends an event for every change to an interface until done
	// is closed; the channel closes when events were lost (the caller then
	// subscribes again and reconciles).
	Subscribe(done <-chan struct{}) (<-chan LinkEvent, error)
	// OpenPeer finds the peer of a veth and holds its namespace open.
	OpenPeer(l Link) (Peer, error)
	// FindPeer reopens a peer recorded by an earlier daemon: the peer of
	// the veth with ifindex port, if it still lives in the namespace with
	// identity netnsID.
	FindPeer(port int, netnsID string) (Peer, error)
}

// Link is an interface at one moment.
type Link struct {
	Name     string
	Index    int
	Type     string // netlink's kind: veth, tuntap, bridge, device...
	Physical bool   // on a bus: a NIC
	Up       bool   // administratively up
	Running  bool   // up with carrier: frames can go out of it
	// XDP is what the kernel reports of the driver's XDP support; XDPErr
	// says why it could not be read.
	XDP    netdev.XDPFeatures
	XDPErr error
}

// LinkEvent says that an interface changed or went away, and what it
// was then.
type LinkEvent struct {
	Index   int
	Name    string
	Deleted bool
	Running bool // as Link.Running
}

// errNoLink: no interface of that name or index.
var errNoLink = errors.New("no such interface")

// Peer is a veth's peer, wherever it lives, held by a namespace handle.
type Peer interface {
	// Features reads the named offload features.
	Features(names []string) (map[string]bool, error)
	// SetFeatures changes offload features.
	SetFeatures(map[string]bool) error
	// ID says where it is: the namespace's identity and its ifindex there.
	ID() PeerID
	String() string
	Close()
}

// PeerID identifies a peer across restarts of the daemon.
type PeerID struct {
	Netns   string `json:"netns"` // device:inode of its namespace
	Ifindex int    `json:"ifindex"`
	Name    string `json:"name"`  // for messages; it may have changed
	Where   string `json:"where"` // the namespace's path when found, for messages
}

// netlinkSystem is System for real.
type netlinkSystem struct{}

func (netlinkSystem) LinkByName(name string) (Link, error) {
	l, err := netlink.LinkByName(name)
	return linkOf(l, err, fmt.Sprintf("interface %q", name))
}

func (netlinkSystem) LinkByIndex(index int) (Link, error) {
	l, err := netlink.LinkByIndex(index)
	return linkOf(l, err, fmt.Sprintf("ifindex %d", index))
}

func linkOf(l netlink.Link, err error, what string) (Link, error) {
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return Link{}, errNoLink
		}
		return Link{}, fmt.Errorf("look up %s: %w", what, err)
	}
	return factsOf(l), nil
}

func factsOf(l netlink.Link) Link {
	a := l.Attrs()
	out := Link{
		Name:     a.Name,
		Index:    a.Index,
		Type:     l.Type(),
		Physical: a.ParentDevBus != "",
		Up:       a.Flags&net.FlagUp != 0,
	}
	out.Running = running(a)
	out.XDP, out.XDPErr = netdev.ReadXDPFeatures(a.Index)
	return out
}

// running says whether an interface is up with carrier (Link.Running).
func running(a *netlink.LinkAttrs) bool {
	return a.Flags&net.FlagUp != 0 && (a.OperState == netlink.OperUp || a.OperState == netlink.OperUnknown)
}

func (netlinkSystem) Subscribe(done <-chan struct{}) (<-chan LinkEvent, error) {
	updates := make(chan netlink.LinkUpdate, 256)
	out := make(chan LinkEvent, 256)
	err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{
		ReceiveBufferSize: 1 << 20,
		// The subscription dies on a receive error (ENOBUFS in an event
		// storm); the closed channel says so.
		ErrorCallback: func(error) {},
	})
	if err != nil {
		return nil, fmt.Errorf("watch interfaces: %w", err)
	}
	go func() {
		defer close(out)
		for u := range updates {
			select {
			case out <- LinkEvent{Index: int(u.Index), Name: u.Attrs().Name, Deleted: u.Header.Type == unix.RTM_DELLINK, Running: running(u.Attrs())}:
			case <-done:
				return
			}
		}
	}()
	return out, nil
}

// OpenPeer finds a veth's peer: by the veth's link-netnsid among named
// namespaces and processes' namespaces, opened once and then held.
func (netlinkSystem) OpenPeer(l Link) (Peer, error) {
	if l.Type != "veth" {
		return nil, fmt.Errorf("%q is a %s, not a veth", l.Name, l.Type)
	}
	nl, err := netlink.LinkByIndex(l.Index)
	if err != nil {
		return nil, fmt.Errorf("look up %q: %w", l.Name, err)
	}
	peerIndex := nl.Attrs().ParentIndex
	if peerIndex == 0 {
		v, ok := nl.(*netlink.Veth)
		if !ok {
			return nil, fmt.Errorf("%q is not a veth", l.Name)
		}
		if peerIndex, err = netlink.VethPeerIndex(v); err != nil {
			return nil, fmt.Errorf("find peer of %q: %w", l.Name, err)
		}
	}
	var h netns.NsHandle
	where := "this namespace"
	if nsid := nl.Attrs().NetNsID; nsid >= 0 {
		path, err := netnsutil.FindByID(nsid)
		if err != nil {
			return nil, fmt.Errorf("peer of %q is in namespace id %d: %w", l.Name, nsid, err)
		}
		if h, err = netns.GetFromPath(path); err != nil {
			return nil, fmt.Errorf("open namespace %s: %w", path, err)
		}
		// The path may have changed hands since FindByID looked: the
		// handle must be the namespace the veth says.
		if id, err := netlink.GetNetNsIdByFd(int(h)); err != nil || id != nsid {
			h.Close()
			return nil, fmt.Errorf("peer of %q: namespace %s changed while it was opened", l.Name, path)
		}
		where = path
	} else if h, err = netns.Get(); err != nil {
		return nil, err
	}
	p := &vethPeer{ns: h, id: PeerID{Ifindex: peerIndex, Where: where}}
	if p.id.Netns, err = netnsutil.Inode(h); err != nil {
		h.Close()
		return nil, err
	}
	err = p.do(func() error {
		pl, err := netlink.LinkByIndex(peerIndex)
		if err != nil {
			return fmt.Errorf("peer ifindex %d: %w", peerIndex, err)
		}
		p.id.Name = pl.Attrs().Name
		return nil
	})
	if err != nil {
		h.Close()
		return nil, err
	}
	return p, nil
}

// FindPeer reopens a recorded peer, and refuses one whose namespace is no
// longer the one recorded.
func (s netlinkSystem) FindPeer(port int, netnsID string) (Peer, error) {
	l, err := s.LinkByIndex(port)
	if err != nil {
		return nil, err
	}
	p, err := s.OpenPeer(l)
	if err != nil {
		return nil, err
	}
	if p.ID().Netns != netnsID {
		p.Close()
		return nil, fmt.Errorf("the peer of ifindex %d now lives in another namespace", port)
	}
	return p, nil
}

// vethPeer is a peer held by its namespace's handle and found by ifindex.
type vethPeer struct {
	ns netns.NsHandle
	id PeerID
}

func (p *vethPeer) ID() PeerID { return p.id }

func (p *vethPeer) String() string { return fmt.Sprintf("%s in %s", p.id.Name, p.id.Where) }

func (p *vethPeer) Close() { p.ns.Close() }

func (p *vethPeer) do(f func() error) error { return netnsutil.DoHandle(p.ns, f) }

// name is the peer's name now (it may have been renamed since).
func (p *vethPeer) name() (string, error) {
	l, err := netlink.LinkByIndex(p.id.Ifindex)
	if err != nil {
		return "", fmt.Errorf("peer ifindex %d: %w", p.id.Ifindex, err)
	}
	return l.Attrs().Name, nil
}

// ethtool runs f with an ethtool handle on the peer, inside its namespace,
// under the name it has now.
func (p *vethPeer) ethtool(f func(et *ethtool.Ethtool, name string) error) error {
	return p.do(func() error {
		name, err := p.name()
		if err != nil {
			return err
		}
		et, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer et.Close()
		return f(et, name)
	})
}

func (p *vethPeer) Features(names []string) (map[string]bool, error) {
	out := map[string]bool{}
	err := p.ethtool(func(et *ethtool.Ethtool, name string) error {
		cur, err := et.Features(name)
		if err != nil {
			return fmt.Errorf("read features of %q: %w", name, err)
		}
		for _, n := range names {
			if v, ok := cur[n]; ok {
				out[n] = v
			}
		}
		return nil
	})
	return out, err
}

func (p *vethPeer) SetFeatures(f map[string]bool) error {
	return p.ethtool(func(et *ethtool.Ethtool, name string) error {
		if err := et.Change(name, f); err != nil {
			return fmt.Errorf("set %s on %q: %w", featureList(f), name, err)
		}
		return nil
	})
}

func featureList(f map[string]bool) string {
	var parts []string
	for k, v := range f {
		parts = append(parts, k+" "+onOff(v))
	}
	return strings.Join(parts, ", ")
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
