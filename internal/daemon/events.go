package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/trestle/trestle/internal/ctl"
)

// Events: what happens to the switch that an operator wants to hear of
// without polling counters. Each is one log line (key=value, event=KIND
// first) and one entry of the recent events `trestle events` shows:
//
//   - mac_move: an address moved between two ports of a bridge; the
//     datapath reports each move (moves.go), and each address gets at most
//     one line every moveEvery, with the moves it stood for (suppressed).
//   - port_up, port_down: a port started or stopped forwarding, once per
//     change of state, whatever the number of reconciles (portEvents);
//     port_blocked: a guard blocked it (edge.go).
//   - table_full, mac_limit and their _end: once when a bridge's table
//     starts refusing addresses or a port reaches max_macs, once when it
//     has been quiet for a while, with the frames in between (episodes.go).

// maxRecentEvents is how many events the daemon keeps for `trestle events`.
const maxRecentEvents = 1000

// followBuffer is how many events a `trestle events --follow` may fall
// behind by before the daemon gives up on it.
const followBuffer = 1024

// eventLog logs events and keeps the recent ones. It is safe for any
// goroutine; it takes no lock but its own, so callers may hold d.mu.
type eventLog struct {
	log *slog.Logger

	mu     sync.Mutex
	recent []ctl.Event // a ring: the oldest at next once full
	next   int
	subs   map[*eventSub]bool
	// For the metrics: events logged and moves not logged one by one, by
	// kind, since the daemon started.
	logged     map[string]uint64
	suppressed map[string]uint64
}

// eventSub is one `trestle events --follow`.
type eventSub struct {
	ch chan ctl.Event
	// behind is closed when ch was full: the follower missed events.
	behind chan struct{}
	missed bool
}

func newEventLog(log *slog.Logger) *eventLog {
	return &eventLog{log: log, subs: map[*eventSub]bool{}, logged: map[string]uint64{}, suppressed: map[string]uint64{}}
}

// eventKinds are every kind, in the order the metrics list them.
var eventKinds = []string{ctl.EventMACMove, ctl.EventMACMoveOverflow, ctl.EventPortUp, ctl.EventPortDown, ctl.EventPortBlocked,
	ctl.EventTableFull, ctl.EventTableFullEnd, ctl.EventMACLimit, ctl.EventMACLimitEnd, ctl.EventGuard, ctl.EventGuardEnd,
	ctl.EventMACFrozen, ctl.EventMACFrozenEnd, ctl.EventNeighRefused}

// eventMessages are the log lines' messages, and their levels.
var eventMessages = map[string]struct {
	msg   string
	level slog.Level
}{
	ctl.EventMACMove:         {"mac moved", slog.LevelInfo},
	ctl.EventMACMoveOverflow: {"mac moves not logged one by one: more addresses moved than the log follows", slog.LevelWarn},
	ctl.EventPortUp:          {"port up", slog.LevelInfo},
	ctl.EventPortDown:        {"port down", slog.LevelWarn},
	ctl.EventPortBlocked:     {"port blocked", slog.LevelWarn},
	ctl.EventTableFull:       {"table full: new addresses are not learned", slog.LevelWarn},
	ctl.EventTableFullEnd:    {"table full: episode over", slog.LevelInfo},
	ctl.EventMACLimit:        {"mac limit reached: new addresses are not learned", slog.LevelWarn},
	ctl.EventMACLimitEnd:     {"mac limit: episode over", slog.LevelInfo},
	ctl.EventGuard:           {"a port's guard drops frames", slog.LevelWarn},
	ctl.EventGuardEnd:        {"guard: episode over", slog.LevelInfo},
	ctl.EventMACFrozen:       {"address frozen: it moved past mac_move_limit", slog.LevelWarn},
	ctl.EventNeighRefused:    {"neighbour not learned: a port's claim of an address was refused", slog.LevelWarn},
	ctl.EventMACFrozenEnd:    {"address released: its mac_move_window passed", slog.LevelInfo},
}

// emit logs an event, keeps it, and passes it to every follower. Its time
// is the log line's.
func (l *eventLog) emit(e ctl.Event) {
	e.Time = time.Now()
	m, ok := eventMessages[e.Event]
	if !ok {
		m.msg, m.level = e.Event, slog.LevelInfo
	}
	// The log line carries the event's own time.
	if h := l.log.Handler(); h.Enabled(context.Background(), m.level) {
		r := slog.NewRecord(e.Time, m.level, m.msg, 0)
		r.Add(e.Fields()...)
		_ = h.Handle(context.Background(), r)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recent) < maxRecentEvents {
		l.recent = append(l.recent, e)
	} else {
		l.recent[l.next] = e
		l.next = (l.next + 1) % maxRecentEvents
	}
	l.logged[e.Event]++
	if e.Suppressed != nil {
		l.suppressed[e.Event] += *e.Suppressed
	}
	if e.Event == ctl.EventMACMoveOverflow {
		l.suppressed[ctl.EventMACMove] += e.Count
	}
	for s := range l.subs {
		select {
		case s.ch <- e:
		default:
			if !s.missed {
				s.missed = true
				close(s.behind)
			}
		}
	}
}

// recentLocked are the kept events, oldest first.
func (l *eventLog) recentLocked() []ctl.Event {
	out := make([]ctl.Event, 0, len(l.recent))
	out = append(out, l.recent[l.next:]...)
	return append(out, l.recent[:l.next]...)
}

func (l *eventLog) snapshot() []ctl.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recentLocked()
}

// follow returns the kept events and a follower that gets every event
// after them, none missed and none twice.
func (l *eventLog) follow() ([]ctl.Event, *eventSub) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &eventSub{ch: make(chan ctl.Event, followBuffer), behind: make(chan struct{})}
	l.subs[s] = true
	return l.recentLocked(), s
}

func (l *eventLog) unfollow(s *eventSub) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.subs, s)
}

// counts are the metrics' numbers: events logged, moves suppressed.
func (l *eventLog) counts() (logged, suppressed map[string]uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	logged, suppressed = map[string]uint64{}, map[string]uint64{}
	for k, v := range l.logged {
		logged[k] = v
	}
	for k, v := range l.suppressed {
		suppressed[k] = v
	}
	return logged, suppressed
}

// eventsStream serves `trestle events --follow`.
func (d *Daemon) eventsStream(ctx context.Context, _ ctl.Request, s *ctl.Stream) (err error) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("an events stream failed inside the daemon", "panic", r)
			err = fmt.Errorf("events: internal error: %v", r)
		}
	}()
	recent, sub := d.events.follow()
	defer d.events.unfollow(sub)
	if err := s.Header(ctl.EventsHeader{Events: recent}); err != nil {
		return nil // the client is gone
	}
	for {
		select {
		case e := <-sub.ch:
			if s.Event(e) != nil || s.Flush() != nil {
				return nil
			}
		case <-sub.behind:
			_ = s.EndEvents(ctl.EventsEnd{Error: fmt.Sprintf("the client fell %d events behind and missed some: follow again", followBuffer)})
			return nil
		case <-s.Done():
			_ = s.EndEvents(ctl.EventsEnd{})
			return nil
		case <-ctx.Done():
			_ = s.EndEvents(ctl.EventsEnd{Error: "the daemon is stopping"})
			return nil
		}
	}
}

// portSnap is what a port's events are told from: its state before an
// apply and after.
type portSnap struct {
	state   string
	mode    string
	ifindex int
	why     string
}

type portID struct{ bridge, key string }

// portStates are the states of every port of the model.
func (d *Daemon) portStates() map[portID]portSnap {
	out := map[portID]portSnap{}
	for name, b := range d.bridges {
		for _, p := range b.ports {
			out[portID{name, p.key()}] = portSnap{p.state(), string(p.mode), p.ifindex, p.why}
		}
	}
	return out
}

// portEvents tells what changed in the ports' states since before: a port
// that starts forwarding (or moves to another mode or interface while it
// does) is port_up, one that stops, or enters the config not forwarding,
// is port_down. A down port whose reason changes is no new event (the
// episode goes on), but the log says why. Called with d.mu held, at the
// end of every apply, so that a reconcile that changes nothing says
// nothing.
func (d *Daemon) portEvents(before map[portID]portSnap) {
	d.pruneBlocks()
	bs, _ := d.sortedBridges("")
	for _, b := range bs {
		for _, p := range b.ports {
			now := portSnap{p.state(), string(p.mode), p.ifindex, p.why}
			was, had := before[portID{b.cfg.Name, p.key()}]
			if had && was == now {
				continue
			}
			e := ctl.Event{Bridge: b.cfg.Name, Port: p.name(), State: now.state, Mode: now.mode, Reason: now.why}
			switch {
			case now.state == stateBlocked:
				if had && was.state == stateBlocked {
					continue
				}
				e.Event, e.Why, e.Reason = ctl.EventPortBlocked, p.blocked, d.blockReason(b, p)
			case now.state == stateUp:
				if had && was.state == stateUp && was.mode == now.mode && was.ifindex == now.ifindex {
					continue // its reason's wording changed, nothing else
				}
				e.Event = ctl.EventPortUp
				if !p.cfg.IsPatch() {
					e.Ifindex = now.ifindex
				}
			case !had || was.state != now.state:
				e.Event = ctl.EventPortDown
			default:
				if was.why != now.why {
					d.log.Info("port still down", "bridge", b.cfg.Name, "port", p.name(), "state", now.state, "reason", now.why)
				}
				continue
			}
			if now.state == stateLinkDown {
				e.Reason = "its interface is down or has no carrier"
			}
			d.events.emit(e)
		}
	}
}

// recentEvents answers `trestle events`: the kept events, oldest first.
func (d *Daemon) recentEvents() []ctl.Event { return d.events.snapshot() }
