package mirror

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// Mirroring (issue 13), both modes: h4 is the span host.

// icmpEcho matches IPv4 ICMP echo frames of type typ (8 request, 0 reply)
// from src.
func icmpEcho(src net.HardwareAddr, typ byte) func([]byte) bool {
	return func(f []byte) bool {
		return len(f) >= 14+20+8 && bytes.Equal(f[6:12], src) && f[12] == 0x08 && f[13] == 0x00 &&
			f[14+9] == 1 && f[14+int(f[14]&0x0f)*4] == typ
	}
}

func matching(fs [][]byte, match func([]byte) bool) [][]byte {
	var out [][]byte
	for _, f := range fs {
		if match(f) {
			out = append(out, f)
		}
	}
	return out
}

// sameFrames reports how a and b differ as lists of frames, "" if they are
// equal in order and bytes.
func sameFrames(a, b [][]byte) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d frames against %d", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return fmt.Sprintf("frame %d: %s against %s", i, hex.EncodeToString(a[i]), hex.EncodeToString(b[i]))
		}
	}
	return ""
}

func mirrorConfig(l *harness.Lab, mode, direction string) string {
	return l.Config(fmt.Sprintf("[[bridge.mirror]]\nname = \"tap0\"\nports = [%q]\ndirection = %q\nto = %q\n",
		harness.PortName(1), direction, harness.PortName(4)), func(int) string { return fmt.Sprintf("mode = %q\n", mode) })
}

func TestMirror(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 4)
		l.WriteConfig(mirrorConfig(l, mode, "both"))
		l.Start()
		// Ten pings h1 -> h2 with port-h1 mirrored both ways: the span host
		// sees the ten requests and the ten replies, each as h2 and h1 got it.
		// Pings between h1, h2 and h3 teach the switch their stations
		// first (the span host cannot answer: what it sends goes nowhere).
		for _, p := range [][2]int{{1, 2}, {1, 3}, {2, 3}} {
			if err := l.Host(p[0]).Ping(harness.HostIP(p[1]), 1); err != nil {
				t.Fatalf("ping h%d -> h%d: %v", p[0], p[1], err)
			}
		}
		for _, dir := range []string{"both", "in", "out"} {
			if dir != "both" {
				l.WriteConfig(mirrorConfig(l, mode, dir))
				if out, err := l.CLI("reload"); err != nil {
					t.Fatalf("reload to direction %s: %v\n%s", dir, err, out)
				}
			}
			caps := map[int]*testutil.Capturer{}
			for i := 1; i <= 4; i++ {
				caps[i] = l.Host(i).Capture(t, "eth0")
			}
			if err := l.Host(1).Ping(harness.HostIP(2), 10); err != nil {
				t.Fatalf("ping h1 -> h2 (mirror %s): %v", dir, err)
			}
			time.Sleep(200 * time.Millisecond)
			got := map[int][][]byte{}
			for i, c := range caps {
				got[i] = c.Stop()
			}
			reqs := matching(got[2], icmpEcho(harness.HostMAC(1), 8))
			replies := matching(got[1], icmpEcho(harness.HostMAC(2), 0))
			if len(reqs) != 10 || len(replies) != 10 {
				t.Fatalf("mirror %s: h2 got %d requests, h1 %d replies; want 10 and 10", dir, len(reqs), len(replies))
			}
			spanReqs := matching(got[4], icmpEcho(harness.HostMAC(1), 8))
			spanReplies := matching(got[4], icmpEcho(harness.HostMAC(2), 0))
			var wantReqs, wantReplies [][]byte
			if dir != "out" {
				wantReqs = reqs // what port-h1 received
			}
			if dir != "in" {
				wantReplies = replies // what the bridge sent out of it
			}
			if d := sameFrames(spanReqs, wantReqs); d != "" {
				t.Errorf("mirror %s: requests at the span host against those h2 got: %s", dir, d)
			}
			if d := sameFrames(spanReplies, wantReplies); d != "" {
				t.Errorf("mirror %s: replies at the span host against those h1 got: %s", dir, d)
			}
			if n := len(matching(got[3], icmpEcho(harness.HostMAC(1), 8))) + len(matching(got[3], icmpEcho(harness.HostMAC(2), 0))); n != 0 {
				t.Errorf("mirror %s: h3 got %d of the pings", dir, n)
			}
		}

		// Back to both: floods reach the span port once; frames the span
		// host sends go nowhere and are counted; frames between ports that
		// are not mirrored are not copied.
		l.WriteConfig(mirrorConfig(l, mode, "both"))
		if out, err := l.CLI("reload"); err != nil {
			t.Fatalf("reload: %v\n%s", err, out)
		}
		caps := map[int]*testutil.Capturer{}
		for i := 1; i <= 4; i++ {
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		h := harness.HostMAC
		c := harness.HCase
		fromSpan := c("span", 4, harness.VLANBcast())
		fromSpan.Reason = "span_ingress"
		fromSpanU := c("spanu", 4, h(1))
		fromSpanU.Reason = "span_ingress"
		harness.VLANRun(t, l, caps, []harness.VCase{
			c("b1", 1, harness.VLANBcast(), 2, 3, 4),
			c("b2", 2, harness.VLANBcast(), 1, 3, 4),
			c("unk1", 1, harness.VLANUnknown(), 2, 3, 4),
			c("u12", 1, h(2), 2, 4),
			c("u31", 3, h(1), 1, 4),
			c("u23", 2, h(3), 3),
			fromSpan,
			fromSpanU,
		})
		if _, ok := l.FDBEntry(h(4)); ok {
			t.Errorf("the span host was learned")
		}
		var mirrored bool
		for _, b := range l.Show().Bridges {
			for _, m := range b.Mirrors {
				mirrored = m.Name == "tap0" && m.To == harness.PortName(4) && m.Direction == "both" && m.Active
			}
			for _, p := range b.Ports {
				if p.Name == harness.PortName(4) && p.Span != "tap0" || p.Name == harness.PortName(1) && p.Mirror != "tap0" {
					t.Errorf("show: port %s span %q mirror %q", p.Name, p.Span, p.Mirror)
				}
			}
		}
		if !mirrored {
			t.Errorf("show does not list mirror tap0 as active: %+v", l.Show().Bridges)
		}
		l.Stop()
	})
}

// A VLAN-selective mirror on a VLAN-aware bridge: only frames of VLAN 10
// are copied, each with its VLAN's tag.
func TestMirrorVLANs(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l, caps := harness.VLANLab(t, mode,
			fmt.Sprintf("[[bridge.mirror]]\nname = \"v10\"\nports = [%q]\nto = %q\nvlans = [10]\n", harness.PortName(1), harness.PortName(4)),
			"trunk = [10, 20]", "trunk = [10, 20]", "vlan = 10", "")
		h := harness.HostMAC
		harness.VLANRun(t, l, caps, []harness.VCase{
			// Tagged 10 from h1: flooded to h2 (tagged), h3 (untagged); copied tagged.
			{Name: "t10", From: 1, Frame: harness.VFrame(harness.VLANBcast(), h(1), "t10", harness.CTag(10)), Recv: map[int][]byte{
				2: harness.VFrame(harness.VLANBcast(), h(1), "t10", harness.CTag(10)),
				3: harness.VFrame(harness.VLANBcast(), h(1), "t10"),
				4: harness.VFrame(harness.VLANBcast(), h(1), "t10", harness.CTag(10)),
			}},
			// Tagged 20: not copied.
			{Name: "t20", From: 1, Frame: harness.VFrame(harness.VLANBcast(), h(1), "t20", harness.CTag(20)), Recv: map[int][]byte{
				2: harness.VFrame(harness.VLANBcast(), h(1), "t20", harness.CTag(20)),
			}},
			// Untagged from h3 (access 10) to h1, known: out of port-h1 tagged 10, and copied so.
			{Name: "u31", From: 3, Frame: harness.VFrame(h(1), h(3), "u31"), Recv: map[int][]byte{
				1: harness.VFrame(h(1), h(3), "u31", harness.CTag(10)),
				4: harness.VFrame(h(1), h(3), "u31", harness.CTag(10)),
			}},
			// VLAN 20 from h2 to h1, known in VLAN 20: not copied.
			{Name: "t20b", From: 2, Frame: harness.VFrame(h(1), h(2), "t20b", harness.CTag(20)), Recv: map[int][]byte{
				1: harness.VFrame(h(1), h(2), "t20b", harness.CTag(20)),
			}},
		})
		l.Stop()
	})
}
