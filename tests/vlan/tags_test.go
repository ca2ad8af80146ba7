package vlan

// Double tags and native_tagged trunks (issue 29): a frame with a second tag
// behind a priority tag or an S-tag, sent on an access port, reaches no
// port of another VLAN (nor any port) and is counted as double_tagged,
// unless the port is a qinq port, which carries it into its VLAN as every
// access port did before; a native_tagged trunk sends its native VLAN
// tagged. The hop the drop closes: the priority tag comes off where VLAN
// 10 leaves untagged (the trunk's native VLAN, another access port), and
// the frame goes on with the inner tag of VLAN 20 outermost.

import (
	"strings"
	"testing"

	"github.com/trestle/trestle/tests/harness"
)

func TestVLANDoubleTagged(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l, caps := harness.VLANLab(t, mode, "", "vlan = 10", "trunk = [10, 20]\nnative = 10", "vlan = 20", "vlan = 10")
		h1, h3 := harness.HostMAC(1), harness.HostMAC(3)
		bc := harness.VLANBcast()
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "h3-in-20", From: 3, Frame: harness.VFrame(bc, h3, "h3-in-20"), Recv: map[int][]byte{
				2: harness.VFrame(bc, h3, "h3-in-20", harness.CTag(20)),
			}},
			{Name: "prio-then-20", From: 1, Frame: harness.VFrame(bc, h1, "prio-then-20", harness.CTagP(5, 0), harness.CTag(20)), Reason: "double_tagged"},
			{Name: "prio-then-20-uc", From: 1, Frame: harness.VFrame(h3, h1, "prio-then-20-uc", harness.CTagP(5, 0), harness.CTag(20)), Reason: "double_tagged"},
			{Name: "stag-then-20", From: 1, Frame: harness.VFrame(bc, h1, "stag-then-20", harness.STag(100), harness.CTag(20)), Reason: "double_tagged"},
			{Name: "stag0-then-20", From: 1, Frame: harness.VFrame(bc, h1, "stag0-then-20", harness.STag(0), harness.CTag(20)), Reason: "double_tagged"},
			{Name: "prio-then-stag", From: 4, Frame: harness.VFrame(bc, harness.HostMAC(4), "prio-then-stag", harness.CTagP(0, 0), harness.STag(20)), Reason: "double_tagged"},
			// One tag that names no VLAN still joins the port's.
			{Name: "prio-alone", From: 1, Frame: harness.VFrame(bc, h1, "prio-alone", harness.CTagP(5, 0)), Recv: map[int][]byte{
				2: harness.VFrame(bc, h1, "prio-alone"),
				4: harness.VFrame(bc, h1, "prio-alone"),
			}},
		})
		if d := l.Stats(harness.PortName(1)).Drops; d["double_tagged"] != 4 {
			t.Errorf("%s drops %v, want 4 double_tagged", harness.PortName(1), d)
		}
		// The dropped frames taught nothing: h1 is known from prio-alone
		// only, in VLAN 10.
		for _, e := range l.FDB() {
			if e.MAC == h1.String() && (e.VLAN != 10 || e.Port != harness.PortName(1)) {
				t.Errorf("h1 learned as %+v, want VLAN 10 on %s only", e, harness.PortName(1))
			}
		}
		l.Stop()
	})
}

// A qinq port keeps what access ports did before: the frame joins the
// port's VLAN with its tags, and the trunk gets it in that VLAN.
func TestVLANQinQPort(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l, caps := harness.VLANLab(t, mode, "", "vlan = 10\nqinq = true", "trunk = [10, 20]", "vlan = 20", "vlan = 10")
		h1 := harness.HostMAC(1)
		bc := harness.VLANBcast()
		harness.VLANRun(t, l, caps, []harness.VCase{
			// The priority tag takes the VID of VLAN 10 on the trunk, and
			// comes off at the access port of VLAN 10.
			{Name: "qinq-prio", From: 1, Frame: harness.VFrame(bc, h1, "qinq-prio", harness.CTagP(5, 0), harness.CTag(20)), Recv: map[int][]byte{
				2: harness.VFrame(bc, h1, "qinq-prio", harness.CTagP(5, 10), harness.CTag(20)),
				4: harness.VFrame(bc, h1, "qinq-prio", harness.CTag(20)),
			}},
			// An S-tag's frame gets a C-tag of VLAN 10 outside on the trunk.
			{Name: "qinq-stag", From: 1, Frame: harness.VFrame(bc, h1, "qinq-stag", harness.STag(100), harness.CTag(20)), Recv: map[int][]byte{
				2: harness.VFrame(bc, h1, "qinq-stag", harness.CTag(10), harness.STag(100), harness.CTag(20)),
				4: harness.VFrame(bc, h1, "qinq-stag", harness.STag(100), harness.CTag(20)),
			}},
			{Name: "qinq-ctag", From: 1, Frame: harness.VFrame(bc, h1, "qinq-ctag", harness.CTag(10)), Reason: "vlan_tagged_on_access"},
		})
		if d := l.Stats(harness.PortName(1)).Drops; d["double_tagged"] != 0 {
			t.Errorf("the qinq port dropped %d frames as double_tagged", d["double_tagged"])
		}
		if e, ok := l.FDBEntry(h1); !ok || e.VLAN != 10 {
			t.Errorf("h1 learned as %+v (found %v), want vlan 10", e, ok)
		}
		if p := l.Show().Bridges[0].Ports[0]; !p.QinQ || p.VLAN != 10 {
			t.Errorf("show: %s qinq %t vlan %d, want a qinq access port of VLAN 10", p.Interface, p.QinQ, p.VLAN)
		}
		out, err := l.CLI("show")
		if err != nil || !strings.Contains(out, "10 qinq") {
			t.Errorf("show says\n%s(%v), want %q", out, err, "10 qinq")
		}
		l.Stop()
	})
}

// A native_tagged trunk sends its native VLAN tagged, takes untagged
// frames into it, and frames tagged with its VID.
func TestVLANNativeTagged(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l, caps := harness.VLANLab(t, mode, "", "vlan = 10", "trunk = [10, 20]\nnative = 10\nnative_tagged = true", "vlan = 20")
		h1, h2, h3 := harness.HostMAC(1), harness.HostMAC(2), harness.HostMAC(3)
		bc := harness.VLANBcast()
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "a10", From: 1, Frame: harness.VFrame(bc, h1, "a10"), Recv: map[int][]byte{
				2: harness.VFrame(bc, h1, "a10", harness.CTag(10)),
			}},
			{Name: "a20", From: 3, Frame: harness.VFrame(bc, h3, "a20"), Recv: map[int][]byte{
				2: harness.VFrame(bc, h3, "a20", harness.CTag(20)),
			}},
			{Name: "trunk-untagged", From: 2, Frame: harness.VFrame(bc, h2, "trunk-untagged"), Recv: map[int][]byte{
				1: harness.VFrame(bc, h2, "trunk-untagged"),
			}},
			{Name: "to-h2", From: 1, Frame: harness.VFrame(h2, h1, "to-h2"), Recv: map[int][]byte{
				2: harness.VFrame(h2, h1, "to-h2", harness.CTag(10)),
			}},
			{Name: "to-h2-again", From: 1, Frame: harness.VFrame(h2, h1, "to-h2-again"), Recv: map[int][]byte{
				2: harness.VFrame(h2, h1, "to-h2-again", harness.CTag(10)),
			}},
			{Name: "trunk-10", From: 2, Frame: harness.VFrame(h1, h2, "trunk-10", harness.CTagP(3, 10)), Recv: map[int][]byte{
				1: harness.VFrame(h1, h2, "trunk-10"),
			}},
		})
		if e, ok := l.FDBEntry(h2); !ok || e.VLAN != 10 || e.Port != harness.PortName(2) {
			t.Errorf("h2 learned as %+v (found %v), want VLAN 10 on %s", e, ok, harness.PortName(2))
		}
		if p := l.Show().Bridges[0].Ports[1]; !p.NativeTagged || p.Native != 10 {
			t.Errorf("show: %s native %d native_tagged %t, want native 10 tagged", p.Interface, p.Native, p.NativeTagged)
		}
		out, err := l.CLI("show")
		if err != nil || !strings.Contains(out, "trunk 10,20 native 10 tagged") {
			t.Errorf("show says\n%s(%v), want %q", out, err, "trunk 10,20 native 10 tagged")
		}
		l.Stop()
	})
}
