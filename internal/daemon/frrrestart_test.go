package daemon

import (
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
