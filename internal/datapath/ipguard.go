package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// The addresses of ip_guard ports (guard_ips, bpf/lib/ipguard.h): keyed by
// slot and address, IPv4 in its IPv4-mapped form. A port's addresses are
// written before its entry says TR_PORT_IP_GUARD, and the ones it no longer
// has are removed after, so that no frame of an address it keeps is dropped
// while it changes.

func guardKey(slot uint16, a netip.Addr) tbpf.GuardKey {
	return tbpf.GuardKey{Slot: uint32(slot), Addr: a.As16()}
}

// guardIPs reads the addresses bound to slot, sorted, IPv4 ones unmapped.
func (d *Datapath) guardIPs(slot uint16) ([]netip.Addr, error) {
	var out []netip.Addr
	var k tbpf.GuardKey
	var v uint8
	it := d.objs.GuardIps.Iterate()
	for it.Next(&k, &v) {
		if k.Slot == uint32(slot) {
			out = append(out, netip.AddrFrom16(k.Addr).Unmap())
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read the addresses of slot %d: %w", slot, err)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
}

// addGuardIPs writes the addresses p's ip_guard takes (none unless
// IPGuard), before its entry.
func (d *Datapath) addGuardIPs(p PortInfo) error {
	if !p.IPGuard() {
		return nil
	}
	if len(p.Policy.GuardIPs) == 0 {
		return fmt.Errorf("port ifindex %d: ip_guard without an address would drop every IP frame", p.Ifindex)
	}
	for _, a := range p.Policy.GuardIPs {
		if !a.IsValid() || a.IsUnspecified() {
			return fmt.Errorf("port ifindex %d: ip_guard address %v", p.Ifindex, a)
		}
		k := guardKey(p.Slot, a)
		if err := d.objs.GuardIps.Put(&k, uint8(1)); err != nil {
			return fmt.Errorf("port ifindex %d: bind address %v: %w", p.Ifindex, a, err)
		}
	}
	return nil
}

// pruneGuardIPs removes the addresses of slot that keep are not (all of
// them for nil), after the port's entry no longer needs them.
func (d *Datapath) pruneGuardIPs(slot uint16, keep []netip.Addr) error {
	have, err := d.guardIPs(slot)
	if err != nil {
		return err
	}
	for _, a := range have {
		if slices.Contains(keep, a) {
			continue
		}
		k := guardKey(slot, a)
		if err := d.objs.GuardIps.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("slot %d: unbind address %v: %w", slot, a, err)
		}
	}
	return nil
}
