package policy

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// TestStormControl (issue 13), both modes: 10 000 broadcast frames sent in
// half a second at a port limited to 1000 broadcasts a second. What passes
// is about a burst (a tenth of a second's worth) plus the rate times the
// time the frames took; the rest is dropped and counted. Known unicast sent
// in the same run, interleaved, all arrives.
func TestStormControl(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		const rate, burst, nb, nu = 1000, 100, 10000, 500
		l := harness.NewLab(t, 3)
		l.WriteConfig(l.Config("", func(i int) string {
			s := fmt.Sprintf("mode = %q\n", mode)
			if i == 1 {
				s += fmt.Sprintf("storm = { broadcast = %d }\n", rate)
			}
			return s
		}))
		l.Start()
		for _, j := range []int{2, 3} {
			if err := l.Host(1).Ping(harness.HostIP(j), 1); err != nil {
				t.Fatalf("ping h1 -> h%d: %v", j, err)
			}
		}
		if p := l.Show().Bridges[0].Ports[0]; p.Storm == nil || p.Storm.Broadcast != rate || p.Storm.Multicast != 0 {
			t.Fatalf("show: port %s storm %+v, want broadcast %d", p.Name, p.Storm, rate)
		}
		caps := map[int]*testutil.Capturer{}
		for _, i := range []int{2, 3} {
			caps[i] = l.Host(i).Capture(t, "eth0")
			if err := caps[i].SetReceiveBuffer(32 << 20); err != nil {
				t.Fatal(err)
			}
		}
		before := l.Stats(harness.PortName(1))
		send := l.Host(1).RawSender(t, "eth0")
		bcast := harness.VFrame(harness.VLANBcast(), harness.HostMAC(1), "storm")
		uni := harness.VFrame(harness.HostMAC(2), harness.HostMAC(1), "known")
		start := time.Now()
		const span = 500 * time.Millisecond
		for i := 0; i < nb; i++ {
			// Paced: frame i leaves at i/nb of the half second.
			if ahead := time.Duration(i)*span/nb - time.Since(start); ahead > time.Millisecond {
				time.Sleep(ahead)
			}
			if err := send.Send(bcast); err != nil {
				t.Fatal(err)
			}
			if i%(nb/nu) == 0 {
				if err := send.Send(uni); err != nil {
					t.Fatal(err)
				}
			}
		}
		took := time.Since(start)
		time.Sleep(300 * time.Millisecond)
		got := map[int]int{}
		for i, c := range caps {
			if d, err := c.SocketDrops(); err != nil || d != 0 {
				t.Fatalf("h%d's capture socket dropped %d frames (%v): cannot count", i, d, err)
			}
			for _, f := range c.Stop() {
				if bytes.Equal(f, bcast) {
					got[i]++
				}
				if i == 2 && bytes.Equal(f, uni) {
					got[-2]++
				}
			}
		}
		after := l.Stats(harness.PortName(1))
		lo, hi := int(took.Seconds()*rate*0.8), int(took.Seconds()*rate*1.2)+burst
		t.Logf("%d broadcasts in %v at %d/s: h2 got %d, h3 %d (want %d..%d); known unicast %d of %d", nb, took, rate, got[2], got[3], lo, hi, got[-2], nu)
		if got[2] < lo || got[2] > hi || got[3] != got[2] {
			t.Errorf("broadcasts through the limit: h2 %d, h3 %d; want %d..%d, the same at both", got[2], got[3], lo, hi)
		}
		if d := after.Drops["storm_broadcast"] - before.Drops["storm_broadcast"]; int(d) != nb-got[2] {
			t.Errorf("storm_broadcast drops went up by %d, want %d (sent %d, passed %d)", d, nb-got[2], nb, got[2])
		}
		if got[-2] != nu {
			t.Errorf("known unicast in the same run: h2 got %d of %d", got[-2], nu)
		}
		l.Stop()
	})
}
