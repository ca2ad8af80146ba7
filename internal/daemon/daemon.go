package daemon

import (
	sd "github.com/coreos/go-systemd/v22/daemon"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/overlay"
)

// Options of `trestle run`.
type Options struct {
	ConfigPath string
	Socket     string // overrides the config's daemon.socket when set
	Persist    bool   // --persist: as [daemon] persist = true
	Metrics    string // --metrics: as [daemon] metrics
	Log        *slog.Logger
}

// Daemon is one running switch.
type Daemon struct {
	log *slog.Logger
	// The dataplane, by role (dataplane.go): each part uses its own.
	topo     Topology
	table    Table
	stages   Stages
	counters Counters
	conns    Conntrack
	attacher Attacher
	sizer    Sizer
	pins     Pins
	capturer capturer      // nil: this dataplane cannot capture
	moves    eventSource   // nil: it reports no MAC moves
	snoop    *snooper      // multicast snooping's state (snoop.go)
	neighs   *neighLearner // the neighbour table's learned entries (neighlearn.go)
	sys      System
	opts     Options

	mu sync.Mutex
	// cfg is the config file's; run the ports added at run time, which
	// every apply adds to it (desired.go, portstore.go).
	cfg      *config.Config
	run      []*runPort
	fromFile bool // the apply running is a reload of the file
	// capacity and refresh: the sizes the datapath's programs run with
	// (an apply that needs more resizes it, reconcile.go).
	capacity uint32
	refresh  time.Duration
	bridges  map[string]*bridgeState
	attached map[int]Attachment // by ifindex
	peers    map[int]*peerFix   // by port ifindex
	alloc    alloc
	closed   bool // set by shutdown: nothing may attach after it
	// settling: waits for the bridges' writes running beside requests
	// (settleLater), waited for before the datapath closes.
	settling sync.WaitGroup
	persist  bool
	state    *stateDir // where peers are recorded; nil in unit tests
	// aging is signalled when the shortest aging time may have changed,
	// so that the sweep's ticker follows a reload from either SIGHUP or
	// the control socket.
	aging chan struct{}

	// noFilters: a tc filter could not be attached (a kernel without
	// cls_bpf): run-time ports take links too (hookFor).
	noFilters bool

	// reserved are the port slots given a reserve at their bridge's mark
	// at the last look (fair.go).
	reserved map[uint16]bool

	capture *captureState // the running `trestle capture` (capture.go)
	ovl     *overlayState // overlay ports' VNIs (overlay.go)
	events  *eventLog     // what is logged as events, and kept (events.go)

	// The edge's guards (edge.go): the ports blocked, by bridge and key;
	// this daemon's mark in its loop probes, and how it sends one (a
	// packet socket, opened when first used; unit tests replace it).
	blocks    map[portID]block
	probeID   uint32
	sendProbe func(ifindex int, frame []byte) error
	probeMu   sync.Mutex // probeFD's: the querier sends beside the event loop
	probeFD   int
	probed    map[uint16]time.Time // by bridge id: when its probes were last sent

	// MAC mobility (mobility.go): the moves counted, by address.
	moveCounts map[moveKey]*moveCount

	// For the metrics: reloads by result (applied: true), and learned
	// entries aged out, by bridge name, since the daemon started.
	reloads map[bool]uint64
	aged    map[string]uint64
	metrics *metricsServer

	// Bad requests on the control socket: when the last was logged, and
	// how many since went unlogged (control.go).
	badMu         sync.Mutex
	badLogged     time.Time
	badSuppressed int
}

// maxRefresh bounds how often the datapath rewrites an entry's timestamp.
const maxRefresh = time.Second

// newDaemon is a daemon over a dataplane and a system, with nothing applied.
func newDaemon(log *slog.Logger, dp Dataplane, sys System, capacity uint32, refresh time.Duration) *Daemon {
	d := &Daemon{
		log: log, sys: sys, capacity: capacity, refresh: refresh,
		topo: dp, table: dp, stages: dp, counters: dp, conns: dp, attacher: dp, sizer: dp, pins: dp,
		bridges: map[string]*bridgeState{}, attached: map[int]Attachment{}, peers: map[int]*peerFix{},
		aging: make(chan struct{}, 1), reloads: map[bool]uint64{}, aged: map[string]uint64{},
		events: newEventLog(log), blocks: map[portID]block{}, probeID: newProbeID(), probed: map[uint16]time.Time{}, moveCounts: map[moveKey]*moveCount{},
	}
	d.sendProbe = d.sendProbeRaw
	d.capturer, _ = dp.(capturer)
	d.moves, _ = dp.(eventSource)
	st, _ := dp.(snoopTable)
	d.snoop = newSnooper(st, log)
	d.snoop.send = func(ifindex int, f []byte) error { return d.sendProbe(ifindex, f) }
	lt, _ := dp.(learnTable)
	d.neighs = newNeighLearner(lt, log, d.events.emit)
	put, _ := dp.(remotePutter)
	d.ovl = newOverlayState(overlay.Netlink{}, put)
	d.neighs.changed = d.nudgeOverlay // learned entries reach FRR at once (overlayneigh.go)
	return d
}

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
	persist := opts.Persist || cfg.Daemon.Persist
	sock := opts.Socket // --socket or TRESTLE_SOCKET, resolved by the CLI
	if sock == "" {
		sock = cfg.Daemon.Socket
	}
	inst, err := InstanceOf(sock)
	if err != nil {
		return err
	}
	pinDir := ""
	if persist {
		pinDir = inst.PinDir
	} else if _, err := os.Stat(inst.PinDir); err == nil {
		// A persisted datapath of this daemon: adopted, so that it keeps
		// forwarding while this daemon takes over, then unpinned.
		pinDir = inst.PinDir
	}
	// The socket first: it is the daemon's name, and a second daemon on
	// it must stop here, before it touches the datapath the first holds.
	srv, err := ctl.Listen(sock)
	if err != nil {
		return err
	}
	capacity, refresh := fdbCapacity(cfg), refreshFor(cfg)
	dlog := func(msg string, args ...any) { log.Info(msg, args...) }
	dp, err := datapath.Load(datapath.Options{FDBCapacity: capacity, Refresh: refresh, PinDir: pinDir, Instance: inst.Name, Log: dlog})
	if err != nil {
		srv.Close()
		return err
	}
	defer dp.Close()
	// An adopted table may be larger than this config needs: reloads may
	// use all of it.
	d := newDaemon(log, realDataplane{dp}, netlinkSystem{}, max(capacity, dp.FDBCapacity()), refresh)
	defer d.settling.Wait() // after shutdown, before the datapath closes
	d.opts, d.persist = opts, persist
	d.state, err = openState(inst.StateDir)
	if err != nil {
		srv.Close()
		return err
	}
	d.loadRun()
	// Deferred calls run last to first: the socket closes before shutdown,
	// so no request can re-attach a port once shutdown has detached them.
	defer d.shutdown()
	defer srv.Close()

	linkDone := make(chan struct{})
	defer close(linkDone)
	// FDB events before the first apply reads the VNIs' FDBs, so that
	// none falls between (the VNIs an earlier daemon recorded are taken
	// over by adopt).
	ovlLost, err := d.ovl.watch(linkDone, d.overlayNeigh)
	if err != nil {
		log.Warn("overlay: cannot watch FDB entries; remote addresses follow at each sync only", "err", err)
	}
	links, err := d.start(cfg, linkDone)
	if err != nil {
		return err
	}
	metricsAddr := opts.Metrics
	if metricsAddr == "" {
		metricsAddr = cfg.Daemon.Metrics
	}
	if metricsAddr != "" {
		if d.metrics, err = d.serveMetrics(metricsAddr); err != nil {
			return err
		}
	}
	defer func() {
		d.mu.Lock()
		m := d.metrics // a reload may have moved it
		d.mu.Unlock()
		m.stop()
	}()
	log.Info("trestle running", "config", opts.ConfigPath, "socket", sock, "bridges", len(cfg.Bridges), "fdb_capacity", capacity, "persist", persist, "pinned", dp.PinDir())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv.HandleStream(ctl.CmdCapture, d.captureStream)
	srv.HandleStream(ctl.CmdEventsFollow, d.eventsStream)
	srv.HandleStream(ctl.CmdFDBShow, d.fdbStream)
	srv.BadRequest = d.badRequest
	// Out of descriptors (a client holding connections open): said, and
	// served again once some are free; the pause caps the lines at one a second.
	srv.AcceptError = func(err error, retry time.Duration) {
		d.log.Warn("control socket cannot accept a connection", "err", err, "retry_in", retry)
	}
	go srv.Serve(ctx, d.handle)
	go d.watchEvents(ctx)
	go d.watchSnoop(ctx)
	go d.overlayLoop(ctx, ovlLost)
	go d.bgpLoop(ctx)
	d.notify(sd.SdNotifyReady, statusLine("forwarding: %d bridges", len(cfg.Bridges)))

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	sweep := time.NewTicker(d.sweepInterval())
	defer sweep.Stop()
	var fed <-chan time.Time // nil outside systemd's watchdog: never ready
	if wd := d.watchdog(); wd != nil {
		defer wd.Stop()
		fed = wd.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-fed:
			d.feedWatchdog()
		case s := <-sigs:
			if s == syscall.SIGHUP {
				d.Reload() // logs what it did or why not
				continue
			}
			log.Info("stopping", "signal", s.String())
			d.notify(sd.SdNotifyStopping)
			return nil
		case <-d.aging:
			sweep.Reset(d.sweepInterval())
		case ev, ok := <-links:
			// Events come in bursts (a delete and a create, a rename and
			// a carrier change): take what is queued, then reconcile once,
			// if any of them is of an interface the switch has to do with.
			evs := []LinkEvent{ev}
			for ok {
				select {
				case ev, ok = <-links:
					evs = append(evs, ev)
					continue
				default:
				}
				break
			}
			if ok && !d.eventsMatter(evs) {
				continue
			}
			if !ok {
				// The subscription dies on any receive error (ENOBUFS in
				// an event storm): subscribe again; the reconcile below
				// catches up on what was missed.
				log.Warn("interface monitor lost events; resubscribing")
				if links, err = d.sys.Subscribe(linkDone); err != nil {
					log.Warn("cannot watch interfaces", "err", err)
				}
			}
			d.reconcile()
		case <-sweep.C:
			if err := d.sweep(); err != nil {
				log.Warn("aging sweep", "err", err)
			}
			if err := d.sweepStates(); err != nil {
				log.Warn("aging tracked connections", "err", err)
			}
		}
	}
}

// start watches interfaces, adopts what a pinned dataplane holds and applies
// cfg. The watch comes first: an interface created while the first apply
// runs must not wait for some unrelated event to be noticed.
func (d *Daemon) start(cfg *config.Config, done <-chan struct{}) (<-chan LinkEvent, error) {
	links, err := d.sys.Subscribe(done)
	if err != nil {
		d.log.Warn("cannot watch interfaces; ports that appear or vanish are noticed at the next reload", "err", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.adopt(); err != nil {
		return nil, err
	}
	if err := d.apply(cfg); err != nil {
		return nil, err
	}
	if !d.persist && d.pins.Pinned() {
		if err := d.unpin(); err != nil {
			return nil, err
		}
	}
	return links, nil
}

// eventsMatter says whether link events may change what an apply does:
// an event of an interface a port is attached to or names (a port whose
// interface is missing comes up when it appears), or of a veth peer the
// daemon holds. Others (a container's veth made before its CNI ADD names
// it, interfaces of no bridge) need no apply: each full apply looks at
// every port's interface, which at a hundred ports is tens of
// milliseconds that a port.add queued behind it waits for
// (docs/performance.md "Pod churn"). Nor do events that say what the
// model holds already (told): those of a container's veth made and set up
// before its port.add, read after it.
func (d *Daemon) eventsMatter(evs []LinkEvent) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cfg == nil {
		return true
	}
	names, peers := map[string]bool{}, map[int]bool{}
	for _, b := range d.bridges {
		for _, p := range b.ports {
			if p.cfg.IsOverlay() {
				// Its VNI's kernel objects (a bridge, an advertise veth)
				// are no ports: any event may be one of theirs.
				return true
			}
			if !p.cfg.IsPatch() {
				names[p.cfg.Interface] = true
			}
		}
	}
	for _, rp := range d.run {
		names[rp.Interface] = true
	}
	for _, f := range d.peers {
		peers[f.peer.ID().Ifindex] = true
	}
	for i, ev := range evs {
		if !(d.attached[ev.Index] != nil || names[ev.Name] || peers[ev.Index]) {
			continue
		}
		if d.told(evs[i:]) {
			continue
		}
		return true
	}
	return false
}

// told says whether the first of evs, and the ones of its interface after
// it, tell nothing an apply would act on: the interface is attached, a
// tc port's of a bridge tree whose ports' modes and peers depend on no
// other port's (scopedFor: no XDP port nor an auto NIC), and the last of
// them gives it the name and the carrier the port has (earlier ones are
// its past: a veth made, then up, then with carrier). Called with d.mu
// held.
func (d *Daemon) told(evs []LinkEvent) bool {
	idx := evs[0].Index
	last := evs[0]
	for _, ev := range evs {
		if ev.Index != idx {
			continue
		}
		if ev.Deleted {
			return false
		}
		last = ev
	}
	if d.attached[idx] == nil {
		return false
	}
	for _, b := range d.bridges {
		for _, p := range b.ports {
			if p.ifindex == idx && p.mode != "" {
				return p.mode == mode.TC && !p.physical && d.scopedFor(p.bridge, nil) != nil && p.name() == last.Name && p.running == last.Running
			}
		}
	}
	return false
}

// reconcile applies the running config again after interfaces changed.
func (d *Daemon) reconcile() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cfg == nil {
		return
	}
	if err := d.apply(d.cfg); err != nil {
		d.log.Error("reconcile after an interface change failed; running state kept", "err", err)
	}
}

// Reload reads the config file again and applies the difference; a
// rejected file is logged here, whether SIGHUP or the socket asked.
func (d *Daemon) Reload() error {
	err := d.reload()
	if err != nil {
		d.log.Error("reload rejected; running state kept", "err", err)
	}
	return err
}

func (d *Daemon) reload() error {
	d.notify(sd.SdNotifyReloading)
	defer d.notify(sd.SdNotifyReady)
	cfg, err := config.Load(d.opts.ConfigPath)
	if err != nil {
		d.countReload(false)
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fromFile = true
	defer func() { d.fromFile = false }()
	if err := d.apply(cfg); err != nil {
		d.reloads[false]++
		return err
	}
	d.reloads[true]++
	d.log.Info("reloaded", "config", cfg.File)
	if d.opts.Metrics == "" { // --metrics, given to run, wins over the file
		d.moveMetrics(cfg.Daemon.Metrics)
	}
	return nil
}

// moveMetrics puts the metrics endpoint where the file now says: started,
// moved (the new one listening before the old one stops) or stopped. One
// that cannot listen there is logged, and the endpoint stays as it was.
// Called with d.mu held.
func (d *Daemon) moveMetrics(addr string) {
	was := ""
	if d.metrics != nil {
		was = d.metrics.want
	}
	if addr == was {
		return
	}
	var next *metricsServer
	if addr != "" {
		m, err := d.serveMetrics(addr)
		if err != nil {
			d.log.Error("daemon.metrics changed, but the endpoint cannot move there; it stays as it was", "config", addr, "was", was, "err", err)
			return
		}
		next = m
	}
	d.metrics.stop()
	d.metrics = next
	if next == nil {
		d.log.Info("metrics endpoint stopped: daemon.metrics is no longer set", "was", was)
	}
}

func (d *Daemon) countReload(ok bool) {
	d.mu.Lock()
	d.reloads[ok]++
	d.mu.Unlock()
}

// fdbCapacity sizes the shared table: every bridge's max_entries, its static
// entries (config and CLI), and room for CPUs that learn at the same moment.
// Address counts are exact (bpf/lib/maps.h), so no bridge takes another's
// room.
func fdbCapacity(cfg *config.Config) uint32 {
	var n int
	for _, b := range cfg.Bridges {
		n += b.MaxEntries + len(b.Static) + maxCLIStatics + 512
	}
	return uint32(n)
}

// maxCLIStatics bounds `trestle fdb add` per bridge (the table has room for
// them, see fdbCapacity).
const maxCLIStatics = 512

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

// agingMayHaveChanged tells the loop to reset the sweep's ticker.
func (d *Daemon) agingMayHaveChanged() {
	select {
	case d.aging <- struct{}{}:
	default:
	}
}

// shutdown stops the daemon: with persist it lets go of the datapath, which
// goes on forwarding with its last state; without, it detaches every
// program and gives every veth peer its settings back.
func (d *Daemon) shutdown() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	d.endCaptureLocked(nil) // no pinned link may keep the capture's program
	if err := d.closeProbes(); err != nil {
		d.log.Warn("loop detection", "err", err)
	}
	if d.persist && d.pins.Pinned() {
		// No daemon follows zebra's moves until the next: the overlay's
		// frames take the vxlan device meanwhile (encap.go).
		if err := d.clearEncaps(); err != nil {
			d.log.Warn("overlay: remove the XDP encapsulations", "err", err)
		}
		for _, a := range d.attached {
			_ = a.Release()
		}
		for _, f := range d.peers {
			f.peer.Close()
		}
		d.log.Info("the datapath goes on forwarding (persist); the next `trestle run` adopts it, `trestle down` removes it", "pinned", d.pins.PinDir())
		return
	}
	var errs []error
	// The overlays first: zebra withdraws their routes before the ports
	// stop forwarding.
	if err := d.removeOverlays(); err != nil {
		errs = append(errs, err)
	}
	for idx, a := range d.attached {
		if err := a.Detach(); err != nil {
			errs = append(errs, fmt.Errorf("ifindex %d: %w", idx, err))
		}
	}
	for _, f := range d.peers {
		if err := f.restore(); err != nil {
			errs = append(errs, err)
		}
		f.peer.Close()
	}
	d.attached, d.peers = map[int]Attachment{}, map[int]*peerFix{}
	if d.state != nil {
		// The run-time ports stay recorded: the next daemon takes them
		// back (a reboot, or `trestle down`, forgets them).
		rm := d.state.remove
		if len(d.run) > 0 {
			rm = d.state.removePeers
		}
		if err := rm(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		d.log.Warn("stopping", "err", err)
	}
	d.log.Info("all ports detached")
}
