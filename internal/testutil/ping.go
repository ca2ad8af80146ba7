package testutil

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"
)

// Timing of Ping, as `ping -c N -W 1 -i 0.2`.
const (
	pingInterval = 200 * time.Millisecond
	pingWait     = time.Second
)

// Ping sends count ICMP echo requests to addr (IPv4 or IPv6, no zone) from
// inside the namespace, 200ms apart, and returns an error unless every one is
// answered within a second, like `ping -c N -W 1 -i 0.2`.
//
// It speaks ICMP over a raw socket itself instead of running ping(8), which
// is not installed everywhere the tests run.
func (n *NS) Ping(addr string, count int) error {
	ip := net.ParseIP(addr)
	if ip == nil {
		return fmt.Errorf("ping from netns %s: %q is not an IP address", n.Name, addr)
	}
	if count < 1 {
		count = 1
	}
	network, reqType, replyType := "ip4:icmp", byte(8), byte(0)
	if ip.To4() == nil {
		network, reqType, replyType = "ip6:ipv6-icmp", 128, 129
	}

	var conn net.PacketConn
	err := n.Do(func() error {
		var err error
		conn, err = net.ListenPacket(network, "")
		return err
	})
	if err != nil {
		return fmt.Errorf("ping %s from netns %s: open ICMP socket: %w", addr, n.Name, err)
	}
	defer conn.Close()

	// A raw ICMP socket sees every ICMP message of the namespace: match
	// replies on identifier, sequence, source and a random payload.
	var tag [10]byte
	if _, err := rand.Read(tag[:]); err != nil {
		return fmt.Errorf("ping: random tag: %w", err)
	}
	id, token := binary.BigEndian.Uint16(tag[:2]), tag[2:]
	echo := func(typ byte, seq int) []byte {
		m := make([]byte, 8, 8+len(token))
		m[0] = typ
		binary.BigEndian.PutUint16(m[4:], id)
		binary.BigEndian.PutUint16(m[6:], uint16(seq))
		m = append(m, token...)
		if typ == 8 { // the kernel checksums ICMPv6 on raw sockets, not ICMP
			binary.BigEndian.PutUint16(m[2:], inetChecksum(m))
		}
		return m
	}

	sendErr := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		for seq := range count {
			if seq > 0 {
				select {
				case <-time.After(pingInterval):
				case <-stop:
					sendErr <- nil
					return
				}
			}
			if _, err := conn.WriteTo(echo(reqType, seq), &net.IPAddr{IP: ip}); err != nil {
				sendErr <- fmt.Errorf("send echo request %d: %w", seq, err)
				return
			}
		}
		sendErr <- nil
	}()

	deadline := time.Now().Add(time.Duration(count-1)*pingInterval + pingWait)
	if err := conn.SetReadDeadline(deadline); err != nil {
		return fmt.Errorf("ping %s from netns %s: %w", addr, n.Name, err)
	}
	got := make([]bool, count)
	received := 0
	buf := make([]byte, 1500)
	for received < count {
		m, from, err := conn.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) || isTimeout(err) {
			break
		}
		if err != nil {
			return fmt.Errorf("ping %s from netns %s: read: %w", addr, n.Name, err)
		}
		src, ok := from.(*net.IPAddr)
		if !ok || !src.IP.Equal(ip) || m != 8+len(token) || buf[0] != replyType ||
			binary.BigEndian.Uint16(buf[4:]) != id || !bytes.Equal(buf[8:m], token) {
			continue
		}
		if seq := int(binary.BigEndian.Uint16(buf[6:])); seq < count && !got[seq] {
			got[seq] = true
			received++
		}
	}
	close(stop)
	if err := <-sendErr; err != nil {
		return fmt.Errorf("ping %s from netns %s: %w", addr, n.Name, err)
	}
	if received < count {
		return fmt.Errorf("ping %s from netns %s: %d packets transmitted, %d received", addr, n.Name, count, received)
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// inetChecksum is the RFC 1071 Internet checksum.
func inetChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
