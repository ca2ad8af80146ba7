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

// The neighbour measure (OverlayNeigh): how many of h1's ARP requests for
// h2, a station the fabric knows (a MAC+IP route from host B), cross the
// underlay, with ARP suppression off and then on at host A. trestle: B's
// port of h2 bound to its addresses (allowed_ips: the neighbour entry
// zebra advertises), then `neigh_suppress = true` on A's bridge. The
// Linux bridge: an address on B's bridge from which it learns h2's
// neighbour entry (zebra advertises it), then `neigh_suppress on` on A's
// vxlan port (docs/overlay.md, "A mixed fabric").

// OverlayNeighRequests is how many ARP requests each half of the measure
// sends.
const OverlayNeighRequests = 1000

// linuxSVI is the address the Linux bridge of host B is given in the
// hosts' subnet, off their numbering: its neighbour entry of h2 is what
// zebra advertises.
const linuxSVI = "10.77.255.254/16"

// neighSuppression runs the neighbour measure on o (h1 behind A asks for
// h2 behind B), n requests each way.
func neighSuppression(ctx context.Context, o *overlayRig, h1, h2 *lab.Host, n int) (OverlayRecord, error) {
	rec := OverlayRecord{Measure: OverlayNeigh, Requests: n}
	// B advertises h2's address.
	if b := o.b; b.trestle != nil {
		b.bind = h2
		if err := b.trestle.Reconfigure(b.trestleConfig); err != nil {
			return rec, fmt.Errorf("host B: bind %s to %s: %w", b.port, h2.IP, err)
		}
	} else {
		if _, err := b.NS.Run(ctx, "ip", "addr", "add", linuxSVI, "dev", b.bridg); err != nil {
			return rec, err
		}
		if _, err := b.NS.Run(ctx, "ping", "-c", "1", "-W", "1", h2.IP); err != nil {
			return rec, fmt.Errorf("host B: ping %s from its bridge: %w", h2.IP, err)
		}
	}
	if err := waitFor(ctx, 30*time.Second, fmt.Sprintf("host A: %s at %s from host B's MAC+IP route", h2.IP, h2.MAC), func() (bool, error) {
		return o.a.remoteNeigh(ctx, h2)
	}); err != nil {
		return rec, err
	}
	ask := frame.ARP(nil, frame.Broadcast(), h1.MAC, layers.ARPRequest, h1.MAC, netip.MustParseAddr(h1.IP), net.HardwareAddr{0, 0, 0, 0, 0, 0}, netip.MustParseAddr(h2.IP))
	asks := make([][]byte, n)
	for i := range asks {
		asks[i] = ask
	}
	send := func() (crossed, answered int, err error) {
		return countWhile(o.a, h1, h2.IP, func() error { return lab.SendFrames(h1, asks) })
	}
	var err error
	if rec.CrossedOff, rec.AnsweredOff, err = send(); err != nil {
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
	rec.CrossedOn, rec.AnsweredOn, err = send()
	return rec, err
}

// remoteNeigh says whether site s has h's address at h's MAC from another
// VTEP's MAC+IP route: trestle's neighbour table as a remote entry, the
// Linux bridge's as zebra's (extern_learn).
func (s *overlaySite) remoteNeigh(ctx context.Context, h *lab.Host) (bool, error) {
	if s.trestle != nil {
		var ns []ctl.NeighEntry
		if err := ctl.Call(s.trestle.Sock(), ctl.Request{Cmd: ctl.CmdNeighShow, Bridge: "br0"}, &ns); err != nil {
			return false, err
		}
		for _, e := range ns {
			if e.IP == h.IP && e.MAC == h.MAC.String() && e.Origin == ctl.NeighRemote {
				return true, nil
			}
		}
		return false, nil
	}
	out, err := s.NS.Run(ctx, "ip", "neigh", "show", h.IP, "dev", s.bridg)
	return err == nil && strings.Contains(out, h.MAC.String()) && strings.Contains(out, "extern_learn"), err
}

// countWhile runs send and counts, until a second after it ends, the ARP
// requests for ip that leave site s on its underlay (in VXLAN) and the
// ARP replies for ip that reach host asker.
func countWhile(s *overlaySite, asker *lab.Host, ip string, send func() error) (crossed, answered int, err error) {
	under, err := openCapture(s.NS, "ul0")
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(under)
	back, err := openCapture(asker.NS, asker.If)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(back)
	want := net.ParseIP(ip).To4()
	isARP := func(op uint16, f []byte) bool {
		p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
		if !ok || a.Operation != op {
			return false
		}
		if op == layers.ARPRequest {
			return net.IP(a.DstProtAddress).Equal(want)
		}
		return net.IP(a.SourceProtAddress).Equal(want)
	}
	stop := make(chan struct{})
	type count struct {
		n   int
		err error
	}
	counts := make([]chan count, 2)
	for i, c := range []struct {
		fd int
		op uint16
	}{{under, layers.ARPRequest}, {back, layers.ARPReply}} {
		counts[i] = make(chan count, 1)
		go func() {
			n, err := drain(c.fd, stop, func(f []byte) bool { return isARP(c.op, f) })
			counts[i] <- count{n, err}
		}()
	}
	sendErr := send()
	time.Sleep(time.Second)
	close(stop)
	u, b := <-counts[0], <-counts[1]
	return u.n, b.n, errors.Join(sendErr, u.err, b.err)
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

// drain reads fd until stop is closed and counts the frames match takes.
func drain(fd int, stop <-chan struct{}, match func([]byte) bool) (int, error) {
	buf := make([]byte, 9216)
	n := 0
	for {
		select {
		case <-stop:
			return n, nil
		default:
		}
		m, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if match(buf[:m]) {
			n++
		}
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
