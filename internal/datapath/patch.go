package datapath

import (
	"fmt"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Patch ports (bpf/lib/patch.h) have no interface: the datapath names one
// by a pseudo ifindex, its slot with the top bit set, keeps it in the
// patches array by slot, and walks a frame sent to it on into its peer's
// bridge within the same program run.

// PatchIfindex is the pseudo ifindex of the patch port in slot.
func PatchIfindex(slot uint16) uint32 { return tbpf.PatchIfindex | uint32(slot) }

// IsPatchIfindex says whether ifindex names a patch port.
func IsPatchIfindex(ifindex uint32) bool { return ifindex&tbpf.PatchIfindex != 0 }

// setPatch writes a patch port: the port its peer's frames enter by, and
// its peer's slot. Every CPU's remembered paths are voided.
func (d *Datapath) setPatch(p PortInfo, v tbpf.Port) error {
	if p.Ifindex != PatchIfindex(p.Slot) {
		return fmt.Errorf("patch port in slot %d: ifindex %#x, want %#x", p.Slot, p.Ifindex, PatchIfindex(p.Slot))
	}
	if p.Peer == 0 || int(p.Peer) >= tbpf.MaxPorts || p.Peer == p.Slot {
		return fmt.Errorf("patch port in slot %d: peer slot %d", p.Slot, p.Peer)
	}
	v.Flags |= tbpf.PortPatch
	if err := d.objs.Patches.Put(uint32(p.Slot), &tbpf.Patch{Port: v, Peer: p.Peer}); err != nil {
		return fmt.Errorf("patch port in slot %d: write: %w", p.Slot, err)
	}
	return d.bumpGeneration()
}

// delPatch forgets the patch port in slot.
func (d *Datapath) delPatch(slot uint16) error {
	if slot == 0 || int(slot) >= tbpf.MaxPorts {
		return fmt.Errorf("patch port: slot %d out of range", slot)
	}
	if err := d.objs.Patches.Put(uint32(slot), &tbpf.Patch{}); err != nil {
		return fmt.Errorf("patch port in slot %d: delete: %w", slot, err)
	}
	return d.bumpGeneration()
}

// patchPorts reads every patch port the maps hold.
func (d *Datapath) patchPorts() ([]PortInfo, error) {
	var out []PortInfo
	var k uint32
	var v tbpf.Patch
	it := d.objs.Patches.Iterate()
	for it.Next(&k, &v) {
		if v.Port.Bridge == 0 {
			continue
		}
		p, _, err := d.portInfo(PatchIfindex(uint16(k)), v.Port)
		if err != nil {
			return nil, err
		}
		p.Peer = v.Peer
		out = append(out, p)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read patch ports: %w", err)
	}
	return out, nil
}

// patchFloodSets are the XDP flood sets of bridges with patch ports: each
// holds the interface ports the bridge's patches reach (its own among them),
// each with the program that lets through only the copies the walk chose.
func (d *Datapath) patchFloodSets() progFloods {
	return progFloods{what: "patch flood set", name: "tr_pflood", outer: d.objs.PatchFloods, sets: d.patchFloods,
		max: tbpf.MaxPorts, prog: tbpf.TrestleProgTrestlePatchEgress}
}

// adoptPatchFloods takes hold of the patch flood sets an adopted map holds.
func (d *Datapath) adoptPatchFloods() error {
	return adoptInner(d.objs.PatchFloods, d.patchFloods, "patch flood set")
}

// hasPatch says whether a bridge's port list holds a patch port.
func (b BridgeInfo) hasPatch() bool {
	for _, p := range b.Ports {
		if IsPatchIfindex(p.Ifindex) {
			return true
		}
	}
	return false
}
