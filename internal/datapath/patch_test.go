package datapath

import (
	"bytes"
	"fmt"
	"net"
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Patch ports through BPF_PROG_TEST_RUN: the rig's three interface ports
// each in a bridge of its own, the bridges chained by patches:
//
//	br1 [p1, patch 10] -- br2 [patch 11, p2, patch 12] -- br3 [patch 13, p3]
func patchChain(t *testing.T, r *rig) {
	t.Helper()
	err := r.ns.Do(func() error {
		for _, p := range []PortInfo{
			{Ifindex: PatchIfindex(10), Bridge: 1, Slot: 10, Peer: 11},
			{Ifindex: PatchIfindex(11), Bridge: 2, Slot: 11, Peer: 10},
			{Ifindex: PatchIfindex(12), Bridge: 2, Slot: 12, Peer: 13},
			{Ifindex: PatchIfindex(13), Bridge: 3, Slot: 13, Peer: 12},
			{Ifindex: r.port[2], Bridge: 2, Slot: 2},
			{Ifindex: r.port[3], Bridge: 3, Slot: 3},
		} {
			if err := r.dp.SetPort(p); err != nil {
				return err
			}
		}
		port := func(slot int) PortInfo {
			if slot < 10 {
				return PortInfo{Ifindex: r.port[slot], Slot: uint16(slot)}
			}
			return PortInfo{Ifindex: PatchIfindex(uint16(slot)), Slot: uint16(slot)}
		}
		reach := []PortInfo{port(1), port(2), port(3)}
		for _, b := range []BridgeInfo{
			{ID: 1, Name: "br1", Ports: []PortInfo{port(1), port(10)}},
			{ID: 2, Name: "br2", Ports: []PortInfo{port(11), port(2), port(12)}},
			{ID: 3, Name: "br3", Ports: []PortInfo{port(13), port(3)}},
		} {
			b.MaxEntries, b.Reach = 1024, reach
			if err := r.dp.SetBridge(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// where says where each bridge learned mac: bridge id -> slot.
func (r *rig) where(mac string) map[uint16]uint16 {
	r.t.Helper()
	es, err := r.dp.FDB()
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[uint16]uint16{}
	for _, e := range es {
		if e.MAC.String() == mac {
			out[e.Bridge] = e.Slot
			if IsPatchIfindex(e.Ifindex) != (e.Slot >= 10) || (e.Slot >= 10 && e.Ifindex != PatchIfindex(e.Slot)) {
				r.t.Errorf("%s in bridge %d: slot %d ifindex %#x", mac, e.Bridge, e.Slot, e.Ifindex)
			}
		}
	}
	return out
}

func wantWhere(t *testing.T, got map[uint16]uint16, want map[uint16]uint16, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: learned %v, want %v", what, got, want)
		return
	}
	for b, s := range want {
		if got[b] != s {
			t.Errorf("%s: learned %v, want %v", what, got, want)
			return
		}
	}
}

func TestPatchChain(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		patchChain(t, r)

		// Unknown unicast from A on p1 floods through both patches: A is
		// learned in every bridge on the patch towards it; p2 and p3 get
		// a copy, counted where they leave; each patch counts the crossing
		// on both of its ports.
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.redirect, "unknown unicast across patches")
		wantWhere(t, r.where(macA.String()), map[uint16]uint16{1: 1, 2: 11, 3: 13}, "A")
		for slot, want := range map[int][2]uint64{10: {0, 1}, 11: {1, 0}, 12: {0, 1}, 13: {1, 0}} {
			if s := r.stats(slot); s.C[tbpf.RxPackets] != want[0] || s.C[tbpf.TxPackets] != want[1] {
				t.Errorf("patch slot %d: rx %d tx %d, want %d %d", slot, s.C[tbpf.RxPackets], s.C[tbpf.TxPackets], want[0], want[1])
			}
		}
		// tc sends each copy itself; in xdp the copies go to every port
		// of the chain but the ingress, so the walk sends them over the
		// reach flood set (no devmap program) and counts them itself.
		for _, slot := range []int{2, 3} {
			if s := r.stats(slot); s.C[tbpf.TxPackets] != 1 {
				t.Errorf("port %d: tx %d, want 1", slot, s.C[tbpf.TxPackets])
			}
		}

		// B answers from p3: A is known all along the chain, so the frame
		// crosses br3, br2 and br1 as a forward, to p1 only.
		r.wantVerdict(r.run(3, ipv4(macA, macB)), m.redirect, "known unicast across patches")
		wantWhere(t, r.where(macB.String()), map[uint16]uint16{3: 3, 2: 12, 1: 10}, "B")
		if s := r.stats(1); s.C[tbpf.TxPackets] != 1 {
			t.Errorf("p1 tx %d, want 1", s.C[tbpf.TxPackets])
		}
		if s := r.stats(2); s.C[tbpf.TxPackets] > 1 {
			t.Errorf("p2 got the known unicast: tx %d", s.C[tbpf.TxPackets])
		}

		// Again: this CPU remembers the path; the crossings still count.
		r.wantVerdict(r.run(3, ipv4(macA, macB)), m.redirect, "remembered path")
		for slot, want := range map[int][2]uint64{13: {1, 2}, 12: {2, 1}, 11: {1, 2}, 10: {2, 1}} {
			if s := r.stats(slot); s.C[tbpf.RxPackets] != want[0] || s.C[tbpf.TxPackets] != want[1] {
				t.Errorf("after the remembered path, patch slot %d: rx %d tx %d, want %d %d", slot, s.C[tbpf.RxPackets], s.C[tbpf.TxPackets], want[0], want[1])
			}
		}
		if s := r.stats(1); s.C[tbpf.TxPackets] != 2 {
			t.Errorf("p1 tx %d after two answers, want 2", s.C[tbpf.TxPackets])
		}

		// A moves behind p2 and sends to B: br2 learns the move; br3 has A
		// on its patch already; br1 sees nothing of the frame and keeps A
		// on p1, as any bridge would, until A's broadcast reaches it.
		r.wantVerdict(r.run(2, ipv4(macB, macA)), m.redirect, "A from p2")
		wantWhere(t, r.where(macA.String()), map[uint16]uint16{1: 1, 2: 2, 3: 13}, "A after its move")
		r.wantVerdict(r.run(2, frame(bcast, macA, 0x0806, 28)), m.redirect, "A's broadcast from p2")
		wantWhere(t, r.where(macA.String()), map[uint16]uint16{1: 10, 2: 2, 3: 13}, "A after its broadcast")
		// The remembered path (to p1) is void: B's next frame goes to p2.
		r.wantVerdict(r.run(3, ipv4(macA, macB)), m.redirect, "B to A after the move")
		if s := r.stats(1); s.C[tbpf.TxPackets] != 3 {
			t.Errorf("p1 tx %d after A moved away, want 3 (the broadcast's copy counted)", s.C[tbpf.TxPackets])
		}
		if s := r.stats(2); s.C[tbpf.Moved] != 1 {
			t.Errorf("p2 moved %d, want 1", s.C[tbpf.Moved])
		}
		if s := r.stats(10); s.C[tbpf.Moved] != 1 {
			t.Errorf("br1's patch moved %d, want 1", s.C[tbpf.Moved])
		}

		// A station behind the patch it came by: the hop drops it as a
		// hairpin, counted on the patch port where it happened.
		r.wantVerdict(r.run(1, ipv4(macB, macC)), m.redirect, "C from p1")
		r.run(1, ipv4(macD, macC)) // D unknown: floods, C learned everywhere
		r.run(1, ipv4(macC, macD)) // D on p1 too: its frame to C is a hairpin in br1
		if got := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_HAIRPIN); got != 1 {
			t.Errorf("hairpin drops on p1 %d, want 1", got)
		}

		// Tables that disagree (br1 sends E to br2, br2 has E back towards
		// br1): br2 drops it as a hairpin, counted once, on the patch port
		// it came in by; the ingress port counts no drop of its own.
		macE := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0e}
		if err := r.ns.Do(func() error {
			if err := r.dp.AddFDB(FDBEntry{Bridge: 1, MAC: macE, Ifindex: PatchIfindex(10), Slot: 10, Static: true}); err != nil {
				return err
			}
			return r.dp.AddFDB(FDBEntry{Bridge: 2, MAC: macE, Ifindex: PatchIfindex(11), Slot: 11, Static: true})
		}); err != nil {
			t.Fatal(err)
		}
		r.wantVerdict(r.run(1, ipv4(macE, macA)), m.drop, "a hairpin in the next bridge")
		if got := r.drops(11, tbpf.TrestleTrDropReasonTR_DROP_HAIRPIN); got != 1 {
			t.Errorf("hairpin drops on br2's patch %d, want 1", got)
		}
		var other uint64
		for _, n := range r.stats(1).Drops {
			other += n
		}
		if other != 1 { // the hairpin of D above
			t.Errorf("p1 counted %d drops, want only its own hairpin: a drop in a later bridge was counted twice", other)
		}
	})
}

// A walk longer than TR_MAX_PATCH_CHAIN bridges is cut, with a reason.
func TestPatchChainLimit(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		lineOfBridges(t, r, tbpf.MaxPatchChain+1) // p2 in the bridge the walk does not reach
		r.wantVerdict(r.run(1, frame(bcast, macA, 0x0806, 28)), m.drop, "broadcast into a chain too long")
		last := 2*tbpf.MaxPatchChain + 9 // bridge MaxPatchChain's patch towards the one beyond
		if got := r.drops(last, tbpf.TrestleTrDropReasonTR_DROP_PATCH_CHAIN); got != 1 {
			t.Errorf("patch_chain drops on slot %d: %d, want 1", last, got)
		}
		if got := len(r.where(macA.String())); got != tbpf.MaxPatchChain {
			t.Errorf("A learned in %d bridges, want %d", got, tbpf.MaxPatchChain)
		}
	})
}

// lineOfBridges puts p1 in bridge 1 and p2 in bridge n, bridges 1..n joined
// in a line by patches (bridge i's patch slots: 2i+8 back, 2i+9 on).
func lineOfBridges(t testing.TB, r *rig, n int) {
	err := r.ns.Do(func() error {
		p1 := PortInfo{Ifindex: r.port[1], Slot: 1}
		p2 := PortInfo{Ifindex: r.port[2], Slot: 2}
		if n == 1 {
			return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "b", MaxEntries: 1024, Ports: []PortInfo{p1, p2}})
		}
		p2.Bridge = uint16(n)
		if err := r.dp.SetPort(p2); err != nil {
			return err
		}
		for i := 1; i <= n; i++ {
			var ports []PortInfo
			if i == 1 {
				ports = append(ports, p1)
			}
			if i > 1 {
				s := uint16(2*i + 8)
				p := PortInfo{Ifindex: PatchIfindex(s), Bridge: uint16(i), Slot: s, Peer: s - 1}
				if err := r.dp.SetPort(p); err != nil {
					return err
				}
				ports = append(ports, p)
			}
			if i < n {
				s := uint16(2*i + 9)
				p := PortInfo{Ifindex: PatchIfindex(s), Bridge: uint16(i), Slot: s, Peer: s + 1}
				if err := r.dp.SetPort(p); err != nil {
					return err
				}
				ports = append(ports, p)
			}
			if i == n {
				ports = append(ports, p2)
			}
			b := BridgeInfo{ID: uint16(i), Name: "b", MaxEntries: 1024, Ports: ports, Reach: []PortInfo{p1, p2}}
			if err := r.dp.SetBridge(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkPatchChain is the program's cost of a frame from p1 to p2
// through 1 bridge and through bridges joined by patches: known unicast
// (the remembered path), and broadcast (a walk through every bridge, which
// learns nothing new; in xdp the broadcast redirect itself is not carried
// out by a test run, in tc the clone is).
func BenchmarkPatchChain(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			for _, c := range []struct {
				kind  string
				frame []byte
			}{{"unicast", ipv4(macB, macA)}, {"broadcast", ipv4(bcast, macA)}} {
				for _, n := range []int{1, 2, 9} {
					b.Run(fmt.Sprintf("%s/bridges-%d", c.kind, n), func(b *testing.B) {
						r := newRig(b, m, 1024, [4]uint32{})
						lineOfBridges(b, r, n)
						r.run(2, ipv4(bcast, macB))
						r.run(1, ipv4(bcast, macA))
						if got := r.run(1, c.frame); got != m.redirect {
							b.Fatalf("verdict %d", got)
						}
						b.ResetTimer()
						per := r.bench(1, c.frame, b.N)
						b.ReportMetric(float64(per.Nanoseconds()), "ns/frame")
					})
				}
			}
		})
	}
}

// A VLAN-aware pair of bridges: br1 [p1 access 10, p2 access 20, patch 10
// trunk 10,20] -- br2 [patch 11 trunk 10,20, p3 trunk 10,20]. A frame keeps
// its VLAN across the patch, and leaves as its last port takes it.
func TestPatchVLAN(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		err := r.ns.Do(func() error {
			if err := r.dp.SetVLANStage(true); err != nil {
				return err
			}
			trunk := []uint16{10, 20}
			b1 := []PortInfo{
				{Ifindex: r.port[1], Bridge: 1, Slot: 1, PVID: 10},
				{Ifindex: r.port[2], Bridge: 1, Slot: 2, PVID: 20},
				{Ifindex: PatchIfindex(10), Bridge: 1, Slot: 10, Peer: 11, Trunk: true, VLANs: trunk},
			}
			b2 := []PortInfo{
				{Ifindex: PatchIfindex(11), Bridge: 2, Slot: 11, Peer: 10, Trunk: true, VLANs: trunk},
				{Ifindex: r.port[3], Bridge: 2, Slot: 3, Trunk: true, VLANs: trunk},
			}
			for _, p := range append(append([]PortInfo{}, b1...), b2...) {
				if err := r.dp.SetPort(p); err != nil {
					return err
				}
			}
			reach := []PortInfo{b1[0], b1[1], b2[1]}
			if err := r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br1", MaxEntries: 1024, Ports: b1, VLANAware: true, VLANs: trunk, Reach: reach}); err != nil {
				return err
			}
			return r.dp.SetBridge(BridgeInfo{ID: 2, Name: "br2", MaxEntries: 1024, Ports: b2, VLANAware: true, VLANs: trunk, Reach: reach})
		})
		if err != nil {
			t.Fatal(err)
		}

		// A on p1 (VLAN 10), to unknown B: br1 floods it in VLAN 10 (not
		// to p2, of VLAN 20) through the patch; br2 learns A there in
		// VLAN 10 and floods it to p3, tagged 10.
		in := ipv4(macB, macA)
		ret, out := r.runOut(1, in)
		r.wantVerdict(ret, m.redirect, "VLAN 10 across the patch")
		if m.name == "xdp" && !bytes.Equal(out, addTag(in, 10)) {
			t.Errorf("p1 -> p3: left as\n% x\nwant tagged 10", out)
		}
		es, err := r.dp.FDB()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range es {
			if e.MAC.String() == macA.String() && e.Bridge == 2 {
				found = e.VLAN == 10 && e.Slot == 11
				if !found {
					t.Errorf("A in br2: %+v, want VLAN 10 on the patch (slot 11)", e)
				}
			}
		}
		if !found {
			t.Error("A not learned in br2")
		}
		if s := r.stats(2); s.C[tbpf.TxPackets] != 0 {
			t.Errorf("p2 (VLAN 20) got %d frames of VLAN 10", s.C[tbpf.TxPackets])
		}

		// B answers from p3 tagged 10: known all the way, to p1 untagged.
		in = addTag(ipv4(macA, macB), 10)
		ret, out = r.runOut(3, in)
		r.wantVerdict(ret, m.redirect, "VLAN 10 back")
		if m.name == "xdp" && !bytes.Equal(out, untag(in)) {
			t.Errorf("p3 -> p1: left as\n% x\nwant untagged", out)
		}

		// B in VLAN 20 to unknown C: across the patch to p2 only.
		in = addTag(ipv4(macC, macB), 20)
		ret, out = r.runOut(3, in)
		r.wantVerdict(ret, m.redirect, "VLAN 20 across the patch")
		if m.name == "xdp" && !bytes.Equal(out, untag(in)) {
			t.Errorf("p3 -> p2 in VLAN 20: left as\n% x\nwant untagged", out)
		}
		if s := r.stats(2); s.C[tbpf.TxPackets] != 1 {
			t.Errorf("p2 tx %d, want 1", s.C[tbpf.TxPackets])
		}
		if s := r.stats(1); s.C[tbpf.TxPackets] != 1 {
			t.Errorf("p1 tx %d, want 1 (VLAN 20 stays off it)", s.C[tbpf.TxPackets])
		}
	})
}
