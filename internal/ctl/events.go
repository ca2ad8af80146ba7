package ctl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Events: what the daemon logged of the switch's life (addresses that
// moved, ports that went up or down, tables and port limits that filled),
// as `trestle events` shows them. CmdEvents answers with the recent ones,
// oldest first; CmdEventsFollow is a stream (capture.go): its header holds
// the recent ones, and each event logged from then on follows as a
// message of its own, until the client stops.

// Event kinds.
const (
	// An address moved to another port of its bridge: mac, vlan, from,
	// to; suppressed counts the other moves of the address since its last
	// line, not logged one by one (at most one line an address every few
	// seconds).
	EventMACMove = "mac_move"
	// More addresses moved than the per-address lines follow: count moves
	// of addresses forgotten before their line was due.
	EventMACMoveOverflow = "mac_move_overflow"
	// A port started forwarding (state up: mode, reason), or stopped
	// (state link-down: attached, but its interface is down or has no
	// carrier; state down: not attached, reason says why).
	EventPortUp   = "port_up"
	EventPortDown = "port_down"
	// A port was blocked (state blocked): it stays attached and forwards
	// nothing. why says what blocked it: bpdu_guard (a BPDU came in by
	// it: mac is its source) or loop (loop_detect heard the bridge's own
	// probe come back by it: from is the port it was sent out of); reason
	// says it in words. bpdu_guard lasts until `trestle port enable`, loop
	// until the bridge's loop_retry has passed; either ends with port_up.
	EventPortBlocked = "port_blocked"
	// A bridge's table refuses new addresses: forwarded unlearned (issue
	// 29; dropped on a VLAN-aware bridge) (count: frames refused in the
	// first look). Its _end is the episode's end: none for a while; count
	// is every one of the episode.
	EventTableFull    = "table_full"
	EventTableFullEnd = "table_full_end"
	// A port is at its max_macs: frames from new addresses are dropped or
	// forwarded unlearned (action). Its _end, as table_full_end's.
	EventMACLimit    = "mac_limit"
	EventMACLimitEnd = "mac_limit_end"
	// A port's guard (ip_guard, ra_guard, dhcp_guard) drops frames: reason
	// is the drop reason, count the frames of the first look. Its _end,
	// as table_full_end's: a tenant spoofing, or a router or DHCP server
	// on a port that should have none.
	EventGuard    = "guard"
	EventGuardEnd = "guard_end"
	// An address moved more than its bridge's mac_move_limit times within
	// mac_move_window (count: its moves, limit, seconds: the window): it
	// is held as a static entry on port, the port it was on before the
	// moves began, for the window; reason says it in words. Its _end: the
	// window passed, the address is learned where it is again.
	EventMACFrozen    = "mac_frozen"
	EventMACFrozenEnd = "mac_frozen_end"
	// A station's claim of an address (its ARP, neighbour discovery or a
	// DHCP answer for it) that a neigh_suppress bridge did not learn: ip, mac
	// (the claimer), vlan, port (the port it came in by), why (spoofed,
	// foreign_mac, address, ip_guard, static, held, port_limit,
	// table_full, dhcp_guard) and reason in words. At most one a minute
	// for one address and MAC, and ten a second of all; the metric counts
	// every one.
	EventNeighRefused = "neigh_refused"
)

// Event is one event, as `trestle events --json` prints it: one object a
// line. Fields an event kind has no use for are left out.
type Event struct {
	Time   time.Time `json:"time"`
	Event  string    `json:"event"`
	Bridge string    `json:"bridge,omitempty"`
	Port   string    `json:"port,omitempty"`
	// mac_move.
	MAC        string  `json:"mac,omitempty"`
	VLAN       *uint16 `json:"vlan,omitempty"` // 0: untagged
	From       string  `json:"from,omitempty"`
	To         string  `json:"to,omitempty"`
	Suppressed *uint64 `json:"suppressed,omitempty"`
	// neigh_refused: the address claimed.
	IP string `json:"ip,omitempty"`
	// port_up, port_down: the port's state as `trestle show` says it
	// (up, link-down, down), its mode (xdp, tc, patch) and why.
	State   string `json:"state,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Ifindex int    `json:"ifindex,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// port_blocked: what blocked the port (bpdu_guard, loop).
	Why string `json:"why,omitempty"`
	// table_full, mac_limit and their ends: frames dropped (or, with
	// mac_limit action forward, forwarded unlearned), and the episode's
	// length; mac_move_overflow: moves.
	Count   uint64  `json:"count,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	Action  string  `json:"action,omitempty"`
	Limit   int     `json:"limit,omitempty"` // table_full: max_entries; mac_limit: max_macs
}

// Fields are the event's kind ("event") and the fields it has, as
// alternating keys and values in the JSON's names and order: the daemon's
// log line and `trestle events`' text are made of them.
func (e Event) Fields() []any {
	a := []any{"event", e.Event}
	str := func(k, v string) {
		if v != "" {
			a = append(a, k, v)
		}
	}
	str("bridge", e.Bridge)
	str("port", e.Port)
	str("mac", e.MAC)
	if e.VLAN != nil {
		a = append(a, "vlan", *e.VLAN)
	}
	str("from", e.From)
	str("to", e.To)
	if e.Suppressed != nil {
		a = append(a, "suppressed", *e.Suppressed)
	}
	str("ip", e.IP)
	str("state", e.State)
	str("mode", e.Mode)
	if e.Ifindex != 0 {
		a = append(a, "ifindex", e.Ifindex)
	}
	str("reason", e.Reason)
	str("why", e.Why)
	if e.Count != 0 {
		a = append(a, "count", e.Count)
	}
	if e.Seconds != 0 {
		a = append(a, "seconds", e.Seconds)
	}
	str("action", e.Action)
	if e.Limit != 0 {
		a = append(a, "limit", e.Limit)
	}
	return a
}

// EventsHeader answers CmdEventsFollow: the recent events, then the stream.
type EventsHeader struct {
	Events []Event `json:"events"`
}

// EventsEnd is the last message of an events stream.
type EventsEnd struct {
	Error string `json:"error,omitempty"`
}

// Event sends one event of a stream (buffered: Flush sends what is held).
func (s *Stream) Event(e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return s.message(msgEvent, b)
}

// EndEvents sends the last message of an events stream.
func (s *Stream) EndEvents(e EventsEnd) error { return s.end(e) }

// EventsClient is the CLI's side of `trestle events --follow`.
type EventsClient struct {
	c      *net.UnixConn
	r      *bufio.Reader
	Header EventsHeader
}

// FollowEvents asks the daemon at path for its events and reads the header.
func FollowEvents(path string) (*EventsClient, error) {
	conn, r, err := openStream(path, Request{Cmd: CmdEventsFollow})
	if err != nil {
		return nil, err
	}
	c := &EventsClient{c: conn.UnixConn, r: r}
	if err := json.Unmarshal(conn.header, &c.Header); err != nil {
		conn.Close()
		return nil, unreadable("the answer to events")
	}
	return c, nil
}

// Next waits for the next event, or the end (then nothing follows).
func (c *EventsClient) Next() (*Event, *EventsEnd, error) {
	kind, b, err := readMessage(c.r)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil, errors.New("events: the daemon ended the stream without its end (it stopped?)")
		}
		return nil, nil, fmt.Errorf("events: %w", err)
	}
	switch kind {
	case msgEvent:
		var e Event
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, nil, unreadable("an event")
		}
		return &e, nil, nil
	case msgEnd:
		var e EventsEnd
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, nil, unreadable("the end of the events")
		}
		return nil, &e, nil
	}
	return nil, nil, fmt.Errorf("events: message of unknown kind %d", kind)
}

// Stop asks the daemon to end the stream.
func (c *EventsClient) Stop() error { return c.c.CloseWrite() }

// Close drops the connection.
func (c *EventsClient) Close() error { return c.c.Close() }
