package daemon

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/trestle/trestle/internal/clsact"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/netdev"
	"github.com/trestle/trestle/internal/overlay"
)

const (
	netdevXDPBasic   = netdev.XDPBasic
	netdevXDPNdoXmit = netdev.XDPNdoXmit
)

// candidate is a port of a bridge being committed, with its interface.
type candidate struct {
	p           *portState
	l           Link
	ml          mode.Link
	via         [2]int // an overlay port's xdp way in, both ends (viaOf)
	peerChecked bool
	fallback    error // the XDP attach an "auto" port tried and the kernel refused
	done        bool  // decided in the XDP pass (attached, or down)
}

// bridgePorts is the commit of one bridge's ports.
type bridgePorts struct {
	b           *bridgeState
	was         map[*portState]bool // forwarding before the apply
	cands       []*candidate
	xdp         []string // ports at XDP: kept so, then attached so
	noRedirects []string // ports of its tree that cannot take XDP redirects (with an "auto" NIC)
}

// commitPorts decides the mode of every port from what its interface is
// (mode.Decide), prepares veth peers, and attaches. XDP ports come first,
// in every bridge, because a port at tc must then be able to take the
// redirects of the XDP ports of its bridge and of every bridge patched to
// it (a frame crosses patches within one program run). What cannot come up
// is down with the reason.
func (d *Daemon) commitPorts(c *change, j *journal) error {
	var all []*bridgePorts
	by := map[*bridgeState]*bridgePorts{}
	for _, b := range c.order {
		bp, err := d.preparePorts(c, b)
		if err != nil {
			return err
		}
		all = append(all, bp)
		by[b] = bp
	}
	for _, bp := range all {
		d.findNoRedirects(c, bp, by)
		d.xdpPass(c, bp, j)
	}
	for _, bp := range all {
		var xdp []string
		for _, tb := range bp.b.tree {
			xdp = append(xdp, by[tb].xdp...)
		}
		d.tcPass(c, bp, xdp, j)
	}
	for _, bp := range all {
		for _, cd := range bp.cands {
			if cd.p.mode != "" {
				cd.p.running = cd.l.Running
			}
		}
		for _, p := range bp.b.ports {
			if bp.was[p] && !p.forwards() {
				// Out of floods: its entries go too, or unicast to the
				// stations behind it would vanish until they aged out.
				c.stopped = append(c.stopped, p)
			}
		}
	}
	return nil
}

// preparePorts finds each port's interface, keeps the ports that stay as
// they are, and lists the others as candidates.
func (d *Daemon) preparePorts(c *change, b *bridgeState) (*bridgePorts, error) {
	bp := &bridgePorts{b: b, was: map[*portState]bool{}}
	was, keptXDP := bp.was, &bp.xdp
	var cands []*candidate
	for _, p := range b.ports {
		was[p] = p.mode != "" && p.running && p.blockedWas == ""
		if slices.Contains(c.newSlots, p.slot) {
			if err := d.topo.ResetPort(p.slot); err != nil {
				return nil, fmt.Errorf("bridge %q: port %q: %w", b.cfg.Name, p.name(), err)
			}
		}
		if p.cfg.IsPatch() {
			continue // no interface: up (plan)
		}
		if c.only != nil && !c.only[portID{b.cfg.Name, p.key()}] {
			// Out of a scoped apply's reach: as it is.
			if p.mode != "" {
				d.keep(c, p, keptXDP)
			}
			continue
		}
		l, err := d.sys.LinkByName(p.name())
		if err != nil {
			why := fmt.Sprintf("interface %q does not exist", p.name())
			if !errors.Is(err, errNoLink) {
				why = err.Error()
			} else if strings.HasPrefix(p.why, fmt.Sprintf("interface %q was ", p.name())) {
				why = p.why // "was deleted" or "was renamed" says more
			}
			d.setDown(p, why)
			continue
		}
		if p.mode != "" && p.ifindex != l.Index {
			// The name came back as another interface since forget looked:
			// this apply keeps the port as it was; the events of the change
			// bring the next one, whose forget takes it apart.
			d.keep(c, p, keptXDP)
			continue
		}
		if p.mode != "" && l.XDPErr != nil {
			// What the driver supports is unknown this time: no decision
			// is taken on it; the port stays as it is.
			d.log.Warn("XDP features unreadable; port kept as it is", "bridge", b.cfg.Name, "port", p.name(), "err", l.XDPErr)
			d.keep(c, p, keptXDP)
			p.running = l.Running
			continue
		}
		cd := &candidate{p: p, l: l, ml: modeLink(l)}
		if p.cfg.IsOverlay() {
			d.viaOf(cd)
		}
		cands = append(cands, cd)
	}
	bp.cands = cands
	return bp, nil
}

// viaOf finds an overlay port's xdp way in: a vxlan device takes no XDP
// redirect, so the frames of xdp ports go into a veth of the VNI's
// (overlay.Names.Tramp, made with the VNI) whose far end hands them to
// the device. The port takes XDP redirects when that veth does.
func (d *Daemon) viaOf(cd *candidate) {
	n := overlay.NamesOf(cd.p.cfg.VXLAN)
	l, err := d.sys.LinkByName(n.Tramp)
	if err != nil {
		return // as a vxlan device alone: it takes none
	}
	if l.XDPErr != nil {
		// What it supports is unknown this time: the way in it had, it
		// keeps, as a port keeps its mode (preparePorts).
		if cd.p.via[0] == l.Index {
			cd.via, cd.ml.TakesRedirects = cd.p.via, true
		}
		return
	}
	peer, err := d.sys.LinkByName(n.TrampPeer)
	if err != nil {
		return
	}
	cd.via = [2]int{l.Index, peer.Index}
	cd.ml.TakesRedirects = l.XDP.Has(netdevXDPNdoXmit)
}

// findNoRedirects lists, for a bridge with an "auto" NIC, the ports of its
// tree that cannot take XDP redirects: they keep the NIC at tc.
func (d *Daemon) findNoRedirects(c *change, bp *bridgePorts, by map[*bridgeState]*bridgePorts) {
	if !slices.ContainsFunc(bp.cands, func(cd *candidate) bool {
		return cd.p.cfg.Mode == mode.Auto && cd.l.Physical && cd.ml.NativeXDP
	}) {
		return
	}
	for _, tb := range bp.b.tree {
		for _, o := range by[tb].cands {
			d.peerFacts(c, o)
			if !o.ml.CanTakeRedirects() {
				bp.noRedirects = append(bp.noRedirects, o.p.name())
			}
		}
	}
}

// xdpPass attaches the ports that go to XDP.
func (d *Daemon) xdpPass(c *change, bp *bridgePorts, j *journal) {
	noRedirects := bp.noRedirects
	for _, cd := range bp.cands {
		p := cd.p
		if p.cfg.Mode == mode.TC || (p.cfg.Mode == mode.Auto && !(cd.l.Physical && cd.ml.NativeXDP)) {
			continue
		}
		d.peerFacts(c, cd)
		dec := mode.Decide(p.cfg.Mode, cd.ml, mode.Bridge{NoRedirects: noRedirects})
		if dec.Mode == "" {
			d.setDown(p, dec.Why)
			cd.done = true
			continue
		}
		if dec.Mode != mode.XDP {
			continue // auto, and a port of the bridge takes no redirects: pass 2
		}
		if err := d.ensurePeer(c, cd.l, peerWant(dec.FixPeer, dec.PeerCsumOff), j); err != nil {
			d.setDown(p, fmt.Sprintf("mode xdp refused: %v", err))
			cd.done = true
			continue
		}
		if err := d.attach(c, cd, mode.XDP, dec.Why, j); err != nil {
			if p.cfg.Mode == mode.Auto {
				cd.fallback = err
				continue
			}
			d.setDown(p, fmt.Sprintf("attach xdp to %q: %v", p.name(), err))
			cd.done = true
			continue
		}
		cd.done = true
		bp.xdp = append(bp.xdp, p.name())
	}
}

// tcPass attaches the ports at tc, which must take the redirects of
// xdpPorts, the XDP ports of their bridge's tree.
func (d *Daemon) tcPass(c *change, bp *bridgePorts, xdpPorts []string, j *journal) {
	noRedirects := bp.noRedirects
	for _, cd := range bp.cands {
		if cd.done {
			continue
		}
		p := cd.p
		if len(xdpPorts) > 0 {
			d.peerFacts(c, cd)
		}
		br := mode.Bridge{XDPPorts: xdpPorts, NoRedirects: noRedirects}
		dec := mode.Decide(p.cfg.Mode, cd.ml, br)
		if cd.fallback != nil {
			dec = mode.Fallback(cd.fallback, cd.ml, br)
		}
		if dec.Mode == "" {
			d.setDown(p, dec.Why)
			continue
		}
		if dec.FixPeer {
			if err := d.ensurePeer(c, cd.l, peerWant(true, false), j); err != nil {
				d.setDown(p, fmt.Sprintf("cannot take the XDP redirects of this bridge's xdp ports (%s): %v", strings.Join(xdpPorts, ", "), err))
				continue
			}
			// What the kernel says now, not what GRO should have done.
			l, err := d.sys.LinkByIndex(cd.l.Index)
			if err == nil {
				err = l.XDPErr
			}
			if err != nil {
				d.setDown(p, fmt.Sprintf("cannot tell whether it takes the XDP redirects of this bridge's xdp ports (%s): %v", strings.Join(xdpPorts, ", "), err))
				continue
			}
			if !l.XDP.Has(netdev.XDPNdoXmit) {
				d.setDown(p, fmt.Sprintf("GRO is on on its veth peer, yet the kernel reports no ndo_xdp_xmit for it: frames from this bridge's xdp ports (%s) would vanish", strings.Join(xdpPorts, ", ")))
				continue
			}
		}
		if err := d.attach(c, cd, mode.TC, dec.Why, j); err != nil {
			d.setDown(p, fmt.Sprintf("attach tc to %q: %v", p.name(), err))
			continue
		}
	}
}

// keep carries a port over to the next model as it is, attachment and
// peer fix included.
func (d *Daemon) keep(c *change, p *portState, xdp *[]string) {
	c.attached[p.ifindex] = d.attached[p.ifindex]
	if f := d.peers[p.ifindex]; f != nil {
		c.peers[p.ifindex] = f
	}
	if p.mode == mode.XDP {
		*xdp = append(*xdp, p.name())
	}
}

// setDown marks a port not attached, with the reason (logged by
// portEvents once the apply is over).
func (d *Daemon) setDown(p *portState, why string) {
	p.mode, p.why, p.running, p.ifindex, p.via = "", why, false, 0, [2]int{}
}

// attach attaches a candidate in mode m, or keeps the attachment its
// interface has in that mode and hook.
func (d *Daemon) attach(c *change, cd *candidate, m mode.Mode, why string, j *journal) error {
	p, idx := cd.p, cd.l.Index
	h := d.hookFor(c, cd, m)
	fits := func(a Attachment) bool { return a != nil && a.Mode() == m && a.Hook() == h }
	a := c.attached[idx]
	if !fits(a) {
		a = d.attached[idx]
	}
	if !fits(a) {
		var err error
		a, err = d.attacher.Attach(idx, m, h)
		switch {
		case err == nil, h != datapath.HookFilter, errors.Is(err, clsact.ErrGone):
		case errors.Is(err, clsact.ErrUnsupported):
			d.noFilters = true
			d.log.Warn("a tc filter cannot be attached on this kernel: ports added at run time take tcx links, which wait for a grace period at their attach and detach", "port", p.name(), "err", err)
			a, err = d.attacher.Attach(idx, m, datapath.HookLink)
		default:
			// This interface's own (another tool's filter at trestle's
			// priority, a failure of the moment): a link for it alone.
			d.log.Warn("a tc filter cannot be attached to this port's interface: it takes a tcx link", "port", p.name(), "err", err)
			p.noFilter = true
			a, err = d.attacher.Attach(idx, m, datapath.HookLink)
		}
		if err != nil {
			return err
		}
		c.made[idx] = a
		j.add(fmt.Sprintf("attach %s to %q", m, p.name()), func() error {
			delete(c.made, idx)
			return a.Detach()
		})
	}
	c.attached[idx] = a
	p.mode, p.ifindex, p.why = m, idx, why
	p.physical = cd.l.Physical
	p.via = cd.via
	return nil
}

// hookFor is how a port's program is put on its interface in mode m: a
// port added at run time at tc whose interface is a veth or a TAP (a
// container's, through the CNI plugin, or a VM's) in a tc filter, which the kernel adds and removes without waiting for a
// grace period, where a tcx link waits for one at its attach and at its
// detach, each on a CNI ADD's or DEL's way (docs/performance.md "Pod
// churn"); every other by a link, whose attach is on no container's way.
// So the filters are those of the run-time ports the daemon records,
// which is where the next daemon looks for them (adoptFilters), and a
// port the file takes over moves to a link (and one that an earlier
// build attached by a link to a filter), each in place: a tcx program
// runs before any filter and decides alone while both are there.
func (d *Daemon) hookFor(c *change, cd *candidate, m mode.Mode) datapath.Hook {
	p := cd.p
	if m == mode.TC && !d.noFilters && !p.noFilter && diesWithOwner(cd.l.Type) && c.run[portID{p.bridge.cfg.Name, p.key()}] {
		return datapath.HookFilter
	}
	return datapath.HookLink
}

// diesWithOwner says whether an interface of that kind goes with what it
// serves (a veth with its container's namespace, a TAP with its VM's
// process): a tc filter left on one by a killed daemon goes with it. A
// host's own interface added at run time keeps a link, which closes with
// the daemon that made it.
func diesWithOwner(kind string) bool { return kind == "veth" || kind == "tuntap" || kind == "tun" }

// peerFacts finds out, once, whether a veth's peer can be prepared.
func (d *Daemon) peerFacts(c *change, cd *candidate) {
	if cd.peerChecked || cd.l.Type != "veth" {
		return
	}
	cd.peerChecked = true
	if _, err := d.peerFix(c, cd.l); err != nil {
		cd.ml.PeerProblem = err.Error()
		return
	}
	cd.ml.PeerFixable = true
}

// peerFix is the fix of an interface's peer: the one held, or a new one.
func (d *Daemon) peerFix(c *change, l Link) (*peerFix, error) {
	if f := c.peers[l.Index]; f != nil {
		return f, nil
	}
	if f := d.peers[l.Index]; f != nil {
		return f, nil
	}
	if f := c.peerCands[l.Index]; f != nil {
		return f, nil
	}
	peer, err := d.sys.OpenPeer(l)
	if err != nil {
		return nil, err
	}
	f := &peerFix{peer: peer, orig: map[string]bool{}}
	if c.peerCands == nil {
		c.peerCands = map[int]*peerFix{}
	}
	c.peerCands[l.Index] = f
	return f, nil
}

// ensurePeer gives an interface's peer the features want, journaled.
func (d *Daemon) ensurePeer(c *change, l Link, want map[string]bool, j *journal) error {
	if len(want) == 0 {
		return nil
	}
	f, err := d.peerFix(c, l)
	if err != nil {
		return err
	}
	prev := map[string]bool{}
	for n, was := range f.orig {
		prev[n] = !was
	}
	before := maps.Clone(f.orig)
	if err := f.ensure(want); err != nil {
		return err
	}
	j.add("prepare the peer of "+l.Name, func() error {
		err := f.ensure(prev)
		f.orig = before
		return err
	})
	c.peers[l.Index] = f
	if !maps.Equal(before, f.orig) {
		d.log.Info("veth peer prepared for XDP", "port", l.Name, "peer", f.String())
		// Recorded at once: a daemon killed before this apply ends must
		// not leave a changed peer no one knows how it was.
		d.saveState(c.peers)
	}
	return nil
}
