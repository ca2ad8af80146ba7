package datapath

import (
	"errors"
	"testing"
)

// TestPutLearned: an entry the control plane puts as learned (an overlay
// port's remote address) forwards to its port, is counted there, moves
// when the station shows up on another port, and never replaces a static
// entry.
func TestPutLearned(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		do := func(f func() error) error { return r.ns.Do(f) }
		counts := func(want2, want3, wantBridge int) {
			t.Helper()
			var p2, p3, b int
			err := do(func() (err error) {
				if p2, err = r.dp.PortMACs(2); err != nil {
					return err
				}
				if p3, err = r.dp.PortMACs(3); err != nil {
					return err
				}
				b, err = r.dp.BridgeMACs(1)
				return err
			})
			if err != nil || p2 != want2 || p3 != want3 || b != wantBridge {
				t.Errorf("counts: port 2 %d, port 3 %d, bridge %d (%v); want %d, %d, %d", p2, p3, b, err, want2, want3, wantBridge)
			}
		}
		put := func() error {
			return do(func() error { return r.dp.PutLearned(FDBEntry{Bridge: 1, MAC: macA, Ifindex: r.port[3], Slot: 3}) })
		}
		if err := put(); err != nil {
			t.Fatal(err)
		}
		if e, ok := r.lookup(macA); !ok || e.Static || e.Slot != 3 {
			t.Fatalf("A after PutLearned: %+v, %v; want learned on slot 3", e, ok)
		}
		counts(0, 1, 1)
		r.wantVerdict(r.run(1, ipv4(macA, macB)), m.redirect, "to the put entry")
		// Put again: replaced, counted once.
		if err := put(); err != nil {
			t.Fatal(err)
		}
		counts(0, 1, 2) // B was learned on port 1
		// The station shows up on port 2: the datapath moves it.
		r.run(2, ipv4(macB, macA))
		if e, _ := r.lookup(macA); e.Slot != 2 {
			t.Errorf("A after a frame from port 2: slot %d, want 2", e.Slot)
		}
		counts(1, 0, 2)
		// And back, on the control plane's word.
		if err := put(); err != nil {
			t.Fatal(err)
		}
		counts(0, 1, 2)
		if err := do(func() error { _, err := r.dp.DelFDB(1, 0, macA); return err }); err != nil {
			t.Fatal(err)
		}
		counts(0, 0, 1)
		// A static entry is never replaced.
		if err := do(func() error {
			return r.dp.AddFDB(FDBEntry{Bridge: 1, MAC: macC, Ifindex: r.port[2], Slot: 2, Static: true})
		}); err != nil {
			t.Fatal(err)
		}
		err := do(func() error { return r.dp.PutLearned(FDBEntry{Bridge: 1, MAC: macC, Ifindex: r.port[3], Slot: 3}) })
		if !errors.Is(err, ErrStatic) {
			t.Errorf("PutLearned over a static entry: %v, want ErrStatic", err)
		}
		if e, _ := r.lookup(macC); !e.Static || e.Slot != 2 {
			t.Errorf("static C after a refused put: %+v", e)
		}
		counts(0, 0, 1)
	})
}
