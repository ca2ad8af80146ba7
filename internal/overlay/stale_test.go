package overlay

import (
	"net"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"
)

// staleWorld is a Manager holding VNI 1000, its clock, and zebra's events.
type staleWorld struct {
	t     *testing.T
	k     *fakeKernel
	m     *Manager
	clock time.Time
}

func newStaleWorld(t *testing.T) *staleWorld {
	w := &staleWorld{t: t, k: newFake(), clock: time.Unix(1e9, 0)}
	w.m = NewManager(w.k)
	w.m.SetClock(func() time.Time { return w.clock })
	if _, _, err := w.m.Ensure(spec); err != nil {
		t.Fatal(err)
	}
	return w
}

// handle gives events, and fails on a Change unless want.
func (w *staleWorld) handle(want bool, ns ...Neigh) {
	w.t.Helper()
	for _, n := range ns {
		if c, ok := w.m.Handle(n); ok != want {
			w.t.Fatalf("%+v: Change %+v, %v; want %v", n, c, ok, want)
		}
	}
}

func onVXOf(m net.HardwareAddr) Neigh {
	return Neigh{Ifindex: devs.VXLAN, MAC: m, Master: true, ExtLearned: true}
}

func deleted(n Neigh) Neigh { n.Deleted = true; return n }

// zebraWrites: zebra installs a remote MAC (the bridge's entry and the
// device's own, which a stale one's write back replaces).
func (w *staleWorld) zebraWrites(m net.HardwareAddr) {
	w.t.Helper()
	_, a := w.m.Handle(onVXOf(m))
	_, b := w.m.Handle(remote(m, vtepB))
	if a == b {
		w.t.Fatalf("zebra writes %s: Changes %v, %v; want one", m, a, b)
	}
}

// zebraWithdraws: zebra deletes a remote MAC as the kernel tells it (the
// bridge's entry, then the device's), then the flood entry; each written
// back is echoed, as the kernel does.
func (w *staleWorld) zebraWithdraws(ms ...net.HardwareAddr) {
	w.t.Helper()
	for _, m := range ms {
		w.handle(false, deleted(onVXOf(m)), deleted(remote(m, vtepB)), remote(m, vtepB))
	}
	w.handle(false, deleted(remote(zero, vtepB)), remote(zero, vtepB))
}

func (w *staleWorld) remotes() (out []string) {
	for _, r := range w.m.Remotes(1000) {
		s := r.MAC.String() + " " + r.VTEP.String()
		if r.Stale {
			s += " stale"
		}
		out = append(out, s)
	}
	return out
}

// TestStaleRestart: FRR restarts. zebra withdraws every remote MAC and the
// flood list, and trestle writes each back, stale, and changes nothing in
// the table; zebra exits (a hold begins) and comes back, writes macA again
// but not macB (the fabric lost it meanwhile); once it has been quiet for
// HoldQuiet the hold ends: macB and trestle's flood entry go, and macA
// stays, zebra's again.
func TestStaleRestart(t *testing.T) {
	w := newStaleWorld(t)
	w.handle(false, remote(zero, vtepB))
	w.zebraWrites(macA)
	w.zebraWrites(macB)
	w.k.writes = nil

	w.zebraWithdraws(macA, macB)
	wantWrites := []string{"stale " + macA.String() + " 192.0.2.2", "stale " + macB.String() + " 192.0.2.2", "stale " + zero.String() + " 192.0.2.2"}
	if !slices.Equal(w.k.writes, wantWrites) {
		t.Errorf("writes while zebra withdrew: %q; want %q", w.k.writes, wantWrites)
	}
	want := []string{macA.String() + " 192.0.2.2 stale", macB.String() + " 192.0.2.2 stale"}
	if got := w.remotes(); !slices.Equal(got, want) {
		t.Errorf("remotes after zebra withdrew: %q; want %q", got, want)
	}
	if st, _ := w.m.Status(1000); st.Stale != 3 || !slices.Equal(st.FloodVTEPs, []netip.Addr{vtepB}) || st.Holding {
		t.Errorf("status after zebra withdrew: %+v", st)
	}
	w.clock = w.clock.Add(100 * time.Millisecond)
	if !w.m.ZebraExited() {
		t.Fatal("zebra exited after withdrawing everything: no hold")
	}
	if w.m.ZebraExited() {
		t.Error("a second nexthop deletion began a second hold")
	}
	// FRR away for longer than StaleWait: nothing goes.
	w.clock = w.clock.Add(10 * time.Second)
	if done, err := w.m.Settle(); err != nil || !reflect.DeepEqual(done, Settled{}) {
		t.Errorf("Settle while FRR is away: %+v, %v", done, err)
	}
	// Back: macA written again, no longer stale.
	w.k.writes = nil
	w.zebraWrites(macA)
	if !w.m.IsStale(1000, macB) || w.m.IsStale(1000, macA) {
		t.Errorf("after zebra wrote macA again: stale A %v, B %v", w.m.IsStale(1000, macA), w.m.IsStale(1000, macB))
	}
	w.clock = w.clock.Add(HoldQuiet - time.Millisecond)
	if done, _ := w.m.Settle(); done.Ended {
		t.Error("the hold ended before zebra was quiet for HoldQuiet")
	}
	w.clock = w.clock.Add(time.Millisecond)
	done, err := w.m.Settle()
	if err != nil || !reflect.DeepEqual(done, Settled{Ended: true, Claimed: true, Removed: 2}) {
		t.Errorf("Settle once zebra is quiet: %+v, %v", done, err)
	}
	wantWrites = []string{"unstale " + macB.String() + " 192.0.2.2", "unstale " + zero.String() + " 192.0.2.2"}
	if !slices.Equal(w.k.writes, wantWrites) {
		t.Errorf("writes at the hold's end: %q; want %q", w.k.writes, wantWrites)
	}
	if got := w.remotes(); !slices.Equal(got, []string{macA.String() + " 192.0.2.2"}) {
		t.Errorf("remotes after the hold: %q; want macA alone, not stale", got)
	}
	// The deletion of trestle's flood entry is its own (not kept again);
	// zebra writes the VTEP back, as it does a VTEP it has.
	w.k.writes = nil
	w.handle(false, deleted(remote(zero, vtepB)), remote(zero, vtepB))
	if st, _ := w.m.Status(1000); len(w.k.writes) != 0 || st.Stale != 0 || !slices.Equal(st.FloodVTEPs, []netip.Addr{vtepB}) {
		t.Errorf("after the hold: writes %q, status %+v", w.k.writes, st)
	}
}

// TestStaleWithdrawn: a route the fabric withdraws (zebra stays): kept
// stale for StaleWait, in case FRR is going, then gone; a zebra exit with
// a flood-list VTEP of zebra's still there is no restart.
func TestStaleWithdrawn(t *testing.T) {
	w := newStaleWorld(t)
	w.handle(false, remote(zero, vtepB), remote(zero, vtepC))
	w.zebraWrites(macA)
	w.handle(false, deleted(onVXOf(macA)), deleted(remote(macA, vtepB)), remote(macA, vtepB))
	if w.m.ZebraExited() {
		t.Error("a hold began with zebra's flood list there")
	}
	w.clock = w.clock.Add(StaleWait - time.Millisecond)
	if done, _ := w.m.Settle(); done.Removed != 0 {
		t.Errorf("a withdrawn MAC went before StaleWait: %+v", done)
	}
	w.clock = w.clock.Add(time.Millisecond)
	w.k.writes = nil
	if done, err := w.m.Settle(); err != nil || !reflect.DeepEqual(done, Settled{Removed: 1}) {
		t.Errorf("Settle after StaleWait: %+v, %v", done, err)
	}
	if len(w.remotes()) != 0 || !slices.Equal(w.k.writes, []string{"unstale " + macA.String() + " 192.0.2.2"}) {
		t.Errorf("after StaleWait: remotes %q, writes %q", w.remotes(), w.k.writes)
	}
	// Learned here while stale: local, and trestle's entry goes at once.
	w.zebraWrites(macB)
	w.handle(false, deleted(onVXOf(macB)), deleted(remote(macB, vtepB)), remote(macB, vtepB))
	w.k.writes = nil
	c, ok := w.m.Handle(Neigh{Ifindex: devs.Adv, MAC: macB, Master: true, ExtLearned: true})
	if !ok || !c.Gone || !slices.Equal(w.k.writes, []string{"unstale " + macB.String() + " 192.0.2.2"}) {
		t.Errorf("a stale MAC learned here: Change %+v, %v, writes %q", c, ok, w.k.writes)
	}
}

// TestStaleHoldLimit: FRR that does not come back within HoldLimit: the
// hold ends, and every stale entry goes.
func TestStaleHoldLimit(t *testing.T) {
	w := newStaleWorld(t)
	w.handle(false, remote(zero, vtepB))
	w.zebraWrites(macA)
	w.zebraWithdraws(macA)
	if !w.m.ZebraExited() {
		t.Fatal("no hold")
	}
	w.clock = w.clock.Add(HoldLimit - time.Millisecond)
	if done, _ := w.m.Settle(); done.Ended {
		t.Error("the hold ended before HoldLimit")
	}
	w.clock = w.clock.Add(time.Millisecond)
	if done, err := w.m.Settle(); err != nil || !reflect.DeepEqual(done, Settled{Ended: true, Removed: 2}) {
		t.Errorf("Settle at HoldLimit: %+v, %v", done, err)
	}
	if len(w.remotes()) != 0 {
		t.Errorf("remotes after the limit: %q", w.remotes())
	}
}
