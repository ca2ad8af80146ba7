package datapath

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Double tags and native_tagged trunks (issue 29, bpf/lib/vlan.h): on the
// rig of vrig (slot 1 access VLAN 10, slot 2 access VLAN 20, slot 3 a trunk
// of 10 and 20), a frame with a second tag behind a priority tag or an
// S-tag on an access port is dropped as double_tagged unless the port is a
// qinq port; a trunk's frames are not checked; a native_tagged trunk sends
// its native VLAN tagged.

// stack is the frame with one more tag (of this TPID and TCI) outside the
// others, right after its addresses.
func stack(b []byte, tpid, tci uint16) []byte {
	out := append([]byte{}, b[:12]...)
	out = binary.BigEndian.AppendUint16(out, tpid)
	out = binary.BigEndian.AppendUint16(out, tci)
	return append(out, b[12:]...)
}

// vport is the rig's port in slot as vrig made it (the trunk's native
// VLAN native), with edit applied.
func (r *rig) vport(slot int, native uint16, edit func(*PortInfo)) PortInfo {
	ps := []PortInfo{
		{Ifindex: r.port[1], Bridge: 1, Slot: 1, PVID: 10},
		{Ifindex: r.port[2], Bridge: 1, Slot: 2, PVID: 20},
		{Ifindex: r.port[3], Bridge: 1, Slot: 3, PVID: native, Trunk: true, VLANs: []uint16{10, 20}},
	}
	p := ps[slot-1]
	edit(&p)
	return p
}

// doubleTagged are frames from A to B with a second tag behind an outer
// one that names no VLAN, each with the inner tag of VLAN 20 or an S-tag.
func doubleTagged() []struct {
	name  string
	frame []byte
} {
	c20 := tagged(macB, macA, 20)
	s20 := tagTCI(macB, macA, 0x88a8, 20)
	return []struct {
		name  string
		frame []byte
	}{
		{"priority tag, then C-tag 20", stack(c20, 0x8100, 5<<13)},
		{"priority tag, then an S-tag", stack(s20, 0x8100, 0)},
		{"S-tag, then C-tag 20", stack(c20, 0x88a8, 100)},
		{"S-tag of VID 0, then C-tag 20", stack(c20, 0x88a8, 0)},
		{"two S-tags", stack(s20, 0x88a8, 100)},
		{"priority tag, then C-tag 0", stack(tagTCI(macB, macA, 0x8100, 0), 0x8100, 0)},
	}
}

func TestVLANDoubleTaggedOnAccess(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 10)
		for _, c := range doubleTagged() {
			before := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_DOUBLE_TAGGED)
			r.wantVerdict(r.run(1, c.frame), m.drop, c.name)
			if got := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_DOUBLE_TAGGED) - before; got != 1 {
				t.Errorf("%s: double_tagged drops went up by %d, want 1", c.name, got)
			}
		}
		// An outer C-tag with a VID is no VLAN of an access port, whatever
		// follows it: dropped as before.
		r.wantVerdict(r.run(1, stack(tagged(macB, macA, 20), 0x8100, 10)), m.drop, "C-tag 10, then C-tag 20")
		if got := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_VLAN_TAGGED); got != 1 {
			t.Errorf("C-tag 10 then C-tag 20 on an access port: vlan_tagged_on_access %d, want 1", got)
		}
		if _, ok := r.lookup(macA); ok {
			t.Errorf("a double-tagged frame's source was learned")
		}
		if s := r.vlanStats(10); s.C[tbpf.VLANRxPackets] != 0 {
			t.Errorf("VLAN 10 counted %d frames in, want 0: a dropped frame has no VLAN", s.C[tbpf.VLANRxPackets])
		}
		// One tag behind nothing is no second tag: a priority-tagged and
		// an S-tagged frame still join VLAN 10.
		r.wantVerdict(r.run(1, tagTCI(macB, macA, 0x8100, 5<<13)), flood(m), "priority-tagged")
		r.wantVerdict(r.run(1, tagTCI(macB, macA, 0x88a8, 100)), flood(m), "S-tagged")
		if e, ok := r.lookup(macA); !ok || e.VLAN != 10 || e.Slot != 1 {
			t.Errorf("A: %+v (found %v), want learned in VLAN 10 on slot 1", e, ok)
		}
	})
}

// flood is the verdict of a flood: tc sends a clone to each port and
// consumes the original.
func flood(m tmode) uint32 {
	if m.name == "tc" {
		return tcStolen
	}
	return m.redirect
}

// A qinq port carries double-tagged frames as every access port did before:
// into its VLAN with their tags, the outer one rewritten (a priority tag)
// or a C-tag pushed outside it (an S-tag) on the trunk.
func TestVLANDoubleTaggedQinQ(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 0)
		r.setPort(r.vport(1, 0, func(p *PortInfo) { p.Policy.Flags |= tbpf.TrestleTrPortFlagsTR_PORT_QINQ }))
		// B known on the trunk in VLAN 10.
		r.wantVerdict(r.run(3, tagged(macA, macB, 10)), flood(m), "B in VLAN 10")
		for _, c := range doubleTagged() {
			verdict, out := r.runOut(1, c.frame)
			r.wantVerdict(verdict, m.redirect, c.name)
			want := addTag(c.frame, 10) // an S-tag: a C-tag of VLAN 10 outside it
			if binary.BigEndian.Uint16(c.frame[12:]) == 0x8100 {
				want = append([]byte{}, c.frame...) // a priority tag: its VID becomes 10
				binary.BigEndian.PutUint16(want[14:], binary.BigEndian.Uint16(c.frame[14:])&0xf000|10)
			}
			if m.name == "xdp" && !bytes.Equal(out, want) {
				t.Errorf("%s from a qinq port to the trunk: left as\n%x\nwant\n%x", c.name, out, want)
			}
		}
		if n := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_DOUBLE_TAGGED); n != 0 {
			t.Errorf("a qinq port dropped %d frames as double_tagged", n)
		}
		if e, ok := r.lookup(macA); !ok || e.VLAN != 10 || e.Slot != 1 {
			t.Errorf("A: %+v (found %v), want learned in VLAN 10 on slot 1", e, ok)
		}
		// The access port's other rules stay: a C-tag with a VID is dropped.
		r.wantVerdict(r.run(1, tagged(macB, macA, 10)), m.drop, "C-tag 10 on a qinq port")
	})
}

// A trunk's frame whose outer tag is one of its VLANs is in that VLAN,
// whatever follows: an inner tag is the VLAN's payload, and leaves an
// access port as the frame's outer tag (docs/switching.md, "Double tags").
// Behind a priority tag or an S-tag on a trunk with a native VLAN, a
// second tag is not checked either.
func TestVLANDoubleTaggedOnTrunk(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 20)
		r.wantVerdict(r.run(1, ipv4(macB, macA)), flood(m), "A in VLAN 10")
		in := stack(tagged(macA, macB, 20), 0x8100, 10)
		verdict, out := r.runOut(3, in)
		r.wantVerdict(verdict, m.redirect, "C-tag 10, then C-tag 20, on the trunk")
		if m.name == "xdp" && !bytes.Equal(out, untag(in)) {
			t.Errorf("trunk to access: left as\n%x\nwant\n%x", out, untag(in))
		}
		r.wantVerdict(r.run(3, stack(tagged(bcast, macC, 10), 0x88a8, 7)), flood(m), "S-tag then C-tag 10 on the trunk, native 20")
		if e, ok := r.lookup(macC); !ok || e.VLAN != 20 {
			t.Errorf("C: %+v (found %v), want learned in the native VLAN 20", e, ok)
		}
		if n := r.drops(3, tbpf.TrestleTrDropReasonTR_DROP_DOUBLE_TAGGED); n != 0 {
			t.Errorf("the trunk dropped %d frames as double_tagged", n)
		}
	})
}

// The decision memo holds no S-tagged frame: one of VID 0 has the key of
// an untagged frame, whose memo would send it on unchecked.
func TestVLANDoubleTaggedAfterMemo(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 0)
		r.wantVerdict(r.run(3, tagged(macA, macB, 10)), flood(m), "B in VLAN 10")
		for i := 0; i < 3; i++ {
			r.wantVerdict(r.run(1, ipv4(macB, macA)), m.redirect, "A to B, untagged")
		}
		r.wantVerdict(r.run(1, stack(tagged(macB, macA, 20), 0x88a8, 0)), m.drop, "S-tag 0 then C-tag 20, after a memo of A to B")
		if got := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_DOUBLE_TAGGED); got != 1 {
			t.Errorf("double_tagged %d after a memo, want 1", got)
		}
		r.wantVerdict(r.run(1, tagTCI(macB, macA, 0x88a8, 0)), m.redirect, "S-tag 0 alone after the memo")
	})
}

// native_tagged: the trunk's native VLAN leaves it tagged, by the pipeline
// and by the memo, and untagged frames on it still join the native VLAN.
func TestVLANNativeTagged(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 10)
		r.setPort(r.vport(3, 10, func(p *PortInfo) { p.Policy.Flags |= tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED }))
		r.wantVerdict(r.run(3, ipv4(macA, macB)), flood(m), "untagged on a native_tagged trunk")
		if e, ok := r.lookup(macB); !ok || e.VLAN != 10 || e.Slot != 3 {
			t.Fatalf("B: %+v (found %v), want learned in the native VLAN 10 on slot 3", e, ok)
		}
		if m.name == "tc" && r.stats(1).C[tbpf.TxPackets] != 1 {
			t.Errorf("the untagged frame's flood reached the VLAN 10 access port %d times, want 1", r.stats(1).C[tbpf.TxPackets])
		}
		in := ipv4(macB, macA)
		for i := 0; i < 3; i++ { // the pipeline, then the memo
			verdict, out := r.runOut(1, in)
			r.wantVerdict(verdict, m.redirect, "access to the native VLAN")
			if m.name == "xdp" && !bytes.Equal(out, addTag(in, 10)) {
				t.Errorf("frame %d to the native VLAN of a native_tagged trunk: left as\n%x\nwant tagged\n%x", i, out, addTag(in, 10))
			}
		}
		if s := r.stats(3); s.C[tbpf.TxBytes] != 3*uint64(len(in)+4) {
			t.Errorf("trunk tx bytes %d, want %d: each frame left with a tag", s.C[tbpf.TxBytes], 3*(len(in)+4))
		}
		// Tagged with the native VID: taken in, and out of the access
		// port untagged.
		in = tagged(macA, macB, 10)
		verdict, out := r.runOut(3, in)
		r.wantVerdict(verdict, m.redirect, "native VID tagged")
		if m.name == "xdp" && !bytes.Equal(out, untag(in)) {
			t.Errorf("native VID tagged to access: left as\n%x\nwant\n%x", out, untag(in))
		}
		// A priority-tagged frame joins the native VLAN and leaves the
		// access port untagged.
		verdict, out = r.runOut(3, tagTCI(macA, macB, 0x8100, 3<<13))
		r.wantVerdict(verdict, m.redirect, "priority-tagged on the trunk")
		if want := untag(tagTCI(macA, macB, 0x8100, 3<<13)); m.name == "xdp" && !bytes.Equal(out, want) {
			t.Errorf("priority-tagged to access: left as\n%x\nwant\n%x", out, want)
		}
	})
}

// metaTagger runs the tc build on a frame whose outer tag (of a TPID and
// TCI) is in the skb's metadata, as the kernel holds a received tag. A test
// run cannot set that metadata, so a small program puts the tag there
// (bpf_skb_vlan_push on an skb with none does) and tail calls the switch.
func (r *rig) metaTagger() func(proto, tci uint16, slot int, data []byte) uint32 {
	t := r.t
	progs, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.ProgramArray, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { progs.Close() })
	if err := progs.Put(uint32(0), program(t, r.dp, modes[1])); err != nil {
		t.Fatal(err)
	}
	return func(proto, tci uint16, slot int, data []byte) uint32 {
		t.Helper()
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Type:    ebpf.SchedCLS,
			License: "GPL",
			Instructions: asm.Instructions{
				asm.Mov.Reg(asm.R6, asm.R1),
				asm.Mov.Imm(asm.R2, int32(htons(proto))),
				asm.Mov.Imm(asm.R3, int32(tci)),
				asm.FnSkbVlanPush.Call(),
				asm.Mov.Reg(asm.R1, asm.R6),
				asm.LoadMapPtr(asm.R2, progs.FD()),
				asm.Mov.Imm(asm.R3, 0),
				asm.FnTailCall.Call(),
				asm.Mov.Imm(asm.R0, 99), // the tail call failed
				asm.Return(),
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var ret uint32
		err = r.ns.Do(func() error {
			return onCPU0(func() error {
				ctx := make([]byte, 44)
				binary.LittleEndian.PutUint32(ctx[40:], r.port[slot])
				var err error
				ret, err = p.Run(&ebpf.RunOptions{Data: data, Context: ctx})
				return err
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return ret
	}
}

// At tc the kernel holds the outer tag in the skb's metadata, and the
// bytes start with the second one: a priority tag or an S-tag there with
// a C-tag in the bytes is double-tagged too.
func TestVLANDoubleTaggedInMetadata(t *testing.T) {
	r := vrig(t, modes[1], 0)
	run := r.metaTagger()
	c20 := tagged(macB, macA, 20)
	for _, c := range []struct {
		name       string
		proto, tci uint16
	}{{"priority tag in metadata, C-tag 20 in the bytes", 0x8100, 5 << 13}, {"S-tag in metadata, C-tag 20 in the bytes", 0x88a8, 100}} {
		before := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_DOUBLE_TAGGED)
		if got := run(c.proto, c.tci, 1, c20); got != tcShot {
			t.Errorf("%s: verdict %d, want drop", c.name, got)
		}
		if got := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_DOUBLE_TAGGED) - before; got != 1 {
			t.Errorf("%s: double_tagged went up by %d, want 1", c.name, got)
		}
	}
	// One tag, in metadata: VLAN 10.
	if got := run(0x88a8, 100, 1, ipv4(bcast, macA)); got != tcStolen {
		t.Errorf("S-tag in metadata alone: verdict %d, want a flood", got)
	}
	if e, ok := r.lookup(macA); !ok || e.VLAN != 10 {
		t.Errorf("A: %+v (found %v), want learned in VLAN 10", e, ok)
	}
}
