package datapath

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"

	tbpf "github.com/trestle/trestle/internal/bpf"
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

// TestOverlayMTU: what leaves by an overlay port (PortInfo.Overlay, here
// the veth of slot 2 with an MTU of 1450, as a vxlan device over a 1500
// underlay has) must fit its MTU: a forward or a flood's copy whose L2
// payload is longer is dropped as overlay_mtu and counted on the overlay
// port, and the flood's other copies still go; one that fits crosses. Only
// tc reaches an overlay port.
func TestOverlayMTU(t *testing.T) {
	const mtu = 1450
	m := modes[1]
	r := newRig(t, m, 1024, [4]uint32{})
	var ports []PortInfo
	for slot := 1; slot <= 3; slot++ {
		ports = append(ports, PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot), Overlay: slot == 2})
	}
	err := r.ns.Do(func() error {
		l, err := netlink.LinkByIndex(int(r.port[2]))
		if err != nil {
			return err
		}
		if err := netlink.LinkSetMTU(l, mtu); err != nil {
			return err
		}
		if err := r.dp.SetPort(ports[1]); err != nil {
			return err
		}
		return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, Overlay: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok, err := r.dp.Port(r.port[2]); err != nil || !ok || !p.Overlay {
		t.Fatalf("slot 2 read back: %+v %v %v, want an overlay port", p, ok, err)
	}
	tooLong := tbpf.TrestleTrDropReasonTR_DROP_OVERLAY_MTU
	// C lives behind the overlay port, A on slot 1, D on slot 3.
	r.wantVerdict(r.run(2, ipv4(macA, macC)), m.redirect, "C's first frame (a flood)")
	r.wantVerdict(r.run(1, ipv4(macC, macA)), m.redirect, "A to C")
	r.wantVerdict(r.run(3, ipv4(macC, macD)), m.redirect, "D to C")

	type want struct {
		verdict   uint32
		tx2, tx3  uint64 // copies sent by slot 2 (the overlay) and 3
		dropped   uint64 // overlay_mtu on slot 2
		elsewhere uint64 // overlay_mtu anywhere else
	}
	cases := []struct {
		name  string
		slot  int
		frame []byte
		want  want
	}{
		{"forward, payload at the MTU", 1, frame(macC, macA, 0x0800, mtu), want{m.redirect, 1, 0, 0, 0}},
		{"forward, one byte over", 1, frame(macC, macA, 0x0800, mtu+1), want{m.drop, 0, 0, 1, 0}},
		{"forward, far over", 3, frame(macC, macD, 0x0800, 1500), want{m.drop, 0, 0, 1, 0}},
		{"flood at the MTU (the overlay's copy a clone)", 1, frame(bcast, macA, 0x0800, mtu), want{m.redirect, 1, 1, 0, 0}},
		{"flood over (a clone's copy): the other copy goes", 1, frame(bcast, macA, 0x0800, mtu+1), want{m.redirect, 0, 1, 1, 0}},
		{"flood over (the last copy): the other copy goes", 3, frame(bcast, macD, 0x0800, mtu+1), want{m.drop, 0, 0, 1, 0}},
		{"flood at the MTU (the last copy)", 3, frame(bcast, macD, 0x0800, mtu), want{m.redirect, 1, 0, 0, 0}},
		{"from the overlay, longer than its MTU: not its concern", 2, frame(macA, macC, 0x0800, 1500), want{m.redirect, 0, 0, 0, 0}},
	}
	for _, c := range cases {
		s1, s2, s3 := r.stats(1), r.stats(2), r.stats(3)
		got := want{verdict: r.run(c.slot, c.frame)}
		a1, a2, a3 := r.stats(1), r.stats(2), r.stats(3)
		got.tx2 = a2.C[tbpf.TrestleTrCounterTR_CNT_TX_PACKETS] - s2.C[tbpf.TrestleTrCounterTR_CNT_TX_PACKETS]
		got.tx3 = a3.C[tbpf.TrestleTrCounterTR_CNT_TX_PACKETS] - s3.C[tbpf.TrestleTrCounterTR_CNT_TX_PACKETS]
		got.dropped = a2.Drops[tooLong] - s2.Drops[tooLong]
		got.elsewhere = a1.Drops[tooLong] - s1.Drops[tooLong] + a3.Drops[tooLong] - s3.Drops[tooLong]
		if c.name == "flood over (the last copy): the other copy goes" {
			// from slot 3, the copy to slot 1 is the clone
			got.tx3 = a1.C[tbpf.TrestleTrCounterTR_CNT_TX_PACKETS] - s1.C[tbpf.TrestleTrCounterTR_CNT_TX_PACKETS]
			c.want.tx3 = 1
		}
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
