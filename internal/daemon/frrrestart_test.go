package daemon

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/overlay"
)

// flood gives the event of zebra writing (or deleting) the flood-list
// entry of VTEP 192.0.2.2 on VNI 1000's vxlan device.
func (w *ovWorld) flood(deleted bool) {
	w.d.ovl.mgr.Handle(overlay.Neigh{Ifindex: w.k.devs[1000].VXLAN, MAC: make(net.HardwareAddr, 6), Dst: netip.MustParseAddr("192.0.2.2"), Deleted: deleted})
}

// TestOverlayFRRRestart: FRR restarts (docs/overlay.md, "FRR restarts").
// zebra withdraws both remote MACs and the flood list, then exits: the
// table keeps both entries, marked stale in fdb show and show, whatever
// time passes; zebra comes back and writes one of them again, and once it
// has been quiet the other, which the fabric no longer has, goes from the
// table, and the one it wrote is no longer stale.
func TestOverlayFRRRestart(t *testing.T) {
	w := newOvWorld(t)
	w.sys.add("p1", "veth")
	w.sys.add("p2", "veth")
	w.mustApply(ovConfig)
	ov := w.port("br0", "tvx1000")
	const kept, lost = "02:00:00:00:00:b1", "02:00:00:00:00:b2"
	w.flood(false)
	w.remote(kept, false)
	w.remote(lost, false)
	w.sync()

	// FRR stops: bgpd leaves zebra, which withdraws everything, then exits.
	w.k.writes = nil
	w.zebraDel(kept)
	w.zebraDel(lost)
	w.flood(true)
	w.flood(false) // the kernel's echo of the entry written back
	if want := []string{"stale " + kept + " 192.0.2.2", "stale " + lost + " 192.0.2.2", "stale 00:00:00:00:00:00 192.0.2.2"}; !slices.Equal(w.k.writes, want) {
		t.Errorf("written back on the vxlan device: %q; want %q", w.k.writes, want)
	}
	if !w.d.ovl.mgr.ZebraExited() {
		t.Fatal("zebra exited after withdrawing everything: no hold")
	}
	showStale := func(when string, want map[string]bool) {
		t.Helper()
		es, err := w.d.fdbShow("")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, e := range es {
			if e.Port == "tvx1000" {
				if e.VTEP != "192.0.2.2" {
					t.Errorf("%s: fdb show %+v: want VTEP 192.0.2.2", when, e)
				}
				got[e.MAC] = e.Stale
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: the overlay port's entries %v; want %v", when, got, want)
		}
		for m, s := range want {
			if g, ok := got[m]; !ok || g != s {
				t.Errorf("%s: %s in fdb show %v, stale %v; want stale %v", when, m, ok, g, s)
			}
		}
		for m := range want {
			if e, ok := w.entry(m); !ok || e.Slot != ov.slot {
				t.Errorf("%s: table entry of %s %+v, %v; want on the overlay port", when, m, e, ok)
			}
		}
	}
	for _, d := range []time.Duration{0, overlay.StaleWait, 30 * time.Second} {
		w.advance(d)
		w.d.settleStale()
		w.sync()
		showStale("FRR away", map[string]bool{kept: true, lost: true})
	}
	if o := w.d.overlayStatus(ov); o.RemoteMACs != 2 || o.Stale != 3 || !o.FRRRestarting || !slices.Equal(o.FloodList, ctl.List[string]{"192.0.2.2"}) {
		t.Errorf("show while FRR is away: %+v", o)
	}

	// FRR is back: zebra writes kept again, not lost.
	w.remote(kept, false)
	w.advance(overlay.HoldQuiet / 2)
	w.d.settleStale()
	w.sync()
	showStale("zebra writing again", map[string]bool{kept: false, lost: true})
	w.k.writes = nil
	w.advance(overlay.HoldQuiet / 2)
	w.d.settleStale()
	w.sync()
	showStale("FRR back", map[string]bool{kept: false})
	if _, ok := w.entry(lost); ok {
		t.Errorf("%s, which zebra did not write again, stayed in the table", lost)
	}
	if want := []string{"unstale 00:00:00:00:00:00 192.0.2.2"}; !slices.Equal(w.k.writes, want) {
		// The fake kernel tells no echo of the entries written back,
		// so lost's own is not there to delete.
		t.Errorf("writes at the hold's end: %q; want %q", w.k.writes, want)
	}
	if o := w.d.overlayStatus(ov); o.RemoteMACs != 1 || o.Stale != 0 || o.FRRRestarting {
		t.Errorf("show once FRR is back: %+v", o)
	}
}

// fakeBGP is bgpd as vtysh tells it: one peer, 10.0.0.2, whose session
// carries VTEP 192.0.2.2's routes, up since upAt (on the world's clock)
// or down; or silent (err).
type fakeBGP struct {
	w    *ovWorld
	up   bool
	upAt time.Time
	err  error
	dirs []string
}

func (f *fakeBGP) query(_ context.Context, dir string) ([]byte, []byte, error) {
	f.dirs = append(f.dirs, dir)
	if f.err != nil {
		return nil, nil, f.err
	}
	state, uptime := "Idle", time.Duration(0)
	routes := `{"numPrefix":0}`
	if f.up {
		state, uptime = "Established", f.w.clock.Sub(f.upAt)
		routes = `{"192.0.2.2:2":{"rd":"192.0.2.2:2","[3]:[0]:[32]:[192.0.2.2]":{"paths":[[{"routeType":3,"ip":"192.0.2.2","peerId":"10.0.0.2"}]]}}}`
	}
	summary := fmt.Sprintf(`{"peers":{"10.0.0.2":{"state":%q,"peerUptimeMsec":%d}}}`, state, uptime.Milliseconds())
	return []byte(summary), []byte(routes), nil
}

// TestOverlayPeerSessionAway: the BGP session of the peer behind VTEP
// 192.0.2.2 goes (its FRR restarting) and zebra withdraws the peer's MAC
// and flood-list entry: the table keeps the MAC, stale, past StaleWait,
// for as long as bgpd says the session is down; once it is back and zebra
// wrote the MAC again, nothing is stale. The same MAC withdrawn over the
// live session goes after StaleWait, as does everything when bgpd was
// never asked (frr_vty_dir's default here).
func TestOverlayPeerSessionAway(t *testing.T) {
	w := newOvWorld(t)
	w.sys.add("p1", "veth")
	w.sys.add("p2", "veth")
	w.mustApply(ovConfig)
	bgp := &fakeBGP{w: w, up: true, upAt: w.clock.Add(-time.Hour)}
	w.d.ovl.bgpQuery = bgp.query
	const mac = "02:00:00:00:00:b1"
	w.flood(false)
	w.remote(mac, false)
	w.sync()
	if _, unknown := w.d.ovl.mgr.BGPNeeds(w.d.ovl.bgp.Knows); !unknown {
		t.Error("BGPNeeds: the flood list's VTEP known before bgpd was asked")
	}
	w.d.askBGP(t.Context())
	if _, unknown := w.d.ovl.mgr.BGPNeeds(w.d.ovl.bgp.Knows); unknown || !slices.Equal(bgp.dirs, []string{"/var/run/frr"}) {
		t.Errorf("after asking bgpd (in %q): a VTEP still unknown %v", bgp.dirs, unknown)
	}
	kept := func(when string, want, stale bool) {
		t.Helper()
		w.d.settleStale()
		w.sync()
		m, _ := net.ParseMAC(mac)
		if _, ok := w.entry(mac); ok != want || w.d.ovl.mgr.IsStale(1000, m) != stale {
			t.Errorf("%s: in the table %v, stale %v; want %v, %v", when, ok, w.d.ovl.mgr.IsStale(1000, m), want, stale)
		}
	}

	// The peer's session goes.
	bgp.up = false
	w.zebraDel(mac)
	w.flood(true)
	w.flood(false) // the kernel's echo of the entry written back
	w.advance(100 * time.Millisecond)
	w.d.askBGP(t.Context())
	for _, d := range []time.Duration{overlay.StaleWait, 30 * time.Second} {
		w.advance(d)
		w.d.askBGP(t.Context())
		kept("the peer's session away", true, true)
	}
	if o := w.d.overlayStatus(w.port("br0", "tvx1000")); o.Stale != 2 || o.FRRRestarting {
		t.Errorf("show with the peer's session away: %+v; want 2 stale, no FRR restart here", o)
	}

	// Back: zebra writes the MAC again.
	bgp.up, bgp.upAt = true, w.clock
	w.advance(500 * time.Millisecond)
	w.d.askBGP(t.Context())
	w.remote(mac, false)
	kept("the peer's session back", true, false)
	w.advance(overlay.HoldQuiet + time.Second)
	w.d.askBGP(t.Context())
	kept("the peer's session back for HoldQuiet", true, false)
	if o := w.d.overlayStatus(w.port("br0", "tvx1000")); o.Stale != 0 {
		t.Errorf("show with the peer's session back: %+v; want nothing stale", o)
	}

	// Withdrawn over the live session: gone after StaleWait.
	w.advance(time.Minute)
	w.zebraDel(mac)
	w.advance(overlay.StaleWait / 2)
	w.d.askBGP(t.Context())
	kept("withdrawn over the live session, before StaleWait", true, true)
	w.advance(overlay.StaleWait / 2)
	kept("withdrawn over the live session, after StaleWait", false, false)
}

// TestBGPDue: how often bgpd is asked. Something stale, bgpd answering:
// four times a second. A host whose bgpd never answered (no FRR, or a vty
// socket vtysh cannot open) with VTEPs it does not know: once a second,
// backing off to bgpRefresh after queries in a row that fail, not once a
// second for ever; nor four times a second while something is stale,
// since a bgpd that never answered holds nothing.
func TestBGPDue(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		stale, unknown, once bool
		fails                int
		want                 time.Duration
	}{
		{"stale, bgpd answering", true, false, true, 0, bgpPoll},
		{"stale, bgpd answered before, silent now", true, true, true, 7, bgpPoll},
		{"stale, bgpd never answered", true, false, false, 0, bgpRefresh},
		{"a VTEP unknown, bgpd answering", false, true, true, 0, time.Second},
		{"a VTEP unknown, one failure", false, true, false, 1, 2 * time.Second},
		{"a VTEP unknown, bgpd never answered", false, true, false, 100, bgpRefresh},
		{"nothing needed", false, false, true, 0, bgpRefresh},
	} {
		if got := bgpDue(tc.stale, tc.unknown, tc.once, tc.fails); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
