package datapath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cilium/ebpf/btf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// A counter appended to enum tr_counter grows tr_port_stats.c by one, which
// moves every drop counter 8 bytes on in the value. A datapath pinned by the
// build before keeps every count: the copy goes by path (drops[3] to
// drops[3]), not by offset, and only the new counter starts at zero.
func TestStatsMigrateWhenACounterIsAppended(t *testing.T) {
	spec, err := tbpf.LoadTrestle()
	if err != nil {
		t.Fatal(err)
	}
	ms := spec.Maps[tbpf.TrestleMapStats]
	to, err := layoutOf(ms, ms.Flags)
	if err != nil {
		t.Fatal(err)
	}
	u64 := &btf.Int{Name: "__u64", Size: 8}
	arr := func(n uint32) *btf.Array {
		return &btf.Array{Index: &btf.Int{Name: "int", Size: 4}, Type: u64, Nelems: n}
	}
	// This build's value with one counter fewer: the layout it migrates from.
	nc, nd := uint32(tbpf.NumCounters-1), uint32(tbpf.NumDrops)
	oldType := &btf.Struct{Name: "tr_port_stats", Size: (nc + nd) * 8, Members: []btf.Member{
		{Name: "c", Type: arr(nc)},
		{Name: "drops", Type: arr(nd), Offset: btf.Bits(nc * 8 * 8)},
	}}
	from, err := describe(oldType, oldType.Size)
	if err != nil {
		t.Fatal(err)
	}
	conv := newConverter(from, to.Value, legacyPaths(tbpf.TrestleMapStats))
	if len(conv.dropped) != 0 || len(conv.zeroed) != 1 || conv.zeroed[0] != fmt.Sprintf("c[%d]", nc) {
		t.Fatalf("conversion: %s, want only c[%d] new", conv.summary(), nc)
	}
	old := make([]byte, oldType.Size)
	for i := uint32(0); i < nc+nd; i++ {
		binary.LittleEndian.PutUint64(old[i*8:], uint64(i+1))
	}
	got := conv.convert(old)
	if len(got) != int(to.ValueSize) {
		t.Fatalf("new value of %d bytes, want %d", len(got), to.ValueSize)
	}
	for i := uint32(0); i < nc+1+nd; i++ {
		want := uint64(0) // the new counter
		switch {
		case i < nc:
			want = uint64(i + 1)
		case i > nc:
			want = uint64(i) // drops[i-nc-1], which was at i-1
		}
		if v := binary.LittleEndian.Uint64(got[i*8:]); v != want {
			t.Errorf("word %d of the new value: %d, want %d", i, v, want)
		}
	}
}

// A port pinned before issue 29 has 16 bits of flags and no pad; this
// build's has 32 bits after a pad. Adoption copies the flags into the low
// bytes of the wider field, so a locked port stays locked from the first
// frame the new programs see, not only once the daemon writes its ports.
func TestPortFlagsWidenOnMigration(t *testing.T) {
	spec, err := tbpf.LoadTrestle()
	if err != nil {
		t.Fatal(err)
	}
	ms := spec.Maps[tbpf.TrestleMapPortIndex]
	to, err := layoutOf(ms, ms.Flags)
	if err != nil {
		t.Fatal(err)
	}
	u16 := &btf.Int{Name: "__u16", Size: 2}
	u32 := &btf.Int{Name: "__u32", Size: 4}
	oldType := &btf.Struct{Name: "tr_port", Size: 12, Members: []btf.Member{
		{Name: "bridge", Type: u16},
		{Name: "slot", Type: u16, Offset: btf.Bits(16)},
		{Name: "max_macs", Type: u32, Offset: btf.Bits(32)},
		{Name: "pvid", Type: u16, Offset: btf.Bits(64)},
		{Name: "flags", Type: u16, Offset: btf.Bits(80)},
	}}
	from, err := describe(oldType, oldType.Size)
	if err != nil {
		t.Fatal(err)
	}
	conv := newConverter(from, to.Value, nil)
	// New since: the pad, and via_dev (an end of a way in's device, 0 in
	// a port's own entry).
	if len(conv.dropped) != 0 || len(conv.zeroed) != 2 || conv.zeroed[0] != "pad" || conv.zeroed[1] != "via_dev" {
		t.Fatalf("conversion: %s, want only the pad and via_dev new", conv.summary())
	}
	old := make([]byte, 12)
	binary.LittleEndian.PutUint16(old[0:], 3)
	binary.LittleEndian.PutUint16(old[2:], 7)
	binary.LittleEndian.PutUint32(old[4:], 100)
	binary.LittleEndian.PutUint16(old[8:], 10)
	binary.LittleEndian.PutUint16(old[10:], uint16(tbpf.PortLocked|tbpf.PortTrunk))
	var p tbpf.Port
	if err := binary.Read(bytes.NewReader(conv.convert(old)), binary.LittleEndian, &p); err != nil {
		t.Fatal(err)
	}
	if p.Bridge != 3 || p.Slot != 7 || p.MaxMacs != 100 || p.Pvid != 10 || p.Flags != tbpf.PortLocked|tbpf.PortTrunk {
		t.Errorf("migrated port %+v, want bridge 3 slot 7 max_macs 100 pvid 10 flags locked|trunk", p)
	}
}
