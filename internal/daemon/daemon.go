// Package daemon is `trestle run`: it turns a validated config into datapath
// state, keeps it there while interfaces come and go, ages the learning table,
// answers the control socket, reloads on SIGHUP, and detaches everything it
// attached when it stops.
//
// Reloads are diffs: a port whose interface, mode and limits are unchanged is
// not touched, so it forwards straight through a reload. A config that fails
// validation, or that cannot fit the loaded datapath, is rejected whole and the
// running state stays as it was.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// Options of `trestle run`.
type Options struct {
	ConfigPath string
	Socket     string // overrides the config's daemon.socket when set
	Log        *slog.Logger
}

type portState struct {
	cfg     config.Port
	bridge  *bridgeState
	slot    uint16
	ifindex int
	mode    string // as attached; "" while down
	reason  string // why this mode, or why down
	up      bool
	link    link.Link
	peer    *peerFix
}

// sameSettings says whether a reload leaves a port as it is: everything but
// its position in the file.
func sameSettings(a, b config.Port) bool {
	a.Line, b.Line = 0, 0
	return a == b
}

type bridgeState struct {
	id    uint16
	cfg   config.Bridge
	ports map[string]*portState // by interface name
	order []string              // interface names in config order
	// Static entries added with `trestle fdb add`: kept across reloads and
	// port flaps, forgotten on restart. Config statics are in cfg.Static.
	cliStatics map[string]config.Static
	// Static entries written to the datapath, so that those the config no
	// longer has can be deleted.
	written map[string]config.Static
}

// Daemon is one running switch.
type Daemon struct {
	log  *slog.Logger
	dp   *datapath.Datapath
	opts Options

	mu       sync.Mutex
	cfg      *config.Config
	capacity uint32
	bridges  map[string]*bridgeState
	ports    map[string]*portState // every port by interface name
	slots    [tbpf.MaxPorts]bool
	ids      [tbpf.MaxBridges + 1]bool
	closed   bool // set by shutdown: nothing may attach after it
}

// maxRefresh bounds how often the datapath rewrites an entry's timestamp.
const maxRefresh = time.Second

// Run starts the daemon and blocks until ctx is done or a SIGTERM/SIGINT.
func Run(ctx context.Context, opts Options) error {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	cfg, err := config.Load(opts.ConfigPath)
	if err != nil {
		return err
	}
	d := &Daemon{log: log, opts: opts, bridges: map[string]*bridgeState{}, ports: map[string]*portState{}}
	d.capacity = fdbCapacity(cfg)
	d.dp, err = datapath.Load(datapath.Options{FDBCapacity: d.capacity, Refresh: refreshFor(cfg)})
	if err != nil {
		return err
	}
	defer d.dp.Close()

	sock := opts.Socket // --socket or TRESTLE_SOCKET, resolved by the CLI
	if sock == "" {
		sock = cfg.Daemon.Socket
	}
	srv, err := ctl.Listen(sock)
	if err != nil {
		return err
	}
	// Deferred calls run last to first: the socket closes before shutdown,
	// so no request can re-attach a port once shutdown has detached them.
	defer d.shutdown()
	defer srv.Close()
	d.mu.Lock()
	err = d.apply(cfg)
	d.mu.Unlock()
	if err != nil {
		return err
	}
	log.Info("trestle running", "config", opts.ConfigPath, "socket", sock, "bridges", len(cfg.Bridges), "fdb_capacity", d.capacity)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go srv.Serve(ctx, d.handle)

	linkDone := make(chan struct{})
	defer close(linkDone)
	links := d.watchLinks(linkDone)

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	sweep := time.NewTicker(d.sweepInterval())
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-sigs:
			if s == syscall.SIGHUP {
				if err := d.Reload(); err != nil {
					log.Error("reload rejected; running state kept", "err", err)
				}
				sweep.Reset(d.sweepInterval())
				continue
			}
			log.Info("stopping", "signal", s.String())
			return nil
		case u, ok := <-links:
			if !ok {
				// The subscription dies on any receive error (ENOBUFS in an
				// event storm): subscribe again and catch up on what was missed.
				log.Warn("link monitor lost events; resubscribing")
				links = d.watchLinks(linkDone)
				d.resync()
				continue
			}
			d.linkChanged(u)
		case <-sweep.C:
			if err := d.sweep(); err != nil {
				log.Warn("aging sweep", "err", err)
			}
		}
	}
}

// watchLinks subscribes to interface changes in the daemon's namespace.
func (d *Daemon) watchLinks(done chan struct{}) chan netlink.LinkUpdate {
	links := make(chan netlink.LinkUpdate, 256)
	err := netlink.LinkSubscribeWithOptions(links, done, netlink.LinkSubscribeOptions{
		ReceiveBufferSize: 1 << 20,
		ErrorCallback: func(err error) {
			select {
			case <-done: // closing the subscription makes its socket fail; not news
			default:
				d.log.Warn("link monitor", "err", err)
			}
		},
	})
	if err != nil {
		d.log.Warn("cannot watch interfaces; ports that vanish are noticed at the next reload", "err", err)
		return nil
	}
	return links
}

// resync checks every port against the interfaces that exist now.
func (d *Daemon) resync() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, b := range d.bridges {
		for _, ifname := range b.order {
			p := b.ports[ifname]
			if !p.up {
				continue
			}
			if l, err := netlink.LinkByName(ifname); err != nil || l.Attrs().Index != p.ifindex {
				d.detach(p)
				d.portDown(p, fmt.Sprintf("interface %q was deleted", ifname))
			}
		}
		if err := d.syncBridge(b); err != nil {
			d.log.Warn("update bridge", "bridge", b.cfg.Name, "err", err)
		}
	}
}

// fdbCapacity sizes the shared table for every bridge's max_entries plus its
// static entries, which do not count against max_entries.
func fdbCapacity(cfg *config.Config) uint32 {
	var n int
	for _, b := range cfg.Bridges {
		n += b.MaxEntries + len(b.Static) + 1024
	}
	return uint32(n)
}

// refreshFor keeps timestamps fresh enough for the shortest aging time.
func refreshFor(cfg *config.Config) time.Duration {
	r := maxRefresh
	for _, b := range cfg.Bridges {
		if b.Aging/4 < r {
			r = b.Aging / 4
		}
	}
	return r
}

func (d *Daemon) sweepInterval() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	iv := 30 * time.Second
	for _, b := range d.bridges {
		if b.cfg.Aging/4 < iv {
			iv = b.cfg.Aging / 4
		}
	}
	if iv < 100*time.Millisecond {
		iv = 100 * time.Millisecond
	}
	return iv
}

// Reload reads the config file again and applies the difference.
func (d *Daemon) Reload() error {
	cfg, err := config.Load(d.opts.ConfigPath)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if need := fdbCapacity(cfg); need > d.capacity {
		return fmt.Errorf("%s: the bridges' max_entries need a table of %d entries and the loaded one holds %d: restart the daemon to grow it", cfg.File, need, d.capacity)
	}
	if r := refreshFor(cfg); r < refreshFor(d.cfg) {
		return fmt.Errorf("%s: an aging time under %v needs a restart of the daemon", cfg.File, 4*refreshFor(d.cfg))
	}
	if err := d.apply(cfg); err != nil {
		return err
	}
	d.log.Info("reloaded", "config", cfg.File)
	return nil
}

// apply moves the running state to cfg. Called with d.mu held.
func (d *Daemon) apply(cfg *config.Config) error {
	if d.closed {
		return errors.New("the daemon is stopping")
	}
	want := map[string]config.Bridge{}
	for _, b := range cfg.Bridges {
		want[b.Name] = b
	}
	// Bridges that went away, and ports that went away or changed.
	for name, b := range d.bridges {
		nb, keep := want[name]
		for _, ifname := range b.order {
			p := b.ports[ifname]
			if keep {
				if np, ok := findPort(nb, ifname); ok && sameSettings(np, p.cfg) {
					p.cfg = np
					continue
				}
			}
			d.removePort(p)
		}
		if !keep {
			d.removeBridge(b)
		}
	}
	for _, nb := range cfg.Bridges {
		b, ok := d.bridges[nb.Name]
		if !ok {
			id, err := d.allocID()
			if err != nil {
				return err
			}
			b = &bridgeState{id: id, ports: map[string]*portState{}, cliStatics: map[string]config.Static{}, written: map[string]config.Static{}}
			d.bridges[nb.Name] = b
			d.log.Info("bridge added", "bridge", nb.Name, "id", id)
		}
		b.cfg = nb
		b.order = b.order[:0]
		for _, pc := range nb.Ports {
			b.order = append(b.order, pc.Interface)
			if _, ok := b.ports[pc.Interface]; ok {
				continue
			}
			slot, err := d.allocSlot()
			if err != nil {
				return err
			}
			p := &portState{cfg: pc, bridge: b, slot: slot}
			b.ports[pc.Interface] = p
			d.ports[pc.Interface] = p
		}
		if err := d.syncBridge(b); err != nil {
			return err
		}
	}
	d.cfg = cfg
	return nil
}

func findPort(b config.Bridge, ifname string) (config.Port, bool) {
	for _, p := range b.Ports {
		if p.Interface == ifname {
			return p, true
		}
	}
	return config.Port{}, false
}

// syncBridge attaches the bridge's ports that can be attached, writes the
// bridge's port list and static entries. Called with d.mu held.
func (d *Daemon) syncBridge(b *bridgeState) error {
	for _, ifname := range b.order {
		if p := b.ports[ifname]; !p.up {
			d.bringUp(p)
		}
	}
	// Ports of a bridge with XDP ports receive XDP redirects: their veth peers
	// need GRO (or an XDP program), and a device that cannot take redirects
	// at all would drop them silently, so it is refused.
	if xdp := b.xdpPorts(); len(xdp) > 0 {
		for _, ifname := range b.order {
			p := b.ports[ifname]
			if !p.up || p.mode != ModeTC {
				continue
			}
			if l, err := netlink.LinkByIndex(p.ifindex); err == nil && !takesXDPRedirects(l) {
				d.detach(p)
				d.portDown(p, fmt.Sprintf("a %s device cannot take the XDP redirects of this bridge's xdp ports (%s): use mode = \"tc\" on those", l.Type(), strings.Join(xdp, ", ")))
				continue
			}
			d.preparePeer(p, false)
		}
	}
	if err := d.writeBridge(b); err != nil {
		return err
	}
	return d.syncStatics(b)
}

// writeBridge writes the bridge's list of up ports, which flooding uses.
func (d *Daemon) writeBridge(b *bridgeState) error {
	var infos []datapath.PortInfo
	for _, ifname := range b.order {
		if p := b.ports[ifname]; p != nil && p.up {
			infos = append(infos, d.portInfo(p))
		}
	}
	return d.dp.SetBridge(b.id, uint32(b.cfg.MaxEntries), infos)
}

func (b *bridgeState) xdpPorts() []string {
	var names []string
	for _, ifname := range b.order {
		if p := b.ports[ifname]; p.up && p.mode == ModeXDP {
			names = append(names, ifname)
		}
	}
	return names
}

// portWithoutXDP names a port of the bridge whose device exists and cannot
// take XDP redirects, or "".
func (b *bridgeState) portWithoutXDP() string {
	for _, ifname := range b.order {
		if l, err := netlink.LinkByName(ifname); err == nil && !takesXDPRedirects(l) {
			return ifname
		}
	}
	return ""
}

func (d *Daemon) portInfo(p *portState) datapath.PortInfo {
	return datapath.PortInfo{Ifindex: uint32(p.ifindex), Bridge: p.bridge.id, Slot: p.slot, MaxMACs: uint32(p.cfg.MaxMACs)}
}

func staticKey(s config.Static) string { return fmt.Sprintf("%s/%d", s.MAC, s.VLAN) }

// syncStatics writes the static entries (config and CLI) whose ports are up,
// and deletes those written before that are no longer wanted.
func (d *Daemon) syncStatics(b *bridgeState) error {
	want := map[string]config.Static{}
	for k, s := range b.cliStatics {
		want[k] = s
	}
	for _, s := range b.cfg.Static {
		want[staticKey(s)] = s
	}
	for k, s := range b.written {
		if w, ok := want[k]; !ok || w.Port != s.Port {
			if err := d.dp.DelFDB(b.id, s.VLAN, s.MAC); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return err
			}
			delete(b.written, k)
		}
	}
	for k, s := range want {
		p := b.ports[s.Port]
		if p == nil || !p.up {
			continue // written when the port comes up
		}
		e := datapath.FDBEntry{Bridge: b.id, VLAN: s.VLAN, MAC: s.MAC, Ifindex: uint32(p.ifindex), Slot: p.slot, Static: true}
		if err := d.dp.AddFDB(e); err != nil {
			return err
		}
		b.written[k] = s
	}
	return nil
}

// bringUp resolves a port's interface and attaches it. A missing interface or
// a refused attach leaves the port down with the reason; it is retried when
// the interface appears.
func (d *Daemon) bringUp(p *portState) {
	name := p.cfg.Interface
	if d.closed || p.up || p.link != nil {
		return
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		d.portDown(p, fmt.Sprintf("interface %q does not exist", name))
		return
	}
	mode, reason := chooseMode(p.cfg.Mode, l)
	if mode == ModeXDP && p.cfg.Mode == ModeAuto {
		if other := p.bridge.portWithoutXDP(); other != "" {
			mode, reason = ModeTC, fmt.Sprintf("auto: port %q of this bridge cannot take XDP redirects, so tc", other)
		}
	}
	if xdp := p.bridge.xdpPorts(); mode == ModeTC && len(xdp) > 0 && !takesXDPRedirects(l) {
		d.portDown(p, fmt.Sprintf("a %s device cannot take the XDP redirects of this bridge's xdp ports (%s): use mode = \"tc\" on those", l.Type(), strings.Join(xdp, ", ")))
		return
	}
	p.ifindex = l.Attrs().Index
	if err := d.dp.ResetStats(p.slot); err != nil {
		d.portDown(p, err.Error())
		return
	}
	if mode == ModeXDP && l.Type() == "veth" {
		if !d.preparePeer(p, true) {
			return
		}
	}
	var lk link.Link
	if mode == ModeXDP {
		lk, err = d.dp.AttachXDP(p.ifindex)
		if err != nil && p.cfg.Mode == ModeAuto {
			reason = fmt.Sprintf("auto: native XDP refused (%v); tc instead", err)
			mode = ModeTC
		}
	}
	if mode == ModeTC {
		lk, err = d.dp.AttachTC(p.ifindex)
	}
	if err != nil {
		p.peer.undo()
		p.peer = nil
		d.portDown(p, fmt.Sprintf("attach %s to %q: %v", mode, name, err))
		return
	}
	if err := d.dp.SetPort(d.portInfo(p)); err != nil {
		lk.Close()
		p.peer.undo()
		p.peer = nil
		d.portDown(p, err.Error())
		return
	}
	p.link, p.mode, p.reason, p.up = lk, mode, reason, true
	d.log.Info("port up", "bridge", p.bridge.cfg.Name, "port", name, "ifindex", p.ifindex, "mode", mode, "why", reason)
}

// preparePeer makes a veth peer ready for XDP; false (and the port down) when
// an XDP port's peer cannot be reached, because frames into it would vanish.
func (d *Daemon) preparePeer(p *portState, forXDP bool) bool {
	if p.peer != nil {
		return true // already prepared; never lose what it remembers
	}
	l, err := netlink.LinkByIndex(p.ifindex)
	if err != nil || l.Type() != "veth" {
		return true
	}
	fix, err := fixPeer(l, forXDP)
	if err != nil {
		if forXDP {
			d.portDown(p, fmt.Sprintf("mode xdp refused: %v", err))
			return false
		}
		if !strings.Contains(p.reason, "WARNING") {
			p.reason += fmt.Sprintf("; WARNING: frames from XDP ports may not reach it: %v", err)
		}
		d.log.Warn("cannot prepare veth peer for XDP redirects", "port", p.cfg.Interface, "err", err)
		return true
	}
	p.peer = fix
	if len(fix.changed) > 0 {
		d.log.Info("veth peer prepared for XDP", "port", p.cfg.Interface, "peer", fix.String())
	}
	return true
}

func (d *Daemon) portDown(p *portState, reason string) {
	if p.up || (p.reason != reason && !strings.Contains(p.reason, "was deleted")) {
		d.log.Warn("port down", "bridge", p.bridge.cfg.Name, "port", p.cfg.Interface, "reason", reason)
	}
	p.up, p.mode, p.reason = false, "", reason
}

// detach takes a port out of the datapath and undoes what was done to its peer.
func (d *Daemon) detach(p *portState) {
	if !p.up {
		return
	}
	// Out of the flood list first, then out of the ports map, then detach:
	// at no point does a frame go to a port that is half gone.
	p.up = false
	if err := d.writeBridge(p.bridge); err != nil {
		d.log.Warn("update bridge", "bridge", p.bridge.cfg.Name, "err", err)
	}
	if err := d.dp.DelPort(uint32(p.ifindex), p.slot); err != nil {
		d.log.Warn("remove port", "port", p.cfg.Interface, "err", err)
	}
	if p.link != nil {
		if err := p.link.Close(); err != nil {
			d.log.Warn("detach", "port", p.cfg.Interface, "err", err)
		}
		p.link = nil
	}
	if err := p.peer.undo(); err != nil {
		d.log.Warn("restore veth peer", "port", p.cfg.Interface, "err", err)
	}
	p.peer = nil
	d.flushPort(p)
	for k, s := range p.bridge.written {
		if s.Port == p.cfg.Interface {
			delete(p.bridge.written, k)
		}
	}
}

// flushPort deletes every entry, static or learned, pointing at the port.
func (d *Daemon) flushPort(p *portState) {
	es, err := d.dp.FDB()
	if err != nil {
		d.log.Warn("flush port", "port", p.cfg.Interface, "err", err)
	}
	for _, e := range es {
		if e.Bridge == p.bridge.id && e.Slot == p.slot {
			_ = d.dp.DelFDB(e.Bridge, e.VLAN, e.MAC)
		}
	}
	if err := d.recount(false); err != nil {
		d.log.Warn("recount addresses", "err", err)
	}
}

func (d *Daemon) removePort(p *portState) {
	d.detach(p)
	b := p.bridge
	delete(b.ports, p.cfg.Interface)
	delete(d.ports, p.cfg.Interface)
	d.slots[p.slot] = false
	d.log.Info("port removed", "bridge", b.cfg.Name, "port", p.cfg.Interface)
}

func (d *Daemon) removeBridge(b *bridgeState) {
	if err := d.dp.DelBridge(b.id); err != nil {
		d.log.Warn("remove bridge", "bridge", b.cfg.Name, "err", err)
	}
	es, _ := d.dp.FDB()
	for _, e := range es {
		if e.Bridge == b.id {
			_ = d.dp.DelFDB(e.Bridge, e.VLAN, e.MAC)
		}
	}
	d.ids[b.id] = false
	delete(d.bridges, b.cfg.Name)
	d.log.Info("bridge removed", "bridge", b.cfg.Name)
}

func (d *Daemon) allocSlot() (uint16, error) {
	for i := 1; i < len(d.slots); i++ {
		if !d.slots[i] {
			d.slots[i] = true
			return uint16(i), nil
		}
	}
	return 0, fmt.Errorf("no free port slot: at most %d ports", len(d.slots)-1)
}

func (d *Daemon) allocID() (uint16, error) {
	for i := 1; i < len(d.ids); i++ {
		if !d.ids[i] {
			d.ids[i] = true
			return uint16(i), nil
		}
	}
	return 0, fmt.Errorf("no free bridge id: at most %d bridges", len(d.ids)-1)
}

// linkChanged reacts to interfaces appearing and vanishing.
func (d *Daemon) linkChanged(u netlink.LinkUpdate) {
	name := u.Link.Attrs().Name
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.ports[name]
	if !ok {
		return
	}
	switch u.Header.Type {
	case syscall.RTM_DELLINK:
		if p.up && p.ifindex == int(u.Index) {
			d.detach(p)
			d.portDown(p, fmt.Sprintf("interface %q was deleted", name))
			// An interface of the same name may exist again already.
			if l, err := netlink.LinkByName(name); err == nil && l.Attrs().Index != int(u.Index) {
				if err := d.syncBridge(p.bridge); err != nil {
					d.log.Warn("update bridge", "bridge", p.bridge.cfg.Name, "err", err)
				}
			}
		}
	case syscall.RTM_NEWLINK:
		if p.up && p.ifindex != int(u.Index) {
			// Same name, new interface: the old one went away.
			d.detach(p)
		}
		if !p.up {
			if err := d.syncBridge(p.bridge); err != nil {
				d.log.Warn("update bridge", "bridge", p.bridge.cfg.Name, "err", err)
			}
		}
	}
}

// sweep deletes learned entries idle for longer than their bridge's aging
// time and recounts what is left.
func (d *Daemon) sweep() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.recount(true)
}

// recount sets the learned-address counts that the datapath checks max_macs
// and max_entries against to the truth, after aging (ageOut) or deletions.
// Called with d.mu held.
func (d *Daemon) recount(ageOut bool) error {
	byID := map[uint16]*bridgeState{}
	for _, b := range d.bridges {
		byID[b.id] = b
	}
	es, err := d.dp.FDB()
	if err != nil {
		return err
	}
	portCount := map[uint16]int32{}
	bridgeCount := map[uint16]int32{}
	for _, p := range d.ports {
		portCount[p.slot] = 0
	}
	for _, b := range d.bridges {
		bridgeCount[b.id] = 0
	}
	for _, e := range es {
		if e.Static {
			continue
		}
		b := byID[e.Bridge]
		if b == nil || (ageOut && e.Age > b.cfg.Aging) {
			if err := d.dp.DelFDB(e.Bridge, e.VLAN, e.MAC); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return err
			}
			continue
		}
		portCount[e.Slot]++
		bridgeCount[e.Bridge]++
	}
	return d.dp.SetCounts(portCount, bridgeCount)
}

// shutdown detaches every port and restores every veth peer.
func (d *Daemon) shutdown() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for _, b := range d.bridges {
		for _, ifname := range b.order {
			if p := b.ports[ifname]; p != nil {
				d.detach(p)
			}
		}
	}
	d.log.Info("all ports detached")
}

// handle answers the control socket.
func (d *Daemon) handle(_ context.Context, req ctl.Request) (any, error) {
	switch req.Cmd {
	case ctl.CmdShow:
		return d.status()
	case ctl.CmdStats:
		return d.stats(req.Bridge)
	case ctl.CmdFDBShow:
		return d.fdbShow(req.Bridge)
	case ctl.CmdFDBAdd:
		return nil, d.fdbAdd(req)
	case ctl.CmdFDBDel:
		return nil, d.fdbDel(req)
	case ctl.CmdFDBFlush:
		return d.fdbFlush(req)
	case ctl.CmdReload:
		return nil, d.Reload()
	}
	return nil, fmt.Errorf("unknown command %q", req.Cmd)
}

func (d *Daemon) bridgeNamed(name string) (*bridgeState, error) {
	b, ok := d.bridges[name]
	if !ok {
		return nil, fmt.Errorf("no bridge %q", name)
	}
	return b, nil
}

func (d *Daemon) sortedBridges(only string) ([]*bridgeState, error) {
	if only != "" {
		b, err := d.bridgeNamed(only)
		if err != nil {
			return nil, err
		}
		return []*bridgeState{b}, nil
	}
	var bs []*bridgeState
	for _, b := range d.bridges {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].id < bs[j].id })
	return bs, nil
}

func (d *Daemon) status() (ctl.Status, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := ctl.Status{Config: d.opts.ConfigPath}
	es, err := d.dp.FDB()
	if err != nil {
		return st, err
	}
	entries := map[uint16]int{}
	macs := map[uint16]int{}
	for _, e := range es {
		entries[e.Bridge]++
		if !e.Static {
			macs[e.Slot]++
		}
	}
	bs, _ := d.sortedBridges("")
	for _, b := range bs {
		bst := ctl.BridgeStatus{Name: b.cfg.Name, ID: b.id, AgingSeconds: b.cfg.Aging.Seconds(), MaxEntries: b.cfg.MaxEntries, Entries: entries[b.id], Ports: []ctl.PortStatus{}}
		for _, ifname := range b.order {
			p := b.ports[ifname]
			ps := ctl.PortStatus{Interface: ifname, Config: p.cfg.Mode, Mode: p.mode, Reason: p.reason, MaxMACs: p.cfg.MaxMACs, State: "down"}
			if p.up {
				ps.State, ps.Ifindex, ps.MACs = "up", p.ifindex, macs[p.slot]
				if p.peer != nil && len(p.peer.changed) > 0 {
					ps.Peer = p.peer.String()
				}
			}
			bst.Ports = append(bst.Ports, ps)
		}
		st.Bridges = append(st.Bridges, bst)
	}
	if s, err := d.dp.Stats(0); err == nil {
		st.Unattached = dropMap(s)
	}
	return st, nil
}

func dropMap(s tbpf.PortStats) map[string]uint64 {
	m := map[string]uint64{}
	for i, n := range s.Drops {
		m[tbpf.DropReason(i).String()] = n
	}
	return m
}

func (d *Daemon) stats(only string) ([]ctl.PortStats, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	bs, err := d.sortedBridges(only)
	if err != nil {
		return nil, err
	}
	out := []ctl.PortStats{}
	for _, b := range bs {
		for _, ifname := range b.order {
			p := b.ports[ifname]
			s, err := d.dp.Stats(p.slot)
			if err != nil {
				return nil, err
			}
			mode := p.mode
			if !p.up {
				mode = "down"
			}
			out = append(out, ctl.PortStats{
				Bridge: b.cfg.Name, Port: ifname, Mode: mode,
				RxPackets: s.RxPackets, RxBytes: s.RxBytes, TxPackets: s.TxPackets, TxBytes: s.TxBytes,
				Flooded: s.Flooded, Learned: s.Learned, Moved: s.Moved, Drops: dropMap(s),
			})
		}
	}
	return out, nil
}

func (d *Daemon) fdbShow(only string) ([]ctl.FDBEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	bs, err := d.sortedBridges(only)
	if err != nil {
		return nil, err
	}
	type key struct {
		bridge uint16
		slot   uint16
	}
	names := map[key]string{}
	byID := map[uint16]*bridgeState{}
	for _, b := range bs {
		byID[b.id] = b
		for _, p := range b.ports {
			names[key{b.id, p.slot}] = p.cfg.Interface
		}
	}
	es, err := d.dp.FDB()
	if err != nil {
		return nil, err
	}
	out := []ctl.FDBEntry{}
	for _, e := range es {
		b := byID[e.Bridge]
		if b == nil {
			continue
		}
		age := 0.0
		if !e.Static {
			age = e.Age.Round(time.Millisecond).Seconds()
		}
		out = append(out, ctl.FDBEntry{Bridge: b.cfg.Name, MAC: e.MAC.String(), VLAN: e.VLAN, Port: names[key{e.Bridge, e.Slot}], Static: e.Static, AgeSeconds: age})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bridge != out[j].Bridge {
			return out[i].Bridge < out[j].Bridge
		}
		if out[i].VLAN != out[j].VLAN {
			return out[i].VLAN < out[j].VLAN
		}
		return out[i].MAC < out[j].MAC
	})
	return out, nil
}

func parseMAC(s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("%q is not a MAC address like 02:00:00:00:00:01", s)
	}
	return mac, nil
}

// fdbAdd writes a static entry from the CLI. It is not in the config: a
// restart forgets it, a reload keeps it.
func (d *Daemon) fdbAdd(req ctl.Request) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := d.bridgeNamed(req.Bridge)
	if err != nil {
		return err
	}
	mac, err := parseMAC(req.MAC)
	if err != nil {
		return err
	}
	if mac[0]&1 != 0 || net.HardwareAddr(make([]byte, 6)).String() == mac.String() {
		return fmt.Errorf("%s: a static entry needs a unicast address", mac)
	}
	if req.VLAN > 4094 {
		return fmt.Errorf("vlan %d: must be 0..4094", req.VLAN)
	}
	p, ok := b.ports[req.Port]
	if !ok {
		return fmt.Errorf("%q is not a port of bridge %q", req.Port, b.cfg.Name)
	}
	st := config.Static{MAC: mac, Port: req.Port, VLAN: req.VLAN}
	k := staticKey(st)
	for _, cs := range b.cfg.Static {
		if staticKey(cs) == k {
			return fmt.Errorf("%s vlan %d is a static entry of the config (line %d): change it there", mac, req.VLAN, cs.Line)
		}
	}
	b.cliStatics[k] = st
	if !p.up {
		return fmt.Errorf("port %q is down (%s): the entry is kept and written when it comes up", req.Port, p.reason)
	}
	return d.syncStatics(b)
}

func (d *Daemon) fdbDel(req ctl.Request) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := d.bridgeNamed(req.Bridge)
	if err != nil {
		return err
	}
	mac, err := parseMAC(req.MAC)
	if err != nil {
		return err
	}
	k := staticKey(config.Static{MAC: mac, VLAN: req.VLAN})
	for _, cs := range b.cfg.Static {
		if staticKey(cs) == k {
			return fmt.Errorf("%s vlan %d is a static entry of the config (line %d): remove it there and reload", mac, req.VLAN, cs.Line)
		}
	}
	_, wasCLI := b.cliStatics[k]
	delete(b.cliStatics, k)
	delete(b.written, k)
	if err := d.dp.DelFDB(b.id, req.VLAN, mac); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) && !wasCLI {
			return fmt.Errorf("bridge %q has no entry for %s in vlan %d", b.cfg.Name, mac, req.VLAN)
		}
		if !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// FlushResult says how many learned entries a flush removed.
type FlushResult struct {
	Removed int `json:"removed"`
}

// fdbFlush removes learned entries (of one bridge, or one port); static
// entries stay.
func (d *Daemon) fdbFlush(req ctl.Request) (FlushResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var res FlushResult
	bs, err := d.sortedBridges(req.Bridge)
	if err != nil {
		return res, err
	}
	ids := map[uint16]*bridgeState{}
	for _, b := range bs {
		ids[b.id] = b
	}
	slot := uint16(0)
	if req.Port != "" {
		p, ok := d.ports[req.Port]
		if !ok || (req.Bridge != "" && p.bridge.cfg.Name != req.Bridge) {
			return res, fmt.Errorf("%q is not a port", req.Port)
		}
		slot = p.slot
	}
	es, err := d.dp.FDB()
	if err != nil {
		return res, err
	}
	for _, e := range es {
		if e.Static || ids[e.Bridge] == nil || (slot != 0 && e.Slot != slot) {
			continue
		}
		if err := d.dp.DelFDB(e.Bridge, e.VLAN, e.MAC); err == nil {
			res.Removed++
		}
	}
	return res, d.recount(false)
}
