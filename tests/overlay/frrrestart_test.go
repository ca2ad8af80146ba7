package overlay

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// TestOverlayFRRRestart: known streams (the generator's numbered frames,
// 20,000 a second) lose none while FRR restarts (docs/overlay.md, "FRR
// restarts"): one from site 1's h1 to site 2's h1 across all of what
// follows, one back from site 2's h1 from site 2's restart on. First FRR
// (bgpd, then zebra, stopped by PID and started again) restarts on site 1,
// then on site 2, away 3s there, and then site 1's bgpd alone restarts,
// away 3s. While FRR is away the site's remote entries stay, marked stale
// in fdb show; a station the fabric lost meanwhile (site 2 deletes its h2
// while site 1's FRR is away, so that site 1's bgpd never hears of the
// withdrawal) goes from site 1 once FRR is back, and the others are no
// longer stale. The other site keeps the restarting one's entries, stale,
// while bgpd says their session is away (FRR 8.4's bgpd drops them at
// once), longer than the 1.5s of a withdrawal over a live session.
//
// Site 1's hosts are at tc, site 2's at XDP, over an underlay that takes
// XDP redirects: each stream is encapsulated by its sender's datapath, the
// tc program's or the XDP program's, with the headers trestle keeps for a
// stale MAC, and never meets the vxlan device, whose entries zebra deletes
// (through it, a frame between zebra's deletion and trestle's write back
// is lost: none, or a few on a loaded machine).
func TestOverlayFRRRestart(t *testing.T) {
	t.Parallel()
	ss := build(t, lab.SitesOpts{UnderlayGRO: true}, []string{"tc", "xdp"}, oneVNI, oneVNI)
	a, b := ss[0], ss[1]
	a.start(t, trestleFirst)
	b.start(t, frrFirst)
	waitFlood(t, a, b)
	pingFirst(t, a.Host(1), b.ip(1))
	pingFirst(t, a.Host(2), b.ip(2))
	for _, m := range []net.HardwareAddr{b.mac(1), b.mac(2)} {
		waitRemote(t, a, m, false)
	}
	waitRemote(t, b, a.mac(1), false)
	// Site 2's h2 keeps quiet from now on: nothing learns it again once
	// it is deleted.
	for _, h := range []*harness.Lab{a.Lab, b.Lab} {
		h.Host(2).MustExec(t, "ip", "neigh", "flush", "all")
	}

	began := time.Now()
	there := startStream(t, a, b, 30*time.Second)

	// Site 1 sends: its entry of the stream's destination stays, stale,
	// while its FRR is away.
	a.stopFRR(t)
	waitRemote(t, a, b.mac(1), true)
	if out, err := b.CLI("fdb", "del", "br0", b.mac(2).String()); err != nil {
		t.Fatalf("site 2: fdb del: %v: %s", err, out)
	}
	time.Sleep(500 * time.Millisecond)
	if e, ok := a.entry("br0", b.mac(2)); !ok || !e.Stale {
		t.Errorf("site 1 while its FRR is away: site 2's h2 %+v, %v; want kept, stale", e, ok)
	}
	a.startFRR(t)
	waitRemote(t, a, b.mac(1), false)
	eventually(t, 20*time.Second, "site 1 drops site 2's h2, which the fabric lost while its FRR was away", func() (bool, string) {
		e, ok := a.entry("br0", b.mac(2))
		return !ok, fmt.Sprintf("%+v", e)
	})
	eventually(t, 5*time.Second, "site 1's VNI 1000: nothing stale, site 2 in the flood list", func() (bool, string) {
		o := a.overlay(1000)
		return o != nil && o.Stale == 0 && !o.FRRRestarting && len(o.FloodList) == 1 && o.FloodList[0] == b.vtep, fmt.Sprintf("%+v", o)
	})

	// The receiving site, its FRR away for 3s, twice StaleWait: FRR 8.4's
	// bgpd on site 1 drops site 2's routes as soon as its session goes,
	// graceful restart or not, and site 1 keeps site 2's h1, stale, for as
	// long as bgpd says the session is away.
	waitRemote(t, b, a.mac(1), false)
	back := startStream(t, b, a, 20*time.Second)
	backBegan := time.Now()
	b.stopFRR(t)
	waitRemote(t, b, a.mac(1), true)
	waitRemote(t, a, b.mac(1), true)
	time.Sleep(3 * time.Second)
	if e, ok := a.entry("br0", b.mac(1)); !ok || !e.Stale {
		t.Errorf("site 1 with site 2's FRR away 3s: site 2's h1 %+v, %v; want kept, stale", e, ok)
	}
	b.startFRR(t)
	waitRemote(t, b, a.mac(1), false)
	waitRemote(t, a, b.mac(1), false)

	// The sending site's bgpd alone, away for 3s, once both sites hold
	// nothing: zebra withdraws everything and stays (no hold begins);
	// site 1 keeps its entries while its bgpd does not answer, and site 2
	// keeps site 1's while the session is away.
	for _, x := range []*site{a, b} {
		eventually(t, 10*time.Second, fmt.Sprintf("site %d's VNI 1000: nothing stale", x.n), func() (bool, string) {
			o := x.overlay(1000)
			return o != nil && o.Stale == 0 && !o.FRRRestarting, fmt.Sprintf("%+v", o)
		})
	}
	if err := a.fr.StopBGPd(); err != nil {
		t.Error(err)
	}
	waitRemote(t, a, b.mac(1), true)
	waitRemote(t, b, a.mac(1), true)
	time.Sleep(3 * time.Second)
	for _, x := range []struct {
		s *site
		m net.HardwareAddr
	}{{a, b.mac(1)}, {b, a.mac(1)}} {
		if e, ok := x.s.entry("br0", x.m); !ok || !e.Stale {
			t.Errorf("site %d with site 1's bgpd away 3s: %s %+v, %v; want kept, stale", x.s.n, x.m, e, ok)
		}
		if o := x.s.overlay(1000); o == nil || o.FRRRestarting {
			t.Errorf("site %d with site 1's bgpd away: %+v; want no FRR restart (zebra stays)", x.s.n, o)
		}
	}
	if err := a.fr.StartBGPd(); err != nil {
		t.Fatal(err)
	}
	waitRemote(t, a, b.mac(1), false)
	waitRemote(t, b, a.mac(1), false)

	if d := time.Since(began); d > 28*time.Second {
		t.Errorf("the restarts took %v of the stream's 30s: it may have ended before them", d)
	} else {
		t.Logf("the restarts took %v of the stream's 30s", d)
	}
	if d := time.Since(backBegan); d > 18*time.Second {
		t.Errorf("site 2's restart and site 1's bgpd took %v of the stream back's 20s: it may have ended before them", d)
	}
	for _, st := range []*stream{there, back} {
		st.lossless(t)
	}
	for _, x := range []*site{a, b} {
		out := x.Daemon.Out.String()
		if !strings.Contains(out, "FRR is restarting") || !strings.Contains(out, "FRR is back") {
			t.Errorf("site %d's daemon did not say FRR restarted and came back:\n%s", x.n, out)
		}
		if !strings.Contains(out, "bgpd answers about its EVPN sessions") || !strings.Contains(out, "the BGP session that carried withdrawn remote addresses went") {
			t.Errorf("site %d's daemon did not say it asked bgpd, and kept the addresses of a session that went:\n%s", x.n, out)
		}
	}
	if out := a.Daemon.Out.String(); !strings.Contains(out, "bgpd does not answer") || !strings.Contains(out, "bgpd answers again") {
		t.Errorf("site 1's daemon did not say its bgpd went silent and answered again:\n%s", out)
	}
}

// stream is the generator's numbered frames from site from's h1 to site
// to's h1, 20,000 a second, and the sink that counts them.
type stream struct {
	from, to  *site
	gen, sink *testutil.Proc
}

// startStream starts a stream of d from from's h1 to to's h1, and waits
// until from's datapath encapsulates it itself: its vxlan device sends
// none of it.
func startStream(t *testing.T, from, to *site, d time.Duration) *stream {
	t.Helper()
	st := &stream{from: from, to: to, sink: to.StartSinkOn(1)}
	st.gen = from.Host(1).Start(t, harness.Bin, "gen", "--dev", "eth0", "--mode", "packet", "--dst-mac", to.mac(1).String(),
		"--rate", "20000", "--duration", d.String(), "--json")
	eventually(t, 10*time.Second, fmt.Sprintf("site %d (hosts at %s) encapsulates the stream itself: its vxlan device sends none of it", from.n, from.hostMode), func() (bool, string) {
		before := from.linkTx(t, "tvx1000")
		time.Sleep(200 * time.Millisecond)
		sent := from.linkTx(t, "tvx1000") - before
		return sent == 0, fmt.Sprintf("the vxlan device sent %d frames in 200ms", sent)
	})
	return st
}

// lossless waits for the stream's generator and checks that its sink
// received every frame.
func (st *stream) lossless(t *testing.T) {
	t.Helper()
	select {
	case <-st.gen.Done():
	case <-time.After(40 * time.Second):
		t.Fatalf("site %d's generator did not finish", st.from.n)
	}
	var g harness.GenSummary
	if err := json.Unmarshal([]byte(st.gen.Out.String()), &g); err != nil || g.Sent == 0 {
		t.Fatalf("site %d's gen: %v\n%s", st.from.n, err, st.gen.Out.String())
	}
	time.Sleep(300 * time.Millisecond)
	s := harness.StopSink(t, st.sink)
	if s.Received != g.Sent || s.Lost != 0 {
		t.Errorf("site %d's h1 received %d of %d frames from site %d's host at %s (lost %d) across FRR restarts, want every one",
			st.to.n, s.Received, g.Sent, st.from.n, st.from.hostMode, s.Lost)
	}
	t.Logf("site %d (hosts at %s) to site %d: %d frames sent, %d received", st.from.n, st.from.hostMode, st.to.n, g.Sent, s.Received)
}

// waitRemote waits until site s has m as a remote entry, marked stale or
// not.
func waitRemote(t *testing.T, s *site, m net.HardwareAddr, stale bool) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("site %d: %s remote, stale %v", s.n, m, stale), func() (bool, string) {
		out, err := s.CLI("fdb", "show", "br0", "--json")
		var es []ctl.FDBEntry
		if err != nil || json.Unmarshal([]byte(out), &es) != nil {
			return false, out
		}
		for _, e := range es {
			if e.MAC == m.String() {
				return e.VTEP != "" && e.Stale == stale, fmt.Sprintf("%+v", e)
			}
		}
		return false, "no entry"
	})
}
