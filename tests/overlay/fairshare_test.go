package overlay

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/trestle/trestle/tests/harness"
)

// TestOverlayFairShare: a flood of source MACs on one host cannot fill
// another host's table. Site 1 (trestle, br0 of max_entries 64: two host
// ports and VNI 1000's overlay port, whose addresses are behind the two
// other sites' VTEPs, four share holders of 16 each, mark 60), site 2
// (trestle, whose tenant h2 sends from flood sources) and site 3 (the
// Linux bridge with FRR). Site 2 learns and advertises every source; site
// 1's FRR has them all as remote MACs, and site 1's table holds site 2's
// share of them, not more, and keeps it so at the syncs after. A newcomer
// station on a host port of site 1, and one at the Linux site, are still
// learned at site 1 within 3 s.
func TestOverlayFairShare(t *testing.T) {
	// Not beside the package's parallel tests: its six sites (both
	// modes at once) and their BGP churn load the machine enough that
	// TestOverlayFRRRestart's stream loses frames. Its modes still run
	// side by side.
	harness.ForModes(t, overlayFairShare)
}

func overlayFairShare(t *testing.T, mode string) {
	const maxEntries, flood = 64, 300
	// The share holders of site 1's br0: its two host ports, and the two
	// VTEPs its overlay port's addresses are behind (docs/security.md).
	const share = maxEntries / (2 + 2)
	a, b, c := threeSites(t, mode, func(a *site) {
		a.bridgeExtra = map[string]string{"br0": fmt.Sprintf("max_entries = %d\n", maxEntries)}
	})
	pingFirst(t, b.Host(1), a.ip(1))
	pingFirst(t, c.Host(1), a.ip(1))

	// The flood: site 2's tenant sends from flood sources, to its h1 (so
	// that the frames themselves stay at site 2; their routes do not).
	src := func(i int) net.HardwareAddr { return net.HardwareAddr{2, 0xf1, 0, 0, byte(i >> 8), byte(i)} }
	tenant := b.Host(2).RawSender(t, "eth0")
	for i := range flood {
		if err := tenant.Send(harness.Marked(b.mac(1), src(i), "flood")); err != nil {
			t.Fatal(err)
		}
	}
	behind := func(s *site) int {
		n := 0
		for _, e := range a.FDB() {
			if e.VTEP == s.vtep {
				n++
			}
		}
		return n
	}
	eventually(t, 30*time.Second, "site 1's FRR has the flood, its table site 2's share of it", func() (bool, string) {
		o := a.overlay(1000)
		n := behind(b)
		return o != nil && o.RemoteMACs >= flood && n > 0 && n <= share, fmt.Sprintf("overlay %+v; %d entries behind site 2 (share %d)", o, n, share)
	})
	for range 3 {
		time.Sleep(time.Second) // a look and a sync, and another
		if n := behind(b); n > share {
			t.Errorf("site 1's table holds %d entries behind site 2, more than its share (%d)", n, share)
		}
	}

	// Newcomers, at site 1 and at the Linux site, each sending a frame
	// now and then, as a station does.
	n1, n3 := net.HardwareAddr{2, 0xee, 0, 0, 1, 2}, net.HardwareAddr{2, 0xee, 0, 0, 3, 1}
	a.setMAC(t, 2, n1)
	c.setMAC(t, 1, n3)
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	start := time.Now()
	eventually(t, 3*time.Second, "the newcomers learned at site 1", func() (bool, string) {
		for _, x := range []struct {
			s   *site
			i   int
			mac net.HardwareAddr
		}{{a, 2, n1}, {c, 1, n3}} {
			if err := x.s.Host(x.i).RawSend("eth0", harness.Marked(bcast, x.mac, "newcomer")); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(200 * time.Millisecond)
		g1, g3 := a.at(t, 1000, n1), a.at(t, 1000, n3)
		return g1 == "local port-h2" && g3 == "remote "+c.vtep, fmt.Sprintf("site 1 has its newcomer %q, the Linux site's %q", g1, g3)
	})
	t.Logf("newcomers learned at site 1 within %v", time.Since(start).Round(100*time.Millisecond))
	if n := behind(b); n > share {
		t.Errorf("after the newcomers: site 1's table holds %d entries behind site 2, more than its share (%d)", n, share)
	}
}
