package filter

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// A filter that fails closed, both modes, written as the attack: the bridge
// passes by default and blocks TCP to port 5022, where h2 listens. h1 sends
// SYNs there that Linux answers but a filter may not read: behind seven
// IPv6 destination options headers (one past the six the filter reads),
// behind one of 520 bytes (past the 512 it reads), and as an IPv4 first
// fragment that carries only the first 8 bytes of the TCP header (RFC
// 1858's tiny fragment), its second fragment the rest. None is answered,
// each is counted as unreadable; a SYN to port 5023, where h2 listens too,
// is. Then the rule is moved to h2's own port, and the same frames are
// answered: Linux takes them, and only the filter stopped them.
func TestFilterUnreadableFailsClosed(t *testing.T) {
	t.Parallel()
	const blocked, open = 5022, 5023
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 2)
		policy := func(in string) string {
			return l.Config(fmt.Sprintf(`filter = true

[[bridge.rule]]
action = "block"
%sproto = "tcp"
dst_port = %d
`, in, blocked), func(int) string { return fmt.Sprintf("mode = %q\n", mode) })
		}
		l.WriteConfig(policy(""))
		l.Start()
		h1, h2 := l.Host(1), l.Host(2)
		m1, m2 := harness.HostMAC(1), harness.HostMAC(2)
		ip6 := func(i int) string { return fmt.Sprintf("fd00:78::%d", i) }
		for i, h := range []*testutil.NS{h1, h2} {
			for _, k := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/eth0/disable_ipv6"} {
				if err := h.Sysctl(k, "0"); err != nil {
					t.Fatal(err)
				}
			}
			h.AddrAdd(t, "eth0", ip6(i+1)+"/64")
		}
		// The answers go straight back: no neighbour discovery in between.
		h2.MustExec(t, "ip", "neigh", "replace", harness.HostIP(1), "lladdr", m1.String(), "dev", "eth0")
		h2.MustExec(t, "ip", "-6", "neigh", "replace", ip6(1), "lladdr", m1.String(), "dev", "eth0")
		for _, port := range []int{blocked, open} {
			var ln net.Listener
			if err := h2.Do(func() (err error) { ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port)); return err }); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
		}
		capture := h1.Capture(t, "eth0")
		tx := h1.RawSender(t, "eth0")
		send := func(fs [][]byte) {
			t.Helper()
			for _, f := range fs {
				if err := tx.Send(f); err != nil {
					t.Fatal(err)
				}
			}
		}
		sport := uint16(40000)
		// answered sends frames (a SYN from a new source port) and says
		// whether h2 answered with a SYN-ACK.
		answered := func(frames func(sport uint16) [][]byte, wait time.Duration) bool {
			sport++
			send(frames(sport))
			return capture.WaitFor(isSYNACK(sport), 1, wait) == 1
		}
		v4 := func(dport uint16) func(uint16) [][]byte {
			return func(sport uint16) [][]byte {
				return [][]byte{synFrame(m2, m1, harness.HostIP(1), harness.HostIP(2), sport, dport)}
			}
		}
		v6 := func(dport uint16, ext ...[]byte) func(uint16) [][]byte {
			return func(sport uint16) [][]byte {
				return [][]byte{synFrame(m2, m1, ip6(1), ip6(2), sport, dport, ext...)}
			}
		}
		seven := make([][]byte, 7)
		for i := range seven {
			seven[i] = destOpts(8)
		}
		tiny := func(dport uint16) func(uint16) [][]byte {
			return func(sport uint16) [][]byte {
				return tinyFragments(m2, m1, harness.HostIP(1), harness.HostIP(2), sport, dport)
			}
		}
		// The listeners answer, and the rule blocks its port.
		if !answered(v4(open), 3*time.Second) || !answered(v6(open), 3*time.Second) {
			t.Fatalf("a SYN to port %d over IPv4 and IPv6 was not answered", open)
		}
		if answered(v4(blocked), time.Second) {
			t.Fatalf("a SYN to port %d was answered through the block rule", blocked)
		}
		attacks := []struct {
			name   string
			frames func(uint16) [][]byte
		}{
			{"behind seven destination options headers", v6(blocked, seven...)},
			{"behind a destination options header of 520 bytes", v6(blocked, destOpts(520))},
			{"in a tiny first fragment", tiny(blocked)},
		}
		for _, a := range attacks {
			before := l.Stats(harness.PortName(1)).Drops["unreadable"]
			if answered(a.frames, 2*time.Second) {
				t.Errorf("a SYN to port %d %s was answered: the filter failed open", blocked, a.name)
			}
			if n := l.Stats(harness.PortName(1)).Drops["unreadable"] - before; n != 1 {
				t.Errorf("a SYN %s: %d unreadable drops on h1's port, want 1", a.name, n)
			}
		}
		// The same frames, the rule moved to h2's own port: answered.
		l.WriteConfig(policy(fmt.Sprintf("in = %q\n", harness.PortName(2))))
		if out, err := l.CLI("reload"); err != nil {
			t.Fatalf("reload: %v: %s", err, out)
		}
		for _, a := range attacks {
			if !answered(a.frames, 3*time.Second) {
				t.Errorf("a SYN to port %d %s, the rule on another port: not answered, so the test shows nothing of the filter", blocked, a.name)
			}
		}
		l.Stop()
	})
}

// synFrame is a TCP SYN from sip:sport to dip:dport (IPv4 or IPv6), IPv6
// with the extension headers ext (each a whole header whose first byte the
// chain's next header overwrites).
func synFrame(dst, src net.HardwareAddr, sip, dip string, sport, dport uint16, ext ...[]byte) []byte {
	s, d := netip.MustParseAddr(sip), netip.MustParseAddr(dip)
	tcp := tcpSYN(s, d, sport, dport)
	f := append(append([]byte{}, dst...), src...)
	if s.Is4() {
		return append(append(binary.BigEndian.AppendUint16(f, 0x0800), ipv4Header(s, d, 0, 0, len(tcp))...), tcp...)
	}
	var hdrs []byte
	for i, h := range ext {
		h = append([]byte{}, h...)
		h[0] = 6
		if i+1 < len(ext) {
			h[0] = 60
		}
		hdrs = append(hdrs, h...)
	}
	ip := make([]byte, 40)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(hdrs)+len(tcp)))
	ip[6], ip[7] = 6, 64
	if len(ext) > 0 {
		ip[6] = 60
	}
	copy(ip[8:], s.AsSlice())
	copy(ip[24:], d.AsSlice())
	f = binary.BigEndian.AppendUint16(f, 0x86dd)
	return append(append(append(f, ip...), hdrs...), tcp...)
}

// tinyFragments are a SYN from sip:sport to dip:dport in two IPv4
// fragments: the first carries the TCP header's first 8 bytes (ports and
// sequence number, not its flags), the second the other 12.
func tinyFragments(dst, src net.HardwareAddr, sip, dip string, sport, dport uint16) [][]byte {
	s, d := netip.MustParseAddr(sip), netip.MustParseAddr(dip)
	tcp := tcpSYN(s, d, sport, dport)
	eth := binary.BigEndian.AppendUint16(append(append([]byte{}, dst...), src...), 0x0800)
	id := sport
	first := append(append(append([]byte{}, eth...), ipv4Header(s, d, id, 0x2000, 8)...), tcp[:8]...) // more fragments, offset 0
	second := append(append(append([]byte{}, eth...), ipv4Header(s, d, id, 1, 12)...), tcp[8:]...)    // offset 8 bytes, the last
	return [][]byte{first, second}
}

// ipv4Header is an IPv4 header of id and flags/fragment offset frag for n
// bytes of TCP, with its checksum.
func ipv4Header(s, d netip.Addr, id, frag uint16, n int) []byte {
	ip := make([]byte, 20)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+n))
	binary.BigEndian.PutUint16(ip[4:], id)
	binary.BigEndian.PutUint16(ip[6:], frag)
	ip[8], ip[9] = 64, 6
	copy(ip[12:], s.AsSlice())
	copy(ip[16:], d.AsSlice())
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum16(ip, 0)))
	return ip
}

// tcpSYN is a TCP header with SYN, its checksum over the pseudo-header.
func tcpSYN(s, d netip.Addr, sport, dport uint16) []byte {
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp, sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	binary.BigEndian.PutUint32(tcp[4:], uint32(sport)<<16|1)
	tcp[12], tcp[13] = 5<<4, 0x02
	binary.BigEndian.PutUint16(tcp[14:], 64240)
	pseudo := append(append([]byte{}, s.AsSlice()...), d.AsSlice()...)
	pseudo = append(pseudo, 0, 6)
	pseudo = binary.BigEndian.AppendUint16(pseudo, uint16(len(tcp)))
	binary.BigEndian.PutUint16(tcp[16:], ^fold(sum16(tcp, sum16(pseudo, 0))))
	return tcp
}

// destOpts is a destination options header of n bytes (a multiple of 8),
// filled with options a receiver skips (RFC 8200, 4.2: type bits 00; an
// experimental type of RFC 4727) and PadN of at most 7 bytes, which Linux
// requires (RFC 4942, 2.1.9.5). Its first byte is the next header's.
func destOpts(n int) []byte {
	h := []byte{0, uint8(n/8 - 1)}
	for left := n - 2; left > 0; {
		switch {
		case left <= 7:
			h = append(append(h, 1, uint8(left-2)), make([]byte, left-2)...)
			left = 0
		default:
			l := min(left-2, 255)
			if r := left - 2 - l; r == 1 {
				l-- // leave room for a PadN after
			}
			h = append(append(h, 0x1e, uint8(l)), make([]byte, l)...)
			left -= 2 + l
		}
	}
	return h
}

func sum16(b []byte, s uint32) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// isSYNACK matches a SYN-ACK to source port sport (IPv4 or IPv6, no
// extension headers).
func isSYNACK(sport uint16) func([]byte) bool {
	return func(f []byte) bool {
		if len(f) < 14 {
			return false
		}
		var tcp []byte
		switch binary.BigEndian.Uint16(f[12:]) {
		case 0x0800:
			if len(f) < 34 || f[23] != 6 {
				return false
			}
			tcp = f[14+int(f[14]&0xf)*4:]
		case 0x86dd:
			if len(f) < 54 || f[20] != 6 {
				return false
			}
			tcp = f[54:]
		default:
			return false
		}
		return len(tcp) >= 14 && binary.BigEndian.Uint16(tcp[2:]) == sport && tcp[13]&0x12 == 0x12
	}
}
