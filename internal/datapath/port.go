package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// SetPort makes ifindex a port: reachable for unicast (tx_ports, by slot),
// then known at ingress (port_index, or ports for large ifindexes).
func (d *Datapath) SetPort(p PortInfo) (err error) {
	d.configChanging()
	defer d.configChanged(&err)
	if p.Slot == 0 || int(p.Slot) >= tbpf.MaxPorts {
		return fmt.Errorf("port ifindex %d: slot %d out of range 1..%d", p.Ifindex, p.Slot, tbpf.MaxPorts-1)
	}
	if p.Bridge == 0 {
		return fmt.Errorf("port ifindex %d: bridge id 0", p.Ifindex)
	}
	if (p.Via != 0) != (p.ViaPeer != 0) || (p.Via != 0 && (IsPatchIfindex(p.Ifindex) || p.Via == p.Ifindex || p.ViaPeer == p.Ifindex || p.Via == p.ViaPeer)) {
		return fmt.Errorf("port ifindex %d: no XDP way in %d-%d for it", p.Ifindex, p.Via, p.ViaPeer)
	}
	if !IsPatchIfindex(p.Ifindex) {
		tx := p.Ifindex
		if p.Via != 0 {
			tx = p.Via
		}
		d.noteVia(p)
		if err := d.objs.TxPorts.Put(uint32(p.Slot), tx); err != nil {
			return fmt.Errorf("port ifindex %d: add to tx_ports as slot %d: %w", p.Ifindex, p.Slot, err)
		}
	}
	// A trunk's VLANs are in place before the port says it is one.
	if p.Trunk {
		bits, err := vlanBits(p.VLANs)
		if err != nil {
			return fmt.Errorf("port ifindex %d: %w", p.Ifindex, err)
		}
		if err := d.objs.PortVlans.Put(uint32(p.Slot), &bits); err != nil {
			return fmt.Errorf("port ifindex %d: write its VLANs: %w", p.Ifindex, err)
		}
	}
	// Storm limits and the mirror are in place before the flags that
	// send frames to them.
	if err := d.setStorm(p); err != nil {
		return err
	}
	if err := d.setMirror(p); err != nil {
		return err
	}
	v := tbpf.Port{Bridge: p.Bridge, Slot: p.Slot, MaxMacs: p.MaxMACs, Pvid: p.PVID}
	if p.Trunk {
		v.Flags |= tbpf.PortTrunk
	}
	if p.Storm != ([3]uint32{}) {
		v.Flags |= tbpf.PortStorm
	}
	v.Flags |= uint32(p.Policy.Flags &^ madeFlags)
	for _, f := range mirrorFlags {
		if *f.get(&p) {
			v.Flags |= f.flag
		}
	}
	if IsPatchIfindex(p.Ifindex) {
		if p.IPGuard() {
			return fmt.Errorf("port ifindex %d: ip_guard on a patch port", p.Ifindex)
		}
		return d.setPatch(p, v)
	}
	if err := d.addGuardIPs(p); err != nil {
		return err
	}
	if err := d.setVia(p, v); err != nil {
		return err
	}
	if err := d.portMap(p.Ifindex).Put(p.Ifindex, &v); err != nil {
		return fmt.Errorf("port ifindex %d: write: %w", p.Ifindex, err)
	}
	var keep []netip.Addr
	if p.IPGuard() {
		keep = p.Policy.GuardIPs
	}
	return d.pruneGuardIPs(p.Slot, keep)
}

// portMap is where the port of ifindex is kept (see bpf/lib/maps.h).
func (d *Datapath) portMap(ifindex uint32) *ebpf.Map {
	if ifindex < tbpf.PortDirect {
		return d.objs.PortIndex
	}
	return d.objs.Ports
}

// Port reads what the maps say of ifindex; ok is false when it is no port.
func (d *Datapath) Port(ifindex uint32) (PortInfo, bool, error) {
	if IsPatchIfindex(ifindex) {
		var pp tbpf.Patch
		slot := ifindex &^ tbpf.PatchIfindex
		if slot >= uint32(tbpf.MaxPorts) {
			return PortInfo{}, false, nil
		}
		if err := d.objs.Patches.Lookup(slot, &pp); err != nil {
			return PortInfo{}, false, fmt.Errorf("read patch port in slot %d: %w", slot, err)
		}
		if pp.Port.Bridge == 0 {
			return PortInfo{}, false, nil
		}
		p, ok, err := d.portInfo(ifindex, pp.Port)
		p.Peer = pp.Peer
		return p, ok, err
	}
	var v tbpf.Port
	err := d.portMap(ifindex).Lookup(ifindex, &v)
	if errors.Is(err, ebpf.ErrKeyNotExist) || (err == nil && v.Bridge == 0) {
		return PortInfo{}, false, nil
	}
	if err != nil {
		return PortInfo{}, false, fmt.Errorf("read port ifindex %d: %w", ifindex, err)
	}
	return d.portInfo(ifindex, v)
}

// portInfo reads a port's value, and a trunk's VLANs.
func (d *Datapath) portInfo(ifindex uint32, v tbpf.Port) (PortInfo, bool, error) {
	p := PortInfo{Ifindex: ifindex, Bridge: v.Bridge, Slot: v.Slot, MaxMACs: v.MaxMacs, PVID: v.Pvid}
	if v.Flags&tbpf.PortVia != 0 {
		// An end of an overlay port's way in: the port is read under its
		// own ifindex (via_dev here).
		p.Via, p.MaxMACs = ifindex, 0
		return p, false, nil
	}
	p.Policy.Flags = tbpf.PortFlag(v.Flags) &^ madeFlags
	for _, f := range mirrorFlags {
		*f.get(&p) = v.Flags&f.flag != 0
	}
	if v.Flags&tbpf.PortTrunk != 0 {
		var bits tbpf.PortVLANs
		if err := d.objs.PortVlans.Lookup(uint32(v.Slot), &bits); err != nil {
			return p, false, fmt.Errorf("read the VLANs of port ifindex %d: %w", ifindex, err)
		}
		p.Trunk = true
		p.VLANs = vlanList(&bits)
	}
	if v.Flags&tbpf.PortStorm != 0 {
		for k := range p.Storm {
			var st tbpf.Storm
			if err := d.objs.Storm.Lookup(stormKey(v.Slot, k), &st); err != nil {
				return p, false, fmt.Errorf("read the storm control of port ifindex %d: %w", ifindex, err)
			}
			p.Storm[k] = st.Rate
		}
	}
	if p.IPGuard() {
		ips, err := d.guardIPs(v.Slot)
		if err != nil {
			return p, false, fmt.Errorf("port ifindex %d: %w", ifindex, err)
		}
		p.Policy.GuardIPs = ips
	}
	if p.Mirrored() {
		var m tbpf.Mirror
		if err := d.objs.Mirrors.Lookup(uint32(v.Slot), &m); err != nil {
			return p, false, fmt.Errorf("read the mirror of port ifindex %d: %w", ifindex, err)
		}
		p.MirrorTo, p.MirrorToSlot = m.SpanIfindex, m.SpanSlot
		if m.Flags&tbpf.MirrorVLANs != 0 {
			var bits tbpf.PortVLANs
			if err := d.objs.MirrorVlans.Lookup(uint32(v.Slot), &bits); err != nil {
				return p, false, fmt.Errorf("read the mirrored VLANs of port ifindex %d: %w", ifindex, err)
			}
			p.MirrorVLANs = vlanList(&bits)
		}
	}
	return p, true, nil
}

func stormKey(slot uint16, kind int) uint32 {
	return uint32(slot)*uint32(tbpf.StormKinds) + uint32(kind)
}

// setStorm writes the port's storm control limiters. A limiter whose rate
// stays keeps its state; a new rate starts with a full burst.
func (d *Datapath) setStorm(p PortInfo) error {
	for k, rate := range p.Storm {
		var cur, want tbpf.Storm
		key := stormKey(p.Slot, k)
		if err := d.objs.Storm.Lookup(key, &cur); err != nil {
			return fmt.Errorf("port ifindex %d: read storm control: %w", p.Ifindex, err)
		}
		if rate > 0 {
			want.Rate = rate
			want.IntervalNs = uint64(time.Second) / uint64(rate)
			want.BurstNs = uint64(StormBurst(rate)-1) * want.IntervalNs
		}
		if cur.Rate == want.Rate && cur.IntervalNs == want.IntervalNs && cur.BurstNs == want.BurstNs {
			continue
		}
		if err := d.objs.Storm.Put(key, &want); err != nil {
			return fmt.Errorf("port ifindex %d: write storm control: %w", p.Ifindex, err)
		}
	}
	return nil
}

// StormBurst is how many frames of a kind limited to rate a second pass
// back to back after a quiet spell: a tenth of a second's worth, at least 1.
func StormBurst(rate uint32) uint32 { return max(rate/10, 1) }

// setMirror writes where a mirrored port's copies go.
func (d *Datapath) setMirror(p PortInfo) error {
	if !p.Mirrored() {
		return nil
	}
	m := tbpf.Mirror{SpanIfindex: p.MirrorTo, SpanSlot: p.MirrorToSlot}
	if len(p.MirrorVLANs) > 0 {
		bits, err := vlanBits(p.MirrorVLANs)
		if err != nil {
			return fmt.Errorf("port ifindex %d: mirrored %w", p.Ifindex, err)
		}
		if err := d.objs.MirrorVlans.Put(uint32(p.Slot), &bits); err != nil {
			return fmt.Errorf("port ifindex %d: write the mirrored VLANs: %w", p.Ifindex, err)
		}
		m.Flags |= tbpf.MirrorVLANs
	}
	if err := d.objs.Mirrors.Put(uint32(p.Slot), &m); err != nil {
		return fmt.Errorf("port ifindex %d: write its mirror: %w", p.Ifindex, err)
	}
	return nil
}

// vlanBits is the bitmap of vids.
func vlanBits(vids []uint16) (tbpf.PortVLANs, error) {
	var bits tbpf.PortVLANs
	for _, vid := range vids {
		if vid == 0 || int(vid) >= tbpf.VLANIDs {
			return bits, fmt.Errorf("VLAN %d out of range", vid)
		}
		bits.Bits[vid/64] |= 1 << (vid % 64)
	}
	return bits, nil
}

// vlanList lists the VIDs whose bits are set.
func vlanList(bits *tbpf.PortVLANs) []uint16 {
	var out []uint16
	for vid := 1; vid < tbpf.VLANIDs; vid++ {
		if bits.Bits[vid/64]&(1<<(vid%64)) != 0 {
			out = append(out, uint16(vid))
		}
	}
	return out
}

// setVia writes the ends of the port's XDP way in (PortInfo.Via,
// ViaPeer) into the port maps under its value v, flagged TR_PORT_VIA and
// holding the port's ifindex in via_dev, and forgets the ends it had.
func (d *Datapath) setVia(p PortInfo, v tbpf.Port) error {
	want := [2]uint32{p.Via, p.ViaPeer}
	if old := d.via[p.Ifindex]; old != want {
		for _, end := range old {
			if end != 0 && end != want[0] && end != want[1] {
				if err := d.unport(end); err != nil {
					return fmt.Errorf("port ifindex %d: forget its XDP way in %d: %w", p.Ifindex, end, err)
				}
			}
		}
		delete(d.via, p.Ifindex)
	}
	if p.Via == 0 {
		return nil
	}
	v.Flags |= tbpf.PortVia
	v.ViaDev, v.MaxMacs = p.Ifindex, 0 // an end is no port: no limit of its own
	for _, end := range want {
		if err := d.portMap(end).Put(end, &v); err != nil {
			return fmt.Errorf("port ifindex %d: write its XDP way in %d: %w", p.Ifindex, end, err)
		}
	}
	d.via[p.Ifindex] = want
	return nil
}

// viaOfEarlier writes again the ends of p's way in that a release before
// struct tr_port had via_dev wrote, with the port's device in max_macs (a
// datapath it pinned, adopted): as trestle_via reads them now.
func (d *Datapath) viaOfEarlier(p PortInfo) error {
	for _, end := range [2]uint32{p.Via, p.ViaPeer} {
		var v tbpf.Port
		if err := d.portMap(end).Lookup(end, &v); err != nil {
			return fmt.Errorf("port ifindex %d: read its XDP way in %d: %w", p.Ifindex, end, err)
		}
		if v.Flags&tbpf.PortVia == 0 || v.ViaDev != 0 {
			continue
		}
		v.ViaDev, v.MaxMacs = p.Ifindex, 0
		if err := d.portMap(end).Put(end, &v); err != nil {
			return fmt.Errorf("port ifindex %d: write its XDP way in %d: %w", p.Ifindex, end, err)
		}
	}
	return nil
}

// unport makes ifindex no port at ingress.
func (d *Datapath) unport(ifindex uint32) error {
	if ifindex < tbpf.PortDirect {
		return d.objs.PortIndex.Put(ifindex, &tbpf.Port{}) // bridge 0: no port
	}
	if err := d.objs.Ports.Delete(ifindex); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	return nil
}

// DelPort forgets a port: first at ingress, then as an egress.
func (d *Datapath) DelPort(ifindex uint32, slot uint16) (err error) {
	d.configChanging()
	defer d.configChanged(&err)
	if IsPatchIfindex(ifindex) {
		return d.delPatch(slot)
	}
	delete(d.xdpTo, ifindex)
	for _, end := range d.via[ifindex] {
		if end == 0 {
			continue
		}
		if err := d.unport(end); err != nil {
			return fmt.Errorf("port ifindex %d: forget its XDP way in %d: %w", ifindex, end, err)
		}
	}
	delete(d.via, ifindex)
	if err := d.unport(ifindex); err != nil {
		return fmt.Errorf("port ifindex %d: delete: %w", ifindex, err)
	}
	if slot == 0 || int(slot) >= tbpf.MaxPorts {
		return nil
	}
	if err := d.objs.TxPorts.Delete(uint32(slot)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("port ifindex %d: remove slot %d from tx_ports: %w", ifindex, slot, err)
	}
	return d.pruneGuardIPs(slot, nil)
}

// Ports reads every port the maps hold (for adoption), each with the ends
// of its XDP way in (Via, ViaPeer), which the datapath then knows as
// SetPort had written them.
func (d *Datapath) Ports() ([]PortInfo, error) {
	out, err := d.ports()
	if err != nil {
		return nil, err
	}
	ends := map[uint16][]uint32{} // slot -> ends of a way in
	ports := out[:0]
	for _, p := range out {
		if p.Via != 0 {
			ends[p.Slot] = append(ends[p.Slot], p.Via)
			continue
		}
		ports = append(ports, p)
	}
	for i := range ports {
		e := ends[ports[i].Slot]
		if len(e) != 2 || IsPatchIfindex(ports[i].Ifindex) {
			continue // not a whole way in: unported below
		}
		// The end XDP copies go into is the slot's egress.
		var tx uint32
		if err := d.objs.TxPorts.Lookup(uint32(ports[i].Slot), &tx); err != nil {
			continue
		}
		switch tx {
		case e[0]:
			ports[i].Via, ports[i].ViaPeer = e[0], e[1]
		case e[1]:
			ports[i].Via, ports[i].ViaPeer = e[1], e[0]
		default:
			continue
		}
		if err := d.viaOfEarlier(ports[i]); err != nil {
			return nil, err
		}
		d.via[ports[i].Ifindex] = [2]uint32{ports[i].Via, ports[i].ViaPeer}
		d.noteVia(ports[i])
		delete(ends, ports[i].Slot)
	}
	// Ends no port owns (half a way in, or one whose device went and
	// took its tx_ports entry along) name nothing: they go. The port's
	// Via reads 0 then, and the daemon writes its way in again.
	for _, es := range ends {
		for _, end := range es {
			if err := d.unport(end); err != nil {
				return nil, fmt.Errorf("remove a stale XDP way in %d: %w", end, err)
			}
		}
	}
	return ports, nil
}

// ports reads every value of the port maps: ports, and ways in (Via set
// to their own ifindex).
func (d *Datapath) ports() ([]PortInfo, error) {
	var out []PortInfo
	cursor := new(ebpf.MapBatchCursor)
	keys := make([]uint32, 4096)
	vals := make([]tbpf.Port, 4096)
	for {
		n, err := d.objs.PortIndex.BatchLookup(cursor, keys, vals, nil)
		for i := 0; i < n; i++ {
			if vals[i].Bridge != 0 {
				p, _, err := d.portInfo(keys[i], vals[i])
				if err != nil {
					return nil, err
				}
				out = append(out, p)
			}
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read ports: %w", err)
		}
	}
	var k uint32
	var v tbpf.Port
	it := d.objs.Ports.Iterate()
	for it.Next(&k, &v) {
		if v.Bridge != 0 {
			p, _, err := d.portInfo(k, v)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read ports: %w", err)
	}
	patches, err := d.patchPorts()
	return append(out, patches...), err
}

// ResetPort zeroes a slot's counters, address counts and reserve,
// for a slot given to a new port. The slot must have no port and no
// entries: no CPU writes them.
func (d *Datapath) ResetPort(slot uint16) error {
	zero := make([]tbpf.PortStats, d.ncpu)
	if err := d.objs.Stats.Put(uint32(slot), zero); err != nil {
		return fmt.Errorf("reset counters of slot %d: %w", slot, err)
	}
	if err := d.SetReserve(slot, 0); err != nil {
		return err
	}
	t, done := d.use()
	defer done()
	for _, m := range []*ebpf.Map{t.portMacs, t.portMacsDel} {
		if err := m.Put(uint32(slot), int32(0)); err != nil {
			return fmt.Errorf("reset address count of slot %d: %w", slot, err)
		}
	}
	return nil
}

// Stats returns a slot's counters summed over CPUs. A frame that crosses a
// patch is counted once, as sent by the patch port it leaves by: a patch
// port's received frames are those its peer sent.
func (d *Datapath) Stats(slot uint16) (tbpf.PortStats, error) {
	sum, err := d.slotStats(slot)
	if err != nil || slot == 0 || int(slot) >= tbpf.MaxPorts {
		return sum, err
	}
	var pp tbpf.Patch
	if err := d.objs.Patches.Lookup(uint32(slot), &pp); err != nil {
		return sum, fmt.Errorf("read patch port of slot %d: %w", slot, err)
	}
	if pp.Port.Bridge == 0 {
		return sum, nil
	}
	peer, err := d.slotStats(pp.Peer)
	if err != nil {
		return sum, err
	}
	sum.C[tbpf.RxPackets], sum.C[tbpf.RxBytes] = peer.C[tbpf.TxPackets], peer.C[tbpf.TxBytes]
	return sum, nil
}

func (d *Datapath) slotStats(slot uint16) (tbpf.PortStats, error) {
	var sum tbpf.PortStats
	per := make([]tbpf.PortStats, d.ncpu)
	if err := d.objs.Stats.Lookup(uint32(slot), &per); err != nil {
		return sum, fmt.Errorf("read counters of slot %d: %w", slot, err)
	}
	for _, s := range per {
		for i := range s.C {
			sum.C[i] += s.C[i]
		}
		for i := range s.Drops {
			sum.Drops[i] += s.Drops[i]
		}
	}
	return sum, nil
}

// MACCount is the learned-address count the datapath checks a port's
// max_macs against (slot) or a bridge's max_entries (bridge id).
func (d *Datapath) PortMACs(slot uint16) (int, error) {
	t, done := d.use()
	defer done()
	return count(t.portMacs, t.portMacsDel, uint32(slot))
}

func (d *Datapath) BridgeMACs(id uint16) (int, error) {
	t, done := d.use()
	defer done()
	return count(t.bridgeMacs, t.bridgeMacsDel, uint32(id))
}

func count(added, deleted *ebpf.Map, idx uint32) (int, error) {
	var a, del int32
	if err := added.Lookup(idx, &a); err != nil {
		return 0, fmt.Errorf("read address count %d: %w", idx, err)
	}
	if err := deleted.Lookup(idx, &del); err != nil {
		return 0, fmt.Errorf("read address count %d: %w", idx, err)
	}
	return int(a - del), nil
}
