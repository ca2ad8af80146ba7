package daemon

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/clsact"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/netdev"
)

// The dataplane in memory, a fake per role (dataplane.go), so that a test
// of one part can be given only the role it uses; fakeDP has them all.
// They share one fakeOps: fail, when set, is asked before every change and
// may refuse it (an injected failure); ops are the changes made, in order,
// whichever role made them.
type fakeOps struct {
	fail func(op string) error
	ops  []string
}

func (f *fakeOps) op(format string, args ...any) error {
	op := fmt.Sprintf(format, args...)
	if f.fail != nil {
		if err := f.fail(op); err != nil {
			return err
		}
	}
	f.ops = append(f.ops, op)
	return nil
}

// fakeDP is a Dataplane in memory: every role.
type fakeDP struct {
	*fakeOps
	*fakeTopo
	*fakeTable
	*fakeStages
	*fakeCounters
	fakeConntrack
	*fakeAttacher
	*fakeSizer
	*fakePins
	eventsLost uint64
}

// fakeSizes are the sizes a fake dataplane is loaded with, as newWorld's
// daemon is told.
var fakeSizes = datapath.Sizes{FDBCapacity: 1 << 20, Refresh: time.Second}

func newFakeDP() *fakeDP {
	ops := &fakeOps{}
	topo := &fakeTopo{fakeOps: ops, ports: map[uint32]datapath.PortInfo{}, bridges: map[uint16]datapath.BridgeInfo{}}
	table := newFakeTable(ops)
	stages := &fakeStages{fakeOps: ops}
	pins := &fakePins{topo: topo}
	sizer := &fakeSizer{fakeOps: ops, sizes: fakeSizes}
	att := &fakeAttacher{fakeOps: ops, stages: stages, sizer: sizer, pins: pins, attached: map[string]*fakeAtt{}, refuse: map[int]error{}, left: map[int]bool{}, removed: map[int]bool{}}
	sizer.attacher = att
	return &fakeDP{fakeOps: ops, fakeTopo: topo, fakeTable: table, fakeStages: stages,
		fakeCounters: &fakeCounters{table: table}, fakePins: pins, fakeSizer: sizer, fakeAttacher: att}
}

// The fake reports no move (the limiter's tests feed it), only its lost count.
func (f *fakeDP) Events() (moveReader, error) { return nil, errors.New("the fake has no event ring") }

func (f *fakeDP) EdgeEvents() (moveReader, error) {
	return nil, errors.New("the fake has no edge ring")
}
func (f *fakeDP) EventsLost() (uint64, error) { return f.eventsLost, nil }

// snapshot is the fake's whole state, to compare before and after.
func (f *fakeDP) snapshot() string {
	var b strings.Builder
	for _, idx := range slices.Sorted(maps.Keys(f.ports)) {
		fmt.Fprintf(&b, "port %+v\n", f.ports[idx])
	}
	for _, id := range slices.Sorted(maps.Keys(f.bridges)) {
		fmt.Fprintf(&b, "bridge %+v\n", f.bridges[id])
	}
	for _, k := range slices.Sorted(maps.Keys(f.fdb)) {
		e := f.fdb[k]
		fmt.Fprintf(&b, "fdb %s slot %d static %v\n", k, e.Slot, e.Static)
	}
	fmt.Fprintf(&b, "attached %v\n", f.attachedKeys())
	return b.String()
}

// fakeTopo is the Topology: the port maps by ifindex, the bridges by id.
type fakeTopo struct {
	*fakeOps
	ports    map[uint32]datapath.PortInfo
	bridges  map[uint16]datapath.BridgeInfo
	resetErr error // when set, fails every ResetPort
}

func (f *fakeTopo) SetPort(p datapath.PortInfo) error {
	vlans := ""
	if p.PVID != 0 || p.Trunk {
		vlans = fmt.Sprintf(" pvid %d trunk %v", p.PVID, p.VLANs)
	}
	if err := f.op("SetPort %d slot %d bridge %d%s", p.Ifindex, p.Slot, p.Bridge, vlans); err != nil {
		return err
	}
	f.ports[p.Ifindex] = p
	return nil
}

func (f *fakeTopo) DelPort(ifindex uint32, slot uint16) error {
	if err := f.op("DelPort %d", ifindex); err != nil {
		return err
	}
	delete(f.ports, ifindex)
	return nil
}

func (f *fakeTopo) ResetPort(slot uint16) error { return f.resetErr }

func (f *fakeTopo) SetBridge(b datapath.BridgeInfo) error {
	aware := ""
	if b.VLANAware {
		aware = fmt.Sprintf(" vlan-aware %v", b.VLANs)
	}
	if err := f.op("SetBridge %s%s", b.Name, aware); err != nil {
		return err
	}
	b.Ports = slices.Clone(b.Ports)
	f.bridges[b.ID] = b
	return nil
}

func (f *fakeTopo) DelBridge(id uint16) error {
	if err := f.op("DelBridge %d", id); err != nil {
		return err
	}
	delete(f.bridges, id)
	return nil
}

func (f *fakeTopo) ResetBridge(id uint16) error { return nil }

// fakeTable is the Table; fdbErr, when set, fails every dump.
type fakeTable struct {
	*fakeOps
	fdb    map[string]datapath.FDBEntry
	fdbErr error
	chunk  int // WalkFDB's chunk; 0: fakeChunk
	// afterChunk, when set, runs after WalkFDB's fn has had each chunk;
	// maxAgeOut is the most entries one AgeOut was given.
	afterChunk func()
	maxAgeOut  int
	// reserve is each slot's reserve at the mark, as SetReserve gave it.
	reserve map[uint16]int
	// neigh is the neighbour table, as SetNeighs left it.
	neigh map[datapath.NeighKey]datapath.Neigh
}

func (f *fakeTable) Neighs() ([]datapath.NeighEntry, error) {
	var out []datapath.NeighEntry
	for k, n := range f.neigh {
		out = append(out, datapath.NeighEntry{NeighKey: k, Neigh: n})
	}
	slices.SortFunc(out, func(a, b datapath.NeighEntry) int { return a.Addr.Compare(b.Addr) })
	return out, nil
}

func (f *fakeTable) SetNeighs(want map[datapath.NeighKey]datapath.Neigh) error {
	f.neigh = maps.Clone(want)
	return nil
}

func newFakeTable(ops *fakeOps) *fakeTable {
	return &fakeTable{fakeOps: ops, fdb: map[string]datapath.FDBEntry{}, reserve: map[uint16]int{}}
}

func (f *fakeTable) SetReserve(slot uint16, n int) error {
	if n == 0 {
		delete(f.reserve, slot)
	} else {
		f.reserve[slot] = n
	}
	return nil
}

func fdbKeyOf(bridge, vlan uint16, mac net.HardwareAddr) string {
	return fmt.Sprintf("%d/%d/%s", bridge, vlan, mac)
}

// fakeChunk is the fake's chunk: small, so that tests walk many.
const fakeChunk = 3

// WalkFDB walks the fake's map in chunks of fakeChunk (or chunk, when a
// test sets it), in the map's own order, as the kernel's hash map has one;
// an entry deleted before the walk reaches it is not handed over.
func (f *fakeTable) WalkFDB(fn func([]datapath.FDBEntry) error) error {
	if f.fdbErr != nil {
		return f.fdbErr
	}
	n := f.chunk
	if n == 0 {
		n = fakeChunk
	}
	buf := make([]datapath.FDBEntry, 0, n)
	for _, e := range f.fdb {
		if buf = append(buf, e); len(buf) == n {
			if err := fn(buf); err != nil {
				return err
			}
			if f.afterChunk != nil {
				f.afterChunk()
			}
			buf = buf[:0]
		}
	}
	if len(buf) > 0 {
		if err := fn(buf); err != nil {
			return err
		}
		if f.afterChunk != nil {
			f.afterChunk()
		}
	}
	return nil
}

func (f *fakeTable) AddFDB(e datapath.FDBEntry) error {
	if err := f.op("AddFDB %s", e.MAC); err != nil {
		return err
	}
	f.fdb[fdbKeyOf(e.Bridge, e.VLAN, e.MAC)] = e
	return nil
}

// learn puts a learned entry in, as the datapath would.
func (f *fakeTable) learn(bridge, slot uint16, ifindex int, mac string, age time.Duration) {
	m, _ := net.ParseMAC(mac)
	f.fdb[fdbKeyOf(bridge, 0, m)] = datapath.FDBEntry{Bridge: bridge, MAC: m, Slot: slot, Ifindex: uint32(ifindex), Age: age}
}

func (f *fakeTable) DelFDB(bridge, vlan uint16, mac net.HardwareAddr) (datapath.FDBEntry, error) {
	k := fdbKeyOf(bridge, vlan, mac)
	e, ok := f.fdb[k]
	if !ok {
		return e, ebpf.ErrKeyNotExist
	}
	if err := f.op("DelFDB %s", mac); err != nil {
		return e, err
	}
	delete(f.fdb, k)
	return e, nil
}

func (f *fakeTable) DelFDBs(es []datapath.FDBEntry) (int, error) {
	n := 0
	for _, e := range es {
		if _, err := f.DelFDB(e.Bridge, e.VLAN, e.MAC); err == nil {
			n++
		} else if !errors.Is(err, ebpf.ErrKeyNotExist) {
			return n, err
		}
	}
	return n, nil
}

func (f *fakeTable) AgeOut(es []datapath.FDBEntry, aging func(uint16) time.Duration) ([]datapath.FDBEntry, error) {
	f.maxAgeOut = max(f.maxAgeOut, len(es))
	var gone []datapath.FDBEntry
	for _, e := range es {
		if cur, ok := f.fdb[fdbKeyOf(e.Bridge, e.VLAN, e.MAC)]; ok && !cur.Static && cur.Age > aging(e.Bridge) {
			if _, err := f.DelFDB(cur.Bridge, cur.VLAN, cur.MAC); err != nil {
				return gone, err
			}
			gone = append(gone, cur)
		}
	}
	return gone, nil
}

// fakeStages is the Stages.
type fakeStages struct {
	*fakeOps
	vlanStage, filterStage bool
}

func (f *fakeStages) SetVLANStage(on bool) error {
	if err := f.op("vlan-stage %v", on); err != nil {
		return err
	}
	f.vlanStage = on
	return nil
}
func (f *fakeStages) VLANStage() bool { return f.vlanStage }

func (f *fakeStages) SetFilterStage(on bool) error {
	if err := f.op("filter-stage %v", on); err != nil {
		return err
	}
	f.filterStage = on
	return nil
}
func (f *fakeStages) FilterStage() bool { return f.filterStage }

// fakeCounters is the Counters: port stats and filter counts as a test
// sets them (zero when absent), address counts from the table.
type fakeCounters struct {
	table        *fakeTable
	stats        map[uint16]tbpf.PortStats // by slot
	filterCount  map[uint16]datapath.FilterCounts
	filterUnread map[uint16]datapath.FilterUnread
	// lock, when a test sets it (the daemon's d.mu), is checked held by
	// the calls that read the real datapath's Go-side record (VLANs,
	// FilterCounterIDs, FilterCounters); those made without it are named
	// in unlocked.
	lock     *sync.Mutex
	unlocked []string
}

// held notes a call made without f.lock held.
func (f *fakeCounters) held(call string) {
	if f.lock != nil && f.lock.TryLock() {
		f.lock.Unlock()
		f.unlocked = append(f.unlocked, call)
	}
}

func (f *fakeCounters) Stats(slot uint16) (tbpf.PortStats, error) { return f.stats[slot], nil }

func (f *fakeCounters) BridgeMACs(id uint16) (int, error) {
	n := 0
	for _, e := range f.table.fdb {
		if e.Bridge == id && !e.Static {
			n++
		}
	}
	return n, nil
}

func (f *fakeCounters) PortMACs(slot uint16) (int, error) {
	n := 0
	for _, e := range f.table.fdb {
		if e.Slot == slot && !e.Static {
			n++
		}
	}
	return n, nil
}

func (f *fakeCounters) FilterCounters(id uint16) (datapath.FilterCounts, bool, error) {
	f.held("FilterCounters")
	c, ok := f.filterCount[id]
	return c, ok, nil
}

// FilterCounterIDs names a bridge's counts in the fake by the bridge's id.
func (f *fakeCounters) FilterCounterIDs(id uint16) (datapath.FilterCounterIDs, bool, error) {
	f.held("FilterCounterIDs")
	_, ok := f.filterCount[id]
	return datapath.FilterCounterIDs{Default: id}, ok, nil
}

func (f *fakeCounters) ReadFilterCounters(ids datapath.FilterCounterIDs) (datapath.FilterCounts, error) {
	return f.filterCount[ids.Default], nil
}

func (f *fakeCounters) FilterUnread(id uint16) (datapath.FilterUnread, error) {
	return f.filterUnread[id], nil
}

func (f *fakeCounters) VLANs() ([]datapath.VLAN, error) {
	f.held("VLANs")
	return nil, nil
}
func (f *fakeCounters) VLANStats(uint16) (tbpf.VLANStats, error) { return tbpf.VLANStats{}, nil }

// fakeConntrack is the Conntrack: it tracks nothing.
type fakeConntrack struct{}

func (fakeConntrack) States() ([]datapath.State, error)        { return nil, nil }
func (fakeConntrack) AgeStates(func(uint16) bool) (int, error) { return 0, nil }

// fakeAttacher is the Attacher: a program attaches with the stages and the
// load of the programs as they are, pinned if the dataplane is; refuse
// makes XDP on an ifindex fail, and a tc filter on it; noFilters every
// tc filter (a kernel without cls_bpf). left are the interfaces with a tc filter an earlier
// daemon left (AdoptFilter).
type fakeAttacher struct {
	*fakeOps
	stages    *fakeStages
	sizer     *fakeSizer
	pins      *fakePins
	attached  map[string]*fakeAtt // "ifindex/mode", "ifindex/tc-filter" -> attachment
	refuse    map[int]error
	noFilters bool
	left      map[int]bool
	removed   map[int]bool // filters another took off (Restore)
}

func (f *fakeAttacher) AdoptFilter(ifindex int) (Attachment, error) {
	if !f.left[ifindex] {
		return nil, nil
	}
	delete(f.left, ifindex)
	a := &fakeAtt{att: f, ifindex: ifindex, m: mode.TC, hook: datapath.HookFilter, pinned: f.pins.pinned, stage: !f.stages.vlanStage, load: -1}
	f.attached[a.key()] = a
	return a, nil
}

func (f *fakeAttacher) Attach(ifindex int, m mode.Mode, h datapath.Hook) (Attachment, error) {
	if err := f.refuse[ifindex]; err != nil && m == mode.XDP {
		return nil, err
	}
	if f.noFilters && h == datapath.HookFilter {
		f.ops = append(f.ops, fmt.Sprintf("Attach %d %s refused", ifindex, m))
		return nil, fmt.Errorf("add the tc filter: %w", clsact.ErrUnsupported)
	}
	if err := f.refuse[ifindex]; err != nil && h == datapath.HookFilter {
		f.ops = append(f.ops, fmt.Sprintf("Attach %d %s refused", ifindex, m))
		return nil, err
	}
	if err := f.op("Attach %d %s", ifindex, m); err != nil {
		return nil, err
	}
	a := &fakeAtt{att: f, ifindex: ifindex, m: m, hook: h, pinned: f.pins.pinned, stage: f.stages.vlanStage, load: f.sizer.load}
	f.attached[a.key()] = a
	return a, nil
}

func (f *fakeAttacher) Restore(a Attachment) (bool, error) {
	fa := a.(*fakeAtt)
	if fa.hook != datapath.HookFilter || !f.removed[fa.ifindex] {
		return false, nil
	}
	delete(f.removed, fa.ifindex)
	return true, f.op("Restore %d", fa.ifindex)
}

func (f *fakeAttacher) Upgrade(a Attachment) (bool, error) {
	fa := a.(*fakeAtt)
	if fa.stage != f.stages.vlanStage || fa.load != f.sizer.load {
		if err := f.op("Upgrade %d vlan-stage %v load %d", fa.ifindex, f.stages.vlanStage, f.sizer.load); err != nil {
			return false, err
		}
		fa.stage, fa.load = f.stages.vlanStage, f.sizer.load
		return true, nil
	}
	if fa.upgraded {
		return false, nil
	}
	fa.upgraded = true
	return true, nil
}

// attachedKeys lists "ifindex/mode" of what is attached.
func (f *fakeAttacher) attachedKeys() []string {
	return slices.Sorted(maps.Keys(f.attached))
}

// fakeSizer is the Sizer: the sizes the programs are loaded with, and
// which load of them attachments get (load: 0 is the first, each resize
// makes the next). A resize not ended keeps the sizes and load of before,
// for Undo. stale names the attachments a Keep found on the load it let go
// of: they would run a table nothing writes any more.
type fakeSizer struct {
	*fakeOps
	attacher *fakeAttacher
	sizes    datapath.Sizes
	load     int
	loads    int
	pending  *fakeResizing
	stale    []string
}

func (f *fakeSizer) Resize(s datapath.Sizes) (Resizing, error) {
	if f.pending != nil {
		return nil, errors.New("the last resize has not ended")
	}
	if err := f.op("Resize %d %v", s.FDBCapacity, s.Refresh); err != nil {
		return nil, err
	}
	r := &fakeResizing{f: f, sizes: f.sizes, load: f.load}
	f.loads++
	f.sizes = datapath.Sizes{FDBCapacity: max(s.FDBCapacity, f.sizes.FDBCapacity), Refresh: s.Refresh}
	f.load, f.pending = f.loads, r
	return r, nil
}

// behind are the attachments that run another load than the current one.
func (f *fakeSizer) behind() []string {
	var out []string
	for _, k := range f.attacher.attachedKeys() {
		if a := f.attacher.attached[k]; a.load != f.load {
			out = append(out, k)
		}
	}
	return out
}

type fakeResizing struct {
	f     *fakeSizer
	sizes datapath.Sizes // before
	load  int
}

func (r *fakeResizing) Keep() error {
	f := r.f
	if f.pending != r {
		return nil
	}
	f.pending = nil
	for _, k := range f.attacher.attachedKeys() {
		if f.attacher.attached[k].load == r.load {
			f.stale = append(f.stale, k)
		}
	}
	return f.op("Resize kept")
}

func (r *fakeResizing) Undo() error {
	f := r.f
	if f.pending != r {
		return nil
	}
	f.pending = nil
	f.sizes, f.load = r.sizes, r.load
	return f.op("Resize undone")
}

// fakePins is the Pins: what the maps hold is the topology's; adopted and
// fresh are what a test says an earlier daemon left.
type fakePins struct {
	topo    *fakeTopo
	adopted []Attachment
	pinned  bool
	fresh   []string
}

func (f *fakePins) Bridges() ([]datapath.BridgeInfo, error) {
	var out []datapath.BridgeInfo
	for _, id := range slices.Sorted(maps.Keys(f.topo.bridges)) {
		out = append(out, f.topo.bridges[id])
	}
	return out, nil
}

func (f *fakePins) Ports() ([]datapath.PortInfo, error) {
	var out []datapath.PortInfo
	for _, idx := range slices.Sorted(maps.Keys(f.topo.ports)) {
		out = append(out, f.topo.ports[idx])
	}
	return out, nil
}

func (f *fakePins) AdoptedLinks() ([]Attachment, error) { return f.adopted, nil }
func (f *fakePins) Pinned() bool                        { return f.pinned }
func (f *fakePins) PinDir() string                      { return "" }
func (f *fakePins) Fresh() []string                     { return f.fresh }
func (f *fakePins) Unpin() error                        { f.pinned = false; return nil }

type fakeAtt struct {
	att      *fakeAttacher
	ifindex  int
	m        mode.Mode
	hook     datapath.Hook
	pinned   bool
	upgraded bool
	stage    bool // runs the programs with the VLAN stage
	load     int  // of the programs it runs (fakeSizer)
}

func (a *fakeAtt) key() string {
	if a.hook == datapath.HookFilter {
		return fmt.Sprintf("%d/%s-filter", a.ifindex, a.m)
	}
	return fmt.Sprintf("%d/%s", a.ifindex, a.m)
}
func (a *fakeAtt) Ifindex() int        { return a.ifindex }
func (a *fakeAtt) Mode() mode.Mode     { return a.m }
func (a *fakeAtt) Hook() datapath.Hook { return a.hook }
func (a *fakeAtt) Detach() error {
	a.att.ops = append(a.att.ops, "Detach "+a.key())
	delete(a.att.attached, a.key())
	return nil
}
func (a *fakeAtt) Release() error {
	if !a.pinned {
		delete(a.att.attached, a.key())
	}
	return nil
}
func (a *fakeAtt) Unpin() error { a.pinned = false; return nil }

// fakeSys is a System in memory: interfaces by name, events to a
// subscriber (lost when there is none, as the kernel's are), peers that
// remember their features.
type fakeSys struct {
	mu       sync.Mutex
	links    map[string]Link
	sub      chan LinkEvent
	peers    map[int]*fakePeer // by the port's ifindex
	noPeer   map[int]string    // OpenPeer fails for these ports
	onLookup func(name string) // called on every LinkByName, for tests that change the world mid-apply
	calls    []string
}

func newFakeSys() *fakeSys {
	return &fakeSys{links: map[string]Link{}, peers: map[int]*fakePeer{}, noPeer: map[int]string{}}
}

var nextIndex = 100

// add creates an interface; typ "veth" ones have a peer with GRO off.
func (s *fakeSys) add(name, typ string) Link {
	s.mu.Lock()
	defer s.mu.Unlock()
	nextIndex++
	l := Link{Name: name, Index: nextIndex, Type: typ, Up: true, Running: true}
	switch typ {
	case "veth":
		l.XDP = netdev.XDPBasic | netdev.XDPRedirect
		s.peers[l.Index] = &fakePeer{name: "peer-" + name, f: map[string]bool{featGRO: false, featTxCsum: true}}
	case "device":
		l.Physical = true
	}
	s.links[name] = l
	s.emit(LinkEvent{Index: l.Index, Name: name, Running: l.Running})
	return l
}

func (s *fakeSys) set(name string, f func(*Link)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.links[name]
	f(&l)
	s.links[name] = l
	s.emit(LinkEvent{Index: l.Index, Name: name, Running: l.Running})
}

func (s *fakeSys) rename(from, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.links[from]
	delete(s.links, from)
	l.Name = to
	s.links[to] = l
	s.emit(LinkEvent{Index: l.Index, Name: to, Running: l.Running})
}

func (s *fakeSys) del(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.links[name]
	delete(s.links, name)
	delete(s.peers, l.Index)
	s.emit(LinkEvent{Index: l.Index, Name: name, Deleted: true})
}

func (s *fakeSys) emit(ev LinkEvent) {
	if s.sub != nil {
		s.sub <- ev
	}
}

func (s *fakeSys) withXDP(l Link) Link {
	if p := s.peers[l.Index]; p != nil && p.f[featGRO] {
		l.XDP |= netdev.XDPNdoXmit // a veth takes redirects once its peer has GRO
	}
	return l
}

func (s *fakeSys) LinkByName(name string) (Link, error) {
	if s.onLookup != nil {
		s.onLookup(name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "LinkByName "+name)
	l, ok := s.links[name]
	if !ok {
		return Link{}, errNoLink
	}
	return s.withXDP(l), nil
}

func (s *fakeSys) LinkByIndex(index int) (Link, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.links {
		if l.Index == index {
			return s.withXDP(l), nil
		}
	}
	return Link{}, errNoLink
}

func (s *fakeSys) Subscribe(done <-chan struct{}) (<-chan LinkEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "Subscribe")
	s.sub = make(chan LinkEvent, 64)
	return s.sub, nil
}

func (s *fakeSys) OpenPeer(l Link) (Peer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if why, ok := s.noPeer[l.Index]; ok {
		return nil, fmt.Errorf("%s", why)
	}
	p := s.peers[l.Index]
	if p == nil {
		return nil, fmt.Errorf("%q has no peer", l.Name)
	}
	return p, nil
}

func (s *fakeSys) FindPeer(port int, netnsID string) (Peer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.peers[port]; p != nil {
		return p, nil
	}
	return nil, errNoLink
}

type fakePeer struct {
	name string
	f    map[string]bool
}

func (p *fakePeer) Features(names []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, n := range names {
		if v, ok := p.f[n]; ok {
			out[n] = v
		}
	}
	return out, nil
}

func (p *fakePeer) SetFeatures(f map[string]bool) error {
	for k, v := range f {
		p.f[k] = v
	}
	return nil
}

func (p *fakePeer) ID() PeerID     { return PeerID{Netns: "1:1", Name: p.name} }
func (p *fakePeer) String() string { return p.name }
func (p *fakePeer) Close()         {}
func (p *fakePeer) features() string {
	keys := slices.Sorted(maps.Keys(p.f))
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+onOff(p.f[k]))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
