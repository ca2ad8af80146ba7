package datapath

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
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
		var prev FDBEntry
		var replaced bool
		put := func() error {
			return do(func() (err error) {
				prev, replaced, err = r.dp.PutLearned(FDBEntry{Bridge: 1, MAC: macA, Ifindex: r.port[3], Slot: 3})
				return err
			})
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
		// And back, on the control plane's word, which says where the
		// datapath had moved it.
		if err := put(); err != nil {
			t.Fatal(err)
		}
		if !replaced || prev.Slot != 2 || prev.Static {
			t.Errorf("PutLearned over A on port 2 replaced %+v (%v), want the learned entry of slot 2", prev, replaced)
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
		err := do(func() error {
			_, _, err := r.dp.PutLearned(FDBEntry{Bridge: 1, MAC: macC, Ifindex: r.port[3], Slot: 3})
			return err
		})
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
		ports = append(ports, PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot), Policy: tbpf.PortPolicy{}.With(tbpf.TrestleTrPortFlagsTR_PORT_OVERLAY, slot == 2)})
	}
	err := r.ns.Do(func() error {
		if err := setMTU(r.port[2], mtu); err != nil {
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
	if p, ok, err := r.dp.Port(r.port[2]); err != nil || !ok || !p.IsOverlay() {
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

// viaRigMTU is the MTU of the overlay port's device in viaRig.
const viaRigMTU = 1450

// viaRig is an XDP rig whose slot 2 is an overlay port (p2, its device's
// MTU 1450, as a vxlan device over a 1500 underlay has) with its xdp way in
// p0-q0, written as the daemon writes a new one; and its three ports.
func viaRig(t testing.TB) (*rig, []PortInfo) {
	r := newRig(t, modes[0], 1024, [4]uint32{})
	ports := []PortInfo{{Ifindex: r.port[1], Bridge: 1, Slot: 1}, {Ifindex: r.port[2], Bridge: 1, Slot: 2, Via: r.port[0], Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_OVERLAY}},
		{Ifindex: r.port[3], Bridge: 1, Slot: 3}}
	err := r.ns.Do(func() error {
		l, err := netlink.LinkByIndex(int(r.port[2]))
		if err != nil {
			return err
		}
		if err := netlink.LinkSetMTU(l, viaRigMTU); err != nil {
			return err
		}
		q, err := netlink.LinkByName("q0")
		if err != nil {
			return err
		}
		ports[1].ViaPeer = uint32(q.Attrs().Index)
		// The bridge first, as the daemon writes a new port: its way in is
		// known from the port list.
		if err := r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, Overlay: true}); err != nil {
			return err
		}
		return r.dp.SetPort(ports[1])
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, ports
}

// TestVia: an overlay port's xdp way in (docs/overlay.md, "xdp ports and
// the overlay"). Slot 2 is the overlay port on p2 (MTU 1450), its way in
// the pair p0 (where XDP copies go) and q0 (its far end): XDP unicast and
// floods for slot 2 go to p0 while the bridge's port list keeps p2 for tc;
// both ends are in the port maps but are no ports; trestle_via at q0 sends
// what fits the overlay on to p2 and drops (and counts on slot 2) what does
// not, and drops what arrives anywhere else; the way in goes with its port.
func TestVia(t *testing.T) {
	const mtu = viaRigMTU
	r, ports := viaRig(t)
	q0 := ports[1].ViaPeer
	var tx uint32
	if err := r.dp.objs.TxPorts.Lookup(uint32(2), &tx); err != nil || tx != r.port[0] {
		t.Errorf("tx_ports[2] = %d, %v; want the way in %d", tx, err, r.port[0])
	}
	var member uint32
	if err := r.dp.floods[1].Lookup(r.port[2], &member); err != nil || member != r.port[0] {
		t.Errorf("the flood set's member for the overlay port sends to %d, %v; want %d", member, err, r.port[0])
	}
	for _, end := range []uint32{r.port[0], q0} {
		if p, ok, err := r.dp.Port(end); err != nil || ok {
			t.Errorf("an end of the way in (%d) reads as a port: %+v %v %v", end, p, ok, err)
		}
	}
	got, err := r.dp.Ports()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !slices.ContainsFunc(got, func(p PortInfo) bool {
		return p.Slot == 2 && p.Ifindex == r.port[2] && p.Via == r.port[0] && p.ViaPeer == q0 && p.IsOverlay()
	}) {
		t.Errorf("Ports() = %+v, want 3 ports, slot 2 with its way in %d-%d", got, r.port[0], q0)
	}

	via := func(ingress uint32, payload int) uint32 {
		t.Helper()
		var ret uint32
		err := r.ns.Do(func() error {
			ctx := make([]byte, 44) // struct __sk_buff up to ifindex at 40
			binary.LittleEndian.PutUint32(ctx[40:], ingress)
			via, err := r.dp.ViaProgram()
			if err != nil {
				return err
			}
			ret, err = via.Run(&ebpf.RunOptions{Data: frame(macC, macA, 0x0800, payload), Context: ctx})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return ret
	}
	tooLong := tbpf.TrestleTrDropReasonTR_DROP_OVERLAY_MTU
	before := r.stats(2).Drops[tooLong]
	if v := via(q0, mtu); v != tcRedirect {
		t.Errorf("trestle_via, a frame that fits: verdict %d, want a redirect", v)
	}
	if v := via(q0, mtu+1); v != tcShot {
		t.Errorf("trestle_via, a frame one byte too long: verdict %d, want dropped", v)
	}
	if n := r.stats(2).Drops[tooLong] - before; n != 1 {
		t.Errorf("overlay_mtu on the overlay port went up by %d, want 1", n)
	}
	if v := via(r.port[1], 64); v != tcShot {
		t.Errorf("trestle_via on an interface that is no way in: verdict %d, want dropped", v)
	}

	// The ends of a way in that a release before via_dev wrote hold the
	// port's device in max_macs: a daemon that adopts them (Ports) writes
	// them again as trestle_via reads them now.
	for _, end := range []uint32{r.port[0], q0} {
		var v tbpf.Port
		if err := r.dp.portMap(end).Lookup(end, &v); err != nil {
			t.Fatal(err)
		}
		v.ViaDev, v.MaxMacs = 0, r.port[2]
		if err := r.dp.portMap(end).Put(end, &v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.dp.Ports(); err != nil {
		t.Fatal(err)
	}
	for _, end := range []uint32{r.port[0], q0} {
		var v tbpf.Port
		if err := r.dp.portMap(end).Lookup(end, &v); err != nil || v.ViaDev != r.port[2] || v.MaxMacs != 0 {
			t.Errorf("an end of an earlier release's way in (%d), adopted: %+v %v, want via_dev %d", end, v, err, r.port[2])
		}
	}
	if v := via(q0, mtu); v != tcRedirect {
		t.Errorf("trestle_via through an adopted way in: verdict %d, want a redirect", v)
	}

	if err := r.ns.Do(func() error { return r.dp.DelPort(r.port[2], 2) }); err != nil {
		t.Fatal(err)
	}
	if v := via(q0, 64); v != tcShot {
		t.Errorf("trestle_via after its port went: verdict %d, want dropped", v)
	}
	if got, _ := r.dp.Ports(); len(got) != 2 {
		t.Errorf("Ports() after the overlay port went: %+v", got)
	}

	// A way in whose device went (the kernel takes its tx_ports entry
	// along) is no one's when a daemon adopts: Ports() removes its ends,
	// and reads the port without it, for the daemon to write it again.
	if err := r.ns.Do(func() error { return r.dp.SetPort(ports[1]) }); err != nil {
		t.Fatal(err)
	}
	if err := r.dp.objs.TxPorts.Delete(uint32(2)); err != nil {
		t.Fatal(err)
	}
	got, err = r.dp.Ports()
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(got, func(p PortInfo) bool { return p.Slot == 2 }); i < 0 || got[i].Via != 0 || got[i].ViaPeer != 0 {
		t.Errorf("Ports() with the way in's device gone: %+v, want slot 2 without a way in", got)
	}
	for _, end := range []uint32{r.port[0], q0} {
		var v tbpf.Port
		if err := r.dp.portMap(end).Lookup(end, &v); err != nil || v.Bridge != 0 {
			t.Errorf("a stale end of the way in (%d) is still in the port maps: %+v %v", end, v, err)
		}
	}
}

// TestOverlayMTUWalk: a tc flood that takes the walk (port 1 is mirrored
// to the span port 3) with a copy too long for the overlay port (2): that
// copy is the overlay port's drop, whichever of the walk's copies it is,
// and the frame is flooded on its ingress port, as in a bridge without the
// walk (TestOverlayMTU), not dropped: the span port's copy went.
func TestOverlayMTUWalk(t *testing.T) {
	const mtu = 1450
	m := modes[1]
	r := newRig(t, m, 1024, [4]uint32{})
	span := PortInfo{Ifindex: r.port[3], Bridge: 1, Slot: 3, Span: true}
	p1 := PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1, MirrorIn: true, MirrorTo: r.port[3], MirrorToSlot: 3}
	p2 := PortInfo{Ifindex: r.port[2], Bridge: 1, Slot: 2, Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_OVERLAY}}
	err := r.ns.Do(func() error {
		if err := setMTU(r.port[2], mtu); err != nil {
			return err
		}
		for _, p := range []PortInfo{span, p1, p2} {
			if err := r.dp.SetPort(p); err != nil {
				return err
			}
		}
		return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: []PortInfo{p1, p2},
			Mirror: true, Overlay: true, Reach: []PortInfo{p1, p2, span}})
	})
	if err != nil {
		t.Fatal(err)
	}
	tooLong := tbpf.TrestleTrDropReasonTR_DROP_OVERLAY_MTU
	sum := func(d []uint64) (n uint64) {
		for _, v := range d {
			n += v
		}
		return n
	}
	for _, c := range []struct {
		name     string
		frame    []byte
		tooLong  uint64
		tx2, tx3 uint64
	}{
		{"a flood that fits", frame(bcast, macA, 0x0800, mtu), 0, 1, 1},
		{"a flood one byte over the overlay's MTU", frame(bcast, macA, 0x0800, mtu+1), 1, 0, 1},
	} {
		s1, s2, s3 := r.stats(1), r.stats(2), r.stats(3)
		r.run(1, c.frame)
		a1, a2, a3 := r.stats(1), r.stats(2), r.stats(3)
		flooded := a1.C[tbpf.TrestleTrCounterTR_CNT_FLOODED] - s1.C[tbpf.TrestleTrCounterTR_CNT_FLOODED]
		dropped := sum(a1.Drops[:]) - sum(s1.Drops[:])
		if flooded != 1 || dropped != 0 {
			t.Errorf("%s: port 1 counted %d flooded, %d dropped, want 1 flooded, 0 dropped", c.name, flooded, dropped)
		}
		if n := a2.Drops[tooLong] - s2.Drops[tooLong]; n != c.tooLong {
			t.Errorf("%s: overlay_mtu on the overlay port %d, want %d", c.name, n, c.tooLong)
		}
		tx2 := a2.C[tbpf.TxPackets] - s2.C[tbpf.TxPackets]
		tx3 := a3.C[tbpf.TxPackets] - s3.C[tbpf.TxPackets]
		if tx2 != c.tx2 || tx3 != c.tx3 {
			t.Errorf("%s: sent by the overlay port %d, by the span port %d, want %d and %d", c.name, tx2, tx3, c.tx2, c.tx3)
		}
	}
}

// setMTU sets the MTU of the interface ifindex, in the calling thread's
// namespace (the rig's, inside r.ns.Do): an overlay port's device.
func setMTU(ifindex uint32, mtu int) error {
	l, err := netlink.LinkByIndex(int(ifindex))
	if err != nil {
		return err
	}
	return netlink.LinkSetMTU(l, mtu)
}
