package datapath

import "testing"

// A settle (SettleMark, WaitGrace, Settled) takes the wait that a flipped
// bridge's next write would take (sync): after it no bridge is left to
// wait for, but for one flipped while it waited, and the bridge is written
// again whole.
func TestSettle(t *testing.T) {
	r := newRig(t, modes[0], 1024, [4]uint32{})
	ports := []PortInfo{{Ifindex: r.port[1], Bridge: 1, Slot: 1}, {Ifindex: r.port[2], Bridge: 1, Slot: 2}}
	set := func(ports []PortInfo) error {
		return r.ns.Do(func() error { return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports}) })
	}
	if err := set(ports); err != nil {
		t.Fatal(err)
	}
	if !r.dp.unsynced[1] {
		t.Fatal("a bridge just written is not waited for")
	}
	settle := func() {
		t.Helper()
		mark, need := r.dp.SettleMark()
		if !need {
			t.Fatal("SettleMark: no bridge to wait for")
		}
		if err := r.dp.WaitGrace(); err != nil {
			t.Fatal(err)
		}
		r.dp.Settled(mark)
	}
	settle()
	if len(r.dp.unsynced) != 0 {
		t.Errorf("after a settle, bridges %v are still to be waited for", r.dp.unsynced)
	}
	if _, need := r.dp.SettleMark(); need {
		t.Error("SettleMark after a settle: a bridge to wait for")
	}
	// A bridge flipped while the wait ran is still waited for.
	mark, _ := r.dp.SettleMark()
	if err := set(ports); err != nil {
		t.Fatal(err)
	}
	if err := r.dp.WaitGrace(); err != nil {
		t.Fatal(err)
	}
	r.dp.Settled(mark)
	if !r.dp.unsynced[1] {
		t.Error("a bridge flipped after the mark is no longer waited for")
	}
	settle()
	if err := set(ports[:1]); err != nil {
		t.Fatal(err)
	}
	bs, err := r.dp.Bridges()
	if err != nil || len(bs) != 1 || len(bs[0].Ports) != 1 || bs[0].Ports[0].Ifindex != r.port[1] {
		t.Errorf("the bridge written after Settle reads back as %+v (%v)", bs, err)
	}
}
