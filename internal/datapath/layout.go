package datapath

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// A map's layout is what a program assumes of the bytes in it: the map's
// type, sizes and flags, and the C types of its key and value, read from the
// object's BTF. Pinned maps are named after a hash of their layout, and the
// layout itself is kept in the pinned layouts map, so that a daemon of
// another build knows whether it may use a pinned map as it is, must copy it
// into a map of its own layout, field by field (migrate), or must refuse.

// typeDesc is a C type reduced to what decides its bytes.
type typeDesc struct {
	Kind   string      `json:"k"` // int, array, struct, union, bytes
	Size   uint32      `json:"s"`
	Signed bool        `json:"sg,omitempty"`
	N      uint32      `json:"n,omitempty"` // array: elements
	Elem   *typeDesc   `json:"e,omitempty"` // array: element type
	Fields []fieldDesc `json:"f,omitempty"` // struct, union, and a data section's variables
}

type fieldDesc struct {
	Name string   `json:"name"`
	Off  uint32   `json:"off"` // bytes
	Type typeDesc `json:"t"`
}

// Layout is a map's layout (max entries apart: a table that only grew is
// copied, never refused).
type Layout struct {
	Type      string   `json:"type"`
	KeySize   uint32   `json:"key_size"`
	ValueSize uint32   `json:"value_size"`
	Flags     uint32   `json:"flags"`
	Key       typeDesc `json:"key"`
	Value     typeDesc `json:"value"`
	Inner     *Layout  `json:"inner,omitempty"` // maps of maps: the inner maps'
}

// Hash names the layout in pin file names: 16 hex digits of its SHA-256.
func (l *Layout) Hash() string {
	b, _ := json.Marshal(l)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// layoutOf describes a map spec. flags are the flags the map is created with.
func layoutOf(ms *ebpf.MapSpec, flags uint32) (*Layout, error) {
	l := &Layout{Type: ms.Type.String(), KeySize: ms.KeySize, ValueSize: ms.ValueSize, Flags: flags}
	var err error
	if l.Key, err = describe(ms.Key, ms.KeySize); err != nil {
		return nil, fmt.Errorf("map %s key: %w", ms.Name, err)
	}
	if l.Value, err = describe(ms.Value, ms.ValueSize); err != nil {
		return nil, fmt.Errorf("map %s value: %w", ms.Name, err)
	}
	if ms.InnerMap != nil {
		if l.Inner, err = layoutOf(ms.InnerMap, ms.InnerMap.Flags); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// describe reduces a BTF type; a map without type information for its key
// or value (devmaps, maps of maps) is described as so many bytes.
func describe(t btf.Type, size uint32) (typeDesc, error) {
	if _, void := t.(*btf.Void); t == nil || void {
		return typeDesc{Kind: "bytes", Size: size}, nil
	}
	return describeType(t, 0)
}

func describeType(t btf.Type, depth int) (typeDesc, error) {
	if depth > 16 {
		return typeDesc{}, fmt.Errorf("type nests too deep")
	}
	t = btf.UnderlyingType(t)
	switch v := t.(type) {
	case *btf.Int:
		return typeDesc{Kind: "int", Size: v.Size, Signed: v.Encoding&btf.Signed != 0}, nil
	case *btf.Enum:
		return typeDesc{Kind: "int", Size: v.Size, Signed: v.Signed}, nil
	case *btf.Pointer:
		return typeDesc{Kind: "int", Size: 8}, nil
	case *btf.Array:
		e, err := describeType(v.Type, depth+1)
		if err != nil {
			return typeDesc{}, err
		}
		return typeDesc{Kind: "array", Size: e.Size * v.Nelems, N: v.Nelems, Elem: &e}, nil
	case *btf.Struct:
		return describeMembers("struct", v.Size, v.Members, depth)
	case *btf.Union:
		return describeMembers("union", v.Size, v.Members, depth)
	case *btf.Datasec:
		d := typeDesc{Kind: "struct", Size: v.Size}
		for _, vs := range v.Vars {
			name := vs.Type.TypeName()
			vt := vs.Type
			if bv, ok := vs.Type.(*btf.Var); ok {
				vt = bv.Type
			}
			td, err := describeType(vt, depth+1)
			if err != nil {
				return typeDesc{}, err
			}
			d.Fields = append(d.Fields, fieldDesc{Name: name, Off: vs.Offset, Type: td})
		}
		return d, nil
	}
	return typeDesc{}, fmt.Errorf("cannot describe %s", t)
}

func describeMembers(kind string, size uint32, ms []btf.Member, depth int) (typeDesc, error) {
	d := typeDesc{Kind: kind, Size: size}
	for _, m := range ms {
		if m.BitfieldSize != 0 || m.Offset%8 != 0 {
			return typeDesc{}, fmt.Errorf("bit field %s", m.Name)
		}
		td, err := describeType(m.Type, depth+1)
		if err != nil {
			return typeDesc{}, err
		}
		d.Fields = append(d.Fields, fieldDesc{Name: m.Name, Off: m.Offset.Bytes(), Type: td})
	}
	return d, nil
}

// leaf is a scalar inside a value: where it is and what it is.
type leaf struct {
	off, size uint32
	kind      string // int (with signedness) or bytes
}

// leaves flattens a type into its scalars by path: "ports[3].ifindex",
// "drops[2]", "name[0]". Padding has no path and is not copied.
func leaves(d typeDesc) map[string]leaf {
	out := map[string]leaf{}
	var walk func(d typeDesc, path string, off uint32)
	walk = func(d typeDesc, path string, off uint32) {
		switch d.Kind {
		case "array":
			for i := uint32(0); i < d.N; i++ {
				walk(*d.Elem, fmt.Sprintf("%s[%d]", path, i), off+i*d.Elem.Size)
			}
		case "struct", "union":
			for _, f := range d.Fields {
				p := f.Name
				if path != "" {
					p = path + "." + f.Name
				}
				walk(f.Type, p, off+f.Off)
			}
		case "int":
			kind := "uint"
			if d.Signed {
				kind = "int"
			}
			out[path] = leaf{off, d.Size, kind}
		default:
			out[path] = leaf{off, d.Size, d.Kind}
		}
	}
	walk(d, "", 0)
	return out
}

// converter turns a value of one layout into a value of another: each
// scalar that exists in both under the same path, size and kind is copied,
// an unsigned integer into a wider one too (a port's flags, 16 bits until
// issue 29, now 32: the low bytes, as the datapath is little-endian, the
// rest zero); every other byte of the new value is zero.
type converter struct {
	newSize uint32
	copies  []copyOp
	// dropped and zeroed name what is lost (old scalars with no place) and
	// what starts from zero (new scalars with no source), for the log.
	dropped, zeroed []string
}

type copyOp struct{ from, to, n uint32 }

func newConverter(from, to typeDesc, legacy map[string]string) *converter {
	fl, tl := leaves(from), leaves(to)
	c := &converter{newSize: to.Size}
	for p, t := range tl {
		f, ok := fl[p]
		if !ok && legacy[p] != "" {
			f, ok = fl[legacy[p]]
		}
		if ok && f.kind == "uint" && t.kind == "uint" && f.size < t.size {
			c.copies = append(c.copies, copyOp{f.off, t.off, f.size})
			continue
		}
		if !ok || f.size != t.size || f.kind != t.kind {
			c.zeroed = append(c.zeroed, p)
			continue
		}
		c.copies = append(c.copies, copyOp{f.off, t.off, t.size})
	}
	renamed := map[string]bool{}
	for _, old := range legacy {
		renamed[old] = true
	}
	for p := range fl {
		if _, ok := tl[p]; !ok && !renamed[p] {
			c.dropped = append(c.dropped, p)
		}
	}
	sort.Slice(c.copies, func(i, j int) bool { return c.copies[i].to < c.copies[j].to })
	sort.Strings(c.zeroed)
	sort.Strings(c.dropped)
	return c
}

// legacyPaths are the fields a map's value had before they became an
// indexed array: the port and VLAN counters were named fields (rx_packets)
// before enum tr_counter made them c[0]. A datapath pinned by such a build
// keeps its counts: c[i] takes the field the enum names for i.
func legacyPaths(mapName string) map[string]string {
	var names []string
	switch mapName {
	case tbpf.TrestleMapStats:
		names = tbpf.CounterNames()
	case tbpf.TrestleMapVlanStats:
		names = tbpf.VLANCounterNames()
	}
	m := map[string]string{}
	for i, n := range names {
		m[fmt.Sprintf("c[%d]", i)] = n
	}
	return m
}

func (c *converter) convert(old []byte) []byte {
	out := make([]byte, c.newSize)
	for _, op := range c.copies {
		if int(op.from+op.n) <= len(old) {
			copy(out[op.to:op.to+op.n], old[op.from:op.from+op.n])
		}
	}
	return out
}

// identity says whether the conversion copies every byte as it is.
func (c *converter) identity(oldSize uint32) bool {
	return oldSize == c.newSize && len(c.zeroed) == 0 && len(c.dropped) == 0
}

// summary names what a conversion loses and starts from zero (shortened).
func (c *converter) summary() string {
	var parts []string
	if len(c.zeroed) > 0 {
		parts = append(parts, "new: "+short(c.zeroed))
	}
	if len(c.dropped) > 0 {
		parts = append(parts, "dropped: "+short(c.dropped))
	}
	return strings.Join(parts, "; ")
}

func short(s []string) string {
	if len(s) > 6 {
		return strings.Join(s[:6], ", ") + fmt.Sprintf(" and %d more", len(s)-6)
	}
	return strings.Join(s, ", ")
}
