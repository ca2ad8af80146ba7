package daemon

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// Loops at the edge (docs/switching.md): BPDU guard and loop detection.
// The datapath sees what happens (bpf/lib/guard.h): it drops a BPDU that
// comes in by a bpdu_guard port, and on a loop_detect bridge a loop probe,
// and reports each in its event ring. The daemon decides: it blocks the
// port, which stays attached and forwards nothing (portState.blocked): the
// port's entry carries TR_PORT_BLOCKED (frames from it are dropped before
// learning, port_blocked, and the egress rule lets no copy out by it), it
// leaves its bridge's flood sets, and its entries are flushed, as a port
// whose link went down.
//
//   - bpdu_guard: blocked until `trestle port enable` (as Cisco's
//     err-disable, without its recovery timer);
//   - loop: the daemon sends a probe (struct tr_probe) out of each
//     forwarding port of a loop_detect bridge every second (and at once
//     when an address of the bridge moves, probeOnMove), with a packet
//     socket on the port's interface, so that only the port's far side
//     gets it; a port that hears the bridge's own probe back is blocked for
//     the bridge's loop_retry, then tried again. Of a loop's two ports, the
//     one that hears first is blocked; the probe the other hears after was
//     sent by a port now blocked, and blocks nothing more.
//
// A block is the daemon's: it lasts across reloads (while the port stays
// in the configuration) and not across a restart of the daemon, as
// err-disable does not survive a reload of a Cisco switch; a guarded
// port's next BPDU blocks it again, and loop detection finds the loop
// again within a second.

const (
	blockBPDU = "bpdu_guard"
	blockLoop = "loop"
)

// block is a port's block: by what, why in words, and for a loop when it
// is tried again.
type block struct {
	why    string
	reason string
	until  time.Time // zero: until port enable
}

// newProbeID is the daemon's mark in its probes: random, so that a probe
// of another switch (or another daemon) is never taken for this one's.
func newProbeID() uint32 { return rand.Uint32() | 1 }

// bridgeByID finds a bridge by its id. Called with d.mu held.
func (d *Daemon) bridgeByID(id uint16) *bridgeState {
	for _, b := range d.bridges {
		if b.id == id {
			return b
		}
	}
	return nil
}

// edgeEvent acts on the datapath's report of a BPDU on a guarded port or
// of a loop probe heard: the port is blocked, if it should be.
func (d *Daemon) edgeEvent(m datapath.Move) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.bridgeByID(m.Bridge)
	if b == nil || d.cfg == nil || d.closed {
		return
	}
	p := b.portBySlot(m.ToSlot)
	if p == nil || p.blocked != "" || p.mode == "" {
		return // gone, or blocked already (frames were on their way)
	}
	var bl block
	switch {
	case m.BPDU:
		if !p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_BPDU_GUARD) {
			return // its guard was taken off since
		}
		bl = block{why: blockBPDU, reason: fmt.Sprintf("bpdu_guard: a BPDU from %s came in by it; 'trestle port enable %s %s' lifts the block", m.MAC, b.cfg.Name, p.name())}
	case m.Loop:
		if !b.cfg.LoopDetect || m.Probe != d.probeID || m.ProbeBridge != b.id {
			return // another switch's probe, or another bridge's
		}
		from := b.portBySlot(m.FromSlot)
		if from == nil {
			return
		}
		if from != p && from.blocked != "" {
			return // sent before its port was blocked: that broke the loop
		}
		bl = block{why: blockLoop, until: time.Now().Add(b.cfg.LoopRetry),
			reason: fmt.Sprintf("loop: the probe the bridge sent out of %s came back by it; tried again in %s", from.name(), b.cfg.LoopRetry)}
	default:
		return
	}
	d.setBlock(b, p, bl)
}

// setBlock blocks port p of bridge b (or lifts its block, bl.why ""), and
// applies the model so. Called with d.mu held.
func (d *Daemon) setBlock(b *bridgeState, p *portState, bl block) {
	id := portID{b.cfg.Name, p.key()}
	if bl.why == "" {
		delete(d.blocks, id)
	} else {
		d.blocks[id] = bl
	}
	if err := d.apply(d.cfg); err != nil {
		d.log.Error("apply after a port's block changed failed; running state kept", "bridge", b.cfg.Name, "port", p.name(), "why", bl.why, "err", err)
	}
}

// pruneBlocks forgets the blocks of ports no longer in the model. Called
// with d.mu held, after an apply.
func (d *Daemon) pruneBlocks() {
	for id := range d.blocks {
		b := d.bridges[id.bridge]
		if b == nil || b.portByKey(id.key) == nil {
			delete(d.blocks, id)
		}
	}
}

// blockReason is why a blocked port is blocked, in words.
func (d *Daemon) blockReason(b *bridgeState, p *portState) string {
	return d.blocks[portID{b.cfg.Name, p.key()}].reason
}

// portEnable answers `trestle port enable`: the port's block is lifted.
func (d *Daemon) portEnable(req ctl.Request) (ctl.PortEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.bridges[req.Bridge]
	if !ok {
		return ctl.PortEntry{}, errNoBridge(req.Bridge)
	}
	p := b.port(req.Port)
	if p == nil {
		return ctl.PortEntry{}, fmt.Errorf("bridge %q has no port %q", req.Bridge, req.Port)
	}
	if p.blocked != "" {
		d.log.Info("port enabled", "bridge", b.cfg.Name, "port", p.name(), "was", p.blocked)
		d.setBlock(b, p, block{})
		if q := d.bridges[req.Bridge]; q != nil {
			b = q
		}
		if q := b.port(req.Port); q != nil {
			p = q
		}
	}
	return d.portEntry(b, p), nil
}

// loopTick retries the loop blocks whose time has come, and sends each
// loop_detect bridge's probes: every second, from the event loop.
func (d *Daemon) loopTick(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cfg == nil || d.closed {
		return
	}
	retry := false
	for id, bl := range d.blocks {
		if !bl.until.IsZero() && !now.Before(bl.until) {
			delete(d.blocks, id)
			d.log.Info("loop block over: port tried again", "bridge", id.bridge, "port", id.key)
			retry = true
		}
	}
	if retry {
		if err := d.apply(d.cfg); err != nil {
			d.log.Error("apply after loop blocks ended failed; running state kept", "err", err)
		}
	}
	for _, b := range d.bridges {
		if b.cfg.LoopDetect {
			d.sendProbes(b, now)
		}
	}
}

// probeSoon is how soon after a bridge's last probes a move of an address
// sends them again.
const probeSoon = 100 * time.Millisecond

// probeOnMove: a loop makes the addresses whose frames circulate in it
// flap between its ports, and a storm may drop a probe in a full backlog:
// a move in a loop_detect bridge sends its probes at once (at most every
// probeSoon), besides the second's.
func (d *Daemon) probeOnMove(m datapath.Move) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.bridgeByID(m.Bridge)
	now := time.Now()
	if b == nil || !b.cfg.LoopDetect || d.closed || now.Sub(d.probed[b.id]) < probeSoon {
		return
	}
	d.sendProbes(b, now)
}

// sendProbes sends bridge b's probes out of its ports. Called with d.mu
// held.
func (d *Daemon) sendProbes(b *bridgeState, now time.Time) {
	d.probed[b.id] = now
	for _, p := range b.ports {
		// An interface's port that forwards: a span port only sends
		// copies, an overlay port's far side is the VNI.
		if !p.forwards() || p.ifindex <= 0 || p.cfg.IsPatch() || p.cfg.IsOverlay() || p.span() != nil {
			continue
		}
		if err := d.sendProbe(p.ifindex, probeFrame(d.probeID, b.id, p.slot)); err != nil {
			d.log.Debug("send a loop probe", "bridge", b.cfg.Name, "port", p.name(), "err", err)
		}
	}
}

// probeFrame is a loop probe (struct tr_probe, bpf/types.h): to every
// station, from an address made of the daemon's mark (locally
// administered), padded to the shortest frame.
func probeFrame(id uint32, bridge, slot uint16) []byte {
	f := make([]byte, 60)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f[6], f[7] = 0x02, 0x74
	binary.BigEndian.PutUint32(f[8:12], id)
	binary.BigEndian.PutUint16(f[12:14], tbpf.ProbeEtherType)
	binary.BigEndian.PutUint32(f[14:18], tbpf.ProbeMagic)
	binary.BigEndian.PutUint32(f[18:22], id)
	binary.BigEndian.PutUint16(f[22:24], bridge)
	binary.BigEndian.PutUint16(f[24:26], slot)
	return f
}

// sendProbeRaw sends a frame (a loop probe, a multicast query) out of an
// interface with a packet socket, opened when first used (it receives
// nothing: protocol 0).
func (d *Daemon) sendProbeRaw(ifindex int, frame []byte) error {
	d.probeMu.Lock()
	defer d.probeMu.Unlock()
	if d.probeFD <= 0 {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open a packet socket for loop probes and multicast queries: %w", err)
		}
		d.probeFD = fd
	}
	sa := &unix.SockaddrLinklayer{Ifindex: ifindex, Halen: 6}
	copy(sa.Addr[:], frame[:6])
	if err := unix.Sendto(d.probeFD, frame, 0, sa); err != nil {
		return fmt.Errorf("send a frame out of ifindex %d: %w", ifindex, err)
	}
	return nil
}

// closeProbes closes the probes' socket, if open.
func (d *Daemon) closeProbes() error {
	d.probeMu.Lock()
	defer d.probeMu.Unlock()
	if d.probeFD <= 0 {
		return nil
	}
	fd := d.probeFD
	d.probeFD = 0
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("close the loop probes' socket: %w", err)
	}
	return nil
}
