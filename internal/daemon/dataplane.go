package daemon

import (
	"net"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
)

// Dataplane is the loaded switch as the daemon drives it: the real one is
// internal/datapath; the unit tests of reconcile use a fake that can fail on
// demand.
type Dataplane interface {
	SetPort(datapath.PortInfo) error
	DelPort(ifindex uint32, slot uint16) error
	ResetPort(slot uint16) error
	SetBridge(datapath.BridgeInfo) error
	DelBridge(id uint16) error
	ResetBridge(id uint16) error

	FDB() ([]datapath.FDBEntry, error)
	AddFDB(datapath.FDBEntry) error
	DelFDB(bridge, vlan uint16, mac net.HardwareAddr) (datapath.FDBEntry, error)
	DelFDBs([]datapath.FDBEntry) (int, error)
	// AgeOut deletes the entries of es still idle beyond their bridge's
	// aging time and returns those it deleted.
	AgeOut(es []datapath.FDBEntry, aging func(bridge uint16) time.Duration) ([]datapath.FDBEntry, error)

	Stats(slot uint16) (tbpf.PortStats, error)
	PortMACs(slot uint16) (int, error)
	BridgeMACs(id uint16) (int, error)

	// The VLAN stage: while on, Attach and Upgrade give ports the
	// programs that classify frames into VLANs (datapath/vlan.go).
	SetVLANStage(on bool) error
	VLANStage() bool
	VLANs() ([]datapath.VLAN, error)
	VLANStats(index uint16) (tbpf.VLANStats, error)

	// The filter stage, like the VLAN stage: on while a bridge filters.
	SetFilterStage(on bool) error
	FilterStage() bool
	FilterCounters(bridge uint16) (datapath.FilterCounts, bool, error)
	States() ([]datapath.State, error)
	AgeStates(keep func(bridge uint16) bool) (int, error)

	Attach(ifindex int, m mode.Mode) (Attachment, error)
	// Upgrade moves an attachment to this dataplane's program in place;
	// false when it runs it already.
	Upgrade(Attachment) (bool, error)

	// What a pinned dataplane held when it was loaded (empty otherwise).
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
	FDBCapacity() uint32
	Unpin() error
	Close()
}

// Attachment is the program on one interface.
type Attachment interface {
	Ifindex() int
	Mode() mode.Mode
	// Detach takes the program off; Release only lets go of the handle (a
	// pinned program stays); Unpin makes it one that Release detaches.
	Detach() error
	Release() error
	Unpin() error
}

// realDataplane adapts *datapath.Datapath to Dataplane.
type realDataplane struct{ *datapath.Datapath }

type realAttachment struct{ *datapath.Attachment }

func (a realAttachment) Ifindex() int    { return a.Attachment.Ifindex }
func (a realAttachment) Mode() mode.Mode { return a.Attachment.Mode }

func (d realDataplane) Attach(ifindex int, m mode.Mode) (Attachment, error) {
	a, err := d.Datapath.Attach(ifindex, m)
	if err != nil {
		return nil, err
	}
	return realAttachment{a}, nil
}

func (d realDataplane) Upgrade(a Attachment) (bool, error) {
	return d.Datapath.Upgrade(a.(realAttachment).Attachment)
}

func (d realDataplane) AdoptedLinks() ([]Attachment, error) {
	ls, err := d.Datapath.AdoptedLinks()
	out := make([]Attachment, 0, len(ls))
	for _, l := range ls {
		out = append(out, realAttachment{l})
	}
	return out, err
}
