package datapath

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// The neighbour table (neigh, bpf/lib/neigh.h): an IP address in one VLAN
// of a bridge, with the MAC of the station that holds it and the port it
// is on. A bridge with NeighSuppress answers ARP requests and neighbour
// solicitations for its addresses itself. The daemon writes the static
// entries (SetNeighs) and the learned ones (PutNeigh, DelNeigh: from the
// ARP, ND and DHCP copies the snoop ring brings it); at most
// tbpf.MaxNeigh of all bridges together.

// NeighKey is an address in one VLAN of a bridge (the VLAN as the FDB
// keys it: 0 in a bridge that is not VLAN-aware).
type NeighKey struct {
	Bridge uint16
	VLAN   uint16
	Addr   netip.Addr // IPv4 in its 4-byte form, or IPv6
}

// Neigh is the station that holds an address.
type Neigh struct {
	MAC     net.HardwareAddr
	Slot    uint16 // its port
	Learned bool   // seen in the port's ARP or ND; else static (the control plane's)
	SeenNs  uint64 // written (static) or last seen (learned), on the datapath's clock (Now)
}

// NeighEntry is an entry of the table as read.
type NeighEntry struct {
	NeighKey
	Neigh
	Age time.Duration // since SeenNs
}

func neighKey(k NeighKey) (tbpf.NeighKey, error) {
	a := k.Addr.Unmap()
	out := tbpf.NeighKey{Bridge: k.Bridge, Vlan: k.VLAN}
	switch {
	case !a.IsValid() || a.IsUnspecified() || a.IsMulticast():
		return out, fmt.Errorf("neighbour %v: not a station's address", k.Addr)
	case a.Is4():
		out.Family = 4
		b := a.As4()
		copy(out.Addr[:], b[:])
	default:
		out.Family = 6
		out.Addr = a.As16()
	}
	return out, nil
}

func neighAddr(k tbpf.NeighKey) netip.Addr {
	if k.Family == 4 {
		return netip.AddrFrom4([4]byte(k.Addr[:4]))
	}
	return netip.AddrFrom16(k.Addr)
}

// Neighs reads the whole table, sorted by bridge, VLAN and address. It is
// bounded (tbpf.MaxNeigh), so it is read at once rather than walked.
func (d *Datapath) Neighs() ([]NeighEntry, error) {
	var out []NeighEntry
	var k tbpf.NeighKey
	var v tbpf.Neigh
	now := Now()
	it := d.objs.Neigh.Iterate()
	for it.Next(&k, &v) {
		e := NeighEntry{NeighKey: NeighKey{Bridge: k.Bridge, VLAN: k.Vlan, Addr: neighAddr(k)},
			Neigh: Neigh{MAC: slices.Clone(net.HardwareAddr(v.Mac[:])), Slot: v.Slot,
				Learned: v.Flags&uint32(tbpf.NeighLearned) != 0, SeenNs: v.SeenNs}}
		if now > v.SeenNs {
			e.Age = time.Duration(now - v.SeenNs)
		}
		out = append(out, e)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read the neighbour table: %w", err)
	}
	slices.SortFunc(out, func(a, b NeighEntry) int {
		if a.Bridge != b.Bridge {
			return int(a.Bridge) - int(b.Bridge)
		}
		if a.VLAN != b.VLAN {
			return int(a.VLAN) - int(b.VLAN)
		}
		return a.Addr.Compare(b.Addr)
	})
	return out, nil
}

// SetNeighs makes the table's static entries want, as they are: an entry
// want has that the table has otherwise is written (new ones stamped now),
// a static one it lacks is deleted; learned entries are left as they are
// unless want names their address. The first error ends it; what was
// written stays, and the next call finishes it.
func (d *Datapath) SetNeighs(want map[NeighKey]Neigh) error {
	have, err := d.Neighs()
	if err != nil {
		return err
	}
	held := map[NeighKey]NeighEntry{}
	for _, e := range have {
		held[e.NeighKey] = e
		if _, ok := want[e.NeighKey]; ok || e.Learned {
			continue
		}
		k, err := neighKey(e.NeighKey)
		if err != nil {
			return err
		}
		if err := d.objs.Neigh.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete neighbour %v vlan %d: %w", e.Addr, e.VLAN, err)
		}
	}
	if len(want) > tbpf.MaxNeigh {
		return fmt.Errorf("%d neighbours, more than the table's %d", len(want), tbpf.MaxNeigh)
	}
	now := Now()
	for nk, n := range want {
		if h, ok := held[nk]; ok && !h.Learned && h.Slot == n.Slot && slices.Equal(h.MAC, n.MAC) {
			continue
		}
		k, err := neighKey(nk)
		if err != nil {
			return err
		}
		if len(n.MAC) != 6 {
			return fmt.Errorf("neighbour %v: MAC %v", nk.Addr, n.MAC)
		}
		v := tbpf.Neigh{Slot: n.Slot, Flags: uint32(tbpf.NeighStatic), SeenNs: now}
		copy(v.Mac[:], n.MAC)
		if n.Learned {
			v.Flags = uint32(tbpf.NeighLearned)
		}
		if err := d.objs.Neigh.Update(&k, &v, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("write neighbour %v vlan %d: %w", nk.Addr, nk.VLAN, err)
		}
	}
	return nil
}

// PutNeigh writes one entry (a learned one, from the daemon's checks of a
// frame the snoop ring copied), stamped seenNs (the datapath's clock, Now).
func (d *Datapath) PutNeigh(nk NeighKey, n Neigh) error {
	k, err := neighKey(nk)
	if err != nil {
		return err
	}
	if len(n.MAC) != 6 {
		return fmt.Errorf("neighbour %v: MAC %v", nk.Addr, n.MAC)
	}
	v := tbpf.Neigh{Slot: n.Slot, Flags: uint32(tbpf.NeighStatic), SeenNs: n.SeenNs}
	if n.Learned {
		v.Flags = uint32(tbpf.NeighLearned)
	}
	copy(v.Mac[:], n.MAC)
	if err := d.objs.Neigh.Update(&k, &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("write neighbour %v vlan %d: %w", nk.Addr, nk.VLAN, err)
	}
	return nil
}

// DelNeigh deletes one entry; none there is no error.
func (d *Datapath) DelNeigh(nk NeighKey) error {
	k, err := neighKey(nk)
	if err != nil {
		return err
	}
	if err := d.objs.Neigh.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete neighbour %v vlan %d: %w", nk.Addr, nk.VLAN, err)
	}
	return nil
}
