package overlay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/lab"
)

// The neighbour measure (OverlayNeigh): how many of h1's ARP requests and
// neighbour solicitations for h2, a station the fabric knows (MAC+IP
// routes from host B, IPv4 and IPv6), cross the underlay, with
// suppression off and then on at host A. trestle: B's port of h2 bound to
// its addresses (allowed_ips: the neighbour entries zebra advertises),
// then `neigh_suppress = true` on A's bridge. The Linux bridge: addresses
// on B's bridge from which it learns h2's neighbour entries (zebra
// advertises them), IPv6 on A's bridge from its set-up on (zebra installs
// the IPv6 routes' neighbours there), then `neigh_suppress on` on A's
// vxlan port (docs/overlay.md, "A mixed fabric").

// OverlayNeighRequests is how many ARP requests, and as many neighbour
// solicitations, each half of the measure sends.
const OverlayNeighRequests = 1000

// linuxSVI and linuxSVI6 are the addresses the Linux bridge of host B is
// given in the hosts' subnets, off their numbering: its neighbour entries
// of h2 are what zebra advertises.
const (
	linuxSVI  = "10.77.255.254/16"
	linuxSVI6 = "fd77::ffff/64"
)

// hostIP6 is host h's IPv6 address in the measure: fd77:: and its
// IPv4 address's last two bytes.
func hostIP6(h *lab.Host) netip.Addr {
	a := netip.MustParseAddr(h.IP).As4()
	return netip.AddrFrom16([16]byte{0xfd, 0x77, 14: a[2], 15: a[3]})
}

// enableIPv6 turns on host h's IPv6, which the lab's namespaces have off,
// with hostIP6 (no duplicate address detection: nothing of it is counted).
func enableIPv6(ctx context.Context, h *lab.Host) error {
	if err := h.NS.IPv6On(h.If); err != nil {
		return err
	}
	_, err := h.NS.Run(ctx, "ip", "-6", "addr", "add", hostIP6(h).String()+"/64", "dev", h.If, "nodad")
	return err
}

// neighSuppression runs the neighbour measure on o (h1 behind A asks for
// h2 behind B), n requests of each kind each way.
func neighSuppression(ctx context.Context, o *overlayRig, h1, h2 *lab.Host, n int) (OverlayRecord, error) {
	rec := OverlayRecord{Measure: OverlayNeigh, Requests: n}
	for _, h := range []*lab.Host{h1, h2} {
		if err := enableIPv6(ctx, h); err != nil {
			return rec, err
		}
	}
	ip6 := hostIP6(h2)
	// B advertises h2's addresses.
	if b := o.b; b.trestle != nil {
		b.bind = h2
		if err := b.trestle.Reconfigure(b.trestleConfig); err != nil {
			return rec, fmt.Errorf("host B: bind %s to %s: %w", b.port, h2.IP, err)
		}
	} else {
		// (IPv6 is on on its bridge since its set-up: setupDUT.)
		for _, args := range [][]string{
			{"ip", "addr", "add", linuxSVI, "dev", b.bridg},
			{"ip", "-6", "addr", "add", linuxSVI6, "dev", b.bridg, "nodad"},
			{"ping", "-c", "1", "-W", "1", h2.IP},
			{"ping", "-c", "1", "-W", "1", ip6.String()},
		} {
			if _, err := b.NS.Run(ctx, args[0], args[1:]...); err != nil {
				return rec, fmt.Errorf("host B: %s: %w", strings.Join(args, " "), err)
			}
		}
	}
	for _, ip := range []string{h2.IP, ip6.String()} {
		if err := waitFor(ctx, 30*time.Second, fmt.Sprintf("host A: %s at %s from host B's MAC+IP route", ip, h2.MAC), func() (bool, error) {
			return o.a.remoteNeigh(ctx, ip, h2.MAC)
		}); err != nil {
			return rec, err
		}
	}
	arp := frame.ARP(nil, frame.Broadcast(), h1.MAC, layers.ARPRequest, h1.MAC, netip.MustParseAddr(h1.IP), net.HardwareAddr{0, 0, 0, 0, 0, 0}, netip.MustParseAddr(h2.IP))
	ns := frame.NS(nil, h1.MAC, hostIP6(h1), ip6, h1.MAC)
	burst := func(f []byte) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = f
		}
		return out
	}
	send := func() (c neighCounts, err error) {
		return countWhile(o.a, h1, h2.IP, ip6.String(), func() error {
			return errors.Join(lab.SendFrames(h1, burst(arp)), lab.SendFrames(h1, burst(ns)))
		})
	}
	off, err := send()
	rec.CrossedOff, rec.AnsweredOff, rec.NSCrossedOff, rec.NSAnsweredOff = off.arpCrossed, off.arpAnswered, off.nsCrossed, off.nsAnswered
	if err != nil {
		return rec, err
	}
	if a := o.a; a.trestle != nil {
		a.suppress = true
		if err := a.trestle.Reconfigure(a.trestleConfig); err != nil {
			return rec, fmt.Errorf("host A: neigh_suppress: %w", err)
		}
	} else if _, err := a.NS.Run(ctx, "bridge", "link", "set", "dev", a.vxlan, "neigh_suppress", "on"); err != nil {
		return rec, err
	}
	on, err := send()
	rec.CrossedOn, rec.AnsweredOn, rec.NSCrossedOn, rec.NSAnsweredOn = on.arpCrossed, on.arpAnswered, on.nsCrossed, on.nsAnswered
	return rec, err
}

// remoteNeigh says whether site s has ip at mac from another
// VTEP's MAC+IP route: trestle's neighbour table as a remote entry, the
// Linux bridge's as zebra's (extern_learn).
func (s *overlaySite) remoteNeigh(ctx context.Context, ip string, mac net.HardwareAddr) (bool, error) {
	if s.trestle != nil {
		var ns []ctl.NeighEntry
		if err := ctl.Call(s.trestle.Sock(), ctl.Request{Cmd: ctl.CmdNeighShow, Bridge: "br0"}, &ns); err != nil {
			return false, err
		}
		for _, e := range ns {
			if e.IP == ip && e.MAC == mac.String() && e.Origin == ctl.NeighRemote {
				return true, nil
			}
		}
		return false, nil
	}
	out, err := s.NS.Run(ctx, "ip", "neigh", "show", ip, "dev", s.bridg)
	return err == nil && strings.Contains(out, mac.String()) && strings.Contains(out, "extern_learn"), err
}

// countTail is how long countWhile counts after the requests are sent:
// a request crosses, and an answer comes back, in microseconds.
const countTail = 500 * time.Millisecond

// neighCounts are what countWhile counted.
type neighCounts struct{ arpCrossed, arpAnswered, nsCrossed, nsAnswered int }

// countWhile runs send and counts, until countTail after it ends, the ARP
// requests for ip and the neighbour solicitations for ip6 that leave site
// s on its underlay (in VXLAN), and the ARP replies and neighbour
// advertisements for them that reach host asker.
func countWhile(s *overlaySite, asker *lab.Host, ip, ip6 string, send func() error) (neighCounts, error) {
	var c neighCounts
	under, err := openCapture(s.NS, "ul0")
	if err != nil {
		return c, err
	}
	defer unix.Close(under)
	back, err := openCapture(asker.NS, asker.If)
	if err != nil {
		return c, err
	}
	defer unix.Close(back)
	want, want6 := net.ParseIP(ip).To4(), net.ParseIP(ip6)
	// classify says what f is: an ARP request or reply for ip, a
	// solicitation or advertisement for ip6 (inside VXLAN too: gopacket
	// decodes an underlay frame to the inner one).
	classify := func(f []byte) (request, answer, nd bool) {
		p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		if a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP); ok {
			return a.Operation == layers.ARPRequest && net.IP(a.DstProtAddress).Equal(want),
				a.Operation == layers.ARPReply && net.IP(a.SourceProtAddress).Equal(want), false
		}
		if ns, ok := p.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation); ok {
			return ns.TargetAddress.Equal(want6), false, true
		}
		if na, ok := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement); ok {
			return false, na.TargetAddress.Equal(want6), true
		}
		return false, false, false
	}
	stop := make(chan struct{})
	errs := make(chan error, 2)
	go func() {
		errs <- drain(under, stop, func(f []byte) {
			if req, _, nd := classify(f); req && nd {
				c.nsCrossed++
			} else if req {
				c.arpCrossed++
			}
		})
	}()
	go func() {
		errs <- drain(back, stop, func(f []byte) {
			if _, ans, nd := classify(f); ans && nd {
				c.nsAnswered++
			} else if ans {
				c.arpAnswered++
			}
		})
	}()
	sendErr := send()
	time.Sleep(countTail)
	close(stop)
	err = errors.Join(sendErr, <-errs, <-errs)
	return c, err
}

// openCapture is a packet socket that takes every frame of device dev in
// namespace ns, both ways, with room for a burst.
func openCapture(ns *lab.NS, dev string) (int, error) {
	fd := -1
	err := ns.Do(func() error {
		idx, err := ifIndex(dev)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("packet socket on %s in %s: %w", dev, ns.Name, err)
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
		tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: idx})
	})
	if err != nil && fd >= 0 {
		unix.Close(fd)
	}
	return fd, err
}

// drain reads fd until stop is closed, giving each frame to take.
func drain(fd int, stop <-chan struct{}, take func([]byte)) error {
	buf := make([]byte, 9216)
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		m, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		take(buf[:m])
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// ifIndex is device dev's index in the calling thread's namespace.
func ifIndex(dev string) (int, error) {
	i, err := net.InterfaceByName(dev)
	if err != nil {
		return 0, err
	}
	return i.Index, nil
}
