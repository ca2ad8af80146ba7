package filter

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// Tenant safety (issue 29), the filter's part, both modes: a port rule
// cannot be walked around with IPv6 extension headers, and a flood of
// connections from one bridge or one port does not stop another's
// stateful rule.

// l4Frame is an IPv4 or IPv6 frame from src to dst carrying a TCP (proto
// 6) or UDP (17) header with ports sport and dport, then marker; IPv6 with
// the extension headers ext (by type, 8 bytes each) between.
func l4Frame(dst, src net.HardwareAddr, sip, dip string, proto uint8, sport, dport uint16, marker string, ext ...uint8) []byte {
	s, d := netip.MustParseAddr(sip), netip.MustParseAddr(dip)
	l4 := make([]byte, 8)
	if proto == 6 {
		l4 = make([]byte, 20)
		l4[12], l4[13] = 5<<4, 0x02 // SYN
	}
	binary.BigEndian.PutUint16(l4, sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	if proto == 17 {
		binary.BigEndian.PutUint16(l4[4:], uint16(8+len(marker)))
	}
	l4 = append(l4, marker...)
	f := append(append([]byte{}, dst...), src...)
	if s.Is4() {
		f = binary.BigEndian.AppendUint16(f, 0x0800)
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
		ip[8], ip[9] = 64, proto
		copy(ip[12:], s.AsSlice())
		copy(ip[16:], d.AsSlice())
		return append(append(f, ip...), l4...)
	}
	var hdrs []byte
	for i, t := range ext {
		next := proto
		if i+1 < len(ext) {
			next = ext[i+1]
		}
		_ = t
		hdrs = append(hdrs, next, 0, 1, 4, 0, 0, 0, 0) // PadN options
	}
	first := proto
	if len(ext) > 0 {
		first = ext[0]
	}
	f = binary.BigEndian.AppendUint16(f, 0x86dd)
	ip := make([]byte, 40)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(hdrs)+len(l4)))
	ip[6], ip[7] = first, 64
	copy(ip[8:], s.AsSlice())
	copy(ip[24:], d.AsSlice())
	return append(append(append(f, ip...), hdrs...), l4...)
}

func hasMarker(m string) func([]byte) bool {
	return func(f []byte) bool { return bytes.Contains(f, []byte(m)) }
}

// TestFilterIPv6ExtensionHeaders: a port rule blocks IPv6 TCP behind a
// hop-by-hop or a destination-options header (before issue 29 the filter
// read the first next header, and such a frame had no port); a frame to
// another port behind the same headers passes.
func TestFilterIPv6ExtensionHeaders(t *testing.T) {
	t.Parallel()
	const hop, dstOpts = 0, 60
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 2)
		l.WriteConfig(l.Config(`filter = true

[[bridge.rule]]
action = "block"
proto = "tcp"
dst_port = 22
`, func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
		l.Start()
		h2cap := l.Host(2).Capture(t, "eth0")
		tx := l.Host(1).RawSender(t, "eth0")
		m1, m2 := harness.HostMAC(1), harness.HostMAC(2)
		// h2's address learned on its port: the frames below are forwards.
		if err := l.Host(2).RawSend("eth0", l4Frame(m1, m2, "2001:db8::2", "2001:db8::1", 17, 1, 1, "learn-h2")); err != nil {
			t.Fatal(err)
		}
		send := func(name string, ext ...uint8) string {
			marker := fmt.Sprintf("ext-%s-%s", mode, name)
			if err := tx.Send(l4Frame(m2, m1, "2001:db8::1", "2001:db8::2", 6, 40000, 22, marker, ext...)); err != nil {
				t.Fatal(err)
			}
			return marker
		}
		blocked := []string{send("none"), send("hop-by-hop", hop), send("destination-options", dstOpts), send("both", hop, dstOpts)}
		other := fmt.Sprintf("ext-%s-port-23", mode)
		if err := tx.Send(l4Frame(m2, m1, "2001:db8::1", "2001:db8::2", 6, 40000, 23, other, hop, dstOpts)); err != nil {
			t.Fatal(err)
		}
		if h2cap.WaitFor(hasMarker(other), 1, 5*time.Second) != 1 {
			t.Fatalf("TCP to port 23 behind hop-by-hop and destination options did not arrive")
		}
		time.Sleep(200 * time.Millisecond)
		for _, m := range blocked {
			if n := h2cap.WaitFor(hasMarker(m), 1, 0); n != 0 {
				t.Errorf("TCP to port 22 (%s) arrived: the port rule was walked around", m)
			}
		}
		if n := l.Stats(harness.PortName(1)).Drops["filtered"]; n != uint64(len(blocked)) {
			t.Errorf("filtered drops on h1's port: %d, want %d", n, len(blocked))
		}
		l.Stop()
	})
}

// TestFilterStateFloodIsolation: two bridges keep state. In br0, h1 and
// h2 (two ports of one tenant) establish far more connections than a port
// may hold, and h1 floods new connections through the table of
// unestablished ones. Still: br1's connection, established before, passes
// after the flood, and a new one there is made and passes; in br0, h3's
// connection, established after h1's, is held within the bridge's bound
// (h1 holds only its port's) and so survives the flood that evicts the
// unestablished; nothing is dropped as state_full.
func TestFilterStateFloodIsolation(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 5)
		policy := func(name string, clients ...int) string {
			s := fmt.Sprintf("\n[[bridge]]\nname = %q\nfilter = true\ndefault = \"block\"\nmax_states = 32\nmax_states_per_port = 16\n", name)
			for _, c := range clients {
				s += fmt.Sprintf("\n[[bridge.rule]]\naction = \"pass\"\nin = %q\nproto = \"udp\"\nkeep_state = true\n", harness.PortName(c))
			}
			return s
		}
		port := func(i int) string {
			return fmt.Sprintf("\n[[bridge.port]]\ninterface = %q\nmode = %q\n", harness.PortName(i), mode)
		}
		cfg := fmt.Sprintf("[daemon]\nsocket = %q\n", l.Sock) +
			policy("br0", 1, 3) + port(1) + port(2) + port(3) +
			policy("br1", 4) + port(4) + port(5)
		l.WriteConfig(cfg)
		l.Start()

		m := func(i int) net.HardwareAddr { return harness.HostMAC(i) }
		ip := harness.HostIP
		tx := map[int]*testutil.RawSender{}
		caps := map[int]*testutil.Capturer{}
		for i := 1; i <= 5; i++ {
			tx[i] = l.Host(i).RawSender(t, "eth0")
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		// A UDP connection from client c (port sport) to server s, port 5000.
		out := func(c, s int, sport uint16, marker string) []byte {
			return l4Frame(m(s), m(c), ip(c), ip(s), 17, sport, 5000, marker)
		}
		back := func(c, s int, sport uint16, marker string) []byte {
			return l4Frame(m(c), m(s), ip(s), ip(c), 17, 5000, sport, marker)
		}
		send := func(i int, f []byte) {
			t.Helper()
			if err := tx[i].Send(f); err != nil {
				t.Fatal(err)
			}
		}
		arrives := func(i int, marker string) bool {
			return caps[i].WaitFor(hasMarker(marker), 1, 3*time.Second) == 1
		}
		// connect opens a connection and sees its reply arrive.
		connect := func(c, s int, sport uint16, what string) {
			t.Helper()
			mk := fmt.Sprintf("%s-%s-%d", mode, what, sport)
			send(c, out(c, s, sport, mk+"-out"))
			if !arrives(s, mk+"-out") {
				t.Fatalf("%s: the frame out did not arrive", what)
			}
			send(s, back(c, s, sport, mk+"-back"))
			if !arrives(c, mk+"-back") {
				t.Fatalf("%s: the reply did not arrive", what)
			}
		}
		// Every station learned first, so that nothing below floods.
		for i := 1; i <= 5; i++ {
			send(i, l4Frame(harness.VLANBcast(), m(i), ip(i), "10.78.0.255", 17, 9, 9, "learn"))
		}
		time.Sleep(100 * time.Millisecond)

		connect(4, 5, 4000, "br1 before")
		// h1 and h2 establish 100 connections: h1's port holds 16.
		for i := uint16(0); i < 100; i++ {
			mk := fmt.Sprintf("%s-est-%d", mode, i)
			send(1, out(1, 2, 10000+i, mk))
			send(2, back(1, 2, 10000+i, mk))
		}
		time.Sleep(200 * time.Millisecond)
		connect(3, 2, 4001, "h3")
		// h1 floods new connections, more than the unestablished table
		// holds, two frames each: the second's lookup marks each one used,
		// as h3's and the other established ones were, so that the LRU
		// evicts by age alone.
		const flood = 40000
		for i := 0; i < flood; i++ {
			f := out(1, 2, uint16(20000+i), "")
			send(1, f)
			send(1, f)
			if i%2048 == 2047 {
				time.Sleep(time.Millisecond) // let the receive side keep up
			}
		}
		// Past every CPU's memory of passing a connection (a second).
		time.Sleep(1200 * time.Millisecond)

		mk := mode + "-after"
		send(5, back(4, 5, 4000, mk+"-br1"))
		if !arrives(4, mk+"-br1") {
			t.Errorf("br1's connection established before the flood: its reply was blocked after it")
		}
		connect(4, 5, 4002, "br1 after")
		send(2, back(3, 2, 4001, mk+"-h3"))
		if !arrives(3, mk+"-h3") {
			t.Errorf("h3's connection in br0: its reply was blocked after h1's flood")
		}
		for i := 1; i <= 5; i++ {
			if n := l.Stats(harness.PortName(i)).Drops["state_full"]; n != 0 {
				t.Errorf("port %d: %d state_full drops", i, n)
			}
		}
		var ss []struct {
			Bridge, State string
		}
		l.CLIJSON(&ss, "state", "show")
		est := map[string]int{}
		for _, s := range ss {
			if s.State == "established" {
				est[s.Bridge]++
			}
		}
		t.Logf("%s: tracked %d connections, established: %v", mode, len(ss), est)
		l.Stop()
	})
}
