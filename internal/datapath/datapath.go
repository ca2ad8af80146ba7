// Package datapath owns the loaded eBPF switch: its maps, and the programs it
// attaches to ports. It knows nothing of config files; the daemon tells it
// which bridges and ports exist and it writes that into the maps.
//
// Map writes keep forwarding correct at every step: a port is written to
// tx_ports and the flood set before it is announced at ingress and removed
// from ingress first; a bridge is rewritten as a whole copy that frames only
// see once it is complete (bridge.go); address counts have one writer per
// side (fdb.go).
//
// With a pin directory (Options.PinDir), every map and every attachment is
// pinned there, so the switch keeps forwarding after the daemon exits, and a
// later Load adopts what is pinned: maps of the layout it expects are used
// as they are, maps of another layout (a newer or older build) are copied
// into maps of its own, field by field (layout.go), and attachments are
// handed to the daemon to move to the new program without detaching (a link
// update). It never runs a program against a map it does not understand.
package datapath

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/clsact"
	"github.com/trestle/trestle/internal/instance"
	"github.com/trestle/trestle/internal/mode"
)

// Options are what the datapath is loaded with. The sizes among them
// (FDBCapacity, Refresh) are changed while it forwards by Resize.
type Options struct {
	// FDBCapacity is the size of the shared learning table (all bridges).
	// An adopted table that is larger is kept as it is.
	FDBCapacity uint32
	// Refresh is how stale an FDB timestamp may get before the datapath
	// refreshes it. It must be well under the shortest aging time.
	Refresh time.Duration
	// PinDir, if set, is a directory on the BPF filesystem where the maps
	// and attachments are pinned, and adopted from when they are there.
	PinDir string
	// Instance names the daemon (instance.Name): its tc filters sit at
	// its own place on an interface (clsact.PlaceOf), apart from another
	// daemon's.
	Instance string
	// Spec replaces the embedded program and maps: for experiments that
	// build a variant of bpf/ (scripts/stage-costs.sh) and for tests of
	// adoption, never in the daemon.
	Spec *ebpf.CollectionSpec
	// Log gets what adoption did (maps adopted, migrated, created).
	Log func(msg string, args ...any)
}

// Datapath is a loaded switch program with its maps.
type Datapath struct {
	// objs are the maps and programs of the first load, but the learning
	// table's (tbl) and the entry points' (progs), which a resize replaces.
	objs objects
	bss  *ebpf.Map            // the generations (lib/fdb.h), pinned with the rest
	maps map[string]*ebpf.Map // every map the programs use, by name, as now
	tmu  sync.Mutex           // tbl, and its users
	tbl  *fdbTable
	// refresh is the load-time refresh_ns of the entry points (Sizes);
	// resizing, a Resize the caller has not ended yet.
	refresh  time.Duration
	resizing *Resizing
	floods   map[uint16]*ebpf.Map
	// syncMap is an inner map kept for sync(): writing it into floods[0]
	// waits for every running program to finish.
	syncMap *ebpf.Map
	// unsynced are the bridges flipped since the last sync (bridge.go);
	// flips counts every flip (SettleMark).
	unsynced map[uint16]bool
	flips    uint64
	ncpu     int
	pin      *pinState    // nil without a pin directory
	place    clsact.Place // where its tc filters sit (Options.Instance)
	log      func(msg string, args ...any)
	// progLog is the verifier's log level for the programs loaded (tests
	// read its stats: TestBuildInstructions).
	progLog ebpf.LogLevel

	// ahead are the flood sets the next settle gives another size;
	// settles, the settles under way (settle.go).
	ahead   map[aheadKey]sizedSet
	settles []*Settle
	// progIDs are the ids of the entry points attached (programID).
	progIDs sync.Map

	// The stages (vlan.go): the spec the programs were loaded from, the
	// builds loaded, by stage, and which of them attachments get; the
	// VLANs written, and the VLAN flood sets; the running capture.
	spec       *ebpf.CollectionSpec
	progs      map[stage]progSet
	stage      stage
	capture    *Capture
	vlans      map[uint32]VLAN
	vlanFloods map[uint16]*ebpf.Map
	// aux are the programs beside the entry points: the devmap programs
	// (trestle_vlan_egress, trestle_patch_egress) and the overlay's way in
	// (trestle_via), each loaded the first time it is asked for (auxProgram),
	// or the error its load gave.
	aux    map[string]*ebpf.Program
	auxErr map[string]error
	// Patch flood sets (patch.go), by bridge.
	patchFloods map[uint16]*ebpf.Map
	hadPatch    map[uint16]bool // bridges written with patch ports
	// via: the ways in the port maps hold, port ifindex -> way in
	// (SetPort, Ports). xdpTo: where XDP copies for a port go when not to
	// its own interface (an overlay port's xdp way in), as the last
	// SetBridge or SetPort said: the flood sets' values take it.
	via   map[uint32][2]uint32
	xdpTo map[uint32]uint32
	// Reach flood sets (reach.go), by bridge.
	reachFloods map[uint16]*ebpf.Map
	// The filter's rule sets and counters (filter.go); nil until used.
	filt *filterState
	// The tables of unestablished connections, by bridge (filter.go).
	halfOpen map[uint16]*ebpf.Map
}

// Load loads the switch's maps into the kernel, adopting what
// Options.PinDir holds. Its programs are loaded when first asked for: an
// entry point by the first Attach, Upgrade or Program of its mode (for the
// build of the stages then on), a devmap program by the first flood set
// that needs it, trestle_via by ViaProgram; the kernel's verifier, most of
// a load's time, checks only what is used. A Load that adopts pinned
// attachments loads the entry points of their modes before it touches a
// pin, so that a build that does not load leaves the running switch as it
// was. Verifier errors are returned in full, by the call that needed the
// program.
func Load(opts Options) (*Datapath, error) {
	spec, err := tbpf.LoadTrestle()
	if opts.Spec != nil {
		spec, err = opts.Spec.Copy(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read embedded datapath: %w", err)
	}
	if opts.FDBCapacity > 0 {
		spec.Maps[tbpf.TrestleMapFdb].MaxEntries = opts.FDBCapacity
	}
	if err := setRefresh(spec, opts.Refresh); err != nil {
		return nil, err
	}
	// Memos expire by the tick count where HZ is known (bpf/lib/fdb.h).
	if err := spec.Variables[tbpf.TrestleVarJiffiesHz].Set(uint64(kernelHZ())); err != nil {
		return nil, fmt.Errorf("set the tick rate: %w", err)
	}
	d := &Datapath{place: clsact.PlaceOf(opts.Instance), floods: map[uint16]*ebpf.Map{}, unsynced: map[uint16]bool{}, ahead: map[aheadKey]sizedSet{}, log: opts.Log, refresh: refreshOf(spec),
		spec: spec, progs: map[stage]progSet{}, vlanFloods: map[uint16]*ebpf.Map{},
		patchFloods: map[uint16]*ebpf.Map{}, hadPatch: map[uint16]bool{}, reachFloods: map[uint16]*ebpf.Map{},
		aux: map[string]*ebpf.Program{}, auxErr: map[string]error{}, halfOpen: map[uint16]*ebpf.Map{},
		via: map[uint32][2]uint32{}, xdpTo: map[uint32]uint32{}}
	if d.log == nil {
		d.log = func(string, ...any) {}
	}
	if d.ncpu, err = ebpf.PossibleCPU(); err != nil {
		return nil, fmt.Errorf("count CPUs: %w", err)
	}
	var repl map[string]*ebpf.Map
	if opts.PinDir != "" {
		if d.pin, err = openPins(opts.PinDir, spec, d.ncpu, d.log); err != nil {
			return nil, err
		}
		repl = d.pin.replacements
	}
	// The maps alone: the programs are loaded when asked for (entry,
	// auxProgram).
	first := spec.Copy()
	first.Programs = map[string]*ebpf.ProgramSpec{}
	coll, err := ebpf.NewCollectionWithOptions(first, ebpf.CollectionOptions{MapReplacements: repl})
	if err != nil {
		d.pin.abort()
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	d.maps = map[string]*ebpf.Map{}
	for name, m := range coll.Maps {
		d.maps[name] = m
	}
	if err := coll.Assign(&d.objs); err != nil {
		coll.Close()
		d.pin.abort()
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	// The table is the first of its kind: a resize replaces it, so it is
	// held apart from objs.
	d.tbl = &fdbTable{fdb: d.objs.Fdb, portMacs: d.objs.PortMacs, portMacsDel: d.objs.PortMacsDel,
		bridgeMacs: d.objs.BridgeMacs, bridgeMacsDel: d.objs.BridgeMacsDel}
	d.objs.Fdb, d.objs.PortMacs, d.objs.PortMacsDel, d.objs.BridgeMacs, d.objs.BridgeMacsDel = nil, nil, nil, nil, nil
	d.bss = coll.DetachMap(".bss")
	coll.Close() // what is left: .rodata, which each program load makes anew
	delete(d.maps, ".rodata")
	if d.syncMap, err = ebpf.NewMap(floodSpec("tr_sync", 4)); err != nil {
		d.Close()
		return nil, fmt.Errorf("create sync map: %w", err)
	}
	if d.pin == nil {
		// Its VLANs array was made here, so it holds none: reading it
		// whole (a lookup of every bridge's 4096 VIDs) was a fifth of a
		// small daemon's start (loadVLANs).
		d.vlans = map[uint32]VLAN{}
	}
	if d.pin != nil {
		if err := d.loadModes(stage{}, pinnedModes(opts.PinDir)); err != nil {
			d.Close()
			return nil, fmt.Errorf("load datapath: %w", err)
		}
		if err := d.pin.commit(d.maps); err != nil {
			d.Close()
			return nil, err
		}
		if err := d.adoptFloods(); err != nil {
			d.Close()
			return nil, err
		}
		if err := d.adoptVLANFloods(); err != nil {
			d.Close()
			return nil, err
		}
		if err := d.adoptPatchFloods(); err != nil {
			d.Close()
			return nil, err
		}
		if err := d.adoptReachFloods(); err != nil {
			d.Close()
			return nil, err
		}
		if err := d.adoptHalfOpen(); err != nil {
			d.Close()
			return nil, err
		}
		// The old daemon's last flip of a bridge may be less than a grace
		// period ago: the first write of each waits (bridge.go).
		for id := uint16(1); id <= uint16(tbpf.MaxBridges); id++ {
			d.unsynced[id] = true
		}
	}
	return d, nil
}

// Fresh names the maps that started empty in a Load that adopted others
// (new in this build, or derived maps of a changed layout): the control
// plane must write everything it keeps there again, not only what changed.
func (d *Datapath) Fresh() []string {
	if d.pin == nil {
		return nil
	}
	return d.pin.fresh
}

// FDBCapacity is the size of the loaded learning table (an adopted one may
// be larger than asked).
func (d *Datapath) FDBCapacity() uint32 {
	t, done := d.use()
	defer done()
	return t.fdb.MaxEntries()
}

// Close releases the daemon's handles on programs and maps. Pinned objects,
// and links attached without pins until they are closed, live on.
func (d *Datapath) Close() {
	d.awaitSettles()
	for _, m := range d.floods {
		m.Close()
	}
	for _, m := range d.vlanFloods {
		m.Close()
	}
	for _, m := range d.patchFloods {
		m.Close()
	}
	for _, m := range d.reachFloods {
		m.Close()
	}
	for _, m := range d.halfOpen {
		m.Close()
	}
	if d.capture != nil {
		d.capture.Close()
	}
	for _, s := range d.progs {
		s.close()
	}
	for _, p := range d.aux {
		p.Close()
	}
	if d.resizing != nil {
		d.resizing.release()
	}
	if d.tbl != nil {
		d.retire(d.tbl)
	}
	if d.syncMap != nil {
		d.syncMap.Close()
	}
	if d.bss != nil {
		d.bss.Close()
	}
	d.pin.abort()
	d.objs.Close()
}

// Pinned says whether the datapath is pinned (it outlives the daemon).
func (d *Datapath) Pinned() bool { return d.pin != nil }

// PinDir is where it is pinned, or "".
func (d *Datapath) PinDir() string {
	if d.pin == nil {
		return ""
	}
	return d.pin.dir
}

// Unpin removes the pins of maps and layouts (links are unpinned by their
// Attachment): the datapath now lives only as long as this process holds
// it. For a daemon without persist that found a persisted datapath.
func (d *Datapath) Unpin() error {
	if d.pin == nil {
		return nil
	}
	err := d.pin.unpinAll()
	d.pin.abort()
	d.pin = nil
	return err
}

// Program is the entry point of mode m that attachments get now: that of
// the build of the stages on (SetVLANStage, SetFilterStage, StartCapture),
// loaded if this is its first use.
func (d *Datapath) Program(m mode.Mode) (*ebpf.Program, error) {
	switch m {
	case mode.XDP, mode.TC:
		return d.entry(d.stage, m)
	}
	return nil, fmt.Errorf("no program for mode %q", m)
}

// pinnedModes are the modes of the links pinned in dir (instance.LinkFile
// names them), whether or not their interfaces are still there.
func pinnedModes(dir string) []mode.Mode {
	ents, _ := os.ReadDir(filepath.Join(dir, instance.LinksDir))
	var xdp, tc bool
	for _, e := range ents {
		if _, m, ok := instance.ParseLinkFile(e.Name()); ok {
			xdp, tc = xdp || m == string(mode.XDP), tc || m == string(mode.TC)
		}
	}
	var out []mode.Mode
	if xdp {
		out = append(out, mode.XDP)
	}
	if tc {
		out = append(out, mode.TC)
	}
	return out
}

// auxProgram is the program name beside the entry points (a devmap program,
// trestle_via), loaded on this datapath's maps the first time it is asked
// for. These use no load-time size (resize.go), so one load serves for the
// datapath's life.
func (d *Datapath) auxProgram(name string) (*ebpf.Program, error) {
	if p := d.aux[name]; p != nil {
		return p, nil
	}
	if err := d.auxErr[name]; err != nil {
		return nil, err
	}
	p, err := d.loadProgram(d.spec.Copy(), name, nil)
	if err != nil {
		err = fmt.Errorf("load %s: %w", name, err)
		if refused(err) {
			d.auxErr[name] = err
		}
		return nil, err
	}
	d.aux[name] = p
	return p, nil
}

// PortInfo is one port as the datapath sees it.
type PortInfo struct {
	Ifindex uint32
	Bridge  uint16
	Slot    uint16
	MaxMACs uint32
	// On a VLAN-aware bridge: PVID is the VLAN of untagged frames (the
	// access VLAN, or a trunk's native one; 0: none); a trunk carries
	// VLANs tagged (PVID among them, untagged).
	PVID  uint16
	Trunk bool
	VLANs []uint16 // a trunk's VLANs, sorted
	// Peer: a patch port's peer, the slot of the patch port of the other
	// bridge (0: an interface's port). A patch port's Ifindex is
	// PatchIfindex(Slot).
	Peer uint16
	// Policy: what the port's keys ask of its entry, the configuration's
	// as it is: every flag of enum tr_port_flags but those the datapath
	// makes from the fields here (madeFlags), and with TR_PORT_IP_GUARD
	// the addresses its ARP, neighbour discovery and IP sources must be
	// (bpf/lib/ipguard.h). What each flag does is its comment in
	// bpf/types.h; TR_PORT_OVERLAY's port is an overlay port (a vxlan
	// device, docs/overlay.md), whose frames must fit its MTU.
	Policy tbpf.PortPolicy
	// Storm: storm control, the broadcast, multicast and unknown-unicast
	// frames a second its ingress accepts, by tbpf kind (0: no limit).
	Storm [3]uint32
	// Span: a mirror's span port, which only sends the copies (frames
	// arriving on it are dropped). On a VLAN-aware bridge it is a trunk of
	// every VLAN with no native one, so that each copy keeps its VLAN's tag.
	Span bool
	// Mirror: where copies of what the port receives (MirrorIn) and what
	// its bridge sends out of it (MirrorOut) go; MirrorVLANs, if any, are
	// the only VLANs copied.
	MirrorIn, MirrorOut bool
	MirrorTo            uint32 // the span port's ifindex
	MirrorToSlot        uint16
	MirrorVLANs         []uint16
	// Via: where the port's XDP copies go instead of Ifindex (0: to
	// Ifindex), and ViaPeer the far end, where trestle_via sends them on
	// to Ifindex. An overlay port's vxlan device takes no XDP redirect, so
	// xdp ports send into its xdp way in, a veth pair (docs/overlay.md);
	// tc ports redirect to the device itself. Both ends are in the port
	// maps under the port's value, flagged TR_PORT_VIA: Via for the
	// devmap programs, ViaPeer for trestle_via.
	Via, ViaPeer uint32
}

// ViaProgram is the program at the far end of an overlay port's xdp way
// in (bpf/lib/overlay.h, trestle_via), for the overlay's kernel objects to
// attach (internal/overlay), loaded the first time it is asked for.
func (d *Datapath) ViaProgram() (*ebpf.Program, error) {
	return d.auxProgram(tbpf.TrestleProgTrestleVia)
}

// xdpDev is where XDP copies for the port on ifindex go.
func (d *Datapath) xdpDev(ifindex uint32) uint32 {
	if v := d.xdpTo[ifindex]; v != 0 {
		return v
	}
	return ifindex
}

// noteVia records where XDP copies for p go, for the flood sets.
func (d *Datapath) noteVia(p PortInfo) {
	if p.Via != 0 {
		d.xdpTo[p.Ifindex] = p.Via
	} else {
		delete(d.xdpTo, p.Ifindex)
	}
}

// Mirrored says whether copies of the port's frames go to a span port.
func (p PortInfo) Mirrored() bool { return p.MirrorIn || p.MirrorOut }

// HasPolicy says whether the port is protected or refuses a kind of flood:
// its bridge's floods then check each port (TR_BRIDGE_POLICY).
func (p PortInfo) HasPolicy() bool {
	return p.Policy.Flags&(tbpf.TrestleTrPortFlagsTR_PORT_PROTECTED|tbpf.TrestleTrPortFlagsTR_PORT_NO_FLOOD|
		tbpf.TrestleTrPortFlagsTR_PORT_NO_MFLOOD|tbpf.TrestleTrPortFlagsTR_PORT_NO_BFLOOD) != 0
}

// IPGuard says whether the port's sources must be its Policy's GuardIPs.
func (p PortInfo) IPGuard() bool { return p.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD) }

// IsOverlay says whether the port is an overlay port.
func (p PortInfo) IsOverlay() bool { return p.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_OVERLAY) }

// madeFlags are the flags of a port's entry the datapath makes from
// PortInfo's other fields (a trunk's VLANs, a patch port, storm control, a
// mirror, an overlay's way in); every other flag is the Policy's, written
// and read back as it is, so that a new flag of a port key needs nothing
// here.
const madeFlags = tbpf.TrestleTrPortFlagsTR_PORT_TRUNK | tbpf.TrestleTrPortFlagsTR_PORT_PATCH |
	tbpf.TrestleTrPortFlagsTR_PORT_STORM | tbpf.TrestleTrPortFlagsTR_PORT_SPAN |
	tbpf.TrestleTrPortFlagsTR_PORT_MIRROR_IN | tbpf.TrestleTrPortFlagsTR_PORT_MIRROR_OUT |
	tbpf.TrestleTrPortFlagsTR_PORT_VIA

// mirrorFlags are the made flags of the port's span and mirror fields.
var mirrorFlags = []struct {
	flag uint32
	get  func(*PortInfo) *bool
}{
	{tbpf.PortSpan, func(p *PortInfo) *bool { return &p.Span }},
	{tbpf.PortMirrorIn, func(p *PortInfo) *bool { return &p.MirrorIn }},
	{tbpf.PortMirrorOut, func(p *PortInfo) *bool { return &p.MirrorOut }},
}

// Equal says whether two ports are the same in every field.
func (p PortInfo) Equal(q PortInfo) bool {
	return p.Ifindex == q.Ifindex && p.Bridge == q.Bridge && p.Slot == q.Slot && p.MaxMACs == q.MaxMACs &&
		p.PVID == q.PVID && p.Trunk == q.Trunk && slices.Equal(p.VLANs, q.VLANs) && p.Peer == q.Peer &&
		p.Policy.Flags == q.Policy.Flags && slices.Equal(p.Policy.GuardIPs, q.Policy.GuardIPs) &&
		p.Storm == q.Storm && p.Span == q.Span && p.MirrorIn == q.MirrorIn && p.MirrorOut == q.MirrorOut &&
		p.MirrorTo == q.MirrorTo && p.MirrorToSlot == q.MirrorToSlot && slices.Equal(p.MirrorVLANs, q.MirrorVLANs) &&
		p.Via == q.Via && p.ViaPeer == q.ViaPeer
}

// Carries says whether the port carries vid on a VLAN-aware bridge.
func (p PortInfo) Carries(vid uint16) bool {
	if vid == 0 {
		return false
	}
	if !p.Trunk {
		return p.PVID == vid
	}
	_, ok := slices.BinarySearch(p.VLANs, vid)
	return ok
}

// FDBEntry is one row of the learning table.
type FDBEntry struct {
	Bridge  uint16
	VLAN    uint16
	MAC     net.HardwareAddr
	Ifindex uint32
	Slot    uint16
	Static  bool
	User    bool          // a static entry from `trestle fdb add`
	Age     time.Duration // since the datapath last refreshed it
	SeenNs  uint64        // when, on the datapath's clock (Now)
}

// Now is the clock the datapath stamps entries with (CLOCK_MONOTONIC_COARSE).
// It is the same for every process, so a new daemon ages entries that an
// earlier one's datapath learned from their own timestamps.
func Now() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts)
	return uint64(ts.Nano())
}

// objects are the loaded maps; the programs are loaded when asked for
// (entry, auxProgram).
type objects struct {
	tbpf.TrestleMaps
	tbpf.TrestleVariables
}

func (o *objects) Close() error { return o.TrestleMaps.Close() }
