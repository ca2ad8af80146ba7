package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Events (bpf/lib/fdb.h): the datapath tells the control plane of what it
// alone sees happen, each move of a learned address, through a ring buffer
// (struct tr_event); the guards' reports (bpf/lib/guard.h) through a
// second ring of the same records (EdgeEvents). Only a move writes a record, never the common
// path, and the datapath never waits for the reader: a record the ring has
// no room for is counted (EventsLost). The ring is pinned with the other
// maps, so a daemon started after another reads what happened in between.

// EventRingSize is the ring's size in bytes.
const EventRingSize = int(tbpf.TrestleTrEventLimitsTR_EVENT_RING)

// Move is an address that moved to another port of its bridge, or another
// event of the ring (Learn, BPDU, Loop).
type Move struct {
	// Learn: not a move but a new address in a bridge with an overlay
	// port (BridgeInfo.Overlay), learned on ToSlot; FromSlot is 0.
	Learn bool
	// BPDU: a BPDU came in by the bpdu_guard port ToSlot (its source
	// MAC), which the daemon blocks (bpf/lib/guard.h).
	BPDU bool
	// Loop: a loop probe came in by port ToSlot of Bridge: sent by the
	// daemon Probe (struct tr_probe's sender) out of port FromSlot of
	// bridge ProbeBridge.
	Loop             bool
	Probe            uint32
	ProbeBridge      uint16
	Time             time.Time
	Bridge, VLAN     uint16
	MAC              net.HardwareAddr
	FromSlot, ToSlot uint16
	// The ports' ifindexes (a patch port's is its PatchIfindex).
	FromIfindex, ToIfindex uint32
}

// EventReader reads the event ring. One reader at a time.
type EventReader struct {
	rd *ringbuf.Reader
}

// ErrNoEvent: Read found nothing before its deadline.
var ErrNoEvent = errors.New("no event before the deadline")

// Events opens a reader of the event ring: moves and learns.
func (d *Datapath) Events() (*EventReader, error) {
	if d.objs.EventRing == nil {
		return nil, errors.New("read events: this datapath build has no event ring")
	}
	rd, err := ringbuf.NewReader(d.objs.EventRing)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return &EventReader{rd: rd}, nil
}

// EdgeEvents opens a reader of the guards' ring (bpf/lib/guard.h): a BPDU
// on a guarded port, a loop probe heard (Move.BPDU, Move.Loop). It is a
// ring of its own so that a loop's storm of moves, which fills the event
// ring faster than any daemon reads it, never crowds out the probe's
// report that breaks the loop.
func (d *Datapath) EdgeEvents() (*EventReader, error) {
	if d.objs.EdgeRing == nil {
		return nil, errors.New("read the guards' events: this datapath build has no edge ring")
	}
	rd, err := ringbuf.NewReader(d.objs.EdgeRing)
	if err != nil {
		return nil, fmt.Errorf("read the guards' events: %w", err)
	}
	return &EventReader{rd: rd}, nil
}

// Read waits for the next move until deadline (zero: no deadline). A
// record of an unknown type (a newer build's) is an error the caller may
// skip; the reader is then ready for the next one.
func (r *EventReader) Read(deadline time.Time) (Move, error) {
	raw, ok, err := readRing(r.rd, deadline)
	if err != nil {
		return Move{}, fmt.Errorf("read events: %w", err)
	}
	if !ok {
		return Move{}, ErrNoEvent
	}
	return decodeEvent(raw, wallOffset())
}

// Pending is how many bytes of records the ring holds unread.
func (r *EventReader) Pending() int { return r.rd.AvailableBytes() }

// Close ends the reader (a Read waiting returns an error).
func (r *EventReader) Close() error { return r.rd.Close() }

// wallOffset is wall clock time less the datapath's (CLOCK_MONOTONIC_COARSE),
// read each time: the wall clock may be set.
func wallOffset() int64 {
	var mono unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &mono)
	return time.Now().UnixNano() - mono.Nano()
}

// eventV1Size is a record's size before loop detection added the probe's
// sender (struct tr_event's probe and pad).
const eventV1Size = 32

func decodeEvent(raw []byte, offset int64) (Move, error) {
	var e tbpf.TrestleTrEvent
	if len(raw) >= eventV1Size && len(raw) < binary.Size(e) {
		// A record of the programs before the probe's field (a pinned
		// ring read across an upgrade): the fields it has.
		raw = append(raw[:len(raw):len(raw)], make([]byte, binary.Size(e)-len(raw))...)
	}
	if len(raw) < binary.Size(e) {
		return Move{}, fmt.Errorf("event record of %d bytes, shorter than %d", len(raw), binary.Size(e))
	}
	if err := binary.Read(bytes.NewReader(raw), binary.NativeEndian, &e); err != nil {
		return Move{}, fmt.Errorf("decode event record: %w", err)
	}
	m := Move{Time: time.Unix(0, int64(e.TsNs)+offset), Bridge: e.Bridge, VLAN: e.Vlan,
		MAC: append(net.HardwareAddr(nil), e.Mac[:]...), FromSlot: e.FromSlot, ToSlot: e.ToSlot,
		FromIfindex: e.FromIfindex, ToIfindex: e.ToIfindex}
	switch e.Type {
	case uint16(tbpf.TrestleTrEventTypeTR_EVENT_MOVE):
	case uint16(tbpf.TrestleTrEventTypeTR_EVENT_LEARN):
		m.Learn = true
	case uint16(tbpf.TrestleTrEventTypeTR_EVENT_BPDU):
		m.BPDU, m.FromIfindex = true, 0
	case uint16(tbpf.TrestleTrEventTypeTR_EVENT_LOOP):
		m.Loop, m.Probe, m.ProbeBridge, m.FromIfindex = true, e.Probe, uint16(e.FromIfindex), 0
	default:
		return Move{}, fmt.Errorf("event record of unknown type %d", e.Type)
	}
	return m, nil
}

// EventsLost counts the records the ring had no room for since the
// datapath was created (a pinned one's count outlives the daemon).
func (d *Datapath) EventsLost() (uint64, error) {
	return d.lostCount(d.objs.EventLost, "the events'")
}

// lostCount sums a ring's lost counter (a per-CPU array of one); whose
// names the ring in its error.
func (d *Datapath) lostCount(m *ebpf.Map, whose string) (uint64, error) {
	if m == nil {
		return 0, nil
	}
	per := make([]uint64, d.ncpu)
	if err := m.Lookup(uint32(0), &per); err != nil {
		return 0, fmt.Errorf("read %s lost counter: %w", whose, err)
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}
