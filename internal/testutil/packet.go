package testutil

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/frame"
)

const (
	ethHdrLen  = 14
	vlanTagLen = 4
	// captureBuf holds any frame veth can deliver, GRO/GSO super-frames
	// included; longer frames are kept truncated.
	captureBuf = 1 << 18
	// captureTick bounds how long Stop waits for the reader to notice.
	captureTick = 100 * time.Millisecond
	// auxdataLen is sizeof(struct tpacket_auxdata).
	auxdataLen = int(unsafe.Sizeof(unix.TpacketAuxdata{}))
)

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Frame builds an Ethernet frame: dst, src, ethertype, payload. It does not
// pad to the 60-byte minimum; veth carries short frames, and tests that want
// padding add it to the payload.
// (internal/frame's Eth, the one frame builder, which takes VLAN tags
// too.)
func Frame(dst, src net.HardwareAddr, ethertype uint16, payload []byte) []byte {
	return frame.Eth{Dst: dst, Src: src, Type: ethertype, Payload: payload}.MustBytes()
}

// ifindex returns the index of ifname; call it inside Do, where the
// netlink socket it opens belongs to the namespace.
func ifindex(ifname string) (int, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}

// RawSend transmits frame, which must start with an Ethernet header, out of
// ifname inside the namespace through an AF_PACKET raw socket. The frame
// goes out byte for byte, VLAN tags included.
func (n *NS) RawSend(ifname string, frame []byte) error {
	if len(frame) < ethHdrLen {
		return fmt.Errorf("netns %s: send on %s: frame of %d bytes is shorter than an Ethernet header", n.Name, ifname, len(frame))
	}
	err := n.Do(func() error {
		idx, err := ifindex(ifname)
		if err != nil {
			return err
		}
		// Protocol 0: a send-only socket that never queues received frames.
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open AF_PACKET socket: %w", err)
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{
			Ifindex:  idx,
			Protocol: htons(binary.BigEndian.Uint16(frame[12:14])),
			Halen:    6,
		}
		copy(sa.Addr[:], frame[:6])
		return unix.Sendto(fd, frame, 0, sa)
	})
	if err != nil {
		return fmt.Errorf("netns %s: send %d-byte frame on %s: %w", n.Name, len(frame), ifname, err)
	}
	return nil
}

// Capturer collects the frames an interface receives, from when Capture
// returns until Stop.
type Capturer struct {
	fd   int
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	frames  [][]byte
	err     error
	changed chan struct{} // closed and replaced whenever frames grows
}

// Capture starts collecting the frames ifname receives inside the namespace:
// everything except PACKET_OUTGOING, that is frames addressed to the host,
// broadcast, multicast and other hosts. It is open when Capture returns, so
// send traffic afterwards. A cleanup stops it.
//
// The kernel removes a received frame's 802.1Q/802.1ad tag before packet
// sockets see it; Capture puts the tag back from PACKET_AUXDATA, so frames
// read as they were on the wire.
func (n *NS) Capture(t testing.TB, ifname string) *Capturer {
	t.Helper()
	var fd int
	err := n.Do(func() error {
		idx, err := ifindex(ifname)
		if err != nil {
			return err
		}
		// Open with protocol 0 and bind with ETH_P_ALL and the ifindex in
		// one step, so no frame of another interface is queued in between.
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open AF_PACKET socket: %w", err)
		}
		tv := unix.NsecToTimeval(captureTick.Nanoseconds())
		if err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			unix.Close(fd)
			return fmt.Errorf("set SO_RCVTIMEO: %w", err)
		}
		if err = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			unix.Close(fd)
			return fmt.Errorf("set PACKET_AUXDATA: %w", err)
		}
		if err = unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: idx, Protocol: htons(unix.ETH_P_ALL)}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("netns %s: capture on %s: %v", n.Name, ifname, err)
	}
	c := &Capturer{fd: fd, stop: make(chan struct{}), done: make(chan struct{}), changed: make(chan struct{})}
	go c.read()
	t.Cleanup(func() {
		c.Stop()
		if err := c.Err(); err != nil {
			t.Errorf("netns %s: capture on %s: %v", n.Name, ifname, err)
		}
	})
	return c
}

func (c *Capturer) read() {
	defer close(c.done)
	defer unix.Close(c.fd)
	buf := make([]byte, captureBuf)
	oob := make([]byte, unix.CmsgSpace(auxdataLen))
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		n, oobn, _, from, err := unix.Recvmsg(c.fd, buf, oob, unix.MSG_TRUNC)
		// ENETDOWN reports once that the interface went down; the socket
		// resumes by itself when it comes back up.
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENETDOWN) {
			continue
		}
		if err != nil {
			c.mu.Lock()
			c.err = fmt.Errorf("receive: %w", err)
			c.mu.Unlock()
			return
		}
		if sll, ok := from.(*unix.SockaddrLinklayer); ok && sll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		frame := withVLANTag(buf[:min(n, len(buf))], oob[:oobn])
		c.mu.Lock()
		c.frames = append(c.frames, frame)
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
	}
}

// withVLANTag returns a copy of frame f with the VLAN tag the kernel stripped,
// if any, reinserted after the MAC addresses.
func withVLANTag(f, oob []byte) []byte {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err == nil {
		for _, m := range msgs {
			if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA ||
				len(m.Data) < auxdataLen || len(f) < 12 {
				continue
			}
			// struct tpacket_auxdata: status, len, snaplen u32; mac, net,
			// vlan_tci, vlan_tpid u16.
			status := binary.NativeEndian.Uint32(m.Data[0:])
			tci := binary.NativeEndian.Uint16(m.Data[16:])
			if status&unix.TP_STATUS_VLAN_VALID == 0 && tci == 0 {
				break
			}
			tpid := uint16(frame.TPIDC)
			if status&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
				tpid = binary.NativeEndian.Uint16(m.Data[18:])
			}
			out := make([]byte, 0, len(f)+vlanTagLen)
			out = append(out, f[:12]...)
			out = binary.BigEndian.AppendUint16(out, tpid)
			out = binary.BigEndian.AppendUint16(out, tci)
			return append(out, f[12:]...)
		}
	}
	return append([]byte(nil), f...)
}

// Stop ends the capture and returns copies of the frames received. It is
// idempotent.
func (c *Capturer) Stop() [][]byte {
	c.once.Do(func() { close(c.stop) })
	<-c.done
	return c.Frames()
}

// Frames returns copies of the frames received so far.
func (c *Capturer) Frames() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([][]byte, len(c.frames))
	for i, f := range c.frames {
		out[i] = append([]byte(nil), f...)
	}
	return out
}

// Err reports why the capture ended early, if it did.
func (c *Capturer) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// WaitFor returns how many captured frames satisfy match, waiting up to
// timeout for there to be at least want of them; it returns as soon as there
// are. With want 0 it waits the whole timeout, which is how a test asserts
// that a frame did not arrive. match must not modify the frame.
func (c *Capturer) WaitFor(match func([]byte) bool, want int, timeout time.Duration) int {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		c.mu.Lock()
		frames, changed := c.frames, c.changed
		c.mu.Unlock()
		got := 0
		for _, f := range frames {
			if match(f) {
				got++
			}
		}
		if want > 0 && got >= want {
			return got
		}
		select {
		case <-changed:
		case <-c.done:
			c.mu.Lock()
			late := len(c.frames) > len(frames)
			c.mu.Unlock()
			if !late {
				return got
			}
			// Frames arrived between the snapshot and the end: count again.
		case <-timer.C:
			return got
		}
	}
}
