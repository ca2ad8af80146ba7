package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
)

// Ports added at run time (`trestle port add`, the CNI plugin, the QEMU
// scripts; issue 28). They are not a second path through the daemon: the
// state it moves the switch to is one, the file's bridges with the run-time
// ports added to them (desired), and every apply plans, commits and
// finalizes that. The store of run-time ports is kept in the daemon's state
// directory under /run/trestle (ports.json), so that a restart, with or
// without persist, takes them back, and a reboot forgets them.
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

// runPort is a port added at run time, as recorded.
type runPort struct {
	Bridge    string `json:"bridge"`
	Interface string `json:"interface"`
	// Ifindex is the interface's when it was added: a name that comes
	// back as another interface is not this port.
	Ifindex int      `json:"ifindex"`
	Owner   string   `json:"owner,omitempty"`
	Args    []string `json:"args,omitempty"` // the port keys, as given
	port    config.Port
}

// runFile is ports.json.
type runFile struct {
	Ports []*runPort `json:"ports"`
}

const runPortsFile = "ports.json"

// maxOwner bounds an owner's text (a CNI owner is a network name, a
// container id of 64 hex digits and an interface name).
const maxOwner = 512

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

// Scoped applies. A run-time port added or removed changes one port of a
// bridge, yet a full apply looks again at every interface of every
// bridge (a netlink lookup and its XDP features each, an in-place upgrade
// check of each attachment, each run-time port's interface): at 50 ports
// that was most of a CNI ADD's time (docs/performance.md "Pod churn").
// A scoped apply plans and commits the whole model as a full one does
// (bridges, flood lists, port maps, statics, stages), but takes every
// port outside its scope as it is. That is the full apply's result
// whenever the ports in scope cannot change how the others are attached,
// which scopedFor checks: no port of the bridge's tree is at XDP, nor an
// "auto" NIC (the one kind of port whose mode another port decides, by
// taking XDP redirects or not), and the port added is neither. A bridge
// tree with XDP ports takes full applies: a tc port joining it must take
// their redirects, a port at XDP changes what the others' peers need.

// portScope is the ports a scoped apply looks at, by bridge and key (a
// run-time port's key is its interface).
type portScope map[portID]bool

// ifindexes are the interfaces the ports in the scope are attached to in
// the next model.
func (s portScope) ifindexes(c *change) map[int]bool {
	out := map[int]bool{}
	for _, b := range c.order {
		for _, p := range b.ports {
			if p.mode != "" && s[portID{b.cfg.Name, p.key()}] {
				out[p.ifindex] = true
			}
		}
	}
	return out
}

// scopedFor is the scope of an apply that adds (l, the port's interface:
// its kind) or removes the run-time ports rps of bridge b, or nil when
// only a full apply gets it right.
func (d *Daemon) scopedFor(b *bridgeState, l *Link, rps ...*runPort) portScope {
	for _, tb := range b.tree {
		for _, p := range tb.ports {
			if p.mode == mode.XDP || p.cfg.Mode == mode.Auto && p.physical {
				return nil
			}
		}
	}
	only := portScope{}
	for _, rp := range rps {
		if rp.port.Mode == mode.XDP || l != nil && rp.port.Mode == mode.Auto && l.Physical {
			return nil
		}
		only[portID{rp.Bridge, rp.Interface}] = true
	}
	return only
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

// runPortOf is the run-time port of a bridge on an interface, or nil.
func (d *Daemon) runPortOf(bridge, iface string) *runPort {
	for _, rp := range d.run {
		if rp.Bridge == bridge && rp.Interface == iface {
			return rp
		}
	}
	return nil
}

// settleRun records the run-time ports an apply kept, and says which went.
func (d *Daemon) settleRun(kept []*runPort, gone []dropped) {
	for _, g := range gone {
		d.log.Info("run-time port removed", "bridge", g.rp.Bridge, "port", g.rp.Interface, "owner", g.rp.Owner, "why", g.why)
	}
	changed := len(gone) > 0 || len(kept) != len(d.run)
	d.run = kept
	if changed {
		d.saveRun()
	}
}

// saveRun writes the store (nothing without a state directory: unit tests).
func (d *Daemon) saveRun() {
	if d.state == nil {
		return
	}
	if err := d.state.saveRun(runFile{Ports: d.run}); err != nil {
		d.log.Error("record the run-time ports", "err", err)
	}
}

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

// loadRun reads the store an earlier daemon left; entries that no longer
// parse are dropped with a warning (the apply drops those whose bridge or
// interface is gone).
func (d *Daemon) loadRun() {
	if d.state == nil {
		return
	}
	rf, err := d.state.loadRun()
	if err != nil {
		// Kept aside, not left where the next port.add writes over it:
		// what it held can still be read, and added again, by hand.
		kept := d.state.runFile() + ".unreadable"
		if rerr := os.Rename(d.state.runFile(), kept); rerr != nil {
			kept = ""
		}
		d.log.Warn("the run-time ports recorded are unreadable; none is taken back", "err", err, "kept_as", kept)
		return
	}
	taken := map[string]string{} // interface -> bridge
	for _, rp := range rf.Ports {
		if rp == nil {
			continue
		}
		// What port.add refuses is refused here too: the merge takes
		// these as they are, and an interface twice would be two ports
		// (two slots) on one ifindex.
		if b, ok := taken[rp.Interface]; ok {
			d.log.Warn("a recorded run-time port names an interface recorded before it; dropped", "bridge", rp.Bridge, "port", rp.Interface, "first", b)
			continue
		}
		if err := checkOwner(rp.Owner); err != nil {
			d.log.Warn("a recorded run-time port has an owner port.add refuses; dropped", "bridge", rp.Bridge, "port", rp.Interface, "err", err)
			continue
		}
		p, err := parseRunPort(rp.Bridge, rp.Interface, rp.Args)
		if err != nil {
			d.log.Warn("a recorded run-time port no longer parses; dropped", "bridge", rp.Bridge, "port", rp.Interface, "err", err)
			continue
		}
		taken[rp.Interface] = rp.Bridge
		rp.port = p
		d.run = append(d.run, rp)
	}
	if len(d.run) > 0 {
		d.log.Info("run-time ports taken back", "count", len(d.run))
	}
}

func (s *stateDir) runFile() string { return filepath.Join(s.dir, runPortsFile) }

func (s *stateDir) loadRun() (runFile, error) {
	var rf runFile
	b, err := os.ReadFile(s.runFile())
	if errors.Is(err, os.ErrNotExist) {
		return rf, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &rf)
	}
	if err != nil {
		return rf, fmt.Errorf("read %s: %w", s.runFile(), err)
	}
	return rf, nil
}

func (s *stateDir) saveRun(rf runFile) error {
	if rf.Ports == nil {
		rf.Ports = []*runPort{}
	}
	return writeAtomic(s.runFile(), rf)
}

// writeAtomic writes v as JSON whole or not at all: a new file renamed
// over the old one.
func writeAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeBytesAtomic(path, b)
}

// writeBytesAtomic writes b whole or not at all. It is not synced: the
// records of the state directory (under /run) describe interfaces and
// namespaces that a reboot takes away with them, and the rename is whole
// to the next daemon after this one dies, which is what they are for. A
// sync cost each port.add and port.del 1.5 ms on an ext4 /run, on a CNI
// ADD's and DEL's way; after a crash of the machine a record that did not
// reach the disk whole is set aside as unreadable (loadRun), with nothing
// left to take back.
func writeBytesAtomic(path string, b []byte) error {
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
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
	if bound.QinQ && bound.VLAN == 0 && !bound.IsTrunk() {
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

// settler takes ahead of time the waits that the next write of the
// bridges would take on its way (datapath.SettleBegin): the grace period
// after a bridge's flip, and flood sets given the size their members need.
type settler interface {
	SettleBegin() *datapath.Settle
	SettleEnd(*datapath.Settle)
}

// settleLater takes, beside whatever comes next, the waits (RCU grace
// periods: 7-15 ms each on a busy machine) that the next port.add or
// port.del would otherwise take in its bridge's write while its caller
// waits. Called with d.mu held at the end of every apply; the waits do
// not hold it, and shutdown waits for them (d.settling) before the
// datapath closes, which ends a settle this did not end.
func (d *Daemon) settleLater() {
	s, ok := d.topo.(settler)
	if !ok || d.closed {
		return
	}
	run := s.SettleBegin()
	if run == nil {
		return
	}
	d.settling.Add(1)
	go func() {
		defer d.settling.Done()
		err := run.Wait()
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.closed {
			return
		}
		if err != nil {
			d.log.Warn("wait for the bridges' writes ahead of the next", "err", err)
		}
		s.SettleEnd(run)
	}()
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
