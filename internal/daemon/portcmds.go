package daemon

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/overlay"
)

// maxOwner bounds an owner's text (a CNI owner is a network name, a
// container id of 64 hex digits and an interface name).
const maxOwner = 512

// parseRunPort checks a run-time port's keys as the config's checker does
// for a [[bridge.port]] of bridge. The port is parsed as its keys say,
// apart from the bridge's other ports: a port without vlan or trunk is
// given VLAN 1 by the merge, while its bridge is VLAN-aware (desired), so
// that what a port is does not depend on the ports added before it, and is
// the same after a restart.
func parseRunPort(bridge, iface string, args []string) (config.Port, error) {
	for _, a := range args {
		k, _, _ := strings.Cut(a, "=")
		switch strings.TrimSpace(k) {
		case "interface":
			return config.Port{}, fmt.Errorf("%s: the interface is the port's name, given before its keys (trestle port add BRIDGE INTERFACE KEY=VALUE...)", a)
		case "patch", "name":
			return config.Port{}, fmt.Errorf("%s: patch ports are the config file's; a run-time port attaches an interface", a)
		case "owner":
			return config.Port{}, fmt.Errorf("%s: owner is not a port key; it is given apart (ctl.Request.Owner)", a)
		}
	}
	return config.ParsePortArgs(&config.Bridge{Name: bridge}, append([]string{"interface=" + iface}, args...))
}

// portAdd adds a run-time port and answers once it forwards (attached),
// or with why not; on an error nothing running changes (but for a port
// whose interface is gone, which the pending link events drop anyway).
func (d *Daemon) portAdd(req ctl.Request) (ctl.PortEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cfg == nil {
		return ctl.PortEntry{}, errors.New("the daemon is starting")
	}
	b, ok := d.bridges[req.Bridge]
	if !ok {
		return ctl.PortEntry{}, errNoBridge(req.Bridge)
	}
	if err := checkOwner(req.Owner); err != nil {
		return ctl.PortEntry{}, err
	}
	if req.Port == "" {
		return ctl.PortEntry{}, errors.New("which interface? trestle port add BRIDGE INTERFACE [KEY=VALUE...]")
	}
	// A run-time port on this interface name whose interface went (and
	// maybe came back as another) before the link events were handled:
	// the switch is moved past that first, so that this add attaches what
	// the name is now, instead of answering with the old port, or refusing
	// the name as taken, and the next reconcile dropping it.
	for _, rp := range d.run {
		if rp.Interface == req.Port && d.runPortGone(rp) != "" {
			if err := d.apply(d.cfg); err != nil {
				return ctl.PortEntry{}, fmt.Errorf("port %q not added: %w", req.Port, err)
			}
			b, ok = d.bridges[req.Bridge]
			if !ok {
				return ctl.PortEntry{}, errNoBridge(req.Bridge)
			}
			break
		}
	}
	if old := d.runPortOf(req.Bridge, req.Port); old != nil && old.Owner == req.Owner && slices.Equal(old.Args, req.Args) {
		if p := b.port(req.Port); p != nil {
			// Added already, as asked: the same answer again (a CNI ADD
			// that is retried).
			return d.portEntry(b, p), nil
		}
	}
	if where := d.portOwnerOf(req.Port); where != "" {
		return ctl.PortEntry{}, fmt.Errorf("interface %q is already a port of %s", req.Port, where)
	}
	if what := d.overlayObject(req.Port); what != "" {
		return ctl.PortEntry{}, fmt.Errorf("interface %q is %s, which the daemon made for the overlay (docs/overlay.md): a port on it would switch this bridge's frames into the VNI", req.Port, what)
	}
	if q := b.port(req.Port); q != nil {
		return ctl.PortEntry{}, fmt.Errorf("%q is already the name of patch port to bridge %q of bridge %q: a port's name is unique in its bridge", req.Port, q.cfg.Patch, b.cfg.Name)
	}
	p, err := parseRunPort(b.cfg.Name, req.Port, req.Args)
	if err != nil {
		return ctl.PortEntry{}, err
	}
	bound := p
	if b.cfg.VLANAware() && bound.VLAN == 0 && !bound.IsTrunk() {
		bound.VLAN = 1 // as the merge makes it (normalizeVLANs)
	}
	if why := b.cfg.BindConflict(&bound); why != "" {
		return ctl.PortEntry{}, fmt.Errorf("allowed_macs: %s", why)
	}
	if why, err := d.bindConflict(b, &bound); err != nil {
		return ctl.PortEntry{}, fmt.Errorf("port %q not added: %w", req.Port, err)
	} else if why != "" {
		return ctl.PortEntry{}, fmt.Errorf("allowed_macs: %s", why)
	}
	if bound.Has(tbpf.TrestleTrPortFlagsTR_PORT_QINQ) && bound.VLAN == 0 && !bound.IsTrunk() {
		return ctl.PortEntry{}, fmt.Errorf("qinq: is for access ports of a VLAN-aware bridge, and bridge %q is not one: set vlan too", b.cfg.Name)
	}
	if !b.cfg.VLANAware() && p.VLANs() != nil && len(b.ports) > 0 {
		return ctl.PortEntry{}, fmt.Errorf("bridge %q is not VLAN-aware (no port sets vlan or trunk): a port added at run time cannot make it so while it has other ports, whose VLAN it would change; set vlan or trunk on a port in the config file", b.cfg.Name)
	}
	total := 0
	for _, ob := range d.bridges {
		total += len(ob.ports)
	}
	if len(b.ports) >= config.MaxPortsPerBridge {
		return ctl.PortEntry{}, fmt.Errorf("bridge %q is full: it has %d ports, the most a bridge takes; put the next on another bridge", b.cfg.Name, len(b.ports))
	}
	if total >= config.MaxPorts {
		return ctl.PortEntry{}, fmt.Errorf("the switch is full: its bridges have %d ports, the most it takes in all bridges together", total)
	}
	l, err := d.sys.LinkByName(req.Port)
	if errors.Is(err, errNoLink) {
		return ctl.PortEntry{}, fmt.Errorf("no interface named %q in the daemon's network namespace", req.Port)
	} else if err != nil {
		return ctl.PortEntry{}, fmt.Errorf("interface %q: %w", req.Port, err)
	}
	rp := &runPort{Bridge: b.cfg.Name, Interface: req.Port, Ifindex: l.Index, Owner: req.Owner, Args: slices.Clone(req.Args), port: p}
	was := d.run
	d.run = append(slices.Clone(d.run), rp)
	if err := d.applyScoped(d.cfg, d.scopedFor(b, &l, rp)); err != nil {
		d.run = was
		return ctl.PortEntry{}, fmt.Errorf("port %q not added: %w", req.Port, err)
	}
	nb := d.bridges[rp.Bridge]
	np := nb.port(rp.Interface)
	if np == nil || np.mode == "" || d.runPortOf(rp.Bridge, rp.Interface) == nil {
		why := "it left the switch during the apply"
		if np != nil {
			why = np.why
		}
		d.run = slices.DeleteFunc(slices.Clone(d.run), func(x *runPort) bool { return x == rp })
		if err := d.apply(d.cfg); err != nil {
			d.log.Error("taking back a run-time port that did not attach failed", "bridge", rp.Bridge, "port", rp.Interface, "err", err)
		}
		d.saveRun()
		return ctl.PortEntry{}, fmt.Errorf("port %q not added: it does not attach: %s", req.Port, why)
	}
	d.saveRun()
	d.log.Info("run-time port added", "bridge", rp.Bridge, "port", rp.Interface, "owner", rp.Owner, "mode", np.mode)
	return d.portEntry(nb, np), nil
}

// portOwnerOf says which bridge has a port on the interface, and from
// where ("bridge br0 (from the config file)"), or "".
func (d *Daemon) portOwnerOf(iface string) string {
	for _, b := range d.bridges {
		for _, p := range b.ports {
			if p.cfg.IsPatch() || p.cfg.Interface != iface {
				continue
			}
			if rp := d.runPortOf(b.cfg.Name, iface); rp != nil {
				if rp.Owner != "" {
					return fmt.Sprintf("bridge %q (added at run time by %q)", b.cfg.Name, rp.Owner)
				}
				return fmt.Sprintf("bridge %q (added at run time)", b.cfg.Name)
			}
			return fmt.Sprintf("bridge %q (from the config file %s)", b.cfg.Name, d.opts.ConfigPath)
		}
	}
	return ""
}

// overlayObject says which of the overlay's kernel objects iface is
// ("VNI 100's advertise port's peer"), or "": one of the VNIs of the
// configuration's overlay ports, or of those the daemon holds (taken over
// from a daemon before it). Those names are the daemon's by contract
// (overlay.NamesOf: it takes over, or refuses to start beside, whatever
// holds them), so the name alone says it; the same names for a VNI the
// daemon has not (QEMU names its TAPs tap0, tap1, ...) are anyone's.
func (d *Daemon) overlayObject(iface string) string {
	vni, ok := overlay.VNIOf(iface)
	if !ok {
		return ""
	}
	ours := slices.Contains(d.ovl.mgr.Held(), vni)
	for _, b := range d.cfg.Bridges {
		for _, p := range b.Ports {
			ours = ours || p.VXLAN == vni
		}
	}
	if !ours {
		return ""
	}
	n := overlay.NamesOf(vni)
	what := map[string]string{
		n.Bridge:    "kernel bridge",
		n.VXLAN:     "vxlan device",
		n.Adv:       "advertise port",
		n.AdvPeer:   "advertise port's peer",
		n.Tramp:     "xdp way in",
		n.TrampPeer: "xdp way in's peer",
	}[iface]
	if what == "" {
		return ""
	}
	return fmt.Sprintf("VNI %d's %s", vni, what)
}

// checkOwner refuses an owner that is too long, not UTF-8 (ports.json,
// being JSON, would take it back changed, and port del --owner would no
// longer find it), or holds a control character (C0, DEL or C1: it is
// printed to terminals).
func checkOwner(o string) error {
	if len(o) > maxOwner {
		return fmt.Errorf("owner: longer than %d bytes", maxOwner)
	}
	if !utf8.ValidString(o) {
		return errors.New("owner: not UTF-8 text")
	}
	for _, r := range o {
		if r < ' ' || r == 0x7f || r >= 0x80 && r <= 0x9f {
			return errors.New("owner: contains a control character")
		}
	}
	return nil
}

// portDel removes a run-time port by its interface, or every run-time port
// of an owner in a bridge; it answers the ports removed. An owner with no
// port is no error (what an orchestrator cleans may be clean already).
func (d *Daemon) portDel(req ctl.Request) ([]ctl.PortEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cfg == nil {
		return nil, errors.New("the daemon is starting")
	}
	b, ok := d.bridges[req.Bridge]
	if !ok {
		return nil, errNoBridge(req.Bridge)
	}
	var del func(*runPort) bool
	switch {
	case req.Port != "" && req.Owner != "":
		return nil, errors.New("port del takes an interface or an owner, not both")
	case req.Port != "":
		if d.runPortOf(b.cfg.Name, req.Port) == nil {
			if p := b.port(req.Port); p != nil {
				return nil, fmt.Errorf("port %q of bridge %q is the config file's (%s): remove it there and reload", req.Port, b.cfg.Name, d.opts.ConfigPath)
			}
			return nil, fmt.Errorf("bridge %q has no port %q", b.cfg.Name, req.Port)
		}
		del = func(rp *runPort) bool { return rp.Bridge == b.cfg.Name && rp.Interface == req.Port }
	case req.Owner != "":
		del = func(rp *runPort) bool { return rp.Bridge == b.cfg.Name && rp.Owner == req.Owner }
	default:
		return nil, errors.New("which port? trestle port del BRIDGE INTERFACE, or trestle port del BRIDGE --owner TEXT")
	}
	out := []ctl.PortEntry{}
	for _, rp := range d.run {
		if del(rp) {
			if p := b.port(rp.Interface); p != nil {
				out = append(out, d.portEntry(b, p))
			}
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	was := d.run
	var gone []*runPort
	for _, rp := range d.run {
		if del(rp) {
			gone = append(gone, rp)
		}
	}
	d.run = slices.DeleteFunc(slices.Clone(d.run), del)
	if err := d.applyScoped(d.cfg, d.scopedFor(b, nil, gone...)); err != nil {
		d.run = was
		return nil, fmt.Errorf("port del: %w", err)
	}
	d.saveRun()
	for _, e := range out {
		d.log.Info("run-time port removed", "bridge", e.Bridge, "port", e.Name, "owner", e.Owner, "why", "port del")
	}
	return out, nil
}

// portList lists the ports of a bridge, or of every bridge, with where
// each came from.
func (d *Daemon) portList(only string) ([]ctl.PortEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	bs, err := d.sortedBridges(only)
	if err != nil {
		return nil, err
	}
	out := []ctl.PortEntry{}
	for _, b := range bs {
		for _, p := range b.ports {
			out = append(out, d.portEntry(b, p))
		}
	}
	return out, nil
}

// Origins of a port in `trestle port list`.
const (
	originFile = "file"
	originRun  = "run"
)

func (d *Daemon) portEntry(b *bridgeState, p *portState) ctl.PortEntry {
	e := ctl.PortEntry{Bridge: b.cfg.Name, Origin: originFile, PortStatus: d.portStatus(b, p)}
	if !p.cfg.IsPatch() {
		if rp := d.runPortOf(b.cfg.Name, p.cfg.Interface); rp != nil {
			e.Origin, e.Owner = originRun, rp.Owner
		}
	}
	return e
}
