package daemon

import (
	"net"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
)

// The dataplane as the daemon's parts use it: one role each, so that a
// part depends on the methods it calls and a test fakes only those. The
// real one is internal/datapath (realDataplane); the unit tests use fakes
// that can fail on demand (fake_test.go).
//
//	Topology   the port and bridge maps        reconcile, ports, adopt, rule add/del
//	Table      the learning table              statics, flushes, aging, fair share, fdb commands
//	Stages     the programs' optional stages   reconcile
//	Counters   what the maps count             show, stats, metrics, episodes, rule show
//	Conntrack  the filter's connections        state show, their aging
//	Attacher   programs on interfaces          ports, stages, capture
//	Sizer      the sizes fixed at load         reconcile (a larger table, a shorter refresh)
//	Pins       what outlives a daemon          adopt, unpin, shutdown, the state file, status
//
// Three more powers are optional, found by type assertion where the daemon
// is wired: capture (capturer), the MAC moves (eventSource) and waiting
// for the bridges' writes ahead (settler, settle.go).

// Topology writes the port and bridge maps: where frames come in and which
// bridge, VLANs, limits and floods each port and bridge has.
type Topology interface {
	SetPort(datapath.PortInfo) error
	DelPort(ifindex uint32, slot uint16) error
	SetBridge(datapath.BridgeInfo) error
	DelBridge(id uint16) error
	// ResetPort and ResetBridge zero the counters and address counts of
	// a slot or id given to a new port or bridge.
	ResetPort(slot uint16) error
	ResetBridge(id uint16) error
}

// Table is the learning table the datapath fills and the daemon writes
// static entries to, flushes and ages.
type Table interface {
	// WalkFDB hands the table to fn a chunk at a time (at most
	// datapath.FDBChunk entries, a slice fn must not keep; an entry's
	// MAC is its own), so that a reader holds a chunk of it, never all
	// (there is no whole dump: every reader walks); fn may delete entries
	// of the chunk it holds. fn's error ends the walk and is returned.
	WalkFDB(fn func([]datapath.FDBEntry) error) error
	AddFDB(datapath.FDBEntry) error
	DelFDB(bridge, vlan uint16, mac net.HardwareAddr) (datapath.FDBEntry, error)
	DelFDBs([]datapath.FDBEntry) (int, error)
	// AgeOut deletes the entries of es still idle beyond their bridge's
	// aging time and returns those it deleted.
	AgeOut(es []datapath.FDBEntry, aging func(bridge uint16) time.Duration) ([]datapath.FDBEntry, error)
	// SetReserve lets the port in slot learn n more new sources, from
	// now, while its bridge is at or past its high-water mark and the port
	// at or over its share (fair.go); 0: none. It replaces the last one,
	// and deletions meanwhile give the port no more.
	SetReserve(slot uint16, n int) error
}

// Stages turns the programs' optional stages on and off. While a stage is
// on, Attach and Upgrade give ports the programs with it: the VLAN stage
// classifies frames into VLANs (datapath/vlan.go), the filter stage runs a
// filtering bridge's rules.
type Stages interface {
	SetVLANStage(on bool) error
	VLANStage() bool
	SetFilterStage(on bool) error
	FilterStage() bool
}

// Counters reads what the maps count, for show, stats and the metrics.
type Counters interface {
	Stats(slot uint16) (tbpf.PortStats, error)
	PortMACs(slot uint16) (int, error)
	BridgeMACs(id uint16) (int, error)
	// VLANs are the VLANs the datapath holds, with the index of their
	// counters (VLANStats). They read the datapath's own record, which an
	// apply writes: only under d.mu.
	VLANs() ([]datapath.VLAN, error)
	VLANStats(index uint16) (tbpf.VLANStats, error)
	// FilterCounters are a bridge's per-rule counts; false while its
	// filter is not in the datapath. FilterCounterIDs names the counters
	// from the datapath's own record of the rule sets, which an apply
	// writes (only under d.mu, as FilterCounters); ReadFilterCounters
	// reads them from the map alone, safe outside it (a metrics scrape).
	FilterCounters(bridge uint16) (datapath.FilterCounts, bool, error)
	FilterCounterIDs(bridge uint16) (datapath.FilterCounterIDs, bool, error)
	ReadFilterCounters(datapath.FilterCounterIDs) (datapath.FilterCounts, error)
	// FilterUnread counts the frames whose transport header a bridge's
	// filter could not read, by why; from the map alone.
	FilterUnread(bridge uint16) (datapath.FilterUnread, error)
}

// Conntrack is the filter's table of tracked connections.
type Conntrack interface {
	States() ([]datapath.State, error)
	AgeStates(keep func(bridge uint16) bool) (int, error)
}

// Attacher puts the programs on interfaces.
type Attacher interface {
	// Attach puts the program of mode m on an interface, hooked as h
	// says (at XDP always by a link).
	Attach(ifindex int, m mode.Mode, h datapath.Hook) (Attachment, error)
	// Upgrade moves an attachment to this dataplane's program in place;
	// false when it runs it already.
	Upgrade(Attachment) (bool, error)
	// Restore puts back a tc filter (datapath.HookFilter) that another
	// removed from its interface (a `tc qdisc del dev IF clsact`); true
	// when it did. Other attachments are left as they are.
	Restore(Attachment) (bool, error)
	// AdoptFilter takes over the tc filter (datapath.HookFilter) an
	// earlier daemon left on an interface, nil when it has none: a filter
	// is not pinned, so the daemon looks where it attached them (the
	// run-time ports it recorded).
	AdoptFilter(ifindex int) (Attachment, error)
}

// Sizer loads the programs again for other load-time sizes: a learning
// table of more entries, timestamps refreshed more often (for a shorter
// aging time), while the switch forwards (datapath/resize.go).
type Sizer interface {
	// Resize copies the table into one of the new sizes and makes the
	// programs loaded for them those Attach and Upgrade give. The caller
	// moves every attachment (Upgrade), then ends the resize with Keep,
	// or with Undo and moves them back. On an error nothing changed.
	Resize(datapath.Sizes) (Resizing, error)
}

// Resizing is a resize under way (Sizer).
type Resizing interface {
	// Keep lets go of the old programs and table once no attachment runs
	// them, carrying over what they learned meanwhile; its error is what
	// could not be carried over (learned again), the resize has ended.
	Keep() error
	// Undo makes the old programs and table the current ones again.
	Undo() error
}

// Pins is what a pinned dataplane outlives the daemon with, and what it
// held when this daemon loaded it (empty when it was not pinned).
type Pins interface {
	Bridges() ([]datapath.BridgeInfo, error)
	Ports() ([]datapath.PortInfo, error)
	AdoptedLinks() ([]Attachment, error)
	// Pinned: the dataplane outlives the daemon. Unpin makes it live
	// only as long as the daemon holds it.
	Pinned() bool
	PinDir() string
	// Fresh names maps that started empty while others were adopted:
	// everything the daemon keeps there must be written again.
	Fresh() []string
	Unpin() error
}

// Dataplane is every role, as the loaded switch has them: what the daemon
// is wired with (newDaemon), not what its parts take.
type Dataplane interface {
	Topology
	Table
	Stages
	Counters
	Conntrack
	Attacher
	Sizer
	Pins
}

// Attachment is the program on one interface.
type Attachment interface {
	Ifindex() int
	Mode() mode.Mode
	Hook() datapath.Hook
	// Detach takes the program off; Release only lets go of the handle (a
	// pinned program stays); Unpin makes it one that Release detaches.
	Detach() error
	Release() error
	Unpin() error
}

// realDataplane adapts *datapath.Datapath to Dataplane.
type realDataplane struct{ *datapath.Datapath }

type realAttachment struct{ *datapath.Attachment }

func (a realAttachment) Ifindex() int        { return a.Attachment.Ifindex }
func (a realAttachment) Mode() mode.Mode     { return a.Attachment.Mode }
func (a realAttachment) Hook() datapath.Hook { return a.Attachment.Hook }

func (d realDataplane) Attach(ifindex int, m mode.Mode, h datapath.Hook) (Attachment, error) {
	a, err := d.Datapath.Attach(ifindex, m, h)
	if err != nil {
		return nil, err
	}
	return realAttachment{a}, nil
}

func (d realDataplane) AdoptFilter(ifindex int) (Attachment, error) {
	a, err := d.Datapath.AdoptFilter(ifindex)
	if a == nil || err != nil {
		return nil, err
	}
	return realAttachment{a}, nil
}

func (d realDataplane) Upgrade(a Attachment) (bool, error) {
	return d.Datapath.Upgrade(a.(realAttachment).Attachment)
}

func (d realDataplane) Restore(a Attachment) (bool, error) {
	return d.Datapath.Restore(a.(realAttachment).Attachment)
}

func (d realDataplane) Resize(s datapath.Sizes) (Resizing, error) {
	r, err := d.Datapath.Resize(s)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (d realDataplane) AdoptedLinks() ([]Attachment, error) {
	ls, err := d.Datapath.AdoptedLinks()
	out := make([]Attachment, 0, len(ls))
	for _, l := range ls {
		out = append(out, realAttachment{l})
	}
	return out, err
}
