package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"

	"github.com/trestle/trestle/internal/netnsutil"
)

// Attach modes.
const (
	ModeAuto = "auto"
	ModeXDP  = "xdp"
	ModeTC   = "tc"
)

// chooseMode resolves "auto" for one interface and says why.
func chooseMode(configured string, l netlink.Link) (mode, reason string) {
	switch configured {
	case ModeXDP:
		return ModeXDP, "configured: mode = \"xdp\""
	case ModeTC:
		return ModeTC, "configured: mode = \"tc\""
	}
	switch l.Type() {
	case "veth":
		return ModeTC, "auto: veth peer is a host or container stack; tc keeps its GSO and checksum offload"
	case "tuntap":
		return ModeTC, "auto: TAP device of a VM or program; tc keeps GSO and checksum state"
	}
	if isPhysical(l.Attrs().Name) {
		return ModeXDP, "auto: physical NIC: native XDP forwards without socket buffers"
	}
	return ModeTC, fmt.Sprintf("auto: %s device: tc works on every device type", l.Type())
}

// takesXDPRedirects says whether frames redirected at XDP into this device are
// delivered. Devices without ndo_xdp_xmit (bridges, VLAN, macvlan, VXLAN,
// dummy...) drop them without a counter anywhere.
func takesXDPRedirects(l netlink.Link) bool {
	switch l.Type() {
	case "veth", "tuntap":
		return true
	}
	return isPhysical(l.Attrs().Name)
}

func isPhysical(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name, "device"))
	return err == nil
}

// peerFix is what the daemon changed on a veth peer so that XDP redirects into
// the port are delivered (GRO on the peer turns on its NAPI receive path) and
// the peer's TCP survives XDP (a checksum-partial frame loses that state in an
// XDP redirect, so the peer must checksum in software). Undo restores it.
type peerFix struct {
	ns      string // namespace path, "" for the daemon's own
	ifname  string
	changed map[string]bool // feature -> value before
}

func (p *peerFix) String() string {
	if p == nil {
		return ""
	}
	var parts []string
	for f, was := range p.changed {
		parts = append(parts, fmt.Sprintf("%s %s (was %s)", f, onOff(!was), onOff(was)))
	}
	where := p.ns
	if where == "" {
		where = "this namespace"
	}
	return fmt.Sprintf("%s in %s: %s", p.ifname, where, strings.Join(parts, ", "))
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

const (
	featGRO    = "rx-gro"
	featTxCsum = "tx-checksum-ip-generic"
)

// fixPeer finds the peer of a veth port and sets the features XDP needs.
// csumOff is for ports attached at XDP; a tc port of a bridge that has XDP ports
// only needs GRO, because it receives XDP redirects.
func fixPeer(l netlink.Link, csumOff bool) (*peerFix, error) {
	peerIndex := l.Attrs().ParentIndex
	if peerIndex == 0 {
		idx, err := netlink.VethPeerIndex(l.(*netlink.Veth))
		if err != nil {
			return nil, fmt.Errorf("find peer of %q: %w", l.Attrs().Name, err)
		}
		peerIndex = idx
	}
	nsPath := ""
	if nsid := l.Attrs().NetNsID; nsid >= 0 {
		p, err := netnsutil.FindByID(nsid)
		if err != nil {
			return nil, fmt.Errorf("peer of %q is in namespace id %d: %w", l.Attrs().Name, nsid, err)
		}
		nsPath = p
	}
	want := map[string]bool{featGRO: true}
	if csumOff {
		want[featTxCsum] = false
	}
	fix := &peerFix{ns: nsPath, changed: map[string]bool{}}
	err := netnsutil.Do(nsPath, func() error {
		peer, err := netlink.LinkByIndex(peerIndex)
		if err != nil {
			return fmt.Errorf("peer ifindex %d: %w", peerIndex, err)
		}
		fix.ifname = peer.Attrs().Name
		et, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer et.Close()
		cur, err := et.Features(fix.ifname)
		if err != nil {
			return fmt.Errorf("read features of %q: %w", fix.ifname, err)
		}
		change := map[string]bool{}
		for f, v := range want {
			if was, ok := cur[f]; ok && was != v {
				change[f] = v
				fix.changed[f] = was
			}
		}
		if len(change) == 0 {
			return nil
		}
		if err := et.Change(fix.ifname, change); err != nil {
			return fmt.Errorf("set %v on %q: %w", change, fix.ifname, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return fix, nil
}

// undo restores the peer's features; a peer that has gone needs nothing.
func (p *peerFix) undo() error {
	if p == nil || len(p.changed) == 0 {
		return nil
	}
	return netnsutil.Do(p.ns, func() error {
		if _, err := netlink.LinkByName(p.ifname); err != nil {
			return nil
		}
		et, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer et.Close()
		return et.Change(p.ifname, p.changed)
	})
}
