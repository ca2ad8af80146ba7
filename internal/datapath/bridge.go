package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// BridgeInfo is a bridge as the datapath holds it.
type BridgeInfo struct {
	ID         uint16
	Name       string
	MaxEntries uint32
	// Ports are the ports floods reach: the bridge's ports that are up.
	Ports []PortInfo
	// VLANAware: frames are classified into VLANs, VLANs are every VLAN
	// its ports carry, up or not (so their counters last while no port
	// that carries them is up).
	VLANAware bool
	VLANs     []uint16
	// Policy: a port is protected or refuses a kind of flood (its floods
	// check each port, through the program flood set at XDP).
	Policy bool
	// Reach: for a bridge with patch ports, the ports of every bridge its
	// patches join it to, its own included, that are up (where a flood
	// that crosses patches may go); with the span ports of their mirrors.
	Reach []PortInfo
	// Mirror: a port of the bridge is mirrored; its frames take the walk
	// (bpf/lib/patch.h), and its Reach is set as a patched bridge's is.
	Mirror bool
	// Overlay: the bridge has an overlay port (docs/overlay.md): each
	// address it learns is reported in the event ring (Move.Learn), so
	// that the daemon advertises it to FRR at once.
	Overlay bool
	// NeighSuppress: ARP requests and neighbour solicitations the
	// neighbour table answers are answered by the switch (neigh.go).
	NeighSuppress bool
	// Snoop: multicast_snooping. IGMP and MLD messages are copied to the
	// snoop ring, and multicast to a group in the group table goes to its
	// ports only (snoop.go). Its floods take the program flood set at XDP,
	// whose devmap program asks each copy's port.
	Snoop bool
	// LoopDetect: the bridge's loop probes (struct tr_probe) are
	// recognised, dropped and reported in the event ring (Move.Loop).
	LoopDetect bool
	// Filter: the bridge's filter is on, with these rules (filter.go).
	// Rules on the egress port make its floods take the walk, which
	// filters each copy: its Reach is set then too (FilterWalks).
	Filter *Filter
}

// FilterWalks says whether the bridge's floods take the walk for its filter.
func (b BridgeInfo) FilterWalks() bool { return b.Filter != nil && b.Filter.hasOut() }

// walked says whether the bridge's frames go through the walk, and its
// copies through its patch flood set.
func (b BridgeInfo) walked() bool { return b.hasPatch() || b.Mirror || b.FilterWalks() }

func checkBridgeID(id uint16) error {
	if id == 0 || int(id) > tbpf.MaxBridges {
		return fmt.Errorf("bridge id %d out of range 1..%d", id, tbpf.MaxBridges)
	}
	return nil
}

// SetBridge writes a bridge and its complete port list. Its ports must
// already be set with SetPort; ports not in the list stop receiving floods.
//
// Frames read a bridge while it is written (an array value is written in
// place), so SetBridge writes the copy no frame reads, points frames at it,
// and then waits until no program still runs on the old copy, which the next
// SetBridge will write (bpf/lib/maps.h).
func (d *Datapath) SetBridge(b BridgeInfo) (err error) {
	d.awaitSettles()
	d.configChanging()
	defer d.configChanged(&err)
	if err := checkBridgeID(b.ID); err != nil {
		return err
	}
	if len(b.Ports) > tbpf.MaxBridgePorts {
		return fmt.Errorf("bridge %q: %d ports, at most %d", b.Name, len(b.Ports), tbpf.MaxBridgePorts)
	}
	if len(b.Name) >= tbpf.NameLen {
		return fmt.Errorf("bridge %q: name longer than %d bytes", b.Name, tbpf.NameLen-1)
	}
	want := map[uint32]bool{}
	for _, p := range b.Ports {
		if !IsPatchIfindex(p.Ifindex) { // a bridge with patch ports floods through its patch flood set
			want[p.Ifindex] = true
		}
	}
	// A bridge is written before its new ports: their ways in are known
	// from the port list.
	for _, ps := range [][]PortInfo{b.Ports, b.Reach} {
		for _, p := range ps {
			if !IsPatchIfindex(p.Ifindex) {
				d.noteVia(p)
			}
		}
	}
	fm, err := d.floodMap(b.ID, want)
	if err != nil {
		return fmt.Errorf("bridge %q: %w", b.Name, err)
	}
	if b.VLANAware || b.Policy || b.Snoop {
		if err := d.setProgFlood(d.vlanFloodSets(), b.ID, b.Ports); err != nil {
			return fmt.Errorf("bridge %q: %w", b.Name, err)
		}
		if err := d.setVLANs(b, b.VLANs); err != nil {
			return fmt.Errorf("bridge %q: %w", b.Name, err)
		}
	}
	patched := b.walked()
	if patched {
		if err := d.setProgFlood(d.patchFloodSets(), b.ID, b.Reach); err != nil {
			return fmt.Errorf("bridge %q: %w", b.Name, err)
		}
		if err := d.setReach(b); err != nil {
			return fmt.Errorf("bridge %q: %w", b.Name, err)
		}
	}
	var br tbpf.Bridge
	br.Nports = uint32(len(b.Ports))
	br.MaxEntries = b.MaxEntries
	if b.VLANAware {
		br.Flags |= tbpf.BridgeVLAN
	}
	if b.hasPatch() {
		br.Flags |= tbpf.BridgePatch
	}
	if b.Mirror {
		br.Flags |= tbpf.BridgeMirror
	}
	if b.Policy {
		br.Flags |= tbpf.BridgePolicy
	}
	if b.Overlay {
		br.Flags |= tbpf.BridgeOverlay
	}
	if b.Snoop {
		br.Flags |= tbpf.BridgeSnoop
	}
	if b.NeighSuppress {
		br.Flags |= tbpf.BridgeNeighSuppress
	}
	if b.LoopDetect {
		br.Flags |= tbpf.BridgeLoopDetect
	}
	for i, p := range b.Ports {
		br.Ports[i] = tbpf.BridgePort{Ifindex: p.Ifindex, Slot: uint32(p.Slot)}
	}
	for i := 0; i < len(b.Name); i++ {
		br.Name[i] = int8(b.Name[i])
	}
	live, err := d.liveCopy(b.ID)
	if err != nil {
		return fmt.Errorf("bridge %q: %w", b.Name, err)
	}
	next := 2 * uint32(b.ID)
	if live == next {
		next++
	}
	// The copy about to be written was live before the last flip of this
	// bridge: wait until no frame can still be reading it. One wait covers
	// every bridge flipped before it, so an apply that rewrites many
	// bridges once each waits at most once.
	if d.unsynced[b.ID] {
		if err := d.sync(); err != nil {
			return fmt.Errorf("bridge %q: %w", b.Name, err)
		}
	}
	// Its rule set goes with the copy: a frame that reads the copy reads
	// the rules written for it.
	filterFlags, err := d.writeFilter(b, next, live)
	if err != nil {
		return err
	}
	br.Flags |= filterFlags
	if b.Filter != nil {
		br.FilterSet = next
	}
	if err := d.objs.Bridges.Put(next, &br); err != nil {
		return fmt.Errorf("bridge %q: write: %w", b.Name, err)
	}
	if err := d.objs.BridgeLive.Put(uint32(b.ID), next); err != nil {
		return fmt.Errorf("bridge %q: switch to the new copy: %w", b.Name, err)
	}
	d.unsynced[b.ID] = true
	d.flips++
	// Now that the live copy no longer names them, drop stale flood members.
	if err := prune(fm, want); err != nil {
		return fmt.Errorf("bridge %q: flood set: %w", b.Name, err)
	}
	if !patched {
		if err := d.delProgFlood(d.patchFloodSets(), b.ID); err != nil {
			return fmt.Errorf("bridge %q: %w", b.Name, err)
		}
		if err := d.delReach(b.ID); err != nil {
			return fmt.Errorf("bridge %q: %w", b.Name, err)
		}
	}
	// Paths across patches that frames remember may have changed with it.
	if patched || d.hadPatch[b.ID] {
		if err := d.bumpGeneration(); err != nil {
			return fmt.Errorf("bridge %q: %w", b.Name, err)
		}
	}
	d.hadPatch[b.ID] = patched
	if !b.VLANAware {
		// No frame reads them now: the live copy is not VLAN-aware.
		if err := d.setVLANs(b, nil); err != nil {
			return fmt.Errorf("bridge %q: %w", b.Name, err)
		}
	}
	if !b.VLANAware && !b.Policy && !b.Snoop {
		// Nor does any frame flood through the program flood set.
		if err := d.delProgFlood(d.vlanFloodSets(), b.ID); err != nil {
			return fmt.Errorf("bridge %q: %w", b.Name, err)
		}
	}
	return nil
}

func (d *Datapath) liveCopy(id uint16) (uint32, error) {
	var live uint32
	if err := d.objs.BridgeLive.Lookup(uint32(id), &live); err != nil {
		return 0, fmt.Errorf("read live copy: %w", err)
	}
	return live, nil
}

// sync returns once every program that was running has finished: writing a
// map into a map of maps makes the kernel wait an RCU grace period
// (maybe_wait_bpf_programs), and every XDP and tc program runs inside one.
// It takes a grace period (milliseconds), so SetBridge waits only when it
// must, and for the rest of a settle's wait when one under way covers
// every flip (settle.go).
func (d *Datapath) sync() error {
	if !d.settled() {
		if err := d.WaitGrace(); err != nil {
			return err
		}
	}
	clear(d.unsynced)
	return nil
}

// WaitGrace returns once every program that was running when it was
// called has finished.
func (d *Datapath) WaitGrace() error {
	if err := d.objs.Floods.Put(uint32(0), d.syncMap); err != nil {
		return fmt.Errorf("wait for running programs: %w", err)
	}
	return nil
}

// DelBridge removes a bridge. Its ports should be deleted first.
func (d *Datapath) DelBridge(id uint16) (err error) {
	d.awaitSettles()
	d.configChanging()
	defer d.configChanged(&err)
	if err := checkBridgeID(id); err != nil {
		return err
	}
	// Frames find no bridge from now on; its copies are unreachable, and
	// the next bridge given this id waits before it writes one (SetBridge).
	if err := d.objs.BridgeLive.Put(uint32(id), uint32(0)); err != nil {
		return fmt.Errorf("bridge %d: clear: %w", id, err)
	}
	d.unsynced[id] = true
	d.flips++
	if fm, ok := d.floods[id]; ok {
		delete(d.ahead, aheadKey{d.objs.Floods, id})
		if err := d.objs.Floods.Delete(uint32(id)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("bridge %d: remove flood set: %w", id, err)
		}
		fm.Close()
		delete(d.floods, id)
	}
	if err := d.setVLANs(BridgeInfo{ID: id}, nil); err != nil {
		return fmt.Errorf("bridge %d: %w", id, err)
	}
	if err := d.delProgFlood(d.vlanFloodSets(), id); err != nil {
		return fmt.Errorf("bridge %d: %w", id, err)
	}
	if err := d.delProgFlood(d.patchFloodSets(), id); err != nil {
		return fmt.Errorf("bridge %d: %w", id, err)
	}
	if err := d.delReach(id); err != nil {
		return fmt.Errorf("bridge %d: %w", id, err)
	}
	delete(d.hadPatch, id)
	if d.hasFilterCopies(id) {
		// Its rule sets, once no frame can still be reading them.
		if err := d.sync(); err != nil {
			return fmt.Errorf("bridge %d: %w", id, err)
		}
		if err := d.dropFilters(id); err != nil {
			return err
		}
	}
	return nil
}

// ResetBridge zeroes a bridge id's address counts, for an id given to a new
// bridge (no frame can reach a bridge that has no ports, so no CPU adds).
func (d *Datapath) ResetBridge(id uint16) error {
	if err := checkBridgeID(id); err != nil {
		return err
	}
	t, done := d.use()
	defer done()
	for _, m := range []*ebpf.Map{t.bridgeMacs, t.bridgeMacsDel} {
		if err := m.Put(uint32(id), int32(0)); err != nil {
			return fmt.Errorf("bridge %d: reset address count: %w", id, err)
		}
	}
	return nil
}

// floodSpec is a flood set's devmap: ifindex -> ifindex (valueSize 4), or
// -> struct bpf_devmap_val (8: ifindex and the program its copies run).
func floodSpec(name string, valueSize uint32) *ebpf.MapSpec {
	return &ebpf.MapSpec{
		Name:       name,
		Type:       ebpf.DevMapHash,
		KeySize:    4,
		ValueSize:  valueSize,
		MaxEntries: uint32(tbpf.MaxBridgePorts),
	}
}

// progFloods are flood sets, one per bridge in an array of maps, whose
// entries each run a devmap program on the copy to their port.
type progFloods struct {
	what, name string // for messages, and the inner maps' names
	outer      *ebpf.Map
	sets       map[uint16]*ebpf.Map
	max        int    // the inner maps' size, as the outer map's template has it
	prog       string // the devmap program each entry runs (auxProgram)
}

// setProgFlood makes bridge id's set hold exactly the interface ports of
// ports (patch ports have no interface), creating it if need be.
//
// A set is sized to its members, not to the most it could hold: a broadcast
// visits every bucket of a hash devmap (dev_map_enqueue_multi), so a set
// of 256 buckets with three members costs a flood hundreds of nanoseconds
// for nothing. A set that outgrows its size, or holds far fewer than it
// could, is replaced by one of the right size, filled first and then
// swapped in whole.
func (d *Datapath) setProgFlood(f progFloods, id uint16, ports []PortInfo) error {
	want := map[uint32]bool{}
	for _, p := range ports {
		if !IsPatchIfindex(p.Ifindex) {
			want[p.Ifindex] = true
		}
	}
	prog, err := d.auxProgram(f.prog)
	if err != nil {
		return fmt.Errorf("%s: %w", f.what, err)
	}
	fd := int32(prog.FD())
	set := sizedSet{outer: f.outer, sets: f.sets, name: f.name, what: f.what, valueSize: 8, limit: f.max, ahead: d.ahead,
		val: func(ifindex uint32) any { return devmapVal{Ifindex: d.xdpDev(ifindex), ProgFD: fd} }}
	m, fresh, err := set.fill(id, want)
	if err != nil || fresh {
		return err
	}
	if err := prune(m, want); err != nil {
		return fmt.Errorf("%s: %w", f.what, err)
	}
	return nil
}

// sizedSet is a kind of flood set: one devmap per bridge in an outer
// array of maps, sized to its members.
type sizedSet struct {
	outer      *ebpf.Map
	sets       map[uint16]*ebpf.Map
	name, what string // the inner maps' names, and what messages call them
	valueSize  uint32
	limit      int                      // the most members a set may hold
	val        func(ifindex uint32) any // a member's value
	// ahead: the sets the next settle gives another size (settle.go).
	ahead map[aheadKey]sizedSet
}

// fill makes bridge id's set hold want, and returns it. A set with room
// for want is written in place (fresh false: members want has not stay,
// for the caller to prune); otherwise a set of the right size is filled
// and then swapped in whole (fresh true), and the old one closed. The
// members that stay until the caller prunes them take room too: a set of
// four holding a, b, c cannot take d and e in place, though want is only
// a, d, e (a bridge whose ports were replaced refused its new ones). A set
// left with no room for one more member, or more than twice the size it
// needs, is given the right size by the next settle, beside what comes
// next (settle.go), not by the next write on its way.
func (s sizedSet) fill(id uint16, want map[uint32]bool) (m *ebpf.Map, fresh bool, err error) {
	size := floodSetSize(len(want)+1, s.limit)
	old, ok := s.sets[id]
	inPlace := false
	var held map[uint32]bool
	if ok {
		if held, err = members(old); err != nil {
			return nil, false, fmt.Errorf("%s: %w", s.what, err)
		}
		room := len(want)
		for k := range held {
			if !want[k] {
				room++
			}
		}
		inPlace = int(old.MaxEntries()) >= room
	}
	if inPlace {
		for ifindex := range want {
			if err := s.put(old, ifindex); err != nil {
				return nil, false, fmt.Errorf("add ifindex %d to the %s: %w", ifindex, s.what, err)
			}
		}
		s.noteSize(id, old, len(want))
		return old, false, nil
	}
	if m, err = s.create(id, size, want); err != nil {
		return nil, false, err
	}
	if err := s.outer.Put(uint32(id), m); err != nil {
		m.Close()
		return nil, false, fmt.Errorf("install %s: %w", s.what, err)
	}
	if ok {
		empty(old, held)
		old.Close()
	}
	s.sets[id] = m
	s.noteSize(id, m, len(want))
	return m, true, nil
}

// empty deletes held from a flood set no frame reads any more (the Put
// that replaced it waited for them): a member holds its device until the
// set is freed, a grace period or two after it is closed, and a
// container's veth deleted meanwhile waited 60 ms for it
// (netdev_wait_allrefs). Emptied, it lets go a grace period from now.
func empty(m *ebpf.Map, held map[uint32]bool) {
	for ifindex := range held {
		_ = m.Delete(ifindex)
	}
}

// put makes ifindex a member of m. One whose interface is gone is left
// out: the kernel refuses it (EINVAL), and it was deleted while a request
// that rewrites the set ran, before the daemon took its link event, whose
// apply removes its port (a container's veth, which a DEL deletes beside
// its port's removal, rewritten by another pod's port.add or port.del).
func (s sizedSet) put(m *ebpf.Map, ifindex uint32) error {
	err := m.Put(ifindex, s.val(ifindex))
	if err != nil && errors.Is(err, unix.EINVAL) && gone(ifindex) {
		return nil
	}
	return err
}

// gone says whether no interface has ifindex in the caller's network
// namespace.
func gone(ifindex uint32) bool {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return false
	}
	ifr.SetUint32(ifindex)
	return errors.Is(unix.IoctlIfreq(fd, unix.SIOCGIFNAME, ifr), unix.ENODEV)
}

// floodSetSize is the size of a flood set of n members (a set is given
// room for one more than it holds) that may hold at most limit: the power
// of two at or above n, at least 4.
func floodSetSize(n, limit int) int {
	size := 4
	for size < n {
		size <<= 1
	}
	return min(size, limit)
}

// delProgFlood removes bridge id's set, once no frame is told to use it.
func (d *Datapath) delProgFlood(f progFloods, id uint16) error {
	m, ok := f.sets[id]
	if !ok {
		return nil
	}
	delete(d.ahead, aheadKey{f.outer, id})
	if err := f.outer.Delete(uint32(id)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("remove %s: %w", f.what, err)
	}
	m.Close()
	delete(f.sets, id)
	return nil
}

// members are the ifindexes a flood set holds.
func members(m *ebpf.Map) (map[uint32]bool, error) {
	held := map[uint32]bool{}
	var prev any // nil: from the first key
	for {
		var k uint32
		err := m.NextKey(prev, &k)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return held, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read members: %w", err)
		}
		held[k] = true
		prev = k
	}
}

// prune deletes the members of a flood set that want does not hold.
func prune(m *ebpf.Map, want map[uint32]bool) error {
	held, err := members(m)
	if err != nil {
		return err
	}
	var stale []uint32
	for k := range held {
		if !want[k] {
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("remove ifindex %d: %w", k, err)
		}
	}
	return nil
}

// floodMap is bridge id's plain flood set (the floods map's inner map).
// It holds want when it returns (and maybe members want has not, which the
// caller prunes once frames no longer read the bridge that names them).
// Like a program flood set (setProgFlood) it is sized to its members: a set
// that outgrows its size, or holds far fewer than it could, is replaced by
// one filled with want and swapped in whole.
func (d *Datapath) floodMap(id uint16, want map[uint32]bool) (*ebpf.Map, error) {
	set := sizedSet{outer: d.objs.Floods, sets: d.floods, name: "tr_flood", what: "flood set", valueSize: 4,
		limit: tbpf.MaxBridgePorts, ahead: d.ahead, val: func(ifindex uint32) any { return d.xdpDev(ifindex) }}
	m, _, err := set.fill(id, want)
	return m, err
}

// adoptFloods takes hold of the flood sets an adopted floods map holds.
func (d *Datapath) adoptFloods() error { return adoptInner(d.objs.Floods, d.floods, "flood set") }

// adoptInner takes hold of the inner maps, by bridge id, of an adopted map
// of maps.
func adoptInner(outer *ebpf.Map, into map[uint16]*ebpf.Map, what string) error {
	for id := uint32(1); id <= uint32(tbpf.MaxBridges); id++ {
		var inner ebpf.MapID
		err := outer.Lookup(id, &inner)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("adopt %s of bridge %d: %w", what, id, err)
		}
		m, err := ebpf.NewMapFromID(inner)
		if err != nil {
			return fmt.Errorf("adopt %s of bridge %d: %w", what, id, err)
		}
		into[uint16(id)] = m
	}
	return nil
}

// Bridges reads the bridges the maps hold (their live copies).
func (d *Datapath) Bridges() ([]BridgeInfo, error) {
	var out []BridgeInfo
	for id := 1; id <= tbpf.MaxBridges; id++ {
		live, err := d.liveCopy(uint16(id))
		if err != nil {
			return nil, err
		}
		if live == 0 {
			continue
		}
		var br tbpf.Bridge
		if err := d.objs.Bridges.Lookup(live, &br); err != nil {
			return nil, fmt.Errorf("read bridge %d: %w", id, err)
		}
		b := BridgeInfo{ID: uint16(id), MaxEntries: br.MaxEntries, VLANAware: br.Flags&tbpf.BridgeVLAN != 0,
			Policy: br.Flags&tbpf.BridgePolicy != 0, Mirror: br.Flags&tbpf.BridgeMirror != 0, Overlay: br.Flags&tbpf.BridgeOverlay != 0,
			NeighSuppress: br.Flags&tbpf.BridgeNeighSuppress != 0, Snoop: br.Flags&tbpf.BridgeSnoop != 0, LoopDetect: br.Flags&tbpf.BridgeLoopDetect != 0}
		d.hadPatch[b.ID] = br.Flags&(tbpf.BridgePatch|tbpf.BridgeMirror) != 0
		for _, c := range br.Name {
			if c == 0 {
				break
			}
			b.Name += string(rune(byte(c)))
		}
		for i := 0; i < int(br.Nports) && i < len(br.Ports); i++ {
			b.Ports = append(b.Ports, PortInfo{Ifindex: br.Ports[i].Ifindex, Bridge: uint16(id), Slot: uint16(br.Ports[i].Slot)})
		}
		out = append(out, b)
	}
	return out, nil
}
