package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/vishvananda/netlink"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/testutil"
)

// The rig pool: a rig's datapath, when its test ends, is emptied and kept
// for the next rig. Most of a rig's cost was the verifier's: each rig
// loaded its builds anew (474 program loads in the package, most of its
// CPU time). A datapath taken from the pool keeps the builds it loaded,
// on its own maps, which are emptied: every entry of a hash deleted, every
// array zeroed, every ring read to its end. Its Go side is made anew as
// Load makes it. Each rig still has a namespace and ports of its own, so
// nothing a test does to its links reaches the next.
//
// Only the plain rig's datapath is pooled (newRig's spec, with no
// rigSpecEdit, and no bench object), and only when nothing the test did
// ties it to that test: closed, pinned, resized to another capacity,
// capturing, or resizing, it is closed as before.
var rigPool struct {
	sync.Mutex
	free []*Datapath
}

// pooledDatapath is a datapath from the pool, or nil.
func pooledDatapath() *Datapath {
	rigPool.Lock()
	defer rigPool.Unlock()
	n := len(rigPool.free)
	if n == 0 {
		return nil
	}
	d := rigPool.free[n-1]
	rigPool.free = rigPool.free[:n-1]
	return d
}

// releaseDatapath pools d, emptied, if it can be, else closes it. ns is
// the rig's namespace, still there.
func releaseDatapath(d *Datapath, capacity uint32, ns *testutil.NS) {
	if !poolable(d, capacity) || !smallIfindexes(ns) {
		d.Close()
		return
	}
	fresh, err := d.renew()
	if err != nil {
		// Nothing to fail: the next rig loads a datapath of its own.
		d.Close()
		return
	}
	rigPool.Lock()
	rigPool.free = append(rigPool.free, fresh)
	rigPool.Unlock()
}

// poolable says whether d is as newRig made it but for what renew
// empties. A resize that kept the capacity may have changed the refresh
// interval: d.spec, d.refresh and the builds loaded since have the new one.
func poolable(d *Datapath, capacity uint32) bool {
	return d.syncMap != nil && d.syncMap.FD() >= 0 && // not closed
		d.pin == nil && d.capture == nil && d.resizing == nil &&
		d.tbl != nil && !d.tbl.retired && d.tbl.users == 0 && d.tbl.fdb.MaxEntries() == capacity &&
		d.refresh == rigRefresh && refreshOf(d.spec) == rigRefresh
}

// smallIfindexes says whether every link of ns has an ifindex below
// rigIfindexes: the entries of port_index renew empties.
func smallIfindexes(ns *testutil.NS) bool {
	small := false
	err := ns.Do(func() error {
		links, err := netlink.LinkList()
		small = err == nil && !slices.ContainsFunc(links, func(l netlink.Link) bool { return l.Attrs().Index >= rigIfindexes })
		return err
	})
	return err == nil && small
}

// renew empties d's maps and returns a datapath on them, with d's loaded
// builds and nothing else of d's: the per-bridge inner maps are closed (the
// outer maps that held them are emptied), and the Go side is Load's.
func (d *Datapath) renew() (*Datapath, error) {
	d.awaitSettles()
	for _, set := range []map[uint16]*ebpf.Map{d.floods, d.vlanFloods, d.patchFloods, d.reachFloods, d.halfOpen} {
		for _, m := range set {
			m.Close()
		}
	}
	for name, m := range d.maps {
		var err error
		switch name {
		case tbpf.TrestleMapVlans:
			// Its 266,240 entries cost a tenth of a second to read;
			// d.vlans holds every one written (setVLANs, which zeroes
			// what it deletes).
			err = zeroEntries(m, slices.Collect(maps.Keys(d.vlans)))
		case tbpf.TrestleMapPortIndex:
			// Indexed by ifindex: a rig's are its own namespace's,
			// numbered from 1 (a test that names one names it past the
			// array: TestLargeIfindex).
			err = zeroArray(m, rigIfindexes)
		default:
			err = emptyMap(m)
		}
		if err != nil {
			return nil, fmt.Errorf("empty %s: %w", name, err)
		}
	}
	if err := emptyMap(d.bss); err != nil {
		return nil, fmt.Errorf("empty .bss: %w", err)
	}
	return &Datapath{objs: d.objs, bss: d.bss, maps: d.maps, tbl: d.tbl, refresh: d.refresh,
		floods: map[uint16]*ebpf.Map{}, syncMap: d.syncMap, unsynced: map[uint16]bool{}, ncpu: d.ncpu,
		place: d.place, log: func(string, ...any) {}, ahead: map[aheadKey]sizedSet{},
		spec: d.spec, progs: d.progs, vlanFloods: map[uint16]*ebpf.Map{}, vlans: map[uint32]VLAN{},
		aux: d.aux, auxErr: d.auxErr, patchFloods: map[uint16]*ebpf.Map{}, hadPatch: map[uint16]bool{},
		via: map[uint32][2]uint32{}, xdpTo: map[uint32]uint32{}, reachFloods: map[uint16]*ebpf.Map{},
		halfOpen: map[uint16]*ebpf.Map{}}, nil
}

// emptyMap leaves m as a new map of its kind is: arrays zeroed, rings
// read to their end, every other kind without entries.
func emptyMap(m *ebpf.Map) error {
	switch m.Type() {
	case ebpf.Array, ebpf.PerCPUArray:
		return zeroArray(m, m.MaxEntries())
	case ebpf.RingBuf:
		rd, err := ringbuf.NewReader(m)
		if err != nil {
			return err
		}
		defer rd.Close()
		rd.SetDeadline(time.Now())
		for {
			if _, err := rd.Read(); errors.Is(err, os.ErrDeadlineExceeded) {
				return nil
			} else if err != nil {
				return err
			}
		}
	}
	// Hashes, tries, devmaps and maps of maps: every key there is (a
	// devmap's or an array of maps' empty slots are keys too, and their
	// deletion says there was nothing).
	var keys [][]byte
	var prev any // nil, not a nil slice: the first key
	for {
		k, err := m.NextKeyBytes(prev)
		if err != nil {
			return err
		}
		if k == nil {
			break
		}
		keys = append(keys, k)
		prev = k
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// zeroArray writes zeros where an array's first entries hold anything
// else: it reads them (a batch lookup is a tenth of the cost of a batch
// update, and a test writes few of its entries) and zeroes the entries
// that are not zero.
func zeroArray(m *ebpf.Map, entries uint32) error {
	cpus := 1
	if m.Type() == ebpf.PerCPUArray {
		var err error
		if cpus, err = ebpf.PossibleCPU(); err != nil {
			return err
		}
	}
	n, vs := int(min(entries, m.MaxEntries())), int(m.ValueSize())
	value := reflect.ArrayOf(vs, reflect.TypeFor[byte]())
	keys := make([]uint32, n)
	vals := reflect.MakeSlice(reflect.SliceOf(value), n*cpus, n*cpus)
	var cursor ebpf.MapBatchCursor
	got, err := m.BatchLookup(&cursor, keys, vals.Interface(), nil)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	zero := reflect.MakeSlice(reflect.SliceOf(value), cpus, cpus).Interface()
	if cpus == 1 {
		zero = reflect.New(value).Interface()
	}
	raw := unsafe.Slice((*byte)(vals.UnsafePointer()), n*cpus*vs)
	each := cpus * vs
	for i := range got {
		if !allZero(raw[i*each : (i+1)*each]) {
			if err := m.Update(keys[i], zero, ebpf.UpdateExist); err != nil {
				return err
			}
		}
	}
	return nil
}

// zeroEntries writes zeros to the entries keys of an array.
func zeroEntries(m *ebpf.Map, keys []uint32) error {
	if len(keys) == 0 {
		return nil
	}
	value := reflect.ArrayOf(int(m.ValueSize()), reflect.TypeFor[byte]())
	_, err := m.BatchUpdate(keys, reflect.MakeSlice(reflect.SliceOf(value), len(keys), len(keys)).Interface(), nil)
	return err
}

// rigIfindexes bounds the ifindexes a rig's namespace gives its links.
const rigIfindexes = 4096

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.NativeEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// sharedFields are the fields of Datapath a pooled datapath keeps: its
// kernel objects and the builds loaded on them (renew), and what cannot be
// compared (a lock, a sync.Map of the attachments' ids).
var sharedFields = map[string]bool{"objs": true, "bss": true, "maps": true, "tbl": true, "spec": true,
	"progs": true, "aux": true, "auxErr": true, "syncMap": true, "tmu": true, "progIDs": true}

// goSideDiff says how pooled's fields but the shared ones differ from
// fresh's, a new Load's: a Go map or a slice must be as empty (and as
// nil), a pointer or a function as nil, anything else equal. And the
// refresh interval its spec loads builds with must be fresh's.
func goSideDiff(pooled, fresh *Datapath) []string {
	var diffs []string
	pv, fv := reflect.ValueOf(pooled).Elem(), reflect.ValueOf(fresh).Elem()
	for i := range pv.NumField() {
		name := pv.Type().Field(i).Name
		if sharedFields[name] {
			continue
		}
		p, f := pv.Field(i), fv.Field(i)
		switch p.Kind() {
		case reflect.Map, reflect.Slice:
			if p.IsNil() != f.IsNil() || p.Len() != f.Len() {
				diffs = append(diffs, fmt.Sprintf("%s has %d (nil %v), a new one %d (nil %v)", name, p.Len(), p.IsNil(), f.Len(), f.IsNil()))
			}
		case reflect.Pointer, reflect.Func, reflect.Interface, reflect.Chan:
			if p.IsNil() != f.IsNil() {
				diffs = append(diffs, fmt.Sprintf("%s nil %v, a new one's %v", name, p.IsNil(), f.IsNil()))
			}
		default:
			if ps, fs := fmt.Sprint(p), fmt.Sprint(f); ps != fs {
				diffs = append(diffs, fmt.Sprintf("%s is %s, a new one's %s", name, ps, fs))
			}
		}
	}
	if p, f := refreshOf(pooled.spec), refreshOf(fresh.spec); p != f {
		diffs = append(diffs, fmt.Sprintf("its builds load with refresh %v, a new one's %v", p, f))
	}
	return diffs
}

// TestRigPoolResized: a rig resizes its table to the same capacity with
// another refresh interval (its spec, and the builds it loads, have the
// new one). Its datapath is not pooled as it is: no datapath in the pool
// refreshes at another interval than a new rig's.
func TestRigPoolResized(t *testing.T) {
	t.Run("resize", func(t *testing.T) {
		r := newRig(t, modes[0], 1024, [4]uint32{})
		rz, err := r.dp.Resize(Sizes{FDBCapacity: rigCapacity, Refresh: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := rz.Keep(); err != nil {
			t.Fatal(err)
		}
		if s := r.dp.Sizes(); s.FDBCapacity != rigCapacity || s.Refresh != time.Millisecond {
			t.Fatalf("resized to %s", s)
		}
		r.run(1, ipv4(bcast, macA))
	})
	rigPool.Lock()
	defer rigPool.Unlock()
	for _, d := range rigPool.free {
		if d.refresh != rigRefresh || refreshOf(d.spec) != rigRefresh {
			t.Errorf("a pooled datapath refreshes every %v (its spec's builds %v), a new rig's every %v", d.refresh, refreshOf(d.spec), rigRefresh)
		}
	}
}

// TestRigPoolOwnLoad: a test puts a datapath of its own in its rig, from
// a spec it changed (a smaller encapsulation table): it is not pooled,
// though poolable cannot tell it from the rig's.
func TestRigPoolOwnLoad(t *testing.T) {
	t.Run("own", func(t *testing.T) {
		r := newRig(t, modes[0], 1024, [4]uint32{})
		spec, err := embeddedSpec()
		if err != nil {
			t.Fatal(err)
		}
		spec = spec.Copy()
		spec.Maps[tbpf.TrestleMapEncaps].MaxEntries = 16
		r.dp.Close()
		if r.dp, err = Load(Options{FDBCapacity: rigCapacity, Refresh: rigRefresh, Spec: spec}); err != nil {
			t.Fatal(err)
		}
	})
	rigPool.Lock()
	defer rigPool.Unlock()
	for _, d := range rigPool.free {
		if d.maps[tbpf.TrestleMapEncaps].MaxEntries() == 16 {
			t.Error("the test's own datapath went to the pool")
		}
	}
}

// TestRigPoolEmpties: a datapath that a VLAN-aware rig used (learned
// addresses, VLANs, counters, flood sets) comes back from the pool as a
// new one is: every hash without entries, every array zero, no VLAN
// written; and the next rig forwards with it as with a new one.
func TestRigPoolEmpties(t *testing.T) {
	t.Run("use", func(t *testing.T) {
		r := vrig(t, modes[0], 0)
		r.run(3, tagged(macA, macB, 10))
		r.run(1, ipv4(macB, macA))
		if _, ok := r.lookup(macB); !ok {
			t.Fatal("nothing learned: the rig was not used")
		}
	})
	d := pooledDatapath()
	if d == nil {
		t.Fatal("the used rig's datapath was not pooled")
	}
	for name, m := range d.maps {
		switch m.Type() {
		case ebpf.RingBuf:
			continue
		case ebpf.Array, ebpf.PerCPUArray:
			cpus := 1
			if m.Type() == ebpf.PerCPUArray {
				cpus = d.ncpu
			}
			n, vs := int(m.MaxEntries()), int(m.ValueSize())
			keys := make([]uint32, n)
			vals := reflect.MakeSlice(reflect.SliceOf(reflect.ArrayOf(vs, reflect.TypeFor[byte]())), n*cpus, n*cpus)
			var cursor ebpf.MapBatchCursor
			if _, err := m.BatchLookup(&cursor, keys, vals.Interface(), nil); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				t.Fatalf("%s: %v", name, err)
			}
			if !allZero(unsafe.Slice((*byte)(vals.UnsafePointer()), n*cpus*vs)) {
				t.Errorf("%s: not zero", name)
			}
		default:
			var prev any
			for {
				k, err := m.NextKeyBytes(prev)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if k == nil {
					break
				}
				// A devmap's or an array of maps' slots are keys,
				// empty: a lookup finds nothing.
				var v []byte
				if err := m.Lookup(k, &v); err == nil || !errors.Is(err, ebpf.ErrKeyNotExist) {
					t.Errorf("%s: key %x holds something (%v)", name, k, err)
					break
				}
				prev = k
			}
		}
	}
	if len(d.vlans) != 0 || len(d.floods) != 0 {
		t.Errorf("Go side kept: %d VLANs, %d flood sets", len(d.vlans), len(d.floods))
	}
	// The Go side, field by field, against a new Load's: a field renew
	// does not make anew (one added to Datapath since) shows here.
	fresh, err := Load(Options{FDBCapacity: rigCapacity, Refresh: rigRefresh, Spec: d.spec})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	for _, diff := range goSideDiff(d, fresh) {
		t.Errorf("Go side of the pooled datapath: %s", diff)
	}
	rigPool.Lock()
	rigPool.free = append(rigPool.free, d)
	rigPool.Unlock()
	t.Run("again", func(t *testing.T) {
		r := vrig(t, modes[0], 0)
		if _, ok := r.lookup(macB); ok {
			t.Fatal("B is in the table before any frame")
		}
		r.run(3, tagged(macA, macB, 10))
		if s := r.vlanStats(10); s.C[tbpf.VLANRxPackets] != 1 {
			t.Errorf("VLAN 10 after one frame: %+v, want rx 1", s)
		}
	})
}
