package snoop

import (
	"net/netip"
	"testing"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/tests/harness"
)

// tagged is f (an untagged Ethernet frame) with a C-tag of vid, as a
// trunk's host sends it: the machine has no 802.1Q devices, so tagged
// frames are written raw, as tests/vlan does.
func tagged(f []byte, vid uint16) []byte {
	t := frame.CTag(vid)
	out := append([]byte{}, f[:12]...)
	out = append(out, byte(t.TPID>>8), byte(t.TPID), byte(t.TCI>>8), byte(t.TCI))
	return append(out, f[12:]...)
}

// TestSnoopVLAN, both modes: the group table is per VLAN. On a VLAN-aware
// snooping bridge, h1 a trunk of VLANs 10 and 20, h2 and h3 access ports
// of VLAN 10, h4 and h5 of VLAN 20: h2 joins 239.1.1.1 (in VLAN 10, its
// port's). h1's datagram to the group tagged 10 reaches h2 only; the same
// group tagged 20, where it has no members, floods VLAN 20 (h4, h5) and
// nothing of VLAN 10.
func TestSnoopVLAN(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l, caps := harness.VLANLab(t, mode, "multicast_snooping = true",
			"trunk = [10, 20]", "vlan = 10", "vlan = 10", "vlan = 20", "vlan = 20")
		join(t, l.Host(2), "239.1.1.1", true)
		waitMDB(t, l, "h2's report in VLAN 10", func(ms []ctl.MDBEntry) bool {
			for _, m := range ms {
				if m.Group == "239.1.1.1" && (m.VLAN != 10 || m.Port != harness.PortName(2)) {
					return false
				}
			}
			return member(ms, "239.1.1.1", harness.PortName(2))
		})
		src := netip.MustParseAddr(harness.HostIP(1))
		g := netip.MustParseAddr("239.1.1.1")
		for _, c := range []struct {
			marker string
			vid    uint16
			want   []int
		}{{"vlan10-to-member", 10, []int{2}}, {"vlan20-flooded", 20, []int{4, 5}}} {
			f := tagged(frame.UDPTo(harness.HostMAC(1), src, g, []byte(c.marker)), c.vid)
			if err := l.Host(1).RawSend("eth0", f); err != nil {
				t.Fatal(err)
			}
			delivered(t, others(caps, 1), c.marker, c.want...)
		}
		if g := l.Stats(harness.PortName(1)).Counters.Get("grouped"); g != 1 {
			t.Errorf("%s grouped %d, want 1 (VLAN 10's datagram)", harness.PortName(1), g)
		}
	})
}
