package events

import (
	"net"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/tests/harness"
)

// TestMACFrozen, both modes: a station on h1's port whose address a tenant
// on h2's port keeps taking (frames with its source, from h2) moves past
// mac_move_limit (3 here) within the window and is frozen on h1's port,
// where it was before: fdb show marks it frozen there, an event says so,
// the tenant's next frames with it are dropped (src_static) and traffic to
// it goes to h1 alone; fdb del releases it, and the tenant's next frame
// moves it again.
func TestMACFrozen(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 3)
		l.WriteConfig(l.Config("mac_move_limit = 3\nmac_move_window = \"60s\"\n", func(int) string { return "mode = \"" + mode + "\"\n" }))
		l.Start()
		defer l.Stop()
		l.PingAll()

		station := net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x01}
		frame := harness.Marked(harness.VLANBcast(), station, "take")
		h1, h2 := l.Host(1).RawSender(t, "eth0"), l.Host(2).RawSender(t, "eth0")
		if err := h1.Send(frame); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		// Taken and given back, 4 moves: h1 -> h2 -> h1 -> h2 -> h1.
		for i := 0; i < 4; i++ {
			s := h2
			if i%2 == 1 {
				s = h1
			}
			if err := s.Send(frame); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		var e ctl.FDBEntry
		deadline := time.Now().Add(3 * time.Second)
		for {
			var ok bool
			if e, ok = l.FDBEntry(station); ok && e.Frozen || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !e.Frozen || !e.Static || e.Port != harness.PortName(1) {
			t.Fatalf("after 4 moves: %+v, want frozen static on %s", e, harness.PortName(1))
		}
		var evs []ctl.Event
		l.CLIJSON(&evs, "events")
		var ev ctl.Event
		for _, x := range evs {
			if x.Event == ctl.EventMACFrozen {
				ev = x
			}
		}
		if ev.MAC != station.String() || ev.Port != harness.PortName(1) || ev.Count != 4 || ev.Limit != 3 {
			t.Errorf("mac_frozen event %+v, want %s on %s after 4 moves, limit 3", ev, station, harness.PortName(1))
		}

		// The tenant's frames with it are dropped; traffic to it goes to h1.
		before := l.Stats(harness.PortName(2)).Drops["src_static"]
		if err := h2.Send(frame); err != nil {
			t.Fatal(err)
		}
		c1, c2 := l.Host(1).Capture(t, "eth0"), l.Host(2).Capture(t, "eth0")
		to := harness.Marked(station, harness.HostMAC(3), "to-station")
		if err := l.Host(3).RawSend("eth0", to); err != nil {
			t.Fatal(err)
		}
		if c1.WaitFor(harness.HasMarker("to-station"), 1, 2*time.Second) == 0 {
			t.Errorf("h1 did not get the frame to the frozen station")
		}
		if n := c2.WaitFor(harness.HasMarker("to-station"), 0, 200*time.Millisecond); n != 0 {
			t.Errorf("h2 got %d frames to the frozen station", n)
		}
		if got := l.Stats(harness.PortName(2)).Drops["src_static"] - before; got != 1 {
			t.Errorf("src_static drops on %s: +%d, want +1", harness.PortName(2), got)
		}
		if e, _ := l.FDBEntry(station); e.Port != harness.PortName(1) {
			t.Errorf("after the tenant's frame: %+v, want still on %s", e, harness.PortName(1))
		}

		// fdb del releases it: the next frame moves it.
		if out, err := l.CLI("fdb", "del", "br0", station.String()); err != nil {
			t.Fatalf("fdb del: %v\n%s", err, out)
		}
		if err := h2.Send(frame); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if e, ok := l.FDBEntry(station); !ok || e.Frozen || e.Static || e.Port != harness.PortName(2) {
			t.Errorf("after fdb del and a frame from h2: %+v (found %t), want learned on %s", e, ok, harness.PortName(2))
		}
	})
}
