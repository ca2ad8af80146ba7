package daemon

import (
	"fmt"
	"slices"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
)

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
)

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
	// written is what the port maps hold for this port, nil for nothing.
	written *datapath.PortInfo
}

func (p *portState) name() string { return p.cfg.Interface }

func (p *portState) state() string {
	switch {
	case p.mode == "":
		return stateDown
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
	return &info
}

// vlanInfo is the port as a bridge's port list holds it: where it is, and
// on a VLAN-aware bridge which VLANs it carries.
func (p *portState) vlanInfo() datapath.PortInfo {
	info := datapath.PortInfo{Ifindex: uint32(p.ifindex), Bridge: p.bridge.id, Slot: p.slot}
	if p.bridge.cfg.VLANAware() {
		info.PVID = p.cfg.PVID()
		if p.cfg.IsTrunk() {
			info.Trunk, info.VLANs = true, p.cfg.VLANs()
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
	// written are the static entries the table holds, by staticKey.
	written map[string]staticEntry
	// info is the bridge as last written to the dataplane, nil if never.
	info *datapath.BridgeInfo
}

func staticKey(s config.Static) string { return fmt.Sprintf("%s/%d", s.MAC, s.VLAN) }

func (b *bridgeState) port(ifname string) *portState {
	for _, p := range b.ports {
		if p.cfg.Interface == ifname {
			return p
		}
	}
	return nil
}

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
	for _, p := range b.ports {
		if p.mode != "" && p.running {
			// A bridge's port list holds where floods go, not limits.
			info.Ports = append(info.Ports, p.vlanInfo())
		}
	}
	if b.cfg.VLANAware() {
		info.VLANAware = true
		info.VLANs = b.vlans()
	}
	return info
}

// vlans are every VLAN the bridge's ports carry, sorted.
func (b *bridgeState) vlans() []uint16 {
	var all []uint16
	for _, p := range b.ports {
		all = append(all, p.cfg.VLANs()...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

func sameBridgeInfo(a, b *datapath.BridgeInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ID == b.ID && a.Name == b.Name && a.MaxEntries == b.MaxEntries && a.VLANAware == b.VLANAware &&
		slices.Equal(a.VLANs, b.VLANs) && slices.EqualFunc(a.Ports, b.Ports, datapath.PortInfo.Equal)
}

func samePortInfo(a, b *datapath.PortInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// alloc hands out bridge ids and port slots. A slot or id whose entries
// could not be flushed is dirty: it is not given out until a flush works,
// so that no new port inherits another's entries.
type alloc struct {
	slotUsed, slotDirty [tbpf.MaxPorts]bool
	idUsed, idDirty     [tbpf.MaxBridges + 1]bool
}

func (a *alloc) slot() (uint16, error) {
	for i := 1; i < len(a.slotUsed); i++ {
		if !a.slotUsed[i] && !a.slotDirty[i] {
			a.slotUsed[i] = true
			return uint16(i), nil
		}
	}
	return 0, fmt.Errorf("no free port slot: at most %d ports", len(a.slotUsed)-1)
}

func (a *alloc) id() (uint16, error) {
	for i := 1; i < len(a.idUsed); i++ {
		if !a.idUsed[i] && !a.idDirty[i] {
			a.idUsed[i] = true
			return uint16(i), nil
		}
	}
	return 0, fmt.Errorf("no free bridge id: at most %d bridges", len(a.idUsed)-1)
}
