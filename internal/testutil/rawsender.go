package testutil

import (
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// RawSender transmits frames out of one interface through one AF_PACKET
// socket opened in the namespace, for streams of frames that RawSend, which
// opens a socket per frame, would send too slowly. Send may be called from
// any goroutine, but not from several at once.
type RawSender struct {
	ns     *NS
	ifname string
	fd     int
	idx    int
}

// RawSender opens a sending socket on ifname inside the namespace; a cleanup
// closes it.
func (n *NS) RawSender(t testing.TB, ifname string) *RawSender {
	t.Helper()
	s := &RawSender{ns: n, ifname: ifname, fd: -1}
	err := n.Do(func() error {
		var err error
		if s.idx, err = ifindex(ifname); err != nil {
			return err
		}
		// Protocol 0: a send-only socket that never queues received frames.
		s.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open AF_PACKET socket: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("netns %s: raw sender on %s: %v", n.Name, ifname, err)
	}
	t.Cleanup(func() { unix.Close(s.fd) })
	return s
}

// Send transmits frame byte for byte, VLAN tags included, as RawSend does.
func (s *RawSender) Send(frame []byte) error {
	if len(frame) < ethHdrLen {
		return fmt.Errorf("netns %s: send on %s: frame of %d bytes is shorter than an Ethernet header", s.ns.Name, s.ifname, len(frame))
	}
	sa := &unix.SockaddrLinklayer{
		Ifindex:  s.idx,
		Protocol: htons(binary.BigEndian.Uint16(frame[12:14])),
		Halen:    6,
	}
	copy(sa.Addr[:], frame[:6])
	if err := unix.Sendto(s.fd, frame, 0, sa); err != nil {
		return fmt.Errorf("netns %s: send %d-byte frame on %s: %w", s.ns.Name, len(frame), s.ifname, err)
	}
	return nil
}

// SetReceiveBuffer sets the capture socket's receive buffer to bytes,
// beyond net.core.rmem_max (SO_RCVBUFFORCE, which needs CAP_NET_ADMIN), so
// a burst of frames is not lost while the reader is not scheduled.
func (c *Capturer) SetReceiveBuffer(bytes int) error {
	if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, bytes); err != nil {
		return fmt.Errorf("capture: set SO_RCVBUFFORCE %d: %w", bytes, err)
	}
	return nil
}

// SocketDrops returns how many frames the kernel dropped because the capture
// socket's buffer was full since the last call (PACKET_STATISTICS, which
// resets the count). Call it before Stop, which closes the socket.
func (c *Capturer) SocketDrops() (uint32, error) {
	st, err := unix.GetsockoptTpacketStats(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return 0, fmt.Errorf("capture: PACKET_STATISTICS: %w", err)
	}
	return st.Drops, nil
}
