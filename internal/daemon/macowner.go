package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"net"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/datapath"
)

// errHolderFound ends a table walk at the first entry that answers.
var errHolderFound = errors.New("holder found")

// macHolder says which port other than self holds mac in VLAN vlan of
// bridge b, and how, or "" when none does. An address bound to a port (a
// static entry, allowed_macs, macspoofchk) has one owner: binding it to
// another port would take the traffic of the station that has it (the
// gateway, learned on the uplink) for good, and drop that station's own
// frames at its port as src_static. The holders are the config's static
// entries, the CLI's, other ports' allowed_macs, an entry the datapath
// learned on another port, and an overlay's remote address. Only under
// d.mu.
func (d *Daemon) macHolder(b *bridgeState, mac net.HardwareAddr, vlan uint16, self string) (string, error) {
	k := staticKey(config.Static{MAC: mac, VLAN: vlan})
	for _, s := range b.cfg.Static {
		if staticKey(s) == k && s.Port != self {
			return fmt.Sprintf("port %q holds it: a static entry of the config (line %d)", s.Port, s.Line), nil
		}
	}
	if f, ok := b.frozen[k]; ok && f.Port != self {
		return fmt.Sprintf("port %q holds it: frozen there after %d moves ('trestle fdb del' releases it)", f.Port, f.moves), nil
	}
	if s, ok := b.cliStatics[k]; ok && s.Port != self {
		return fmt.Sprintf("port %q holds it: a static entry from trestle fdb add", s.Port), nil
	}
	for i := range b.cfg.Ports {
		for _, s := range b.cfg.Ports[i].AllowedStatics() {
			if staticKey(s) == k && s.Port != self {
				return fmt.Sprintf("port %q holds it: its allowed_macs", s.Port), nil
			}
		}
	}
	for _, p := range b.ports {
		if p.cfg.VXLAN == 0 || p.name() == self || vlan != 0 && !p.cfg.Carries(vlan) {
			continue
		}
		if vtep, ok := d.ovl.mgr.RemoteOf(p.cfg.VXLAN, mac); ok {
			return fmt.Sprintf("overlay port %q holds it: a remote address of VNI %d, behind VTEP %s", p.name(), p.cfg.VXLAN, vtep), nil
		}
	}
	var held string
	err := d.table.WalkFDB(func(es []datapath.FDBEntry) error {
		for _, e := range es {
			if e.Bridge != b.id || e.VLAN != vlan || !bytes.Equal(e.MAC, mac) {
				continue
			}
			name := fmt.Sprintf("ifindex %d", e.Ifindex)
			if p := b.portBySlot(e.Slot); p != nil {
				name = p.name()
			}
			if name == self {
				return errHolderFound
			}
			how := "learned there"
			switch {
			case e.Static && e.User:
				how = "a static entry from trestle fdb add"
			case e.Static:
				how = "a static entry"
			}
			held = fmt.Sprintf("port %q holds it: %s", name, how)
			return errHolderFound
		}
		return nil
	})
	if err != nil && !errors.Is(err, errHolderFound) {
		return "", fmt.Errorf("reading the learning table: %w", err)
	}
	return held, nil
}

// bindConflict checks every address port p (not yet added to b) binds
// against the holders macHolder knows: "" when none holds one.
func (d *Daemon) bindConflict(b *bridgeState, p *config.Port) (string, error) {
	for _, s := range p.AllowedStatics() {
		why, err := d.macHolder(b, s.MAC, s.VLAN, s.Port)
		if err != nil || why != "" {
			if why != "" {
				why = fmt.Sprintf("%s vlan %d: %s; an address is bound to one port (delete it there first: trestle fdb del, or the other port's allowed_macs)", s.MAC, s.VLAN, why)
			}
			return why, err
		}
	}
	return "", nil
}
