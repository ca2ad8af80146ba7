package datapath

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// VLAN table tests: each verdict of the VLAN stage (bpf/lib/vlan.h) in both
// builds, through BPF_PROG_TEST_RUN, on a bridge of an access port of VLAN
// 10 (slot 1), one of VLAN 20 (slot 2) and a trunk of 10 and 20 (slot 3).
// The XDP build's output frames are checked byte for byte; the tc build
// keeps a pushed tag in the skb's metadata, which a test run does not return,
// so its tags are checked by the namespace tests (cmd/trestle/vlan_test.go).

const tcStolen = 4

// vrig makes r's bridge VLAN-aware, with the trunk's native VLAN native (0:
// none), on the programs with the VLAN stage.
func vrig(t testing.TB, m tmode, native uint16) *rig {
	r := newRig(t, m, 1024, [4]uint32{})
	err := r.ns.Do(func() error {
		if err := r.dp.SetVLANStage(true); err != nil {
			return err
		}
		ports := []PortInfo{
			{Ifindex: r.port[1], Bridge: 1, Slot: 1, PVID: 10},
			{Ifindex: r.port[2], Bridge: 1, Slot: 2, PVID: 20},
			{Ifindex: r.port[3], Bridge: 1, Slot: 3, PVID: native, Trunk: true, VLANs: []uint16{10, 20}},
		}
		for _, p := range ports {
			if err := r.dp.SetPort(p); err != nil {
				return err
			}
		}
		return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, VLANAware: true, VLANs: []uint16{10, 20}})
	})
	if err != nil {
		t.Fatalf("make the bridge VLAN-aware: %v", err)
	}
	return r
}

// runOut is run, also returning the frame as the program left it.
func (r *rig) runOut(slot int, data []byte) (uint32, []byte) {
	r.t.Helper()
	ret, out, err := r.runOutFlags(slot, data, 0)
	if err != nil {
		r.t.Fatalf("test run: %v", err)
	}
	return ret, out
}

// runOutFlags is runOut with the test run's flags (BPF_F_TEST_*), and its
// error.
func (r *rig) runOutFlags(slot int, data []byte, flags uint32) (uint32, []byte, error) {
	r.t.Helper()
	var ret uint32
	out := make([]byte, len(data)+64)
	prog := r.prog()
	err := r.ns.Do(func() error {
		return onCPU0(func() error {
			opts := &ebpf.RunOptions{Data: data, DataOut: out, Flags: flags}
			if r.m.name == "xdp" {
				ctx := make([]byte, 24)
				binary.LittleEndian.PutUint32(ctx[4:], uint32(len(data)))
				binary.LittleEndian.PutUint32(ctx[12:], r.port[slot])
				opts.Context = ctx
			} else {
				ctx := make([]byte, 44)
				binary.LittleEndian.PutUint32(ctx[40:], r.port[slot])
				opts.Context = ctx
			}
			var err error
			ret, err = prog.Run(opts)
			out = out[:len(opts.DataOut)]
			return err
		})
	})
	return ret, out, err
}

// tci builds a frame with an 802.1Q tag of this TCI (or another TPID).
func tagTCI(dst, src net.HardwareAddr, tpid, tci uint16) []byte {
	b := frame(dst, src, tpid, 4+46)
	binary.BigEndian.PutUint16(b[14:], tci)
	binary.BigEndian.PutUint16(b[16:], 0x0800)
	return b
}

// untag is the frame without its first tag.
func untag(b []byte) []byte {
	return append(append([]byte{}, b[:12]...), b[16:]...)
}

// addTag is the frame with an 802.1Q tag of this TCI after its addresses.
func addTag(b []byte, tci uint16) []byte {
	out := append([]byte{}, b[:12]...)
	out = binary.BigEndian.AppendUint16(out, 0x8100)
	out = binary.BigEndian.AppendUint16(out, tci)
	return append(out, b[12:]...)
}

func (r *rig) vlanStats(vid uint16) tbpf.VLANStats {
	r.t.Helper()
	vs, err := r.dp.VLANs()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, v := range vs {
		if v.Bridge == 1 && v.VID == vid {
			s, err := r.dp.VLANStats(v.Index)
			if err != nil {
				r.t.Fatal(err)
			}
			return s
		}
	}
	r.t.Fatalf("no VLAN %d", vid)
	return tbpf.VLANStats{}
}

func TestVLANIngressDrops(t *testing.T) {
	cases := []struct {
		name   string
		slot   int
		frame  []byte
		reason tbpf.DropReason
	}{
		{"tagged on an access port", 1, tagged(macB, macA, 10), tbpf.TrestleTrDropReasonTR_DROP_VLAN_TAGGED},
		{"untagged on a trunk without native", 3, ipv4(macB, macA), tbpf.TrestleTrDropReasonTR_DROP_VLAN_UNTAGGED},
		{"priority-tagged on a trunk without native", 3, tagTCI(macB, macA, 0x8100, 5<<13), tbpf.TrestleTrDropReasonTR_DROP_VLAN_UNTAGGED},
		{"802.1ad on a trunk without native", 3, tagTCI(macB, macA, 0x88a8, 100), tbpf.TrestleTrDropReasonTR_DROP_VLAN_UNTAGGED},
		{"VLAN the trunk does not carry", 3, tagged(macB, macA, 30), tbpf.TrestleTrDropReasonTR_DROP_VLAN_NOT_CARRIED},
		{"VID 4095", 3, tagged(macB, macA, 4095), tbpf.TrestleTrDropReasonTR_DROP_VLAN_NOT_CARRIED},
	}
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 0)
		for _, c := range cases {
			before := r.drops(c.slot, c.reason)
			r.wantVerdict(r.run(c.slot, c.frame), m.drop, c.name)
			if got := r.drops(c.slot, c.reason) - before; got != 1 {
				t.Errorf("%s: %s drops went up by %d, want 1", c.name, c.reason, got)
			}
		}
		if _, ok := r.lookup(macA); ok {
			t.Errorf("a dropped frame's source was learned")
		}
	})
}

func TestVLANForwarding(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 0)
		flood := m.redirect
		if m.name == "tc" {
			flood = tcStolen // a clone to each member; the original is consumed
		}
		// B tagged 10 on the trunk: learned in VLAN 10 on slot 3; flooded
		// to the VLAN-10 access port only.
		r.wantVerdict(r.run(3, tagged(macA, macB, 10)), flood, "unknown unicast in vlan 10")
		if e, ok := r.lookup(macB); !ok || e.VLAN != 10 || e.Slot != 3 {
			t.Fatalf("B: %+v (found %v), want learned in VLAN 10 on slot 3", e, ok)
		}
		if s := r.vlanStats(10); s.C[tbpf.VLANRxPackets] != 1 || s.C[tbpf.VLANFlooded] != 1 {
			t.Errorf("VLAN 10 after a flood: %+v, want rx 1 flooded 1", s)
		}
		if m.name == "tc" { // clones really leave in the test run
			if r.stats(1).C[tbpf.TxPackets] != 1 || r.stats(2).C[tbpf.TxPackets] != 0 {
				t.Errorf("tc flood of VLAN 10: tx slot 1 %d slot 2 %d, want 1 and 0", r.stats(1).C[tbpf.TxPackets], r.stats(2).C[tbpf.TxPackets])
			}
			if s := r.vlanStats(10); s.C[tbpf.VLANTxPackets] != 1 {
				t.Errorf("VLAN 10 tx %d after a flood to one member, want 1", s.C[tbpf.TxPackets])
			}
		}

		// Untagged from the access port to B: leaves the trunk tagged 10.
		in := ipv4(macB, macA)
		verdict, out := r.runOut(1, in)
		r.wantVerdict(verdict, m.redirect, "access to trunk")
		if m.name == "xdp" && !bytes.Equal(out, addTag(in, 10)) {
			t.Errorf("access to trunk: left as\n%x\nwant\n%x", out, addTag(in, 10))
		}
		if e, ok := r.lookup(macA); !ok || e.VLAN != 10 || e.Slot != 1 {
			t.Errorf("A: %+v (found %v), want learned in VLAN 10 on slot 1", e, ok)
		}
		if s := r.stats(3); s.C[tbpf.TxPackets] != 1 || s.C[tbpf.TxBytes] != uint64(len(in)+4) {
			t.Errorf("trunk tx %d packets %d bytes, want 1 and %d (the tag counts)", s.C[tbpf.TxPackets], s.C[tbpf.TxBytes], len(in)+4)
		}

		// Tagged from the trunk to A: leaves the access port untagged.
		in = tagged(macA, macB, 10)
		verdict, out = r.runOut(3, in)
		r.wantVerdict(verdict, m.redirect, "trunk to access")
		if m.name == "xdp" && !bytes.Equal(out, untag(in)) {
			t.Errorf("trunk to access: left as\n%x\nwant\n%x", out, untag(in))
		}

		// Priority-tagged (VID 0, PCP 5) on the access port joins VLAN 10
		// and keeps its priority on the trunk.
		in = tagTCI(macB, macA, 0x8100, 5<<13)
		verdict, out = r.runOut(1, in)
		r.wantVerdict(verdict, m.redirect, "priority-tagged")
		if want := tagTCI(macB, macA, 0x8100, 5<<13|10); m.name == "xdp" && !bytes.Equal(out, want) {
			t.Errorf("priority-tagged to trunk: left as\n%x\nwant\n%x", out, want)
		}
		// An 802.1ad frame on the access port: VLAN 10, its bytes intact,
		// a C-tag pushed outside its S-tag on the trunk.
		in = tagTCI(macB, macA, 0x88a8, 100)
		verdict, out = r.runOut(1, in)
		r.wantVerdict(verdict, m.redirect, "802.1ad")
		if m.name == "xdp" && !bytes.Equal(out, addTag(in, 10)) {
			t.Errorf("802.1ad to trunk: left as\n%x\nwant\n%x", out, addTag(in, 10))
		}

		// The same MAC in VLAN 20 is another entry; to A in VLAN 20 is
		// unknown, so it floods VLAN 20 (to slot 2).
		r.wantVerdict(r.run(3, tagged(macA, macB, 20)), flood, "B in VLAN 20")
		n := 0
		es, _ := r.dp.FDB()
		for _, e := range es {
			if e.MAC.String() == macB.String() {
				n++
			}
		}
		if n != 2 {
			t.Errorf("B has %d entries, want 2 (VLANs 10 and 20)", n)
		}
	})
}

// Known unicast to a port that does not carry the frame's VLAN (only a
// static entry can say so) is dropped, never sent into another VLAN.
func TestVLANEgressMismatch(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 0)
		err := r.ns.Do(func() error {
			return r.dp.AddFDB(FDBEntry{Bridge: 1, VLAN: 10, MAC: macD, Ifindex: r.port[2], Slot: 2, Static: true})
		})
		if err != nil {
			t.Fatal(err)
		}
		r.wantVerdict(r.run(1, ipv4(macD, macA)), m.drop, "to a port outside the VLAN")
		if got := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_VLAN_EGRESS); got != 1 {
			t.Errorf("vlan_egress drops %d, want 1", got)
		}
	})
}

// Native VLAN: untagged in on the trunk is VLAN 10; VLAN 10 leaves the
// trunk untagged, and a frame tagged with the native VID is taken in too.
func TestVLANNative(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 10)
		flood := m.redirect
		if m.name == "tc" {
			flood = tcStolen
		}
		r.wantVerdict(r.run(3, ipv4(macA, macB)), flood, "untagged on a trunk with native")
		if e, ok := r.lookup(macB); !ok || e.VLAN != 10 {
			t.Fatalf("B: %+v, want learned in the native VLAN 10", e)
		}
		in := ipv4(macB, macA)
		verdict, out := r.runOut(1, in)
		r.wantVerdict(verdict, m.redirect, "access to native")
		if m.name == "xdp" && !bytes.Equal(out, in) {
			t.Errorf("to the native VLAN: left as\n%x\nwant it untagged\n%x", out, in)
		}
		in = tagged(macA, macB, 10)
		verdict, out = r.runOut(3, in)
		r.wantVerdict(verdict, m.redirect, "native VID tagged")
		if m.name == "xdp" && !bytes.Equal(out, untag(in)) {
			t.Errorf("native VID tagged to access: left as\n%x\nwant\n%x", out, untag(in))
		}
	})
}

// A bridge that is not VLAN-aware behaves the same under the programs with
// the stage: learning keyed by whatever outer VID the frame carries.
func TestVLANStageUnawareBridge(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		if err := r.ns.Do(func() error { return r.dp.SetVLANStage(true) }); err != nil {
			t.Fatal(err)
		}
		in := tagged(macB, macA, 30)
		r.wantVerdict(r.run(1, in), m.redirect, "tagged on an unaware bridge")
		if e, ok := r.lookup(macA); !ok || e.VLAN != 30 {
			t.Errorf("A: %+v, want learned with the frame's VID 30", e)
		}
		verdict, out := r.runOut(2, tagged(macA, macB, 30))
		r.wantVerdict(verdict, m.redirect, "known unicast")
		if want := tagged(macA, macB, 30); m.name == "xdp" && !bytes.Equal(out, want) {
			t.Errorf("an unaware bridge changed the frame:\n%x\nwant\n%x", out, want)
		}
	})
}

// At tc the kernel has taken a received tag out of the frame into the
// skb's metadata (metaTagger puts it there).
func TestVLANTagInMetadata(t *testing.T) {
	r := vrig(t, modes[1], 0)
	tag := r.metaTagger()
	run := func(vid uint16, slot int, data []byte) uint32 { return tag(0x8100, vid, slot, data) }
	// Tagged 10 in metadata on the trunk: VLAN 10, learned there.
	if got := run(10, 3, ipv4(macA, macB)); got != tcStolen {
		t.Fatalf("metadata tag 10 on the trunk: verdict %d, want %d (flood)", got, tcStolen)
	}
	if e, ok := r.lookup(macB); !ok || e.VLAN != 10 || e.Slot != 3 {
		t.Errorf("B: %+v (found %v), want learned in VLAN 10 on slot 3", e, ok)
	}
	if s := r.stats(3); s.C[tbpf.RxBytes] != uint64(len(ipv4(macA, macB))+4) {
		t.Errorf("rx bytes %d, want %d: a tag in metadata counts as on the wire", s.C[tbpf.RxBytes], len(ipv4(macA, macB))+4)
	}
	// Metadata tag 30 on the trunk: not carried; tag 10 on an access port: dropped.
	if got := run(30, 3, ipv4(macA, macB)); got != tcShot {
		t.Errorf("metadata tag 30: verdict %d, want drop", got)
	}
	if r.drops(3, tbpf.TrestleTrDropReasonTR_DROP_VLAN_NOT_CARRIED) != 1 {
		t.Errorf("metadata tag 30 not counted as vlan_not_carried")
	}
	if got := run(10, 1, ipv4(macB, macA)); got != tcShot {
		t.Errorf("metadata tag on an access port: verdict %d, want drop", got)
	}
	if r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_VLAN_TAGGED) != 1 {
		t.Errorf("metadata tag on an access port not counted as vlan_tagged_on_access")
	}
	// To B from the access port: forwarded to the trunk.
	if got := r.run(1, ipv4(macB, macA)); got != tcRedirect {
		t.Errorf("access to trunk after a metadata-tag learn: verdict %d, want redirect", got)
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// BenchmarkVLAN is what the VLAN stage costs a frame, through
// BPF_PROG_TEST_RUN with a repeat count, on the rig's bridge: unaware under
// the programs without the stage (what every switch without VLANs runs),
// unaware under the programs with it (another bridge is VLAN-aware), and
// VLAN-aware forwarding that needs no tag written (the trunk's native VLAN
// to an access port). A repeated test run hands each repetition the frame
// the last one left, so a push or pop would be measured once and then the
// drop of the changed frame: those are measured by the lab (vlan-overhead).
//
//	go test -run '^$' -bench VLAN -count 3 ./internal/datapath
func BenchmarkVLAN(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			for _, c := range []struct {
				name   string
				stage  bool
				aware  bool
				slot   int
				frame  []byte
				native uint16
			}{
				{"unaware-no-stage", false, false, 1, ipv4(macB, macA), 0},
				{"unaware-stage", true, false, 1, ipv4(macB, macA), 0},
				{"aware-untagged", true, true, 3, ipv4(macA, macB), 10},
				{"aware-push", true, true, 1, ipv4(macB, macA), 0},
				{"aware-pop", true, true, 3, tagged(macA, macB, 10), 0},
			} {
				b.Run(c.name, func(b *testing.B) {
					var r *rig
					if c.aware {
						r = vrig(b, m, c.native)
					} else {
						r = newRig(b, m, 1024, [4]uint32{})
						if c.stage {
							if err := r.ns.Do(func() error { return r.dp.SetVLANStage(true) }); err != nil {
								b.Fatal(err)
							}
						}
					}
					// Unaware: A on slot 1, B on slot 2. Aware: A on the
					// access port of VLAN 10, B on the trunk (tagged 10,
					// or untagged in its native VLAN 10).
					if c.aware {
						r.run(1, ipv4(bcast, macA))
						if c.native != 0 {
							r.run(3, ipv4(bcast, macB))
						} else {
							r.run(3, tagged(bcast, macB, 10))
						}
					} else {
						r.run(1, ipv4(bcast, macA))
						r.run(2, ipv4(bcast, macB))
					}
					b.ResetTimer()
					per := r.bench(c.slot, c.frame, b.N)
					b.ReportMetric(float64(per.Nanoseconds()), "ns/frame")
				})
			}
		})
	}
}
