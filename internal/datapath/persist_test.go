package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/vishvananda/netlink"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/instance"
	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/testutil"
)

// newPinnedRig is a rig whose datapath is pinned in dir.
func newPinnedRig(t *testing.T, dir string) *rig {
	r := newRig(t, modes[0], 1024, [4]uint32{})
	r.dp.Close()
	r.load(t, dir)
	err := r.ns.Do(func() error {
		var ports []PortInfo
		for slot := 1; slot <= 3; slot++ {
			p := PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot)}
			if err := r.dp.SetPort(p); err != nil {
				return err
			}
			ports = append(ports, p)
		}
		return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports})
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) load(t *testing.T, dir string) {
	t.Helper()
	err := r.ns.Do(func() error {
		dp, err := Load(Options{FDBCapacity: 1024, PinDir: dir, Log: func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) }})
		r.dp = dp
		return err
	})
	if err != nil {
		t.Fatalf("load pinned datapath: %v", err)
	}
}

func (r *rig) xdpProg(t *testing.T, slot int) int {
	t.Helper()
	var id int
	err := r.ns.Do(func() error {
		l, err := netlink.LinkByIndex(int(r.port[slot]))
		if err != nil {
			return err
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			id = int(x.ProgId)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A pinned datapath outlives its loader: the program stays on the port, and
// a new Load adopts the table, the counters, the bridge and the link, then
// moves the link to its own program in place.
func TestPinnedDatapathIsAdopted(t *testing.T) {
	dir := filepath.Join(testutil.RequireBPFFS(t), "dp")
	r := newPinnedRig(t, dir)
	var a *Attachment
	if err := r.ns.Do(func() (err error) { a, err = r.dp.Attach(int(r.port[1]), mode.XDP, HookLink); return }); err != nil {
		t.Fatal(err)
	}
	r.run(1, ipv4(bcast, macA))
	r.run(2, ipv4(macA, macB))
	before := r.stats(1)
	prog := r.xdpProg(t, 1)
	if prog == 0 {
		t.Fatal("no XDP program on port 1 after Attach")
	}
	// The daemon goes away without detaching.
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	r.dp.Close()
	if got := r.xdpProg(t, 1); got != prog {
		t.Fatalf("XDP program on port 1 after the loader closed: %d, want %d still there", got, prog)
	}

	r.load(t, dir)
	// The mode of the pinned link is loaded before the pins are touched
	// (a build that does not load leaves them as they were); the other is
	// not.
	if got := r.dp.progs[stage{}].modes(); !slices.Equal(got, []mode.Mode{mode.XDP}) {
		t.Errorf("adopting an XDP link loaded the entry points of %v, want xdp alone", got)
	}
	bs, err := r.dp.Bridges()
	if err != nil || len(bs) != 1 || bs[0].Name != "br0" || bs[0].ID != 1 || len(bs[0].Ports) != 3 {
		t.Fatalf("adopted bridges: %+v (%v), want br0 with 3 ports", bs, err)
	}
	ps, err := r.dp.Ports()
	if err != nil || len(ps) != 3 {
		t.Fatalf("adopted ports: %+v (%v)", ps, err)
	}
	if e, ok := r.lookup(macA); !ok || e.Slot != 1 {
		t.Errorf("A not adopted on slot 1: %+v %v", e, ok)
	}
	if s := r.stats(1); s.C[tbpf.RxPackets] != before.C[tbpf.RxPackets] || s.C[tbpf.Learned] != before.C[tbpf.Learned] {
		t.Errorf("counters of port 1 after adoption: %+v, want %+v", s, before)
	}
	if n, _ := r.dp.PortMACs(1); n != 1 {
		t.Errorf("port 1 counts %d addresses after adoption, want 1", n)
	}
	links, err := r.dp.AdoptedLinks()
	if err != nil || len(links) != 1 || links[0].Ifindex != int(r.port[1]) || links[0].Mode != mode.XDP {
		t.Fatalf("adopted links: %v (%v), want the XDP link of port 1", links, err)
	}
	gens := func() (cfg, fdb uint32) {
		if err := r.dp.objs.CfgGen.Get(&cfg); err != nil {
			t.Fatal(err)
		}
		if err := r.dp.objs.FdbGen.Get(&fdb); err != nil {
			t.Fatal(err)
		}
		return cfg, fdb
	}
	cfg0, fdb0 := gens()
	changed, err := r.dp.Upgrade(links[0])
	if err != nil || !changed {
		t.Fatalf("upgrade the adopted link: changed %v, %v", changed, err)
	}
	// The program before may have been another build's: its memos and
	// this build's are void (voidMemos).
	if cfg1, fdb1 := gens(); cfg1 == cfg0 || fdb1 == fdb0 {
		t.Errorf("generations after the upgrade: cfg %d -> %d, fdb %d -> %d, want both bumped", cfg0, cfg1, fdb0, fdb1)
	}
	if got := r.xdpProg(t, 1); got == prog || got == 0 {
		t.Errorf("program on port 1 after the upgrade: %d (was %d), want the new loader's", got, prog)
	}
	// Counting goes on from where it was, in the same maps.
	r.run(1, ipv4(macB, macA))
	if s := r.stats(1); s.C[tbpf.RxPackets] != before.C[tbpf.RxPackets]+1 {
		t.Errorf("rx after adoption %d, want %d", s.C[tbpf.RxPackets], before.C[tbpf.RxPackets]+1)
	}
	links[0].Release()
	r.dp.Close()

	did, err := instance.Down(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(did) != 1 {
		t.Errorf("Down did %v, want one link detached", did)
	}
	if got := r.xdpProg(t, 1); got != 0 {
		t.Errorf("program %d still on port 1 after Down", got)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin directory left after Down: %v", err)
	}
}

// pinOld pins a map of another build's layout into dir, with its record.
func pinOld(t *testing.T, dir string, ms *ebpf.MapSpec, fill func(m *ebpf.Map)) string {
	t.Helper()
	p := &pinState{dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := p.openLayouts(false); err != nil {
		t.Fatalf("open layouts: %v", err)
	}
	defer p.layoutsMap.Close()
	l, err := layoutOf(ms, ms.Flags)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.recordLayout(l); err != nil {
		t.Fatalf("record layout: %v", err)
	}
	m, err := ebpf.NewMap(ms)
	if err != nil {
		t.Fatalf("create %s: %v", ms.Name, err)
	}
	defer m.Close()
	fill(m)
	path := filepath.Join(dir, pinName(ms.Name)+"-"+l.Hash())
	if err := m.Pin(path); err != nil {
		t.Fatalf("pin %s: %v", path, err)
	}
	return path
}

func u64(name string, off uint32) btf.Member {
	return btf.Member{Name: name, Type: &btf.Int{Name: "u64", Size: 8}, Offset: btf.Bits(off * 8)}
}

// A map pinned by a build whose value had other fields is copied field by
// field into this build's layout: what both have keeps its value, what is
// new starts at zero, what is gone is dropped. The old pin is replaced.
func TestPinnedMapMigrates(t *testing.T) {
	dir := filepath.Join(testutil.RequireBPFFS(t), "dp")
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	old := &ebpf.MapSpec{
		Name: tbpf.TrestleMapStats, Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 24, MaxEntries: 256,
		Key:   &btf.Int{Name: "u32", Size: 4},
		Value: &btf.Struct{Name: "tr_port_stats", Size: 24, Members: []btf.Member{u64("tx_packets", 0), u64("obsolete", 8), u64("rx_packets", 16)}},
	}
	type oldStats struct{ Tx, Obsolete, Rx uint64 }
	oldPath := pinOld(t, dir, old, func(m *ebpf.Map) {
		v := make([]oldStats, ncpu)
		v[0] = oldStats{Tx: 20, Obsolete: 99, Rx: 10}
		if err := m.Put(uint32(5), v); err != nil {
			t.Fatal(err)
		}
	})
	r := newRig(t, modes[0], 1024, [4]uint32{})
	r.dp.Close()
	r.load(t, dir)
	s := r.stats(5)
	if s.C[tbpf.RxPackets] != 10 || s.C[tbpf.TxPackets] != 20 || s.C[tbpf.RxBytes] != 0 || s.C[tbpf.Learned] != 0 {
		t.Errorf("slot 5 after migration: %+v, want rx 10 tx 20 and the rest 0", s)
	}
	if _, err := os.Stat(oldPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old pin %s is still there: %v", oldPath, err)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "stats-*"))
	if len(matches) != 1 {
		t.Errorf("stats pins after migration: %v, want one", matches)
	}
	r.dp.Close()
	// And the next load adopts the copy as it is.
	r.load(t, dir)
	if s := r.stats(5); s.C[tbpf.RxPackets] != 10 {
		t.Errorf("slot 5 at the next load: %+v", s)
	}
	r.dp.Close()
	if _, err := instance.Down(dir); err != nil {
		t.Fatal(err)
	}
}

// A pinned map this build cannot carry over (here: of another type) is
// refused with what to do, and nothing is loaded against it.
func TestPinnedMapRefused(t *testing.T) {
	dir := filepath.Join(testutil.RequireBPFFS(t), "dp")
	old := &ebpf.MapSpec{Name: tbpf.TrestleMapFdb, Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 16,
		Key: &btf.Int{Name: "u32", Size: 4}, Value: &btf.Int{Name: "u64", Size: 8}}
	pinOld(t, dir, old, func(*ebpf.Map) {})
	r := newRig(t, modes[0], 1024, [4]uint32{})
	r.dp.Close()
	err := r.ns.Do(func() error {
		dp, err := Load(Options{FDBCapacity: 1024, PinDir: dir})
		if err == nil {
			dp.Close()
		}
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "trestle down") || !strings.Contains(err.Error(), "Array") {
		t.Errorf("load against an fdb pinned as an array: %v, want a refusal that says what to do", err)
	}
	r.dp = nil
	if _, err := instance.Down(dir); err != nil {
		t.Fatal(err)
	}
}

// A table that must grow (a config with more room) is copied into a larger
// one, pinned in the old one's place, with the maps that count its entries
// copied at the same moment; the next load adopts the copy.
func TestPinnedTableGrows(t *testing.T) {
	dir := filepath.Join(testutil.RequireBPFFS(t), "dp")
	r := newPinnedRig(t, dir)
	r.run(1, ipv4(bcast, macA))
	r.run(2, ipv4(bcast, macB))
	r.dp.Close()
	var logged []string
	err := r.ns.Do(func() error {
		dp, err := Load(Options{FDBCapacity: 4096, PinDir: dir, Log: func(msg string, args ...any) { logged = append(logged, fmt.Sprint(msg, args)) }})
		r.dp = dp
		return err
	})
	if err != nil {
		t.Fatalf("load with a larger table: %v", err)
	}
	if got := r.dp.FDBCapacity(); got != 4096 {
		t.Errorf("table of %d entries, want 4096", got)
	}
	if _, ok := r.lookup(macB); !ok {
		t.Errorf("B not carried into the larger table")
	}
	if n, _ := r.dp.PortMACs(2); n != 1 {
		t.Errorf("port 2 counts %d addresses after the copy, want 1", n)
	}
	copied := strings.Join(logged, "\n")
	for _, m := range []string{"fdb", "port_macs", "bridge_macs_del"} {
		if !strings.Contains(copied, "copied pinned map into this build's[map "+m+" ") {
			t.Errorf("%s was not copied with the table:\n%s", m, copied)
		}
	}
	if pins, _ := filepath.Glob(filepath.Join(dir, "fdb-*")); len(pins) != 1 {
		t.Errorf("fdb pins after the copy: %v", pins)
	}
	r.dp.Close()
	r.load(t, dir)
	if got := r.dp.FDBCapacity(); got != 4096 {
		t.Errorf("the next load has a table of %d entries, want the pinned 4096", got)
	}
	r.dp.Close()
	r.dp = nil
	if _, err := instance.Down(dir); err != nil {
		t.Fatal(err)
	}
}

// TestPinDirRefused: a pin directory another user may write is refused
// before anything in it is adopted (a map put there would be the switch's
// table, a program its datapath), and so is a link in its place.
func TestPinDirRefused(t *testing.T) {
	root := testutil.RequireBPFFS(t)
	r := newRig(t, modes[0], 1024, [4]uint32{})
	r.dp.Close()
	open := func(dir string) error {
		return r.ns.Do(func() error {
			dp, err := Load(Options{FDBCapacity: 1024, Refresh: time.Hour, PinDir: dir})
			if err == nil {
				dp.Close()
			}
			return err
		})
	}
	dir := filepath.Join(root, "dp")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := open(dir); err == nil || !strings.Contains(err.Error(), "writable by other users") {
		t.Errorf("a pin directory of mode 0777: %v, want refused", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := open(dir); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("a pin directory of another user: %v, want refused", err)
	}
	if err := os.Chown(dir, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := open(dir); err != nil {
		t.Errorf("the pin directory made right: %v", err)
	}
}
