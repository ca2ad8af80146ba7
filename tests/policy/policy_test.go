package policy

import (
	"fmt"
	"net"
	"testing"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// TestPortPolicies (issue 13), both modes: a port with learning = false
// forwards but is never learned on; a port at max_macs with
// mac_limit_action = "forward" lets a new source through unlearned and
// counts it; show says both.
func TestPortPolicies(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 3)
		l.WriteConfig(l.Config("", func(i int) string {
			extra := map[int]string{1: "learning = false\n", 2: "max_macs = 1\nmac_limit_action = \"forward\"\n"}[i]
			return fmt.Sprintf("mode = %q\n%s", mode, extra)
		}))
		l.Start()
		l.PingAll()
		if e, ok := l.FDBEntry(harness.HostMAC(1)); ok {
			t.Errorf("h1 learned on a port with learning off: %+v", e)
		}
		for _, i := range []int{2, 3} {
			if e, ok := l.FDBEntry(harness.HostMAC(i)); !ok || e.Port != harness.PortName(i) {
				t.Errorf("h%d: %+v (found %v)", i, e, ok)
			}
		}

		caps := map[int]*testutil.Capturer{}
		for i := 1; i <= 3; i++ {
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		other := net.HardwareAddr{0x02, 0x77, 0, 0, 0, 2}
		before := l.Stats(harness.PortName(2))
		harness.VLANRun(t, l, caps, []harness.VCase{
			// A second source behind port-h2 (at max_macs 1): forwarded.
			{Name: "second", From: 2, Frame: harness.VFrame(harness.VLANBcast(), other, "second"), Recv: map[int][]byte{
				1: harness.VFrame(harness.VLANBcast(), other, "second"),
				3: harness.VFrame(harness.VLANBcast(), other, "second"),
			}},
			// To h1, never learned: flooded to h1 and h3.
			{Name: "to-h1", From: 3, Frame: harness.VFrame(harness.HostMAC(1), harness.HostMAC(3), "to-h1"), Recv: map[int][]byte{
				1: harness.VFrame(harness.HostMAC(1), harness.HostMAC(3), "to-h1"),
				2: harness.VFrame(harness.HostMAC(1), harness.HostMAC(3), "to-h1"),
			}},
		})
		if _, ok := l.FDBEntry(other); ok {
			t.Errorf("the source over max_macs was learned")
		}
		after := l.Stats(harness.PortName(2))
		if after.Counters.Get("unlearned") != before.Counters.Get("unlearned")+1 || after.Drops["mac_limit"] != before.Drops["mac_limit"] {
			t.Errorf("port-h2: unlearned %d -> %d, mac_limit drops %d -> %d; want one more unlearned, no drop", before.Counters.Get("unlearned"), after.Counters.Get("unlearned"), before.Drops["mac_limit"], after.Drops["mac_limit"])
		}
		for _, p := range l.Show().Bridges[0].Ports {
			switch p.Name {
			case harness.PortName(1):
				if p.Learning || p.MACLimitAction != "" {
					t.Errorf("show %s: learning %v, mac_limit_action %q; want false, none", p.Name, p.Learning, p.MACLimitAction)
				}
			case harness.PortName(2):
				if !p.Learning || p.MACLimitAction != "forward" {
					t.Errorf("show %s: learning %v, mac_limit_action %q; want true, forward", p.Name, p.Learning, p.MACLimitAction)
				}
			}
		}
		l.Stop()
	})
}

// TestPortProtectionAndFloods (issue 13), both modes: h1 and h2 protected,
// h3 with flood = false, h4 with mcast_flood and bcast_flood = false.
// Protected ports exchange nothing with each other and everything with
// the others; each flood switch keeps exactly its kind of flood off its
// port, and known unicast still reaches it.
func TestPortProtectionAndFloods(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 4)
		l.WriteConfig(l.Config("", func(i int) string {
			extra := map[int]string{1: "protected = true\n", 2: "protected = true\n", 3: "flood = false\n",
				4: "mcast_flood = false\nbcast_flood = false\n"}[i]
			return fmt.Sprintf("mode = %q\n%s", mode, extra)
		}))
		l.Start()
		caps := map[int]*testutil.Capturer{}
		for i := 1; i <= 4; i++ {
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		h := harness.HostMAC
		c := harness.HCase
		blocked := c("u12", 1, h(2))
		blocked.Reason = "protected"
		harness.VLANRun(t, l, caps, []harness.VCase{
			c("b1", 1, harness.VLANBcast(), 3),
			c("b2", 2, harness.VLANBcast(), 3),
			c("b3", 3, harness.VLANBcast(), 1, 2),
			c("b4", 4, harness.VLANBcast(), 1, 2, 3),
			blocked,
			c("u13", 1, h(3), 3),
			c("u31", 3, h(1), 1),
			c("u34", 3, h(4), 4),
			c("unk1", 1, harness.VLANUnknown(), 4),
			c("unk4", 4, harness.VLANUnknown(), 1, 2),
			c("m1", 1, harness.VLANMcast(), 3),
			c("m3", 3, harness.VLANMcast(), 1, 2),
		})
		ports := l.Show().Bridges[0].Ports
		if !ports[0].Protected || ports[2].Flood || !ports[2].BcastFlood || ports[3].McastFlood || ports[3].BcastFlood || !ports[3].Flood {
			t.Errorf("show: %+v", ports)
		}
		l.Stop()
	})
}
