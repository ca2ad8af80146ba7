package daemon

import (
	"fmt"
	"reflect"
	"slices"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
)

// flagLocked is the flag of a locked port, whose learned entries the
// commit flushes when it becomes one (reconcile.go).
const flagLocked = tbpf.TrestleTrPortFlagsTR_PORT_LOCKED

// The daemon's model of the switch. Each apply builds the next model from
// the config and the current one, and swaps it in only when every change it
// needed in the dataplane was made (reconcile.go). Attachments and peer
// fixes belong to interfaces (by ifindex), not to ports, so that a port that
// moves to another bridge, or an interface renamed to another port's name,
// hands its program over without detaching it.

// Port states, as `trestle show` prints them.
const (
	stateUp       = "up"        // attached, and its interface can send: it forwards
	stateLinkDown = "link-down" // attached, but its interface is down or has no carrier: out of floods, no entries
	stateDown     = "down"      // not attached: see why
	stateBlocked  = "blocked"   // attached, but a guard blocked it (edge.go): out of floods, no entries, takes nothing in
)

// modePatch is the mode of a patch port, which attaches to no interface:
// up as long as its bridge and its peer's are configured.
const modePatch mode.Mode = "patch"

// portState is one configured port.
type portState struct {
	cfg    config.Port
	bridge *bridgeState
	slot   uint16
	// ifindex is the interface the port is attached to (0: none); mode is
	// how (""), why says why that mode, or why the port is down.
	ifindex int
	mode    mode.Mode
	why     string
	// running: attached and its interface is up with carrier.
	running bool
	// physical: its interface, when attached, is a NIC (a scoped apply
	// leaves a bridge with an "auto" NIC to full applies: scoped.go).
	physical bool
	// noFilter: a tc filter was refused on its interface (another's
	// filter at trestle's priority): it keeps a link while it is a port.
	noFilter bool
	// blocked: the guard that blocked it (blockBPDU, blockLoop; edge.go),
	// "" for none; blockedWas, what the model before this apply's had.
	blocked, blockedWas string
	// written is what the port maps hold for this port, nil for nothing.
	written *datapath.PortInfo
	// peer: a patch port's peer, the patch port of the other bridge.
	peer *portState
	// via: the ends of an overlay port's xdp way in (datapath.PortInfo.Via
	// and ViaPeer): the veth xdp ports send its frames into, and its peer,
	// where trestle_via sends them on to the vxlan device; 0: none.
	via [2]int
}

func (p *portState) name() string { return p.cfg.PortName() }

// key identifies a port across applies: its interface, or for a patch
// port the bridge it leads to (one patch per pair of bridges), so that a
// patch port renamed keeps its slot and its entries.
func (p *portState) key() string { return portKey(p.cfg) }

func portKey(c config.Port) string {
	if c.IsPatch() {
		return "patch:" + c.Patch
	}
	return c.Interface
}

func (p *portState) state() string {
	switch {
	case p.mode == "":
		return stateDown
	case p.blocked != "":
		return stateBlocked
	case !p.running:
		return stateLinkDown
	}
	return stateUp
}

// info is what the port maps should hold for the port.
func (p *portState) info() *datapath.PortInfo {
	if p.mode == "" {
		return nil
	}
	info := p.vlanInfo()
	info.MaxMACs = uint32(p.cfg.MaxMACs)
	// The port keys' flags, as the configuration filled them: a new
	// boolean key needs nothing here (docs/architecture.md, "How to add").
	info.Policy = p.cfg.Policy
	if p.blocked != "" {
		// The daemon's flag, not a key's: the port takes and sends
		// nothing (bpf/lib/guard.h).
		info.Policy.Flags |= tbpf.PortBlocked
	}
	if p.bridge.cfg.MulticastSnooping {
		// The daemon's flag, not a key's: the devmap program asks a
		// multicast copy's group (bpf/lib/snoop.h).
		info.Policy.Flags |= tbpf.PortSnoop
	}
	if p.peer != nil {
		info.Peer = p.peer.slot
	}
	st := p.cfg.Storm
	info.Storm = [3]uint32{uint32(st.Broadcast), uint32(st.Multicast), uint32(st.UnknownUnicast)}
	info.Span = p.span() != nil
	if m := p.bridge.cfg.MirrorOf(p.name()); m != nil {
		// Copies go to the span port while it forwards.
		if to := p.bridge.port(m.To); to != nil && to.forwards() && to.ifindex > 0 {
			info.MirrorIn, info.MirrorOut = m.In, m.Out
			info.MirrorTo, info.MirrorToSlot = uint32(to.ifindex), to.slot
			info.MirrorVLANs = m.VLANs
		}
	}
	return &info
}

// span is the mirror the port is the span port of, or nil.
func (p *portState) span() *config.Mirror { return p.bridge.cfg.SpanPort(p.name()) }

// vlanInfo is the port as a bridge's port list holds it: where it is, and
// on a VLAN-aware bridge which VLANs it carries.
func (p *portState) vlanInfo() datapath.PortInfo {
	info := datapath.PortInfo{Ifindex: uint32(p.ifindex), Bridge: p.bridge.id, Slot: p.slot}
	if p.cfg.IsPatch() {
		info.Ifindex = datapath.PatchIfindex(p.slot)
	}
	if p.cfg.IsOverlay() && p.ifindex > 0 && p.via[0] > 0 {
		info.Via, info.ViaPeer = uint32(p.via[0]), uint32(p.via[1])
	}
	if p.bridge.cfg.VLANAware() {
		switch {
		case p.span() != nil:
			// Each copy keeps the tag of its frame's VLAN.
			info.Trunk = true
			for vid := uint16(1); vid <= 4094; vid++ {
				info.VLANs = append(info.VLANs, vid)
			}
		case p.cfg.IsTrunk():
			info.PVID = p.cfg.PVID()
			info.Trunk, info.VLANs = true, p.cfg.VLANs()
		default:
			info.PVID = p.cfg.PVID()
		}
	}
	return info
}

// staticEntry is a static entry as written to the table.
type staticEntry struct {
	config.Static
	Ifindex int
	Slot    uint16
	User    bool // from `trestle fdb add`
}

// bridgeState is one configured bridge.
type bridgeState struct {
	id    uint16
	cfg   config.Bridge
	ports []*portState // config order
	// Static entries added with `trestle fdb add`: kept across reloads and,
	// with persist, restarts (the table marks them as the CLI's).
	cliStatics map[string]config.Static
	// cliRules: the filter's running rules as `trestle rule add/del` left
	// them, kept until the next reload from the file; nil: the config's.
	cliRules *[]config.Rule
	// written are the static entries the table holds, by staticKey.
	written map[string]staticEntry
	// frozen are the addresses that moved past mac_move_limit, held as
	// static entries (mobility.go), by staticKey; kept across reloads.
	frozen map[string]frozenEntry
	// info is the bridge as last written to the dataplane, nil if never.
	info *datapath.BridgeInfo
	// tree: the bridges patches join this one to, itself first.
	tree []*bridgeState
}

func staticKey(s config.Static) string { return fmt.Sprintf("%s/%d", s.MAC, s.VLAN) }

// port finds a port by its name (an interface's, or a patch port's).
func (b *bridgeState) port(name string) *portState {
	for _, p := range b.ports {
		if p.name() == name {
			return p
		}
	}
	return nil
}

// portByKey finds a port by its key (see portState.key).
func (b *bridgeState) portByKey(key string) *portState {
	for _, p := range b.ports {
		if p.key() == key {
			return p
		}
	}
	return nil
}

// forwards says whether the port takes frames: attached and running, or a
// patch port, and not blocked by a guard.
func (p *portState) forwards() bool { return p.mode != "" && p.running && p.blocked == "" }

func (b *bridgeState) portBySlot(slot uint16) *portState {
	for _, p := range b.ports {
		if p.slot == slot {
			return p
		}
	}
	return nil
}

// desired is the bridge as the dataplane should hold it: the ports that
// forward are in its flood list.
func (b *bridgeState) desired() datapath.BridgeInfo {
	info := datapath.BridgeInfo{ID: b.id, Name: b.cfg.Name, MaxEntries: uint32(b.cfg.MaxEntries)}
	patched := false
	for _, p := range b.ports {
		// A span port takes no flood: copies reach it through the walk.
		if p.forwards() && p.span() == nil {
			// A bridge's port list holds where floods go, not limits.
			info.Ports = append(info.Ports, p.vlanInfo())
			patched = patched || p.cfg.IsPatch()
		}
	}
	if b.cfg.VLANAware() {
		info.VLANAware = true
		info.VLANs = b.vlans()
	}
	for _, p := range b.ports {
		if i := p.info(); i != nil && i.HasPolicy() {
			info.Policy = true
		}
		if i := p.info(); i != nil && i.Mirrored() {
			info.Mirror = true
		}
		if p.cfg.VXLAN != 0 {
			info.Overlay = true
		}
	}
	info.NeighSuppress = b.cfg.NeighSuppress
	info.Snoop = b.cfg.MulticastSnooping
	info.LoopDetect = b.cfg.LoopDetect
	info.Filter = b.filter()
	if patched || info.Mirror || info.FilterWalks() {
		// Where a flood that crosses patches may go: every bridge's
		// interface ports that forward, in the tree's order, span
		// ports included.
		for _, tb := range b.tree {
			for _, p := range tb.ports {
				if p.forwards() && !p.cfg.IsPatch() {
					info.Reach = append(info.Reach, p.vlanInfo())
				}
			}
		}
	}
	return info
}

// joinTrees sets each bridge's tree, and each patch port's peer, from the
// patch ports of the model (the config checked that they pair up and form
// no cycle).
func joinTrees(order []*bridgeState, byName map[string]*bridgeState) {
	for _, b := range order {
		for _, p := range b.ports {
			p.peer = nil
			if !p.cfg.IsPatch() {
				continue
			}
			if pb := byName[p.cfg.Patch]; pb != nil {
				p.peer = pb.portByKey("patch:" + b.cfg.Name)
			}
		}
	}
	for _, b := range order {
		b.tree = []*bridgeState{b}
		seen := map[*bridgeState]bool{b: true}
		for i := 0; i < len(b.tree); i++ {
			for _, p := range b.tree[i].ports {
				if p.peer != nil && !seen[p.peer.bridge] {
					seen[p.peer.bridge] = true
					b.tree = append(b.tree, p.peer.bridge)
				}
			}
		}
	}
}

// vlans are every VLAN the bridge's ports carry, sorted.
func (b *bridgeState) vlans() []uint16 {
	var all []uint16
	for _, p := range b.ports {
		if p.span() == nil {
			all = append(all, p.cfg.VLANs()...)
		}
	}
	slices.Sort(all)
	return slices.Compact(all)
}

func sameBridgeInfo(a, b *datapath.BridgeInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ID == b.ID && a.Name == b.Name && a.MaxEntries == b.MaxEntries && a.VLANAware == b.VLANAware && a.Policy == b.Policy && a.Mirror == b.Mirror && a.Overlay == b.Overlay && a.NeighSuppress == b.NeighSuppress && a.Snoop == b.Snoop && a.LoopDetect == b.LoopDetect &&
		slices.Equal(a.VLANs, b.VLANs) && slices.EqualFunc(a.Ports, b.Ports, datapath.PortInfo.Equal) &&
		slices.EqualFunc(a.Reach, b.Reach, datapath.PortInfo.Equal) && reflect.DeepEqual(a.Filter, b.Filter)
}

func samePortInfo(a, b *datapath.PortInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
