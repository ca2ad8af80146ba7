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
// ports (high-water mark 30, fair share 16). h1 floods 200 random sources:
// the table takes them to the mark and forwards the rest unlearned. h2, a
// new station, then sends from 4 sources: every frame is delivered, the
// room above the mark takes 2, the full table forwards the others unlearned,
// and the daemon evicts the oldest of h1's (the port holding the most) so
// that h2's next frames are learned. The static entry stays.
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
		if h1, _ := count(); h1 != 30 {
			t.Fatalf("h1's flood holds %d entries, want the mark, 30", h1)
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
		if s := l.Stats(harness.PortName(1)); s.Counters.Get("unlearned_full") < 170 {
			t.Errorf("unlearned_full on h1's port: %d, want the flood's past the mark", s.Counters.Get("unlearned_full"))
		}
	})
}
