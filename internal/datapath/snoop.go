package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Multicast snooping (bpf/lib/snoop.h): in a bridge with Snoop, the
// datapath copies each IGMP, MLD and PIM message that comes in by a port
// to the snoop ring (a ring of its own, so that a flood of reports crowds
// out no other event; a copy with no room is counted, SnoopLost), and
// sends a multicast frame to a group in the group table only to that
// entry's ports. The daemon parses the messages and writes the table
// (SetGroup, DelGroup): at most tbpf.MaxGroups entries of all bridges.

// GroupKey is a group in one VLAN of a bridge (the VLAN as the FDB keys
// it). An unspecified Group (0.0.0.0 for IGMP, :: for MLD) is the bridge's
// entry for that protocol's messages other than queries (their router
// ports, once a querier of it has been seen).
type GroupKey struct {
	Bridge uint16
	VLAN   uint16
	Group  netip.Addr
}

func groupKey(k GroupKey) (tbpf.GroupKey, error) {
	out := tbpf.GroupKey{Bridge: k.Bridge, Vlan: k.VLAN}
	if !k.Group.IsMulticast() && !k.Group.IsUnspecified() {
		return out, fmt.Errorf("group %v: not a multicast address", k.Group)
	}
	out.Addr = netip.AddrFrom16(k.Group.As16()).As16() // IPv4 as ::ffff:a.b.c.d
	return out, nil
}

// SetGroup writes the ports (slots) a group's frames go to. The table
// full is ErrGroupsFull.
func (d *Datapath) SetGroup(k GroupKey, slots []uint16) error {
	key, err := groupKey(k)
	if err != nil {
		return err
	}
	var g tbpf.Group
	for _, s := range slots {
		if int(s) >= len(g.Sel)*64 {
			return fmt.Errorf("group %v: port slot %d out of range", k.Group, s)
		}
		g.Sel[s/64] |= 1 << (s % 64)
	}
	if err := d.objs.Groups.Put(&key, &g); err != nil {
		if errors.Is(err, unix.E2BIG) {
			return fmt.Errorf("group %v: %w", k.Group, ErrGroupsFull)
		}
		return fmt.Errorf("write group %v: %w", k.Group, err)
	}
	return nil
}

// ErrGroupsFull: the group table holds tbpf.MaxGroups entries.
var ErrGroupsFull = fmt.Errorf("the group table is full (%d entries of all bridges)", tbpf.MaxGroups)

// DelGroup removes a group's entry; one that is not there is no error.
func (d *Datapath) DelGroup(k GroupKey) error {
	key, err := groupKey(k)
	if err != nil {
		return err
	}
	if err := d.objs.Groups.Delete(&key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete group %v: %w", k.Group, err)
	}
	return nil
}

// ClearGroups empties the group table: a daemon that starts knows no
// member (they report again at the next query), so every group is flooded
// meanwhile, as one without members is.
func (d *Datapath) ClearGroups() error {
	var k tbpf.GroupKey
	var keys []tbpf.GroupKey
	var v tbpf.Group
	it := d.objs.Groups.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read the group table: %w", err)
	}
	for i := range keys {
		if err := d.objs.Groups.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("clear the group table: %w", err)
		}
	}
	return nil
}

// Groups reads the table: each entry's ports by slot.
func (d *Datapath) Groups() (map[GroupKey][]uint16, error) {
	out := map[GroupKey][]uint16{}
	var k tbpf.GroupKey
	var v tbpf.Group
	it := d.objs.Groups.Iterate()
	for it.Next(&k, &v) {
		gk := GroupKey{Bridge: k.Bridge, VLAN: k.Vlan, Group: netip.AddrFrom16(k.Addr).Unmap()}
		var slots []uint16
		for w, bits := range v.Sel {
			for b := 0; b < 64; b++ {
				if bits&(1<<b) != 0 {
					slots = append(slots, uint16(w*64+b))
				}
			}
		}
		out[gk] = slots
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read the group table: %w", err)
	}
	return out, nil
}

// SnoopMsg is a control frame as it came in by a port, copied to the snoop
// ring: an IGMP, MLD or PIM message of a snooping bridge (Neigh false), or
// an ARP, neighbour discovery or DHCP server message of a bridge with
// NeighSuppress (Neigh, bpf/lib/neigh.h's tr_neigh_copy). Packet is its
// payload after the tags (the IP packet, the ARP message), cut at
// tbpf.SnoopCopy bytes, of EtherType Proto.
type SnoopMsg struct {
	Time     time.Time
	Bridge   uint16
	VLAN     uint16
	Slot     uint16
	Neigh    bool
	Proto    uint16
	Dst, Src net.HardwareAddr
	Packet   []byte
}

// SnoopReader reads the snoop ring. One reader at a time.
type SnoopReader struct {
	rd *ringbuf.Reader
}

// Snoop opens a reader of the snoop ring.
func (d *Datapath) Snoop() (*SnoopReader, error) {
	if d.objs.SnoopRing == nil {
		return nil, errors.New("read snooped messages: this datapath build has no snoop ring")
	}
	rd, err := ringbuf.NewReader(d.objs.SnoopRing)
	if err != nil {
		return nil, fmt.Errorf("read snooped messages: %w", err)
	}
	return &SnoopReader{rd: rd}, nil
}

// Read waits for the next message until deadline (zero: none); ErrNoEvent
// when none came.
func (r *SnoopReader) Read(deadline time.Time) (SnoopMsg, error) {
	raw, ok, err := readRing(r.rd, deadline)
	if err != nil {
		return SnoopMsg{}, fmt.Errorf("read snooped messages: %w", err)
	}
	if !ok {
		return SnoopMsg{}, ErrNoEvent
	}
	return decodeSnoop(raw, wallOffset())
}

// Close ends the reader (a Read waiting returns an error).
func (r *SnoopReader) Close() error { return r.rd.Close() }

func decodeSnoop(raw []byte, offset int64) (SnoopMsg, error) {
	var m tbpf.SnoopMsg
	if len(raw) < binary.Size(m) {
		return SnoopMsg{}, fmt.Errorf("snooped message record of %d bytes, shorter than %d", len(raw), binary.Size(m))
	}
	if err := binary.Read(bytes.NewReader(raw), binary.NativeEndian, &m); err != nil {
		return SnoopMsg{}, fmt.Errorf("decode snooped message: %w", err)
	}
	n := min(int(m.Len), len(m.Data))
	return SnoopMsg{Time: time.Unix(0, int64(m.TsNs)+offset), Bridge: m.Bridge, VLAN: m.Vlan, Slot: m.Slot,
		Neigh: m.Kind == uint8(tbpf.TrestleTrSnoopKindTR_SNOOP_NEIGH), Proto: m.Proto,
		Dst: slices.Clone(net.HardwareAddr(m.Eth[:6])), Src: slices.Clone(net.HardwareAddr(m.Eth[6:])),
		Packet: append([]byte(nil), m.Data[:n]...)}, nil
}

// SnoopLost counts the messages the snoop ring had no room for since the
// datapath was created.
func (d *Datapath) SnoopLost() (uint64, error) {
	return d.lostCount(d.objs.SnoopLost, "the snoop ring's")
}
