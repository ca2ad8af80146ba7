// Package datapath owns the loaded eBPF switch: its maps, and the programs it
// attaches to ports. It knows nothing of config files; the daemon tells it
// which bridges and ports exist and it writes that into the maps.
//
// All map writes for one bridge happen in an order that keeps forwarding
// correct at every step: a port is written to tx_ports and the flood set before
// it is announced in the ports map, and removed from the ports map first.
package datapath

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Options are fixed when the datapath is loaded.
type Options struct {
	// FDBCapacity is the size of the shared learning table (all bridges).
	FDBCapacity uint32
	// Refresh is how stale an FDB timestamp may get before the datapath
	// refreshes it. It must be well under the shortest aging time.
	Refresh time.Duration
	// Spec replaces the embedded program and maps: for experiments that
	// build a variant of bpf/ (scripts/stage-costs.sh), never in the daemon.
	Spec *ebpf.CollectionSpec
}

// Datapath is a loaded switch program with its maps.
type Datapath struct {
	objs   tbpf.TrestleObjects
	floods map[uint16]*ebpf.Map
	ncpu   int
}

// Load loads the switch into the kernel. Verifier errors are returned in full.
func Load(opts Options) (*Datapath, error) {
	spec, err := tbpf.LoadTrestle()
	if opts.Spec != nil {
		spec, err = opts.Spec, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read embedded datapath: %w", err)
	}
	if opts.FDBCapacity > 0 {
		spec.Maps[tbpf.TrestleMapFdb].MaxEntries = opts.FDBCapacity
	}
	if opts.Refresh > 0 {
		if err := spec.Variables[tbpf.TrestleVarRefreshNs].Set(uint64(opts.Refresh.Nanoseconds())); err != nil {
			return nil, fmt.Errorf("set refresh interval: %w", err)
		}
	}
	d := &Datapath{floods: map[uint16]*ebpf.Map{}}
	if err := spec.LoadAndAssign(&d.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load datapath: %+v", ve)
		}
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	d.ncpu, err = ebpf.PossibleCPU()
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("count CPUs: %w", err)
	}
	return d, nil
}

// Close releases the programs and maps. Links attached from it stay until
// they are closed too.
func (d *Datapath) Close() {
	for _, m := range d.floods {
		m.Close()
	}
	d.objs.Close()
}

// XDPProgram and TCProgram are the two entry points, for attaching and tests.
func (d *Datapath) XDPProgram() *ebpf.Program { return d.objs.TrestleXdp }
func (d *Datapath) TCProgram() *ebpf.Program  { return d.objs.TrestleTc }

// AttachXDP attaches the XDP entry point to ifindex in native (driver) mode.
func (d *Datapath) AttachXDP(ifindex int) (link.Link, error) {
	return link.AttachXDP(link.XDPOptions{Program: d.objs.TrestleXdp, Interface: ifindex, Flags: link.XDPDriverMode})
}

// AttachTC attaches the tc entry point at tcx ingress of ifindex.
func (d *Datapath) AttachTC(ifindex int) (link.Link, error) {
	return link.AttachTCX(link.TCXOptions{Program: d.objs.TrestleTc, Attach: ebpf.AttachTCXIngress, Interface: ifindex})
}

// PortInfo is one port as the datapath sees it.
type PortInfo struct {
	Ifindex uint32
	Bridge  uint16
	Slot    uint16
	MaxMACs uint32
}

// SetBridge writes a bridge and its complete port list. Ports must already be
// set with SetPort; ports of the bridge not in the list stop receiving floods.
func (d *Datapath) SetBridge(id uint16, maxEntries uint32, ports []PortInfo) error {
	if id == 0 || int(id) > tbpf.MaxBridges {
		return fmt.Errorf("bridge id %d out of range 1..%d", id, tbpf.MaxBridges)
	}
	if len(ports) > tbpf.MaxBridgePorts {
		return fmt.Errorf("bridge %d: %d ports, at most %d", id, len(ports), tbpf.MaxBridgePorts)
	}
	fm, err := d.floodMap(id)
	if err != nil {
		return err
	}
	want := map[uint32]bool{}
	for _, p := range ports {
		want[p.Ifindex] = true
		if err := fm.Put(p.Ifindex, p.Ifindex); err != nil {
			return fmt.Errorf("bridge %d: add ifindex %d to flood set: %w", id, p.Ifindex, err)
		}
	}
	var br tbpf.Bridge
	br.Nports = uint32(len(ports))
	br.MaxEntries = maxEntries
	for i, p := range ports {
		br.Ports[i] = tbpf.BridgePort{Ifindex: p.Ifindex, Slot: uint32(p.Slot)}
	}
	if err := d.objs.Bridges.Put(uint32(id), &br); err != nil {
		return fmt.Errorf("bridge %d: write: %w", id, err)
	}
	// Now that the port list no longer names them, drop stale flood members.
	var k, v uint32
	var stale []uint32
	it := fm.Iterate()
	for it.Next(&k, &v) {
		if !want[k] {
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		if err := fm.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("bridge %d: remove ifindex %d from flood set: %w", id, k, err)
		}
	}
	return nil
}

// DelBridge removes a bridge. Its ports should be deleted first.
func (d *Datapath) DelBridge(id uint16) error {
	if err := d.objs.Bridges.Put(uint32(id), &tbpf.Bridge{}); err != nil {
		return fmt.Errorf("bridge %d: clear: %w", id, err)
	}
	if fm, ok := d.floods[id]; ok {
		if err := d.objs.Floods.Delete(uint32(id)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("bridge %d: remove flood set: %w", id, err)
		}
		fm.Close()
		delete(d.floods, id)
	}
	_ = d.objs.BridgeMacs.Put(uint32(id), int32(0))
	return nil
}

func (d *Datapath) floodMap(id uint16) (*ebpf.Map, error) {
	if m, ok := d.floods[id]; ok {
		return m, nil
	}
	spec := &ebpf.MapSpec{
		Name:       fmt.Sprintf("tr_flood_%d", id),
		Type:       ebpf.DevMapHash,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: uint32(tbpf.MaxBridgePorts),
	}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		return nil, fmt.Errorf("bridge %d: create flood set: %w", id, err)
	}
	if err := d.objs.Floods.Put(uint32(id), m); err != nil {
		m.Close()
		return nil, fmt.Errorf("bridge %d: install flood set: %w", id, err)
	}
	d.floods[id] = m
	return m, nil
}

// SetPort makes ifindex a port: reachable for unicast (tx_ports, by slot),
// then known at ingress (port_index, or ports for large ifindexes).
func (d *Datapath) SetPort(p PortInfo) error {
	if p.Slot == 0 || int(p.Slot) >= tbpf.MaxPorts {
		return fmt.Errorf("port ifindex %d: slot %d out of range 1..%d", p.Ifindex, p.Slot, tbpf.MaxPorts-1)
	}
	if p.Bridge == 0 {
		return fmt.Errorf("port ifindex %d: bridge id 0", p.Ifindex)
	}
	if err := d.objs.TxPorts.Put(uint32(p.Slot), p.Ifindex); err != nil {
		return fmt.Errorf("port ifindex %d: add to tx_ports as slot %d: %w", p.Ifindex, p.Slot, err)
	}
	v := tbpf.Port{Bridge: p.Bridge, Slot: p.Slot, MaxMacs: p.MaxMACs}
	if err := d.portMap(p.Ifindex).Put(p.Ifindex, &v); err != nil {
		return fmt.Errorf("port ifindex %d: write: %w", p.Ifindex, err)
	}
	return nil
}

// portMap is where the port of ifindex is kept (see bpf/lib/maps.h).
func (d *Datapath) portMap(ifindex uint32) *ebpf.Map {
	if ifindex < tbpf.PortDirect {
		return d.objs.PortIndex
	}
	return d.objs.Ports
}

// DelPort forgets a port: first at ingress, then as an egress.
func (d *Datapath) DelPort(ifindex uint32, slot uint16) error {
	var err error
	if ifindex < tbpf.PortDirect {
		err = d.objs.PortIndex.Put(ifindex, &tbpf.Port{}) // bridge 0: no port
	} else if err = d.objs.Ports.Delete(ifindex); errors.Is(err, ebpf.ErrKeyNotExist) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("port ifindex %d: delete: %w", ifindex, err)
	}
	if slot == 0 || int(slot) >= tbpf.MaxPorts {
		return nil
	}
	if err := d.objs.TxPorts.Delete(uint32(slot)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("port ifindex %d: remove slot %d from tx_ports: %w", ifindex, slot, err)
	}
	return nil
}

// ResetStats zeroes a slot's counters, for a slot given to a new port.
func (d *Datapath) ResetStats(slot uint16) error {
	zero := make([]tbpf.PortStats, d.ncpu)
	if err := d.objs.Stats.Put(uint32(slot), zero); err != nil {
		return fmt.Errorf("reset counters of slot %d: %w", slot, err)
	}
	return d.objs.PortMacs.Put(uint32(slot), int32(0))
}

// Stats returns a slot's counters summed over CPUs.
func (d *Datapath) Stats(slot uint16) (tbpf.PortStats, error) {
	var sum tbpf.PortStats
	per := make([]tbpf.PortStats, d.ncpu)
	if err := d.objs.Stats.Lookup(uint32(slot), &per); err != nil {
		return sum, fmt.Errorf("read counters of slot %d: %w", slot, err)
	}
	for _, s := range per {
		sum.RxPackets += s.RxPackets
		sum.RxBytes += s.RxBytes
		sum.TxPackets += s.TxPackets
		sum.TxBytes += s.TxBytes
		sum.Flooded += s.Flooded
		sum.Learned += s.Learned
		sum.Moved += s.Moved
		for i := range s.Drops {
			sum.Drops[i] += s.Drops[i]
		}
	}
	return sum, nil
}

// FDBEntry is one row of the learning table.
type FDBEntry struct {
	Bridge  uint16
	VLAN    uint16
	MAC     net.HardwareAddr
	Ifindex uint32
	Slot    uint16
	Static  bool
	Age     time.Duration // since the datapath last refreshed it
}

// Now is the clock the datapath stamps entries with (CLOCK_MONOTONIC_COARSE).
func Now() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts)
	return uint64(ts.Nano())
}

// FDB dumps the learning table of every bridge.
func (d *Datapath) FDB() ([]FDBEntry, error) {
	now := Now()
	var out []FDBEntry
	var k tbpf.FDBKey
	var v tbpf.FDBVal
	it := d.objs.Fdb.Iterate()
	for it.Next(&k, &v) {
		e := FDBEntry{
			Bridge:  k.Bridge,
			VLAN:    k.Vlan,
			MAC:     append(net.HardwareAddr(nil), k.Mac[:]...),
			Ifindex: v.Ifindex,
			Slot:    v.Slot,
			Static:  v.Flags&tbpf.FDBStatic != 0,
		}
		if now > v.SeenNs {
			e.Age = time.Duration(now - v.SeenNs)
		}
		out = append(out, e)
	}
	if err := it.Err(); err != nil {
		return out, fmt.Errorf("dump fdb: %w", err)
	}
	return out, nil
}

func fdbKey(bridge, vlan uint16, mac net.HardwareAddr) (tbpf.FDBKey, error) {
	k := tbpf.FDBKey{Bridge: bridge, Vlan: vlan}
	if len(mac) != 6 {
		return k, fmt.Errorf("mac %q is not 6 bytes", mac)
	}
	copy(k.Mac[:], mac)
	return k, nil
}

// AddFDB writes an entry, replacing any learned one for the same address.
func (d *Datapath) AddFDB(e FDBEntry) error {
	k, err := fdbKey(e.Bridge, e.VLAN, e.MAC)
	if err != nil {
		return err
	}
	v := tbpf.FDBVal{Ifindex: e.Ifindex, Slot: e.Slot, SeenNs: Now()}
	if e.Static {
		v.Flags = tbpf.FDBStatic
	}
	if err := d.objs.Fdb.Put(&k, &v); err != nil {
		return fmt.Errorf("add fdb entry %s vlan %d: %w", e.MAC, e.VLAN, err)
	}
	// It may replace a learned entry on another port that a CPU's memo holds.
	return d.bumpGeneration()
}

// DelFDB deletes an entry; ErrKeyNotExist when there is none.
func (d *Datapath) DelFDB(bridge, vlan uint16, mac net.HardwareAddr) error {
	k, err := fdbKey(bridge, vlan, mac)
	if err != nil {
		return err
	}
	if err := d.objs.Fdb.Delete(&k); err != nil {
		return fmt.Errorf("delete fdb entry %s vlan %d: %w", mac, vlan, err)
	}
	return d.bumpGeneration()
}

// bumpGeneration tells every CPU's learning cache that entries are gone
// (bpf/lib/fdb.h): a source they vouched for must be looked up again.
func (d *Datapath) bumpGeneration() error {
	var g uint32
	if err := d.objs.FdbGen.Get(&g); err != nil {
		return fmt.Errorf("read fdb generation: %w", err)
	}
	// Only the control plane writes fdb_gen (the datapath counts its moves
	// in move_gen), so read-then-write loses nothing.
	if err := d.objs.FdbGen.Set(g + 1); err != nil {
		return fmt.Errorf("write fdb generation: %w", err)
	}
	return nil
}

// SetCounts sets the learned-address counts the limits are checked against.
// XXX: a Put overwrites increments CPUs make between the dump the counts come
// from and the write, so a count can run short by the addresses learned in
// that window until the next sweep; counts are signed so they never wrap.
// The datapath changes them only when it learns; the control plane keeps them
// true after it deletes entries.
func (d *Datapath) SetCounts(ports map[uint16]int32, bridges map[uint16]int32) error {
	for slot, n := range ports {
		if err := d.objs.PortMacs.Put(uint32(slot), n); err != nil {
			return fmt.Errorf("set address count of slot %d: %w", slot, err)
		}
	}
	for id, n := range bridges {
		if err := d.objs.BridgeMacs.Put(uint32(id), n); err != nil {
			return fmt.Errorf("set address count of bridge %d: %w", id, err)
		}
	}
	return nil
}
