package policy

import (
	"fmt"
	"net"
	"testing"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// TestLockedPortAndStaticSources (issue 29), both modes: h1's port is
// locked to h1's MAC (allowed_macs); h3's port has a static entry of an
// address no host uses. A MAC-steal attempt from the locked port moves
// nothing and is counted (locked), as is a source the port is not bound
// to; a frame from h2 whose source is h1's bound address or h3's static
// entry is dropped and counted (src_static), never forwarded, and moves
// nothing; h1 still talks from its own MAC, before and after.
func TestLockedPortAndStaticSources(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 3)
		static := net.HardwareAddr{0x02, 0x55, 0, 0, 0, 3}
		cfg := l.Config("", func(i int) string {
			extra := map[int]string{1: fmt.Sprintf("locked = true\nallowed_macs = [%q]\n", harness.HostMAC(1))}[i]
			return fmt.Sprintf("mode = %q\n%s", mode, extra)
		})
		l.WriteConfig(cfg + fmt.Sprintf("\n[[bridge.static]]\nmac = %q\nport = %q\n", static, harness.PortName(3)))
		l.Start()
		l.PingAll()

		where := func(mac net.HardwareAddr, port string, static bool, what string) {
			t.Helper()
			if e, ok := l.FDBEntry(mac); !ok || e.Port != port || e.Static != static {
				t.Errorf("%s: %s is %+v (found %t), want on %s, static %t", what, mac, e, ok, port, static)
			}
		}
		where(harness.HostMAC(1), harness.PortName(1), true, "h1, bound")
		where(harness.HostMAC(2), harness.PortName(2), false, "h2, learned")
		for _, p := range l.Show().Bridges[0].Ports {
			if want := p.Name == harness.PortName(1); p.Locked != want {
				t.Errorf("show %s: locked %t, want %t", p.Name, p.Locked, want)
			}
		}

		caps := map[int]*testutil.Capturer{}
		for i := 1; i <= 3; i++ {
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		forged := net.HardwareAddr{0x02, 0x66, 0, 0, 0, 1}
		bc := harness.VLANBcast()
		harness.VLANRun(t, l, caps, []harness.VCase{
			// From the locked port: another port's learned address, a
			// static one, one nobody has. Each dropped there.
			{Name: "steal-h2", From: 1, Frame: harness.VFrame(harness.HostMAC(3), harness.HostMAC(2), "steal-h2"), Recv: map[int][]byte{}, Reason: "locked"},
			{Name: "steal-static", From: 1, Frame: harness.VFrame(bc, static, "steal-static"), Recv: map[int][]byte{}, Reason: "locked"},
			{Name: "forged", From: 1, Frame: harness.VFrame(bc, forged, "forged"), Recv: map[int][]byte{}, Reason: "locked"},
			// From h2: the locked port's address and h3's static entry.
			{Name: "steal-h1", From: 2, Frame: harness.VFrame(harness.HostMAC(3), harness.HostMAC(1), "steal-h1"), Recv: map[int][]byte{}, Reason: "src_static"},
			{Name: "steal-h3s", From: 2, Frame: harness.VFrame(bc, static, "steal-h3s"), Recv: map[int][]byte{}, Reason: "src_static"},
			// h1 from its own MAC: forwarded to h2.
			harness.HCase("own", 1, harness.HostMAC(2), 2),
		})
		where(harness.HostMAC(2), harness.PortName(2), false, "h2 after the steal attempt from the locked port")
		where(harness.HostMAC(1), harness.PortName(1), true, "h1 after the steal attempt from h2")
		where(static, harness.PortName(3), true, "h3's static entry after the attempts")
		if _, ok := l.FDBEntry(forged); ok {
			t.Error("a forged source of the locked port was learned")
		}
		for i := 1; i <= 2; i++ {
			if s := l.Stats(harness.PortName(i)); s.Counters.Get("moved") != 0 {
				t.Errorf("%s: moved %d, want 0", harness.PortName(i), s.Counters.Get("moved"))
			}
		}
		// Both ways still work: h1's and h2's entries are where they were.
		if err := l.Host(2).Ping(harness.HostIP(1), 2); err != nil {
			t.Errorf("h2 to h1 after the attempts: %v", err)
		}
		if err := l.Host(1).Ping(harness.HostIP(2), 2); err != nil {
			t.Errorf("h1 to h2 after the attempts: %v", err)
		}
		l.Stop()
	})
}
