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
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/netdev"
)

// fakeDP is a Dataplane in memory. fail, when set, is asked before every
// change and may refuse it (an injected failure).
type fakeDP struct {
	ports       map[uint32]datapath.PortInfo // by ifindex
	bridges     map[uint16]datapath.BridgeInfo
	fdb         map[string]datapath.FDBEntry
	attached    map[string]*fakeAtt // "ifindex/mode" -> attachment
	adopted     []Attachment
	pinned      bool
	fail        func(op string) error
	ops         []string
	fdbErr      error
	refuse      map[int]error // XDP attach on ifindex fails
	fresh       []string
	vlanStage   bool
	stats       map[uint16]tbpf.PortStats // by slot; zero when absent
	filterCount map[uint16]datapath.FilterCounts
	filterStage bool
	eventsLost  uint64
}

func newFakeDP() *fakeDP {
	return &fakeDP{ports: map[uint32]datapath.PortInfo{}, bridges: map[uint16]datapath.BridgeInfo{},
		fdb: map[string]datapath.FDBEntry{}, attached: map[string]*fakeAtt{}, refuse: map[int]error{}}
}

func (f *fakeDP) op(format string, args ...any) error {
	op := fmt.Sprintf(format, args...)
	if f.fail != nil {
		if err := f.fail(op); err != nil {
			return err
		}
	}
	f.ops = append(f.ops, op)
	return nil
}

func fdbKeyOf(bridge, vlan uint16, mac net.HardwareAddr) string {
	return fmt.Sprintf("%d/%d/%s", bridge, vlan, mac)
}

func (f *fakeDP) SetPort(p datapath.PortInfo) error {
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

func (f *fakeDP) DelPort(ifindex uint32, slot uint16) error {
	if err := f.op("DelPort %d", ifindex); err != nil {
		return err
	}
	delete(f.ports, ifindex)
	return nil
}

func (f *fakeDP) ResetPort(slot uint16) error { return nil }

func (f *fakeDP) SetBridge(b datapath.BridgeInfo) error {
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

func (f *fakeDP) DelBridge(id uint16) error {
	if err := f.op("DelBridge %d", id); err != nil {
		return err
	}
	delete(f.bridges, id)
	return nil
}

func (f *fakeDP) ResetBridge(id uint16) error { return nil }

func (f *fakeDP) FDB() ([]datapath.FDBEntry, error) {
	if f.fdbErr != nil {
		return nil, f.fdbErr
	}
	var out []datapath.FDBEntry
	for _, k := range slices.Sorted(maps.Keys(f.fdb)) {
		out = append(out, f.fdb[k])
	}
	return out, nil
}

func (f *fakeDP) AddFDB(e datapath.FDBEntry) error {
	if err := f.op("AddFDB %s", e.MAC); err != nil {
		return err
	}
	f.fdb[fdbKeyOf(e.Bridge, e.VLAN, e.MAC)] = e
	return nil
}

// learn puts a learned entry in, as the datapath would.
func (f *fakeDP) learn(bridge, slot uint16, ifindex int, mac string, age time.Duration) {
	m, _ := net.ParseMAC(mac)
	f.fdb[fdbKeyOf(bridge, 0, m)] = datapath.FDBEntry{Bridge: bridge, MAC: m, Slot: slot, Ifindex: uint32(ifindex), Age: age}
}

func (f *fakeDP) DelFDB(bridge, vlan uint16, mac net.HardwareAddr) (datapath.FDBEntry, error) {
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

func (f *fakeDP) DelFDBs(es []datapath.FDBEntry) (int, error) {
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

func (f *fakeDP) AgeOut(es []datapath.FDBEntry, aging func(uint16) time.Duration) ([]datapath.FDBEntry, error) {
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

// The fake reports no move (the limiter's tests feed it), only its lost count.
func (f *fakeDP) Events() (moveReader, error) { return nil, errors.New("the fake has no event ring") }
func (f *fakeDP) EventsLost() (uint64, error) { return f.eventsLost, nil }

func (f *fakeDP) Fresh() []string     { return f.fresh }
func (f *fakeDP) FDBCapacity() uint32 { return 1 << 20 }

func (f *fakeDP) Stats(slot uint16) (tbpf.PortStats, error) { return f.stats[slot], nil }

func (f *fakeDP) BridgeMACs(id uint16) (int, error) {
	n := 0
	for _, e := range f.fdb {
		if e.Bridge == id && !e.Static {
			n++
		}
	}
	return n, nil
}

func (f *fakeDP) PortMACs(slot uint16) (int, error) {
	n := 0
	for _, e := range f.fdb {
		if e.Slot == slot && !e.Static {
			n++
		}
	}
	return n, nil
}

func (f *fakeDP) SetVLANStage(on bool) error {
	if err := f.op("vlan-stage %v", on); err != nil {
		return err
	}
	f.vlanStage = on
	return nil
}
func (f *fakeDP) VLANStage() bool { return f.vlanStage }

func (f *fakeDP) SetFilterStage(on bool) error {
	if err := f.op("filter-stage %v", on); err != nil {
		return err
	}
	f.filterStage = on
	return nil
}
func (f *fakeDP) FilterStage() bool { return f.filterStage }
func (f *fakeDP) FilterCounters(id uint16) (datapath.FilterCounts, bool, error) {
	c, ok := f.filterCount[id]
	return c, ok, nil
}
func (f *fakeDP) States() ([]datapath.State, error)        { return nil, nil }
func (f *fakeDP) AgeStates(func(uint16) bool) (int, error) { return 0, nil }
func (f *fakeDP) VLANs() ([]datapath.VLAN, error)          { return nil, nil }
func (f *fakeDP) VLANStats(uint16) (tbpf.VLANStats, error) { return tbpf.VLANStats{}, nil }

func (f *fakeDP) Attach(ifindex int, m mode.Mode) (Attachment, error) {
	if err := f.refuse[ifindex]; err != nil && m == mode.XDP {
		return nil, err
	}
	if err := f.op("Attach %d %s", ifindex, m); err != nil {
		return nil, err
	}
	a := &fakeAtt{dp: f, ifindex: ifindex, m: m, pinned: f.pinned, stage: f.vlanStage}
	f.attached[a.key()] = a
	return a, nil
}

func (f *fakeDP) Upgrade(a Attachment) (bool, error) {
	fa := a.(*fakeAtt)
	if fa.stage != f.vlanStage {
		if err := f.op("Upgrade %d vlan-stage %v", fa.ifindex, f.vlanStage); err != nil {
			return false, err
		}
		fa.stage = f.vlanStage
		return true, nil
	}
	if fa.upgraded {
		return false, nil
	}
	fa.upgraded = true
	return true, nil
}

func (f *fakeDP) Bridges() ([]datapath.BridgeInfo, error) {
	var out []datapath.BridgeInfo
	for _, id := range slices.Sorted(maps.Keys(f.bridges)) {
		out = append(out, f.bridges[id])
	}
	return out, nil
}

func (f *fakeDP) Ports() ([]datapath.PortInfo, error) {
	var out []datapath.PortInfo
	for _, idx := range slices.Sorted(maps.Keys(f.ports)) {
		out = append(out, f.ports[idx])
	}
	return out, nil
}

func (f *fakeDP) AdoptedLinks() ([]Attachment, error) { return f.adopted, nil }
func (f *fakeDP) Pinned() bool                        { return f.pinned }
func (f *fakeDP) PinDir() string                      { return "" }
func (f *fakeDP) Unpin() error                        { f.pinned = false; return nil }
func (f *fakeDP) Close()                              {}

// attachedKeys lists "ifindex/mode" of what is attached.
func (f *fakeDP) attachedKeys() []string {
	return slices.Sorted(maps.Keys(f.attached))
}

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

type fakeAtt struct {
	dp       *fakeDP
	ifindex  int
	m        mode.Mode
	pinned   bool
	upgraded bool
	stage    bool // runs the programs with the VLAN stage
}

func (a *fakeAtt) key() string     { return fmt.Sprintf("%d/%s", a.ifindex, a.m) }
func (a *fakeAtt) Ifindex() int    { return a.ifindex }
func (a *fakeAtt) Mode() mode.Mode { return a.m }
func (a *fakeAtt) Detach() error {
	a.dp.ops = append(a.dp.ops, "Detach "+a.key())
	delete(a.dp.attached, a.key())
	return nil
}
func (a *fakeAtt) Release() error {
	if !a.pinned {
		delete(a.dp.attached, a.key())
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
	s.emit(LinkEvent{Index: l.Index, Name: name})
	return l
}

func (s *fakeSys) set(name string, f func(*Link)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.links[name]
	f(&l)
	s.links[name] = l
	s.emit(LinkEvent{Index: l.Index, Name: name})
}

func (s *fakeSys) rename(from, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.links[from]
	delete(s.links, from)
	l.Name = to
	s.links[to] = l
	s.emit(LinkEvent{Index: l.Index, Name: to})
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
