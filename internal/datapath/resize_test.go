package datapath

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/instance"
	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/testutil"
)

// TestResizeLeavesOtherPrograms: a resize loads the entry points again and
// leaves the devmap programs and the overlay's way in running as they are.
// That holds while they read neither the table a resize replaces nor a
// load-time constant (.rodata) nor the generations (.bss); a program that
// comes to read one must be moved by Resize too (its devmap entries
// rewritten, or its link updated).
func TestResizeLeavesOtherPrograms(t *testing.T) {
	spec, err := tbpf.LoadTrestle()
	if err != nil {
		t.Fatal(err)
	}
	entry := []string{tbpf.TrestleProgTrestleXdp, tbpf.TrestleProgTrestleTc, tbpf.TrestleProgTrestleXdpFilter, tbpf.TrestleProgTrestleTcFilter}
	off := append([]string{".rodata", ".bss"}, fdbGroup...)
	kept := 0
	for name, p := range spec.Programs {
		if slices.Contains(entry, name) {
			continue
		}
		kept++
		for _, ins := range p.Instructions {
			if ref := ins.Reference(); ins.IsLoadFromMap() && slices.Contains(off, ref) {
				t.Errorf("program %s reads %s: a resize would leave it on the old one", name, ref)
			}
		}
	}
	if kept < 3 {
		t.Errorf("%d programs besides the entry points, want trestle_vlan_egress, trestle_patch_egress and trestle_via at least", kept)
	}
}

// macN is the nth of a run of learned addresses.
func macN(n int) net.HardwareAddr { return net.HardwareAddr{0x02, 0xee, 0, 0, byte(n >> 8), byte(n)} }

// TestResizeGrowsTable: a table of 1024 entries, full, grown to 4096 with a
// shorter refresh while a port is attached: the entries, statics and
// counters are kept, an address the old program learns after the copy is
// carried over, the counts are the table's, the link moves in place, and
// the new program learns what the old table could not hold and refreshes
// as often as it is now told.
func TestResizeGrowsTable(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 8192, [4]uint32{})
		r.run(1, ipv4(bcast, macA))
		r.wantVerdict(r.run(2, ipv4(macA, macB)), m.redirect, "A before the resize")
		if err := r.dp.AddFDB(FDBEntry{Bridge: 1, MAC: macC, Ifindex: r.port[3], Slot: 3, Static: true}); err != nil {
			t.Fatal(err)
		}
		// More sources than the table holds: the rest go unlearned.
		for i := 0; i < 1100; i++ {
			r.run(3, ipv4(bcast, macN(i)))
		}
		if full := r.stats(3).C[tbpf.UnlearnedFull]; full == 0 {
			t.Fatalf("a table of 1024 took 1100 sources and more: unlearned_full %d", full)
		}
		// Room for one, which the old program takes after the copy.
		if _, err := r.dp.DelFDB(1, 0, macN(0)); err != nil {
			t.Fatal(err)
		}
		before := map[int]tbpf.PortStats{}
		for slot := 1; slot <= 3; slot++ {
			before[slot] = r.stats(slot)
		}
		var a *Attachment
		am := mode.XDP
		if m.name == "tc" {
			am = mode.TC
		}
		if err := r.ns.Do(func() (err error) { a, err = r.dp.Attach(int(r.port[1]), am, HookLink); return }); err != nil {
			t.Fatal(err)
		}
		defer a.Detach()
		was, _ := a.ProgramID()
		old := r.prog()

		rz, err := r.dp.Resize(Sizes{FDBCapacity: 4096, Refresh: time.Millisecond})
		if err != nil {
			t.Fatalf("resize: %v", err)
		}
		if s := r.dp.Sizes(); s.FDBCapacity != 4096 || s.Refresh != time.Millisecond {
			t.Errorf("sizes after the resize: %v", s)
		}
		// The old program still runs where it was not moved yet: what it
		// learns now is in the old table only, until Keep.
		r.runProg(old, 2, ipv4(bcast, macD))
		if changed, err := r.dp.Upgrade(a); err != nil || !changed {
			t.Fatalf("move the attachment to the new program: changed %v, %v", changed, err)
		}
		if now, _ := a.ProgramID(); now == was {
			t.Errorf("the attachment runs program %d still", now)
		}
		if err := rz.Keep(); err != nil {
			t.Fatalf("keep: %v", err)
		}
		if rz.Carried != 1 {
			t.Errorf("%d addresses carried over, want 1 (D)", rz.Carried)
		}

		for _, w := range []struct {
			mac    net.HardwareAddr
			slot   uint16
			static bool
		}{{macA, 1, false}, {macB, 2, false}, {macC, 3, true}, {macD, 2, false}, {macN(1), 3, false}} {
			if e, ok := r.lookup(w.mac); !ok || e.Slot != w.slot || e.Static != w.static {
				t.Errorf("%s after the resize: %+v (found %v), want slot %d static %v", w.mac, e, ok, w.slot, w.static)
			}
		}
		checkCounts(t, r)
		for slot := 1; slot <= 3; slot++ {
			if s := r.stats(slot); s.C[tbpf.RxPackets] < before[slot].C[tbpf.RxPackets] {
				t.Errorf("port %d's counters went back: rx %d, was %d", slot, s.C[tbpf.RxPackets], before[slot].C[tbpf.RxPackets])
			}
		}

		// The new program forwards on the carried table and counts on.
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.redirect, "A to B after the resize")
		if s := r.stats(2); s.C[tbpf.TxPackets] != before[2].C[tbpf.TxPackets]+1 {
			t.Errorf("port 2 tx %d, want %d", s.C[tbpf.TxPackets], before[2].C[tbpf.TxPackets]+1)
		}
		if s := r.stats(1); s.C[tbpf.RxPackets] != before[1].C[tbpf.RxPackets]+1 {
			t.Errorf("port 1 rx %d, want %d", s.C[tbpf.RxPackets], before[1].C[tbpf.RxPackets]+1)
		}
		// The sources the old table had no room for are learned now.
		full := r.stats(3).C[tbpf.UnlearnedFull]
		for i := 0; i < 1100; i++ {
			r.run(3, ipv4(bcast, macN(i)))
		}
		if got := r.stats(3).C[tbpf.UnlearnedFull]; got != full {
			t.Errorf("the grown table refused %d sources", got-full)
		}
		if n, _ := r.dp.PortMACs(3); n != 1100 {
			t.Errorf("port 3 counts %d addresses, want 1100", n)
		}
		checkCounts(t, r)
		// Timestamps are refreshed every millisecond now, not every hour.
		time.Sleep(30 * time.Millisecond)
		r.run(1, ipv4(macB, macA))
		if e, _ := r.lookup(macA); e.Age > 20*time.Millisecond {
			t.Errorf("A's entry is %v old after a frame from A: the refresh is still the loaded one", e.Age)
		}
	})
}

// checkCounts: the address counts are what the table holds.
func checkCounts(t *testing.T, r *rig) {
	t.Helper()
	es, err := r.dp.FDB()
	if err != nil {
		t.Fatal(err)
	}
	ports, bridges := map[uint16]int{}, map[uint16]int{}
	for _, e := range es {
		if !e.Static {
			ports[e.Slot]++
			bridges[e.Bridge]++
		}
	}
	for slot := uint16(1); slot <= 3; slot++ {
		if n, err := r.dp.PortMACs(slot); err != nil || n != ports[slot] {
			t.Errorf("port %d counts %d addresses (%v), the table holds %d", slot, n, err, ports[slot])
		}
	}
	if n, err := r.dp.BridgeMACs(1); err != nil || n != bridges[1] {
		t.Errorf("the bridge counts %d addresses (%v), the table holds %d", n, err, bridges[1])
	}
}

// TestResizeUndo: a resize undone gives back the programs and the table of
// before; what the new program learned meanwhile is gone, and counted gone.
func TestResizeUndo(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		r.run(1, ipv4(bcast, macA))
		old := r.prog()
		rz, err := r.dp.Resize(Sizes{FDBCapacity: 2048, Refresh: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if r.prog() == old {
			t.Fatal("the entry point attachments get is the old one after a resize")
		}
		r.run(2, ipv4(bcast, macB)) // learned in the new table only
		if err := rz.Undo(); err != nil {
			t.Fatalf("undo: %v", err)
		}
		if r.prog() != old {
			t.Error("the entry point attachments get is not the old one after an undo")
		}
		if s := r.dp.Sizes(); s.FDBCapacity != 1024 || s.Refresh != time.Hour {
			t.Errorf("sizes after the undo: %v", s)
		}
		if _, ok := r.lookup(macA); !ok {
			t.Error("A is gone after the undo")
		}
		if _, ok := r.lookup(macB); ok {
			t.Error("B, learned by the new program, is in the old table")
		}
		checkCounts(t, r)
		// A resize after the undo starts afresh.
		rz, err = r.dp.Resize(Sizes{FDBCapacity: 2048})
		if err != nil {
			t.Fatal(err)
		}
		if err := rz.Keep(); err != nil {
			t.Fatal(err)
		}
		if s := r.dp.Sizes(); s.FDBCapacity != 2048 || s.Refresh != time.Hour {
			t.Errorf("sizes after a resize of the table alone: %v", s)
		}
		// Never smaller: what the table holds must fit.
		if rz, err = r.dp.Resize(Sizes{FDBCapacity: 16}); err != nil {
			t.Fatal(err)
		}
		_ = rz.Keep()
		if got := r.dp.FDBCapacity(); got != 2048 {
			t.Errorf("a resize asked for 16 entries made a table of %d, want 2048 kept", got)
		}
	})
}

// TestResizeWalkSpansIt: a walk of the table that a resize overtakes ends on
// the table it began on, whole, and the table it read is closed after it.
func TestResizeWalkSpansIt(t *testing.T) {
	r := newRig(t, modes[0], 4096, [4]uint32{})
	rz, err := r.dp.Resize(Sizes{FDBCapacity: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if err := rz.Keep(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3*FDBChunk/2; i++ {
		r.run(1, ipv4(bcast, macN(i)))
	}
	n, chunks := 0, 0
	err = r.dp.WalkFDB(func(es []FDBEntry) error {
		if chunks++; chunks == 1 {
			rz, err := r.dp.Resize(Sizes{FDBCapacity: 8192})
			if err != nil {
				return err
			}
			if err := rz.Keep(); err != nil {
				return err
			}
		}
		n += len(es)
		return nil
	})
	if err != nil || n != 3*FDBChunk/2 || chunks < 2 {
		t.Errorf("a walk across a resize: %d entries in %d chunks, %v; want %d", n, chunks, err, 3*FDBChunk/2)
	}
	if got := len(mustFDB(t, r)); got != 3*FDBChunk/2 {
		t.Errorf("the grown table holds %d entries, want %d", got, 3*FDBChunk/2)
	}
}

func mustFDB(t *testing.T, r *rig) []FDBEntry {
	t.Helper()
	es, err := r.dp.FDB()
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// TestResizePinned: a pinned datapath's resize replaces the table's pins,
// so the next daemon adopts the grown table.
func TestResizePinned(t *testing.T) {
	dir := filepath.Join(testutil.RequireBPFFS(t), "dp")
	r := newPinnedRig(t, dir)
	r.run(1, ipv4(bcast, macA))
	rz, err := r.dp.Resize(Sizes{FDBCapacity: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if err := rz.Keep(); err != nil {
		t.Fatal(err)
	}
	pins, _ := filepath.Glob(filepath.Join(dir, "fdb-*"))
	if len(pins) != 1 {
		t.Fatalf("fdb pins after the resize: %v", pins)
	}
	pm, err := ebpf.LoadPinnedMap(pins[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := pm.MaxEntries(); got != 4096 {
		t.Errorf("the pinned table holds %d entries, want the grown 4096", got)
	}
	pm.Close()
	r.dp.Close()
	r.load(t, dir) // asks for 1024
	if got := r.dp.FDBCapacity(); got != 4096 {
		t.Errorf("the next load has a table of %d entries, want the pinned 4096", got)
	}
	if _, ok := r.lookup(macA); !ok {
		t.Error("A is not in the adopted table")
	}
	checkCounts(t, r)
	r.dp.Close()
	r.dp = nil
	if _, err := instance.Down(dir); err != nil {
		t.Fatal(err)
	}
}

// TestResizeBesideReaders: readers that run beside the daemon's writes (a
// metrics scrape's counts, a walk of fdb show) meet no closed map and no
// error while resizes come and go (run it with -race).
func TestResizeBesideReaders(t *testing.T) {
	r := newRig(t, modes[0], 4096, [4]uint32{})
	for i := 0; i < 500; i++ {
		r.run(1, ipv4(bcast, macN(i)))
	}
	stop := make(chan struct{})
	errs := make(chan error, 2)
	// each runs check until stop, or until it fails.
	each := func(check func() error) {
		go func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if err := check(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	each(func() error {
		if n, err := r.dp.BridgeMACs(1); err != nil || n != 500 {
			return fmt.Errorf("bridge count %d: %v", n, err)
		}
		return nil
	})
	each(func() error {
		n := 0
		if err := r.dp.WalkFDB(func(es []FDBEntry) error { n += len(es); return nil }); err != nil || n != 500 {
			return fmt.Errorf("walk: %d entries, %v", n, err)
		}
		return nil
	})
	for size := uint32(2048); size <= 16384; size *= 2 {
		rz, err := r.dp.Resize(Sizes{FDBCapacity: size})
		if err != nil {
			t.Fatal(err)
		}
		if err := rz.Keep(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestResizeUndoKeepsStage: a stage switched on after a resize and left on
// when it is undone has its build loaded on the table of before, so that
// the attachments have a program to go back to.
func TestResizeUndoKeepsStage(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		r.run(1, ipv4(bcast, macA))
		rz, err := r.dp.Resize(Sizes{FDBCapacity: 2048})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.dp.SetVLANStage(true); err != nil {
			t.Fatal(err)
		}
		if err := rz.Undo(); err != nil {
			t.Fatalf("undo: %v", err)
		}
		if r.prog() == nil || !r.dp.VLANStage() {
			t.Fatalf("after the undo: program %v, VLAN stage %v", r.prog(), r.dp.VLANStage())
		}
		r.wantVerdict(r.run(2, ipv4(macA, macB)), m.redirect, "A to B on the build of before, with the VLAN stage")
		if e, ok := r.lookup(macB); !ok || e.Slot != 2 {
			t.Errorf("B not learned in the table of before: %+v %v", e, ok)
		}
		checkCounts(t, r)
	})
}
