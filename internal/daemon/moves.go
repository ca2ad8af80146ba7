package daemon

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// MAC moves: the datapath writes a record for each move of a learned
// address into its event ring (bpf/lib/fdb.h), and never waits for the
// daemon. readMoves logs them, rate-limited by moveLimiter:
//
//   - an address's first move is logged at once;
//   - after a line, an address gets no other for moveEvery: its moves are
//     counted, and the next line (when moveEvery has passed, at the latest
//     a tick after) reports the last of them, from and to, with
//     suppressed = the others. A flapping station is then one line every
//     moveEvery, and lines plus the suppressed counts add up to the moves;
//   - all addresses together get at most moveBurst lines at once and
//     moveRate a second: beyond, lines wait (their moves counted) for the
//     budget, so that many stations moving at once cannot flood the log;
//   - the limiter remembers moveMACs addresses, those that moved last;
//     the moves still uncounted of an address it forgets are reported by
//     one mac_move_overflow line every moveEvery at most.
//
// Records the ring had no room for (the daemon was behind, or stopped)
// are counted by the datapath: trestle_events_lost_total.

const (
	moveEvery = 5 * time.Second
	moveMACs  = 4096
	moveRate  = 10 // lines a second, all addresses together
	moveBurst = 50
	eventTick = time.Second // how often due lines and episodes are looked at
)

// moveKey is an address in a VLAN of a bridge: what a limit is kept for.
type moveKey struct {
	bridge, vlan uint16
	mac          [6]byte
}

func moveKeyOf(m datapath.Move) moveKey {
	k := moveKey{bridge: m.Bridge, vlan: m.VLAN}
	copy(k.mac[:], m.MAC)
	return k
}

// moveState is what the limiter remembers of one address.
type moveState struct {
	key     moveKey
	logged  time.Time // its last line; zero: none
	pending uint64    // moves since, not logged
	last    datapath.Move
	elem    *list.Element
}

// moveLine is a line to log: a move, and how many other moves of its
// address it stands for.
type moveLine struct {
	move       datapath.Move
	suppressed uint64
	// overflow: instead, moves of forgotten addresses (no move).
	overflow uint64
}

type moveLimiter struct {
	every        time.Duration
	size         int
	rate, burst  float64
	tokens       float64
	refilled     time.Time
	macs         map[moveKey]*moveState
	lru          *list.List // front: the address that moved last
	overflow     uint64     // moves of forgotten addresses not yet reported
	overflowLine time.Time
}

func newMoveLimiter(every time.Duration, size int, rate, burst float64) *moveLimiter {
	return &moveLimiter{every: every, size: size, rate: rate, burst: burst, tokens: burst,
		macs: map[moveKey]*moveState{}, lru: list.New()}
}

// take spends one line of the budget, if there is one.
func (l *moveLimiter) take(now time.Time) bool {
	if !l.refilled.IsZero() && now.After(l.refilled) {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.refilled).Seconds()*l.rate)
	}
	l.refilled = now
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

// add counts a move; it returns the line to log now, if any.
func (l *moveLimiter) add(m datapath.Move, now time.Time) (moveLine, bool) {
	k := moveKeyOf(m)
	s := l.macs[k]
	if s == nil {
		if l.lru.Len() >= l.size {
			old := l.lru.Back().Value.(*moveState)
			l.overflow += old.pending
			l.forget(old)
		}
		s = &moveState{key: k}
		s.elem = l.lru.PushFront(s)
		l.macs[k] = s
	} else {
		l.lru.MoveToFront(s.elem)
	}
	if s.pending == 0 && (s.logged.IsZero() || now.Sub(s.logged) >= l.every) && l.take(now) {
		s.logged = now
		return moveLine{move: m}, true
	}
	s.pending++
	s.last = m
	return moveLine{}, false
}

func (l *moveLimiter) forget(s *moveState) {
	l.lru.Remove(s.elem)
	delete(l.macs, s.key)
}

// due returns the lines whose time has come: the last move of each address
// with moves not logged whose moveEvery has passed (as the budget allows,
// those that waited longest first), and the overflow. Addresses quiet for
// moveEvery with nothing to report are forgotten: their next move is
// logged at once, as it would be anyway.
func (l *moveLimiter) due(now time.Time) []moveLine {
	var out []moveLine
	for e := l.lru.Back(); e != nil; {
		s := e.Value.(*moveState)
		e = e.Prev()
		if !s.logged.IsZero() && now.Sub(s.logged) < l.every {
			continue
		}
		if s.pending == 0 {
			l.forget(s)
			continue
		}
		if !l.take(now) {
			break
		}
		out = append(out, moveLine{move: s.last, suppressed: s.pending - 1})
		s.logged, s.pending = now, 0
	}
	if l.overflow > 0 && (l.overflowLine.IsZero() || now.Sub(l.overflowLine) >= l.every) {
		out = append(out, moveLine{overflow: l.overflow})
		l.overflow, l.overflowLine = 0, now
	}
	return out
}

// pending counts the moves not yet in a line, for the tests.
func (l *moveLimiter) pending() uint64 {
	n := l.overflow
	for _, s := range l.macs {
		n += s.pending
	}
	return n
}

// eventSource is a dataplane that reports events (internal/datapath).
type eventSource interface {
	Events() (moveReader, error)
	EdgeEvents() (moveReader, error)
	EventsLost() (uint64, error)
}

// ringReader reads one of the datapath's rings: the event ring's moves,
// the snoop ring's messages (snoop.go).
type ringReader[T any] interface {
	Read(deadline time.Time) (T, error)
	Close() error
}

type moveReader = ringReader[datapath.Move]

func (d realDataplane) Events() (moveReader, error) { return d.Datapath.Events() }

func (d realDataplane) EdgeEvents() (moveReader, error) { return d.Datapath.EdgeEvents() }

// watchEvents reads the datapath's moves and looks at the episodes' counters
// until ctx is done. The datapath never waits for it: what it cannot keep
// up with is lost, and counted.
func (d *Daemon) watchEvents(ctx context.Context) {
	var rd moveReader
	if d.moves != nil {
		var err error
		if rd, err = d.moves.Events(); err != nil {
			d.log.Warn("mac moves will not be logged", "err", err)
		}
	}
	if rd != nil {
		go func() {
			<-ctx.Done()
			rd.Close() // ends a Read that waits
		}()
	}
	if d.moves != nil {
		go d.watchEdge(ctx)
	}
	lim := newMoveLimiter(moveEvery, moveMACs, moveRate, moveBurst)
	eps := newEpisodes()
	tick := time.Now()
	for ctx.Err() == nil {
		if now := time.Now(); now.Sub(tick) >= eventTick {
			tick = now
			for _, ln := range lim.due(now) {
				d.logMove(ln)
			}
			d.lookAtEpisodes(eps, now)
			d.loopTick(now)
			d.thawTick(now)
			if err := d.makeRoom(); err != nil {
				d.log.Warn("make room in a full table", "err", err)
			}
		}
		if rd == nil {
			select {
			case <-ctx.Done():
			case <-time.After(eventTick):
			}
			continue
		}
		m, ok := readRecord(ctx, d, "event ring", rd.Read, tick.Add(eventTick))
		if !ok {
			continue
		}
		if m.BPDU || m.Loop {
			d.edgeEvent(m) // a guard's report of a build before the edge ring (edge.go)
			continue
		}
		d.overlayMoved(m) // a station moved (to or from an overlay port, perhaps), or is new beside one
		if m.Learn {
			continue
		}
		d.probeOnMove(m)           // a loop makes addresses flap (edge.go)
		d.countMove(m, time.Now()) // past mac_move_limit, frozen (mobility.go)
		if ln, ok := lim.add(m, time.Now()); ok {
			d.logMove(ln)
		}
	}
}

// watchEdge reads the guards' ring (a BPDU on a guarded port, a loop probe
// heard) until ctx is done, apart from the moves: in a loop's storm the
// moves come faster than they are read, and the probe's report, which
// ends the storm, is read at once.
func (d *Daemon) watchEdge(ctx context.Context) {
	rd, err := d.moves.EdgeEvents()
	if err != nil {
		d.log.Warn("BPDU guard and loop detection will not block ports", "err", err)
		return
	}
	go func() {
		<-ctx.Done()
		rd.Close()
	}()
	for ctx.Err() == nil {
		m, ok := readRecord(ctx, d, "edge ring", rd.Read, time.Time{})
		if ok && (m.BPDU || m.Loop) {
			d.edgeEvent(m) // the port is blocked (edge.go)
		}
	}
}

// readRecord reads the next record of a ring (the event, edge or snoop
// ring) until deadline (zero: none); false when there was none, when the
// record was one to skip (a newer build's, logged at debug) or when ctx is
// done, which the caller's loop checks.
func readRecord[T any](ctx context.Context, d *Daemon, ring string, read func(time.Time) (T, error), deadline time.Time) (T, bool) {
	m, err := read(deadline)
	if err != nil && !errors.Is(err, datapath.ErrNoEvent) && ctx.Err() == nil {
		d.log.Debug(ring, "err", err)
	}
	return m, err == nil
}

// logMove names a move's bridge and ports and logs it.
func (d *Daemon) logMove(ln moveLine) {
	if ln.overflow > 0 {
		d.events.emit(ctl.Event{Event: ctl.EventMACMoveOverflow, Count: ln.overflow})
		return
	}
	m := ln.move
	vlan, suppressed := m.VLAN, ln.suppressed
	e := ctl.Event{Event: ctl.EventMACMove, MAC: m.MAC.String(), VLAN: &vlan, Suppressed: &suppressed}
	d.mu.Lock()
	e.Bridge, e.From, e.To = d.moveNames(m)
	d.mu.Unlock()
	d.events.emit(e)
}

// moveNames are the names of a move's bridge and ports; a bridge or port
// gone since is named by its number. Called with d.mu held.
func (d *Daemon) moveNames(m datapath.Move) (bridge, from, to string) {
	var b *bridgeState
	for _, cand := range d.bridges {
		if cand.id == m.Bridge {
			b = cand
		}
	}
	name := func(slot uint16, ifindex uint32) string {
		if b != nil {
			if p := b.portBySlot(slot); p != nil {
				return p.name()
			}
		}
		if datapath.IsPatchIfindex(ifindex) {
			return fmt.Sprintf("patch slot %d", slot)
		}
		return fmt.Sprintf("ifindex %d", ifindex)
	}
	bridge = fmt.Sprintf("bridge %d", m.Bridge)
	if b != nil {
		bridge = b.cfg.Name
	}
	return bridge, name(m.FromSlot, m.FromIfindex), name(m.ToSlot, m.ToIfindex)
}
