package policy

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/trestle/trestle/tests/harness"
)

// TestTableFairness (issue 29), both modes: a bridge of 32 entries over 2
// ports (high-water mark 30, fair share 16, reserve 1). h1 floods 200 random
// sources: the table takes them to the mark (and its reserve past it when a
// look of the daemon's falls within the flood) and forwards the rest
// unlearned. h2, a new station, then sends from 4 sources: every frame is
// delivered, the room above the mark takes what it can, the full table
// forwards the others unlearned, and the daemon evicts the oldest of h1's
// (the port holding the most) so that h2's next frames are learned. The
// static entry stays.
func TestTableFairness(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 2)
		static := net.HardwareAddr{0x02, 0x55, 0, 0, 0, 1}
		cfg := l.Config("max_entries = 32\n", func(int) string { return fmt.Sprintf("mode = %q\n", mode) })
		l.WriteConfig(cfg + fmt.Sprintf("\n[[bridge.static]]\nmac = %q\nport = %q\n", static, harness.PortName(1)))
		l.Start()
		for k := 0; k < 200; k++ {
			src := net.HardwareAddr{0x02, 0xfe, 0, 0, byte(k >> 8), byte(k)}
			if err := l.Host(1).RawSend("eth0", harness.Marked(harness.HostMAC(2), src, "flood")); err != nil {
				t.Fatal(err)
			}
		}
		count := func() (h1, h2 int) {
			for _, e := range l.FDB() {
				switch {
				case e.Static:
				case e.Port == harness.PortName(1):
					h1++
				case e.Port == harness.PortName(2):
					h2++
				}
			}
			return
		}
		deadline := time.Now().Add(5 * time.Second)
		for h1, _ := count(); h1 < 30 && time.Now().Before(deadline); h1, _ = count() {
			time.Sleep(50 * time.Millisecond)
		}
		if h1, _ := count(); h1 > 31 {
			t.Fatalf("h1's flood holds %d entries, want the mark, 30, and at most its reserve, 1, past it", h1)
		}

		cap1 := l.Host(1).Capture(t, "eth0")
		srcs := []net.HardwareAddr{harness.HostMAC(2)}
		for i := 1; i < 4; i++ {
			srcs = append(srcs, net.HardwareAddr{0x02, 0x77, 0, 0, 0, byte(i)})
		}
		send := func(round int) {
			for i, src := range srcs {
				if err := l.Host(2).RawSend("eth0", harness.Marked(harness.HostMAC(1), src, fmt.Sprintf("new-%d-%d", round, i))); err != nil {
					t.Fatal(err)
				}
			}
		}
		send(0)
		for i := range srcs {
			mark := []byte(fmt.Sprintf("new-0-%d", i))
			if cap1.WaitFor(func(b []byte) bool { return bytes.Contains(b, mark) }, 1, 2*time.Second) < 1 {
				t.Errorf("h2's frame from %s was not delivered to h1", srcs[i])
			}
		}
		// Learned within a few seconds: the daemon makes room, and the
		// next frames take it.
		deadline = time.Now().Add(10 * time.Second)
		round := 1
		for _, h2 := count(); h2 < len(srcs) && time.Now().Before(deadline); _, h2 = count() {
			send(round)
			round++
			time.Sleep(200 * time.Millisecond)
		}
		h1, h2 := count()
		if h2 != len(srcs) {
			t.Errorf("h2's %d sources: %d learned, want all", len(srcs), h2)
		}
		if h1 >= 30 {
			t.Errorf("h1 holds %d entries, want fewer than the mark: its oldest evicted", h1)
		}
		if e, ok := l.FDBEntry(static); !ok || !e.Static || e.Port != harness.PortName(1) {
			t.Errorf("the static entry is %+v (found %t), want it on %s", e, ok, harness.PortName(1))
		}
		// 170 of the flood's frames came past the mark; its reserve took
		// one at each look of the daemon's the flood lasted.
		if s := l.Stats(harness.PortName(1)); s.Counters.Get("unlearned_full") < 150 {
			t.Errorf("unlearned_full on h1's port: %d, want the flood's past the mark, but for a reserve of 1 a second", s.Counters.Get("unlearned_full"))
		}
	})
}

// TestTableFairnessUplink, both modes, written as the attack: a bridge of
// 1,024 entries over 8 ports (mark 960, 1,024 less a sixteenth; share 128;
// reserve 4, half the 64 above the mark over the 8 ports). h1 is an uplink
// with 300 stations, over its share; h2 floods new sources, without pause,
// until the table sits at its mark and on. A new station behind the uplink
// must still be learned, within 3 s of its first frame: it gets the
// uplink's reserve past the mark, and the daemon takes the room back out of
// the flooder's oldest entries, never the uplink's. (Before: the flood held
// the count exactly at the mark, which evicted nothing, and the uplink over
// its share learned no new station, so unicast to it flooded to every port,
// the attacker's too.)
func TestTableFairnessUplink(t *testing.T) {
	t.Parallel()
	const (
		stations = 300
		mark     = 960
		reserves = 8 * 4
		deadline = 3 * time.Second
	)
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 8)
		l.WriteConfig(l.Config("max_entries = 1024\n", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
		l.Start()
		counts := func() (bridge, uplink, flooder int) {
			for _, e := range l.FDB() {
				if e.Static {
					continue
				}
				bridge++
				switch e.Port {
				case harness.PortName(1):
					uplink++
				case harness.PortName(2):
					flooder++
				}
			}
			return
		}
		waitFor := func(what string, ok func() bool) {
			t.Helper()
			for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
				if time.Now().After(end) {
					b, u, f := counts()
					t.Fatalf("%s: not within 10 s (the bridge holds %d, the uplink %d, the flooder %d)", what, b, u, f)
				}
			}
		}

		uplink := l.Host(1).RawSender(t, "eth0")
		station := func(i int) net.HardwareAddr { return net.HardwareAddr{0x02, 0x75, 0, 0, byte(i >> 8), byte(i)} }
		for i := 0; i < stations; i++ {
			if err := uplink.Send(harness.Marked(harness.HostMAC(3), station(i), "station")); err != nil {
				t.Fatal(err)
			}
		}
		waitFor("the uplink's stations learned", func() bool { _, u, _ := counts(); return u >= stations })

		// The flood: new sources at a few thousand a second, far more than
		// the reserve a look the flooder gets, until the test ends.
		flooder := l.Host(2).RawSender(t, "eth0")
		stop, flooded := make(chan struct{}), make(chan error, 1)
		go func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					flooded <- nil
					return
				default:
				}
				src := net.HardwareAddr{0x0a, 0xf1, 0, byte(k >> 16), byte(k >> 8), byte(k)}
				if err := flooder.Send(harness.Marked(harness.HostMAC(3), src, "flood")); err != nil {
					flooded <- err
					return
				}
				if k%64 == 63 {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
		defer func() {
			close(stop)
			if err := <-flooded; err != nil {
				t.Errorf("the flood: %v", err)
			}
		}()
		waitFor("the flood at the table's mark", func() bool { b, _, _ := counts(); return b >= mark })

		newcomer := net.HardwareAddr{0x02, 0x75, 0x4e, 0, 0, 1}
		first := time.Now()
		var learned time.Duration
		for learned == 0 && time.Since(first) < deadline {
			if err := uplink.Send(harness.Marked(harness.HostMAC(3), newcomer, "newcomer")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			if e, ok := l.FDBEntry(newcomer); ok && e.Port == harness.PortName(1) {
				learned = time.Since(first)
			}
		}
		bridge, up, fl := counts()
		t.Logf("%s: the newcomer learned after %v (0: not); the bridge holds %d, the uplink %d, the flooder %d", mode, learned, bridge, up, fl)
		if learned == 0 {
			t.Fatalf("the uplink's new station was not learned within %v of its first frame while h2 flooded", deadline)
		}
		if up < stations+1 {
			t.Errorf("the uplink holds %d entries, want its %d stations and the newcomer: room is made out of the flooder's", up, stations+1)
		}
		// Look after look, the flood gets its reserve and loses as much:
		// the bridge never climbs past its mark and the reserves.
		for end := time.Now().Add(3 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			if bridge > mark+reserves {
				t.Fatalf("the bridge holds %d learned entries, want at most its mark and the ports' reserves, %d", bridge, mark+reserves)
			}
			if time.Now().After(end) {
				break
			}
			bridge, _, _ = counts()
		}
		if s := l.Stats(harness.PortName(2)); s.Counters.Get("unlearned_full") == 0 {
			t.Error("the flooder's port counts no source refused at the mark")
		}
	})
}
