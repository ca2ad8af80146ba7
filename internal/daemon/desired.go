package daemon

import (
	"errors"
	"fmt"
	"slices"

	"github.com/trestle/trestle/internal/config"
)

// Ports added at run time (`trestle port add`, the CNI plugin, the QEMU
// scripts; issue 28). They are not a second path through the daemon: the
// state it moves the switch to is one, the file's bridges with the run-time
// ports added to them (desired), and every apply plans, commits and
// finalizes that. This file is that merge. The store of run-time ports is
// kept in the daemon's state directory under /run/trestle (ports.json,
// portstore.go), so that a restart, with or without persist, takes them
// back, and a reboot forgets them; the control socket's port.add, port.del
// and port.list are portcmds.go.
//
// The rules of the merge:
//   - the file's ports are the file's: a run-time port whose interface the
//     file names (in any bridge) is dropped, and the file's port wins;
//   - a run-time port of a bridge the file no longer has goes with it;
//   - a run-time port whose interface is gone (deleted, renamed, or its
//     name now another interface's) is dropped, so no stale port and no
//     slot is kept;
//   - a bridge that a port makes VLAN-aware makes its other ports that set
//     neither vlan nor trunk access ports of VLAN 1, as in the file; when
//     the last port that set one goes, the bridge is no longer VLAN-aware.

// dropped is a run-time port the merge left out, and why.
type dropped struct {
	rp  *runPort
	why string
}

// desired is the state an apply moves to: cfg with the run-time ports
// added to its bridges. kept are the run-time ports in it; gone those
// left out (recorded as gone once the apply succeeds). cfg is not changed.
// A scoped apply (only set) looks up the interfaces of its own ports
// alone: whether the others' are still there is the link events' to say.
func (d *Daemon) desired(cfg *config.Config, only portScope) (next *config.Config, kept []*runPort, gone []dropped) {
	if len(d.run) == 0 {
		return cfg, nil, nil
	}
	next = &config.Config{File: cfg.File, Daemon: cfg.Daemon, Bridges: slices.Clone(cfg.Bridges)}
	inFile := map[string]string{}   // interface -> bridge
	patchNames := map[string]bool{} // "bridge/name" of the file's patch ports
	total := 0
	for i := range next.Bridges {
		b := &next.Bridges[i]
		b.Ports = slices.Clone(b.Ports)
		for _, p := range b.Ports {
			if p.IsPatch() {
				patchNames[b.Name+"/"+p.Name] = true
			} else {
				inFile[p.Interface] = b.Name
			}
		}
		total += len(b.Ports)
	}
	for _, rp := range d.run {
		b := bridgeOf(next, rp.Bridge)
		switch {
		case b == nil:
			gone = append(gone, dropped{rp, fmt.Sprintf("bridge %q is no longer in the config", rp.Bridge)})
			continue
		case inFile[rp.Interface] != "":
			gone = append(gone, dropped{rp, fmt.Sprintf("the config file names interface %q as a port of bridge %q, which wins", rp.Interface, inFile[rp.Interface])})
			continue
		case patchNames[rp.Bridge+"/"+rp.Interface]:
			gone = append(gone, dropped{rp, fmt.Sprintf("the config file names a patch port of bridge %q %q, which wins", rp.Bridge, rp.Interface)})
			continue
		case len(b.Ports) >= config.MaxPortsPerBridge || total >= config.MaxPorts:
			gone = append(gone, dropped{rp, fmt.Sprintf("no room: the file's ports fill bridge %q or the switch", rp.Bridge)})
			continue
		}
		if only != nil && !only[portID{rp.Bridge, rp.Interface}] {
			// Out of the scope: its interface is looked at by the
			// next full apply (a link event's).
		} else if why := d.runPortGone(rp); why != "" {
			gone = append(gone, dropped{rp, why})
			continue
		}
		b.Ports = append(b.Ports, rp.port)
		total++
		kept = append(kept, rp)
	}
	for i := range next.Bridges {
		normalizeVLANs(&next.Bridges[i])
	}
	return next, kept, gone
}

// runPortGone says why a run-time port's interface is no longer there, or
// "" if it is (or cannot be told: an error other than "no such interface"
// keeps the port).
func (d *Daemon) runPortGone(rp *runPort) string {
	l, err := d.sys.LinkByName(rp.Interface)
	switch {
	case errors.Is(err, errNoLink):
		return fmt.Sprintf("interface %q is gone", rp.Interface)
	case err != nil:
		return ""
	case rp.Ifindex != 0 && l.Index != rp.Ifindex:
		return fmt.Sprintf("interface %q is now another interface (ifindex %d, was %d)", rp.Interface, l.Index, rp.Ifindex)
	}
	return ""
}

// normalizeVLANs gives a VLAN-aware bridge's ports that set neither vlan
// nor trunk VLAN 1, as the config does for the ports of its file.
func normalizeVLANs(b *config.Bridge) {
	if !b.VLANAware() {
		return
	}
	for i := range b.Ports {
		if p := &b.Ports[i]; p.VLAN == 0 && !p.IsTrunk() {
			p.VLAN = 1
		}
	}
}

func bridgeOf(cfg *config.Config, name string) *config.Bridge {
	for i := range cfg.Bridges {
		if cfg.Bridges[i].Name == name {
			return &cfg.Bridges[i]
		}
	}
	return nil
}
