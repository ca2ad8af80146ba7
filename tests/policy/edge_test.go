package policy

import (
	"fmt"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// portStatus is port name of br0 as `trestle show` gives it.
func portStatus(t *testing.T, l *harness.Lab, name string) ctl.PortStatus {
	t.Helper()
	for _, p := range l.Show().Bridges[0].Ports {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("show has no port %s", name)
	return ctl.PortStatus{}
}

// waitState waits up to within for port name to be in state, and returns
// how long it took.
func waitState(t *testing.T, l *harness.Lab, name, state string, within time.Duration) (ctl.PortStatus, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		p := portStatus(t, l, name)
		if p.State == state {
			return p, time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s: state %s (%s) after %s, want %s", name, p.State, p.Reason, within, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// blockedEvent is the last port_blocked event of port name, if any.
func blockedEvent(l *harness.Lab, name string) (ctl.Event, bool) {
	var evs []ctl.Event
	l.CLIJSON(&evs, "events")
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Event == ctl.EventPortBlocked && evs[i].Port == name {
			return evs[i], true
		}
	}
	return ctl.Event{}, false
}

// TestBPDUGuard, both modes: a BPDU on a port without bpdu_guard is
// dropped as every reserved frame is; on h1's guarded port it blocks the
// port: no frame passes it either way, show says blocked and why, an
// event tells it, and `trestle port enable` lets it forward again.
func TestBPDUGuard(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 3)
		l.WriteConfig(l.Config("", func(i int) string {
			extra := map[int]string{1: "bpdu_guard = true\n"}[i]
			return fmt.Sprintf("mode = %q\n%s", mode, extra)
		}))
		l.Start()
		l.PingAll()
		h1, h2 := harness.PortName(1), harness.PortName(2)
		if p := portStatus(t, l, h1); !p.BPDUGuard || p.State != "up" {
			t.Fatalf("show %s: %+v, want up with bpdu_guard", h1, p)
		}

		// Unguarded: the BPDU is dropped (reserved), the port stays up.
		before := l.Stats(h2).Drops["reserved_address"]
		if err := l.Host(2).RawSend("eth0", harness.BPDUFrame(t, harness.HostMAC(2))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if got := l.Stats(h2).Drops["reserved_address"] - before; got != 1 {
			t.Errorf("%s: reserved_address drops went up by %d, want 1", h2, got)
		}
		if p := portStatus(t, l, h2); p.State != "up" {
			t.Errorf("%s after a BPDU without the guard: %s, want up", h2, p.State)
		}

		// Guarded: blocked.
		if err := l.Host(1).RawSend("eth0", harness.BPDUFrame(t, harness.HostMAC(1))); err != nil {
			t.Fatal(err)
		}
		p, took := waitState(t, l, h1, "blocked", 3*time.Second)
		t.Logf("%s blocked %s after the BPDU: %s", h1, took, p.Reason)
		if p.Why != "bpdu_guard" {
			t.Errorf("show %s: why %q, want bpdu_guard", h1, p.Why)
		}
		if s := l.Stats(h1); s.Drops["bpdu_guard"] != 1 {
			t.Errorf("%s: bpdu_guard drops %d, want 1", h1, s.Drops["bpdu_guard"])
		}
		if e, ok := blockedEvent(l, h1); !ok || e.Why != "bpdu_guard" {
			t.Errorf("port_blocked event of %s: %+v (found %t), want why bpdu_guard", h1, e, ok)
		}
		if _, ok := l.FDBEntry(harness.HostMAC(1)); ok {
			t.Errorf("h1's entry is still in the table of the blocked port")
		}

		// Nothing passes it, either way: a broadcast from h1, and one from
		// h2 reaches h3, not h1.
		caps := map[int]*testutil.Capturer{}
		for i := 1; i <= 3; i++ {
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		bc := harness.VLANBcast()
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "from-blocked", From: 1, Frame: harness.VFrame(bc, harness.HostMAC(1), "from-blocked"), Recv: map[int][]byte{}, Reason: "port_blocked"},
			{Name: "to-h2", From: 1, Frame: harness.VFrame(harness.HostMAC(2), harness.HostMAC(1), "to-h2"), Recv: map[int][]byte{}, Reason: "port_blocked"},
			harness.HCase("to-all", 2, bc, 3),
		})
		if err := l.Host(2).Ping(harness.HostIP(1), 1); err == nil {
			t.Errorf("h2 pinged h1 through the blocked port")
		}

		// A reload keeps it blocked.
		if out, err := l.CLI("reload"); err != nil {
			t.Fatalf("reload: %v\n%s", err, out)
		}
		if p := portStatus(t, l, h1); p.State != "blocked" {
			t.Errorf("%s after a reload: %s, want blocked", h1, p.State)
		}

		// port enable lifts it.
		out, err := l.CLI("port", "enable", "br0", h1)
		if err != nil {
			t.Fatalf("port enable: %v\n%s", err, out)
		}
		waitState(t, l, h1, "up", 3*time.Second)
		if err := l.Host(2).Ping(harness.HostIP(1), 2); err != nil {
			t.Errorf("h2 to h1 after port enable: %v", err)
		}
		l.Stop()
	})
}

// TestLoopDetect, both modes: two ports of a loop_detect bridge, l1 and l2,
// whose far ends are joined by a Linux bridge in a namespace of their own.
// Once the far bridge takes both, a broadcast from h1 circulates; within
// 3 s loop detection blocks one of the two ports (why loop, an event), the
// broadcast stops circulating (h2 gets no more copies, the loop's ports
// take in a few frames a second where they took hundreds), and h1 and h2
// still talk.
func TestLoopDetect(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 2)
		far := testutil.NewNS(t, "far")
		// No IPv6: the far bridge's own solicitations and reports would
		// be floods of their own, counted with the broadcast's.
		if err := far.NoIPv6(); err != nil {
			t.Fatal(err)
		}
		loop := []string{"port-l1", "port-l2"}
		for i, p := range loop {
			testutil.Attach(t, l.SW, p, far, fmt.Sprintf("l%d", i+1), harness.HostMAC(10+i), "")
		}
		far.MustExec(t, "ip", "link", "add", "name", "lbr", "type", "bridge", "stp_state", "0", "forward_delay", "0")
		far.MustExec(t, "ip", "link", "set", "l1", "master", "lbr")
		far.MustExec(t, "ip", "link", "set", "lbr", "up")
		cfg := l.Config("loop_detect = true\nloop_retry = \"60s\"\n", func(int) string { return fmt.Sprintf("mode = %q\n", mode) })
		for _, p := range loop {
			cfg += fmt.Sprintf("\n[[bridge.port]]\ninterface = %q\nmode = %q\n", p, mode)
		}
		l.WriteConfig(cfg)
		l.Start()
		l.PingAll()
		for _, p := range loop {
			waitState(t, l, p, "up", 5*time.Second)
		}

		// Close the loop, and send a broadcast in.
		far.MustExec(t, "ip", "link", "set", "l2", "master", "lbr")
		cap2 := l.Host(2).Capture(t, "eth0")
		start := time.Now()
		if err := l.Host(1).RawSend("eth0", harness.VFrame(harness.VLANBcast(), harness.HostMAC(1), "circle")); err != nil {
			t.Fatal(err)
		}
		var blocked ctl.PortStatus
		for blocked.Name == "" {
			for _, p := range loop {
				if s := portStatus(t, l, p); s.State == "blocked" {
					blocked = s
				}
			}
			if time.Since(start) > 3*time.Second {
				t.Fatalf("no port of the loop blocked within 3 s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("%s blocked %s after the loop closed: %s", blocked.Name, time.Since(start).Round(time.Millisecond), blocked.Reason)
		if blocked.Why != "loop" {
			t.Errorf("show %s: why %q, want loop", blocked.Name, blocked.Why)
		}
		for _, p := range loop {
			if p != blocked.Name {
				if s := portStatus(t, l, p); s.State != "up" {
					t.Errorf("the loop's other port %s: %s, want up (one port breaks the loop)", p, s.State)
				}
			}
		}
		if e, ok := blockedEvent(l, blocked.Name); !ok || e.Why != "loop" {
			t.Errorf("port_blocked event of %s: %+v (found %t), want why loop", blocked.Name, e, ok)
		}

		// The broadcast stops circulating: no port floods, h2 gets no copy.
		circle := harness.HasVMarker("circle")
		if cap2.WaitFor(circle, 1, 2*time.Second) == 0 {
			t.Errorf("h2 never got the broadcast")
		}
		time.Sleep(500 * time.Millisecond)
		// What comes in by the loop's ports: a few frames a second (the
		// probes, the far bridge's own) where the loop carried hundreds.
		loopIn := func() (n uint64) {
			for _, p := range loop {
				n += l.Stats(p).Counters.Get("rx_packets")
			}
			return n
		}
		count := func() int {
			n := 0
			for _, f := range cap2.Frames() {
				if circle(f) {
					n++
				}
			}
			return n
		}
		r0, c0 := loopIn(), count()
		time.Sleep(time.Second)
		r1, c1 := loopIn(), count()
		t.Logf("the loop's ports took in %d frames before the block's second, %d in it; h2 got %d copies of the broadcast", r0, r1-r0, c0)
		if r1-r0 > 10 || c1 != c0 {
			t.Errorf("a second after the block: the loop's ports took in %d frames (want 10 at most), h2's copies %d -> %d (want no change)", r1-r0, c0, c1)
		}

		// The rest of the bridge forwards.
		if err := l.Host(1).Ping(harness.HostIP(2), 2); err != nil {
			t.Errorf("h1 to h2 with the loop blocked: %v", err)
		}
		cap2.Stop()
		l.Stop()
	})
}
