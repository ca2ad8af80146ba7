package datapath

import (
	"fmt"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// A migration is a pinned map copied into a map of this build's layout.
type migration struct {
	name string
	old  *ebpf.Map
}

// migrate copies a pinned map of layout from into a new map of layout to,
// which the loader then uses instead of creating one; commit pins it and
// removes the old pin. A derived map starts empty instead (empty says so).
// The old program, still attached, keeps the old map until the daemon moves
// its links to the new program: what it learns or counts in between (well
// under a second) is learned or counted again.
func (p *pinState) migrate(ms *ebpf.MapSpec, flags uint32, old *ebpf.Map, oldPath string, from, to *Layout) (empty bool, err error) {
	name := ms.Name
	refuse := func(what string) (bool, error) {
		old.Close()
		return false, fmt.Errorf("pinned map %s: %s: this build cannot carry its contents over; stop forwarding with `trestle down` and start again", oldPath, what)
	}
	if from.Type != to.Type {
		return refuse(fmt.Sprintf("it was a %s and is now a %s", from.Type, to.Type))
	}
	if (from.Inner == nil) != (to.Inner == nil) {
		return refuse("its inner maps changed")
	}
	if name == tbpf.TrestleMapFdb && old.MaxEntries() > ms.MaxEntries {
		ms.MaxEntries = old.MaxEntries() // never copied into a smaller table
	}
	spec := ms.Copy()
	spec.Flags = flags
	spec.Pinning = ebpf.PinNone
	nm, err := ebpf.NewMap(spec)
	if err != nil {
		old.Close()
		return false, fmt.Errorf("create map %s for the contents of %s: %w", name, oldPath, err)
	}
	n, summary := 0, "starts empty: the daemon fills it"
	if !derived[name] {
		kc, vc := newConverter(from.Key, to.Key, nil), newConverter(from.Value, to.Value, legacyPaths(name))
		if n, err = copyEntries(old, nm, kc, vc); err != nil {
			nm.Close()
			old.Close()
			return false, fmt.Errorf("copy pinned map %s: %w", oldPath, err)
		}
		summary = vc.summary()
		if kc.summary() != "" {
			summary += "; key " + kc.summary()
		}
		if summary == "" {
			summary = "the same fields (copied with its group, or resized)"
		}
	}
	p.replacements[name] = nm
	p.stale = append(p.stale, oldPath)
	p.migrations = append(p.migrations, &migration{name: name, old: old})
	p.log("copied pinned map into this build's", "map", name, "entries", n, "from", from.Hash(), "to", to.Hash(), "changes", summary)
	return derived[name], nil
}

// rawBytes is a key or value as bytes, for copying maps whatever they hold.
type rawBytes []byte

func (r *rawBytes) UnmarshalBinary(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

func (r rawBytes) MarshalBinary() ([]byte, error) { return r, nil }

// copyEntries copies every entry of old into nm, converting keys and values,
// and says how many it copied.
func copyEntries(old, nm *ebpf.Map, kc, vc *converter) (int, error) {
	perCPU := old.Type() == ebpf.PerCPUArray || old.Type() == ebpf.PerCPUHash || old.Type() == ebpf.LRUCPUHash
	conv := func(v any) any {
		if perCPU {
			vs := *(v.(*[]rawBytes))
			out := make([]rawBytes, len(vs))
			for i := range vs {
				out[i] = vc.convert(vs[i])
			}
			return out
		}
		return rawBytes(vc.convert(*(v.(*rawBytes))))
	}
	newValue := func() any {
		if perCPU {
			return new([]rawBytes)
		}
		return new(rawBytes)
	}
	n := 0
	if old.Type() == ebpf.Array || old.Type() == ebpf.PerCPUArray {
		for i := uint32(0); i < min(old.MaxEntries(), nm.MaxEntries()); i++ {
			v := newValue()
			if err := old.Lookup(i, v); err != nil {
				return n, err
			}
			if err := nm.Put(i, conv(v)); err != nil {
				return n, fmt.Errorf("write index %d: %w", i, err)
			}
			n++
		}
		return n, nil
	}
	var k rawBytes
	v := newValue()
	it := old.Iterate()
	for it.Next(&k, v) {
		if err := nm.Put(rawBytes(kc.convert(k)), conv(v)); err != nil {
			return n, fmt.Errorf("write entry %d: %w", n, err)
		}
		n++
	}
	if err := it.Err(); err != nil {
		return n, err
	}
	return n, nil
}
