package datapath

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/mode"
)

// The VLAN stage (bpf/lib/vlan.h). Its code is in the programs only while
// the stage is on (a load-time constant, architecture.md rule 6): SetVLANStage
// loads the programs again with it, on the same maps, and the daemon moves
// every attachment to them with a link update (Upgrade), so that no frame
// meets a port without a program. A VLAN-aware bridge has a flag in its
// bridge value; its VLANs are entries of the vlans array, each with an
// index that numbers its counters; its XDP floods go through a devmap whose
// entries run trestle_vlan_egress.

// progSet is one build of the two entry points, each loaded the first time
// it is asked for (entry): a daemon whose ports all run at tc never has the
// verifier check its XDP program, nor the reverse. A load the verifier
// refused is kept as its error, so that it is tried once, not once per
// port.
type progSet struct {
	xdp, tc       *ebpf.Program
	xdpErr, tcErr error
}

func (s progSet) close() {
	if s.xdp != nil {
		s.xdp.Close()
	}
	if s.tc != nil {
		s.tc.Close()
	}
}

// slot is where s keeps the entry point of mode m, and its load's error.
func (s *progSet) slot(m mode.Mode) (**ebpf.Program, *error) {
	if m == mode.XDP {
		return &s.xdp, &s.xdpErr
	}
	return &s.tc, &s.tcErr
}

// modes are the modes whose entry points s holds.
func (s progSet) modes() []mode.Mode {
	var out []mode.Mode
	if s.xdp != nil {
		out = append(out, mode.XDP)
	}
	if s.tc != nil {
		out = append(out, mode.TC)
	}
	return out
}

// stage is which optional stages a build of the entry points has: the VLAN
// stage, the filter stage (filter.go) and capture (capture.go). Each is a
// load-time constant.
type stage struct{ vlan, capture, filter bool }

// stageConsts gate the optional stages, one way: each is a load-time
// constant of the programs (bpf/lib/stages.h, with the matrix of builds
// they make), set before a build is loaded. The filter's build has entry
// points of its own too (entryName).
var stageConsts = []struct {
	name, what string
	on         func(stage) bool
}{
	{tbpf.TrestleVarVlanAware, "VLAN stage", func(s stage) bool { return s.vlan }},
	{tbpf.TrestleVarCaptureOn, "capture stage", func(s stage) bool { return s.capture }},
	{tbpf.TrestleVarFilterOn, "filter stage", func(s stage) bool { return s.filter }},
}

// VLANStage says whether the programs attached from now on classify frames
// into VLANs.
func (d *Datapath) VLANStage() bool { return d.stage.vlan }

// SetVLANStage makes the programs of mode.XDP and mode.TC those with (on) or
// without the VLAN stage, loading them on this datapath's maps the first time
// they are asked for. Attachments keep their program until Upgrade.
func (d *Datapath) SetVLANStage(on bool) error {
	return d.switchStage("VLAN stage", on, func(s *stage) *bool { return &s.vlan })
}

// SetFilterStage is SetVLANStage for the filter stage (bpf/lib/filter.h):
// its code is in the programs only while some bridge has its filter on.
func (d *Datapath) SetFilterStage(on bool) error {
	return d.switchStage("filter stage", on, func(s *stage) *bool { return &s.filter })
}

// FilterStage says whether the programs attached from now on filter.
func (d *Datapath) FilterStage() bool { return d.stage.filter }

// switchStage turns one stage of the attached build on or off.
func (d *Datapath) switchStage(what string, on bool, field func(*stage) *bool) (err error) {
	d.configChanging()
	defer d.configChanged(&err)
	if on == *field(&d.stage) {
		return nil
	}
	next := d.stage
	*field(&next) = on
	if err := d.loadModes(next, d.progs[d.stage].modes()); err != nil {
		return fmt.Errorf("load the programs with the %s %s: %w", what, onOff(on), err)
	}
	d.stage = next
	d.log(what, "on", on)
	return nil
}

// loadModes loads build s of the entry points of modes ms (those another
// build holds, when attachments are to move from it to this one), so that
// a build that does not load fails the switch to it, not the moves after.
func (d *Datapath) loadModes(s stage, ms []mode.Mode) error {
	for _, m := range ms {
		if _, err := d.entry(s, m); err != nil {
			return err
		}
	}
	return nil
}

// entry is the entry point of mode m in build s, loaded on this datapath's
// maps the first time it is asked for; a capture build writes to the
// running capture's ring.
func (d *Datapath) entry(s stage, m mode.Mode) (*ebpf.Program, error) {
	set := d.progs[s]
	prog, failed := set.slot(m)
	if *prog != nil || *failed != nil {
		return *prog, *failed
	}
	p, err := d.loadEntry(s, m)
	if err != nil {
		err = fmt.Errorf("load the %s entry point: %w", m, err)
		if !refused(err) {
			return nil, err
		}
	}
	*prog, *failed = p, err
	d.progs[s] = set
	return p, err
}

func (d *Datapath) loadEntry(s stage, m mode.Mode) (*ebpf.Program, error) {
	spec := d.spec.Copy()
	for _, c := range stageConsts {
		on := c.on(s)
		v, ok := spec.Variables[c.name]
		if !ok && !on {
			continue // an older build, without the stage
		}
		if !ok {
			return nil, fmt.Errorf("this datapath build has no %s", c.what)
		}
		var b uint8
		if on {
			b = 1
		}
		if err := v.Set(b); err != nil {
			return nil, fmt.Errorf("set the %s: %w", c.what, err)
		}
	}
	var ring *ebpf.Map
	if s.capture {
		if d.capture == nil {
			return nil, errors.New("no capture is running")
		}
		ring = d.capture.ring
	}
	return d.loadProgram(spec, entryName(s, m), ring)
}

// entryName is the program of build s's entry point of mode m.
func entryName(s stage, m mode.Mode) string {
	switch {
	case m == mode.TC && s.filter:
		// Entry points of their own, so that those without the stage are
		// compiled as if it did not exist (bpf/lib/stages.h).
		return tbpf.TrestleProgTrestleTcFilter
	case m == mode.TC:
		return tbpf.TrestleProgTrestleTc
	case s.filter:
		return tbpf.TrestleProgTrestleXdpFilter
	}
	return tbpf.TrestleProgTrestleXdp
}

// loadProgram loads the program name of spec (a copy of d.spec, which it
// changes) on this datapath's maps, with ring, if not nil, as its capture
// ring; only .rodata, the load-time constants, is made for it.
func (d *Datapath) loadProgram(spec *ebpf.CollectionSpec, name string, ring *ebpf.Map) (*ebpf.Program, error) {
	repl := map[string]*ebpf.Map{".bss": d.bss}
	for n, m := range d.maps {
		repl[n] = m
	}
	if ring != nil {
		spec.Maps[tbpf.TrestleMapCaptureRing].MaxEntries = ring.MaxEntries()
		repl[tbpf.TrestleMapCaptureRing] = ring
	}
	for n := range spec.Programs {
		if n != name {
			delete(spec.Programs, n)
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: repl,
		Programs: ebpf.ProgramOptions{LogLevel: d.progLog}})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, verifierError{ve}
		}
		return nil, err
	}
	defer coll.Close()
	return coll.DetachProgram(name), nil
}

// verifierError is the verifier's refusal, with its whole log. (Not
// embedded: its Format would print the short form.)
type verifierError struct{ ve *ebpf.VerifierError }

func (e verifierError) Error() string { return fmt.Sprintf("%+v", e.ve) }
func (e verifierError) Unwrap() error { return e.ve }

// refused says whether err is the verifier's: the same program on the same
// kernel is refused again, so it is not tried again.
func refused(err error) bool {
	var ve *ebpf.VerifierError
	return errors.As(err, &ve)
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// vlanKey is the index of a bridge's VLAN in the vlans array.
func vlanKey(bridge, vid uint16) uint32 { return uint32(bridge)*uint32(tbpf.VLANIDs) + uint32(vid) }

// VLAN is one VLAN of a VLAN-aware bridge as the datapath holds it.
type VLAN struct {
	Bridge  uint16
	VID     uint16
	Index   uint16 // of its counters
	Members int    // up ports carrying it
}

// loadVLANs reads the VLANs the maps hold into d.vlans, once: a daemon that
// adopts a pinned datapath keeps their indexes, and so their counters.
func (d *Datapath) loadVLANs() error {
	if d.vlans != nil {
		return nil
	}
	d.vlans = map[uint32]VLAN{}
	cursor := new(ebpf.MapBatchCursor)
	keys := make([]uint32, tbpf.VLANIDs)
	vals := make([]tbpf.VLANEntry, tbpf.VLANIDs)
	for {
		n, err := d.objs.Vlans.BatchLookup(cursor, keys, vals, nil)
		for i := 0; i < n; i++ {
			if vals[i].Idx != 0 {
				d.vlans[keys[i]] = VLAN{Bridge: uint16(keys[i] / uint32(tbpf.VLANIDs)), VID: uint16(keys[i] % uint32(tbpf.VLANIDs)),
					Index: vals[i].Idx, Members: int(vals[i].Members)}
			}
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			d.vlans = nil
			return fmt.Errorf("read VLANs: %w", err)
		}
	}
	return nil
}

// freeVLANIndex is the lowest index no VLAN holds.
func (d *Datapath) freeVLANIndex() (uint16, error) {
	used := make([]bool, tbpf.MaxVLANs+1)
	for _, v := range d.vlans {
		used[v.Index] = true
	}
	for i := 1; i <= tbpf.MaxVLANs; i++ {
		if !used[i] {
			return uint16(i), nil
		}
	}
	return 0, fmt.Errorf("no free VLAN index: at most %d VLANs in all bridges", tbpf.MaxVLANs)
}

// setVLANs writes a bridge's VLANs: each of vids (nil: the bridge is not
// VLAN-aware) with the count of ports that carry it; those it held before
// and no longer does are removed. A new VLAN starts with zero counters.
func (d *Datapath) setVLANs(b BridgeInfo, vids []uint16) error {
	if err := d.loadVLANs(); err != nil {
		return err
	}
	want := map[uint16]bool{}
	var keys []uint32
	var vals []tbpf.VLANEntry
	for _, vid := range vids {
		if vid == 0 || int(vid) >= tbpf.VLANIDs-1 {
			return fmt.Errorf("VLAN %d out of range 1..%d", vid, tbpf.VLANIDs-2)
		}
		want[vid] = true
		k := vlanKey(b.ID, vid)
		v, ok := d.vlans[k]
		if !ok {
			idx, err := d.freeVLANIndex()
			if err != nil {
				return err
			}
			zero := make([]tbpf.VLANStats, d.ncpu)
			if err := d.objs.VlanStats.Put(uint32(idx), zero); err != nil {
				return fmt.Errorf("VLAN %d: reset counters: %w", vid, err)
			}
			v = VLAN{Bridge: b.ID, VID: vid, Index: idx, Members: -1}
		}
		members := 0
		for _, p := range b.Ports {
			if p.Carries(vid) {
				members++
			}
		}
		if members != v.Members {
			v.Members = members
			keys = append(keys, k)
			vals = append(vals, tbpf.VLANEntry{Idx: v.Index, Members: uint16(members)})
		}
		d.vlans[k] = v
	}
	for k, v := range d.vlans {
		if v.Bridge == b.ID && !want[v.VID] {
			keys = append(keys, k)
			vals = append(vals, tbpf.VLANEntry{})
			delete(d.vlans, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if _, err := d.objs.Vlans.BatchUpdate(keys, vals, nil); err != nil {
		return fmt.Errorf("write %d VLANs: %w", len(keys), err)
	}
	return nil
}

// VLANs are the VLANs of every VLAN-aware bridge, by bridge and VID.
func (d *Datapath) VLANs() ([]VLAN, error) {
	if err := d.loadVLANs(); err != nil {
		return nil, err
	}
	out := make([]VLAN, 0, len(d.vlans))
	for _, v := range d.vlans {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b VLAN) int {
		if a.Bridge != b.Bridge {
			return int(a.Bridge) - int(b.Bridge)
		}
		return int(a.VID) - int(b.VID)
	})
	return out, nil
}

// VLANStats are a VLAN's counters summed over CPUs.
func (d *Datapath) VLANStats(index uint16) (tbpf.VLANStats, error) {
	var sum tbpf.VLANStats
	per := make([]tbpf.VLANStats, d.ncpu)
	if err := d.objs.VlanStats.Lookup(uint32(index), &per); err != nil {
		return sum, fmt.Errorf("read counters of VLAN index %d: %w", index, err)
	}
	for _, s := range per {
		for i := range s.C {
			sum.C[i] += s.C[i]
		}
	}
	return sum, nil
}

// devmapVal is struct bpf_devmap_val: an interface and the program its
// copies run.
type devmapVal struct {
	Ifindex uint32
	ProgFD  int32
}

// vlanFloodSets are the XDP flood sets of VLAN-aware bridges: each holds
// the bridge's ports, each with the program that keeps its copy in the VLAN.
func (d *Datapath) vlanFloodSets() progFloods {
	return progFloods{what: "VLAN flood set", name: "tr_vflood", outer: d.objs.VlanFloods, sets: d.vlanFloods,
		max: tbpf.MaxBridgePorts, prog: tbpf.TrestleProgTrestleVlanEgress}
}

// adoptVLANFloods takes hold of the VLAN flood sets an adopted map holds.
func (d *Datapath) adoptVLANFloods() error {
	return adoptInner(d.objs.VlanFloods, d.vlanFloods, "VLAN flood set")
}
