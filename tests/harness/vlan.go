package harness

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/testutil"
)

const (
	TPIDC = frame.TPIDC // 802.1Q C-tag
	TPIDS = frame.TPIDS // 802.1ad S-tag
)

// VTag is a tag of a test frame: TPID and TCI (internal/frame's, the
// one frame builder).
type VTag = frame.Tag

func CTag(vid uint16) VTag          { return frame.CTag(vid) }
func CTagP(pcp, vid uint16) VTag    { return frame.CTagP(pcp, vid) }
func STag(vid uint16) VTag          { return frame.STag(vid) }
func VLANBcast() net.HardwareAddr   { return frame.Broadcast() }
func VLANMcast() net.HardwareAddr   { return net.HardwareAddr{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03} }
func VLANUnknown() net.HardwareAddr { return net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x99} }

// VFrame builds a frame dst, src, the tags outermost first, ethertype 0x88b5
// and a 46-byte payload that starts with <marker>.
func VFrame(dst, src net.HardwareAddr, marker string, tags ...VTag) []byte {
	payload := make([]byte, 46)
	copy(payload, "<"+marker+">")
	return frame.Eth{Dst: dst, Src: src, Tags: tags, Type: 0x88b5, Payload: payload}.MustBytes()
}

func HasVMarker(marker string) func([]byte) bool {
	m := []byte("<" + marker + ">")
	return func(f []byte) bool { return bytes.Contains(f, m) }
}

// VLANLab starts a daemon in mode whose bridge has one port per element of
// ports, port-hI configured with ports[I-1] (TOML lines: vlan, trunk, native)
// and bridgeExtra added to the bridge table. Every host captures on eth0.
func VLANLab(t *testing.T, mode, bridgeExtra string, ports ...string) (*Lab, map[int]*testutil.Capturer) {
	t.Helper()
	l := NewLab(t, len(ports))
	l.WriteConfig(l.Config(bridgeExtra, func(i int) string {
		return fmt.Sprintf("mode = %q\n%s\n", mode, ports[i-1])
	}))
	l.Start()
	for _, p := range l.Show().Bridges[0].Ports {
		if p.State != "up" || p.Mode != mode {
			t.Fatalf("port %s: state %s mode %s (%s), want up in %s", p.Interface, p.State, p.Mode, p.Reason, mode)
		}
	}
	caps := map[int]*testutil.Capturer{}
	for i := 1; i <= len(ports); i++ {
		caps[i] = l.Host(i).Capture(t, "eth0")
	}
	return l, caps
}

// HCase is a case of an untagged frame from host from to dst, which hosts
// to receive as sent.
func HCase(name string, from int, dst net.HardwareAddr, to ...int) VCase {
	f := VFrame(dst, HostMAC(from), name)
	vc := VCase{Name: name, From: from, Frame: f, Recv: map[int][]byte{}}
	for _, i := range to {
		vc.Recv[i] = f
	}
	return vc
}

// VCase is one frame sent and where it must arrive.
type VCase struct {
	Name   string // the frame's marker
	From   int    // sending host
	Frame  []byte
	Recv   map[int][]byte // host -> the frame it receives once; every other host receives nothing
	Reason string         // when recv is empty: the sending port counts one drop of this reason
}

// VLANRun sends the cases' frames in order, 20ms apart so that what a frame
// teaches the switch is known before the next, and checks that each host
// received exactly what its case says: one copy of the expected bytes, or
// nothing with the case's marker, and the drops counted on the sending port.
func VLANRun(t *testing.T, l *Lab, caps map[int]*testutil.Capturer, cases []VCase) {
	t.Helper()
	names := map[string]bool{}
	for _, c := range cases {
		if names[c.Name] || !bytes.Contains(c.Frame, []byte("<"+c.Name+">")) {
			t.Fatalf("case %q: marker repeated or not in its frame", c.Name)
		}
		names[c.Name] = true
	}
	dropsBefore := map[int]map[string]uint64{}
	for _, c := range cases {
		if c.Reason != "" && dropsBefore[c.From] == nil {
			dropsBefore[c.From] = l.Stats(PortName(c.From)).Drops
		}
	}
	for _, c := range cases {
		if err := l.Host(c.From).RawSend("eth0", c.Frame); err != nil {
			t.Fatalf("case %s: %v", c.Name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range cases {
		for h, want := range c.Recv {
			caps[h].WaitFor(func(f []byte) bool { return bytes.Equal(f, want) }, 1, 2*time.Second)
		}
	}
	time.Sleep(200 * time.Millisecond) // for frames that must not arrive
	for _, c := range cases {
		for h := 1; h <= len(caps); h++ {
			var got [][]byte
			for _, f := range caps[h].Frames() {
				if HasVMarker(c.Name)(f) {
					got = append(got, f)
				}
			}
			want, ok := c.Recv[h]
			switch {
			case !ok && len(got) > 0:
				t.Errorf("%s (from h%d): h%d received %d frames, want none:\n%s", c.Name, c.From, h, len(got), HexFrames(got))
			case ok && (len(got) != 1 || !bytes.Equal(got[0], want)):
				t.Errorf("%s (from h%d): h%d received %d frames, want 1:\n  want %s\n%s", c.Name, c.From, h, len(got), hex.EncodeToString(want), HexFrames(got))
			}
		}
	}
	want := map[int]map[string]uint64{}
	for _, c := range cases {
		if c.Reason != "" {
			if want[c.From] == nil {
				want[c.From] = map[string]uint64{}
			}
			want[c.From][c.Reason]++
		}
	}
	for h, reasons := range want {
		after := l.Stats(PortName(h)).Drops
		for reason, n := range reasons {
			if got := after[reason] - dropsBefore[h][reason]; got != n {
				t.Errorf("%s: %s drops went up by %d, want %d (drops before %v, after %v)", PortName(h), reason, got, n, dropsBefore[h], after)
			}
		}
	}
}

func HexFrames(fs [][]byte) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  got  %s\n", hex.EncodeToString(f))
	}
	return b.String()
}

// ForModes runs f as a subtest in each mode, xdp and tc, side by side: each
// makes a lab of its own.
func ForModes(t *testing.T, f func(t *testing.T, mode string)) {
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			f(t, mode)
		})
	}
}
