// Package ctl is the daemon's control socket: one JSON request per connection
// over a unix socket, one JSON response back, or a stream (capture.go:
// capture, events --follow, and fdb show, fdb.go). The types here are the
// wire format; `trestle show|stats --json` print the Data of a response as
// is, `trestle fdb show --json` the stream's chunks gathered into one array,
// so their field names are part of the interface contract
// (docs/architecture.md; docs/operations.md, "The JSON contract"): every
// boolean is always there, every list is an array (List, VLANList) and
// always there, rates end in _per_second and durations in their unit.
package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/trestle/trestle/internal/problem"
)

// DefaultSocket is where the daemon listens unless told otherwise.
const DefaultSocket = "/run/trestle/trestle.sock"

// SocketPath resolves the socket: the --socket flag, then TRESTLE_SOCKET, then the default.
func SocketPath(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	if s := getenv("TRESTLE_SOCKET"); s != "" {
		return s
	}
	return DefaultSocket
}

// Commands.
const (
	CmdShow      = "show"
	CmdStats     = "stats"
	CmdVLANStats = "stats.vlan"
	CmdFDBShow   = "fdb.show"
	CmdFDBAdd    = "fdb.add"
	CmdFDBDel    = "fdb.del"
	CmdFDBFlush  = "fdb.flush"
	CmdReload    = "reload"
	CmdCapture   = "capture" // a stream (capture.go)
	CmdRuleShow  = "rule.show"
	CmdRuleAdd   = "rule.add"
	CmdRuleDel   = "rule.del"
	CmdStateShow = "state.show"
	CmdNeighShow = "neigh.show" // answers []NeighEntry, of Bridge or of every bridge
	CmdMDBShow   = "mdb.show"   // answers []MDBEntry, of Bridge or of every bridge
	// events: the recent ones; events.follow: those and every one after,
	// a stream (events.go).
	CmdEvents       = "events"
	CmdEventsFollow = "events.follow"
	// Run-time ports (`trestle port add|del|list`, the CNI plugin, the
	// QEMU scripts): port.add takes Bridge, Port (the interface), Args
	// (the port keys of the config as KEY=VALUE) and Owner, and answers
	// once the port forwards; port.del takes Bridge and Port, or Bridge
	// and Owner (every run-time port of that owner); port.list answers
	// []PortEntry, of Bridge's ports or of every bridge's.
	CmdPortAdd  = "port.add"
	CmdPortDel  = "port.del"
	CmdPortList = "port.list"
	// CmdPortEnable lifts a guard's block of port Port of bridge Bridge
	// (bpdu_guard, loop): the answer is the port's PortEntry.
	CmdPortEnable = "port.enable"
)

// Request is what the CLI sends.
type Request struct {
	Cmd    string `json:"cmd"`
	Bridge string `json:"bridge,omitempty"`
	MAC    string `json:"mac,omitempty"`
	Port   string `json:"port,omitempty"`
	VLAN   uint16 `json:"vlan,omitempty"`
	// fdb show and fdb flush: only the entries of this VLAN (0: the
	// untagged ones); nil: of every VLAN. Port is the other filter: only
	// the entries on that port.
	OnlyVLAN *uint16 `json:"only_vlan,omitempty"`
	// capture: "in", "out" or "both" (""), and bytes kept of each frame.
	Direction string `json:"direction,omitempty"`
	Snaplen   int    `json:"snaplen,omitempty"`
	// rule add: the rule as KEY=VALUE arguments, and where it goes (1:
	// first; 0: last); rule del: Index, from 1.
	Args  []string `json:"args,omitempty"`
	Index int      `json:"index,omitempty"`
	// port add and del: who added a run-time port (for CNI: network
	// name, container id and interface name), free text.
	Owner string `json:"owner,omitempty"`
}

// PortEntry is one row of `trestle port list --json`: a port of a bridge,
// where it came from ("file": the config file; "run": added at run time),
// who added it (run-time ports), and its status as `trestle show` gives it.
type PortEntry struct {
	Bridge string `json:"bridge"`
	Origin string `json:"origin"`
	Owner  string `json:"owner,omitempty"`
	PortStatus
}

// Rule is one row of `trestle rule show --json`: a rule of a bridge's
// filter in order (index from 1), with the config's keys, and what it
// decided; then a row with "state" (frames passed as part of a tracked
// connection) and one with "default" (frames no rule matched), last. Off:
// the bridge's filter is off (the rules are kept, not applied).
type Rule struct {
	Bridge    string `json:"bridge"`
	Index     int    `json:"index,omitempty"`
	Action    string `json:"action"`
	EtherType string `json:"ethertype,omitempty"`
	In        string `json:"in,omitempty"`
	Out       string `json:"out,omitempty"`
	Proto     string `json:"proto,omitempty"`
	Src       string `json:"src,omitempty"`
	Dst       string `json:"dst,omitempty"`
	SrcPort   string `json:"src_port,omitempty"`
	DstPort   string `json:"dst_port,omitempty"`
	KeepState bool   `json:"keep_state"`
	SrcMAC    string `json:"src_mac,omitempty"`
	DstMAC    string `json:"dst_mac,omitempty"`
	VLAN      uint16 `json:"vlan,omitempty"`
	ICMPType  *uint8 `json:"icmp_type,omitempty"`
	State     bool   `json:"state"`
	Default   bool   `json:"default"`
	Off       bool   `json:"off"`
	Packets   uint64 `json:"packets"`
	Bytes     uint64 `json:"bytes"`
}

// State is one row of `trestle state show --json`: a tracked connection,
// from the endpoint that opened it to the other. Connections have no
// counters of their own (like conntrack without accounting): the frames
// all connections passed are `rule show`'s "state" row.
type State struct {
	Bridge         string  `json:"bridge"`
	VLAN           uint16  `json:"vlan,omitempty"` // the frames' VLAN: the same endpoints in another VLAN are another connection
	Proto          string  `json:"proto"`
	From           string  `json:"from"`
	To             string  `json:"to"`
	State          string  `json:"state"` // "opening" (not yet seen both ways; TCP: the handshake not complete), "established", "closing" (TCP FIN or RST seen)
	Rule           int     `json:"rule"`  // the rule that opened it, from 1
	AgeSeconds     float64 `json:"age_seconds"`
	IdleSeconds    float64 `json:"idle_seconds"`
	ExpiresSeconds float64 `json:"expires_seconds"`
}

// Response is what the daemon answers. Errors holds a configuration's
// problems one by one, when what failed is a configuration the daemon
// refused (a reload): the CLI lists them (`trestle reload --json`) and
// exits with the status of a refused configuration.
type Response struct {
	Error  string          `json:"error,omitempty"`
	Errors problem.Errors  `json:"errors,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// FDBEntry is one row of `trestle fdb show --json`.
type FDBEntry struct {
	Bridge     string  `json:"bridge"`
	MAC        string  `json:"mac"`
	VLAN       uint16  `json:"vlan"`
	Port       string  `json:"port"`
	Static     bool    `json:"static"`
	AgeSeconds float64 `json:"age_seconds"`
	// Frozen: a static entry the daemon holds because the address moved
	// past its bridge's mac_move_limit (docs/switching.md, "MAC
	// mobility"); released when its window passes or by fdb del.
	Frozen bool `json:"frozen,omitempty"`
	// VTEP: a remote address of an overlay port, behind this VTEP
	// (docs/overlay.md).
	VTEP string `json:"vtep,omitempty"`
	// Stale: a remote address zebra withdrew that is kept until FRR is
	// back, or for a moment in case it is going (docs/overlay.md, "FRR
	// restarts").
	Stale bool `json:"stale,omitempty"`
}

// NeighEntry is one row of `trestle neigh show --json`: an address in one
// VLAN of a bridge, the MAC of the station that holds it, the port it is
// on, where the entry came from (Origin: NeighStatic, NeighLearned, NeighRemote) and
// how long ago it was written (static) or last seen (learned).
type NeighEntry struct {
	Bridge     string  `json:"bridge"`
	IP         string  `json:"ip"`
	MAC        string  `json:"mac"`
	VLAN       uint16  `json:"vlan"`
	Port       string  `json:"port"`
	Origin     string  `json:"origin"`
	AgeSeconds float64 `json:"age_seconds"`
	// VTEP: a remote entry's, the VTEP its station is behind.
	VTEP string `json:"vtep,omitempty"`
}

// MDBEntry is one row of `trestle mdb show --json`: a port's membership
// of a multicast group in one VLAN of a snooping bridge, with its sources
// (IGMPv3 and MLDv2 include mode; empty: any source) and how long ago it
// was last reported; or (Router) a multicast router port of the bridge,
// with no group.
type MDBEntry struct {
	Bridge     string   `json:"bridge"`
	Group      string   `json:"group"`
	VLAN       uint16   `json:"vlan"`
	Port       string   `json:"port"`
	Sources    []string `json:"sources"`
	Router     bool     `json:"router"`
	AgeSeconds float64  `json:"age_seconds"`
}

// A neighbour entry's origins.
const (
	NeighStatic  = "static"  // a port's allowed_ips with its allowed_macs
	NeighLearned = "learned" // seen in the port's ARP or neighbour discovery
	NeighRemote  = "remote"  // another VTEP's station, from its MAC+IP route (the overlay port's; VTEP says which)
)

// PortStats is one port of `trestle stats --json`: its counters (named as
// in bpf/types.h's enum tr_counter: rx_packets, rx_bytes, tx_packets,
// tx_bytes, flooded, learned, moved, unlearned, ...) are fields of the
// port's object beside bridge, port, mode and drops (by reason).
type PortStats struct {
	Bridge   string
	Port     string
	Mode     string
	Counters Counts
	Drops    map[string]uint64
}

// Status is `trestle show --json`.
type Status struct {
	Config string `json:"config"`
	// Persist: the datapath outlives the daemon, pinned at PinDir.
	Persist bool               `json:"persist"`
	PinDir  string             `json:"pin_dir,omitempty"`
	Bridges List[BridgeStatus] `json:"bridges"`
	// Unattached counts frames that reached the datapath on no port: drops by reason.
	Unattached map[string]uint64 `json:"unattached_drops,omitempty"`
}

type BridgeStatus struct {
	Name         string           `json:"name"`
	ID           uint16           `json:"id"`
	VLANAware    bool             `json:"vlan_aware"`
	AgingSeconds float64          `json:"aging_seconds"`
	MaxEntries   int              `json:"max_entries"`
	Entries      int              `json:"entries"`
	Ports        List[PortStatus] `json:"ports"`
	Mirrors      List[Mirror]     `json:"mirrors"`
	// The filter stage: on or not, its running rules' count, and what a
	// frame no rule matches gets (`trestle rule show` lists the rules).
	Filter        bool   `json:"filter"`
	Rules         int    `json:"rules"`
	DefaultAction string `json:"default_action"`
	// NeighSuppress: the switch answers ARP and neighbour discovery for
	// the addresses of its neighbour table (`trestle neigh show`).
	NeighSuppress bool `json:"neigh_suppress"`
	// MulticastSnooping: a group's frames go to its members and the
	// router ports only (trestle mdb show).
	MulticastSnooping bool `json:"multicast_snooping"`
	// MulticastQuerier: the bridge queries while no other querier wins
	// the election over it; Queriers, the querier of each family in each
	// VLAN that snooping knows of, the bridge's own or another.
	MulticastQuerier bool          `json:"multicast_querier"`
	Queriers         List[Querier] `json:"queriers"`
}

// Querier is the IGMP or MLD querier of a VLAN of a snooping bridge, as
// `trestle show` lists it: its address (the bridge's own queries come from
// 0.0.0.0 and from a link-local address), whether it is the bridge's own
// (Own) or heard by a port (Port), and how long it is taken to be there
// without another query.
type Querier struct {
	VLAN           uint16  `json:"vlan"`
	Family         string  `json:"family"` // "igmp" or "mld"
	Address        string  `json:"address"`
	Own            bool    `json:"own"`
	Port           string  `json:"port"` // "" for the bridge's own
	ExpiresSeconds float64 `json:"expires_seconds"`
}

// Mirror is one [[bridge.mirror]] as `trestle show` prints it.
type Mirror struct {
	Name      string       `json:"name"`
	Ports     List[string] `json:"ports"`
	Direction string       `json:"direction"` // "in", "out" or "both"
	To        string       `json:"to"`
	VLANs     VLANList     `json:"vlans"` // [10, "20-29"]; []: every VLAN
	// Active: the span port forwards, so copies reach it.
	Active bool `json:"active"`
}

// Storm is a port's storm control in frames a second (0: no limit).
type Storm struct {
	Broadcast      int `json:"broadcast,omitempty"`
	Multicast      int `json:"multicast,omitempty"`
	UnknownUnicast int `json:"unknown_unicast,omitempty"`
}

type PortStatus struct {
	// Name is what fdb, stats and static entries call the port: its
	// interface, or a patch port's name.
	Name      string `json:"name"`
	Interface string `json:"interface,omitempty"` // "" for a patch port
	// Patch: a patch port's peer bridge. A patch port has no interface,
	// ifindex or mode, and is up while both bridges are configured.
	Patch   string `json:"patch,omitempty"`
	Ifindex int    `json:"ifindex,omitempty"`
	// State is "up" (attached and forwarding), "link-down" (attached, but
	// the interface is down or has no carrier: out of floods, no entries),
	// "blocked" (attached, but blocked by a guard, Why: it takes and sends
	// nothing) or "down" (not attached: see Reason).
	State string `json:"state"`
	// Why: a blocked port's guard, "bpdu_guard" or "loop".
	Why     string `json:"why,omitempty"`
	Mode    string `json:"mode,omitempty"` // "xdp" or "tc" as attached; the configured mode when down
	Config  string `json:"config_mode,omitempty"`
	Reason  string `json:"reason"` // why this mode, or why down
	MaxMACs int    `json:"max_macs"`
	// Port policies: learning (false: no source learned on the port),
	// and at max_macs "drop" or "forward" (new sources unlearned).
	Learning       bool   `json:"learning"`
	MACLimitAction string `json:"mac_limit_action,omitempty"`
	// protected, and which floods leave by the port (each true by default).
	Protected bool `json:"protected"`
	// Locked: takes only sources bound to it (its static entries and
	// AllowedMACs, lower case, colon form) and learns none.
	Locked      bool         `json:"locked"`
	AllowedMACs List[string] `json:"allowed_macs"`
	// IPGuard: its ARP, ND and IP sources must be its AllowedIPs (and the
	// EUI-64 link-local addresses of its AllowedMACs).
	IPGuard bool `json:"ip_guard"`
	// BPDUGuard: a BPDU arriving blocks the port (state blocked, Why
	// bpdu_guard) until `trestle port enable`.
	BPDUGuard  bool         `json:"bpdu_guard"`
	AllowedIPs List[string] `json:"allowed_ips"`
	// RAGuard, DHCPGuard: router advertisements and redirects, and DHCP
	// and DHCPv6 server messages, from the port are dropped.
	RAGuard    bool   `json:"ra_guard"`
	DHCPGuard  bool   `json:"dhcp_guard"`
	Flood      bool   `json:"flood"`
	McastFlood bool   `json:"mcast_flood"`
	BcastFlood bool   `json:"bcast_flood"`
	MACs       int    `json:"macs"`
	Peer       string `json:"peer,omitempty"` // what the daemon did to the veth peer
	// On a VLAN-aware bridge: the access VLAN, or the VLANs a trunk
	// carries ([10, 20, "100-199"]; []: not a trunk) and its native VLAN
	// (0: none).
	VLAN   uint16   `json:"vlan,omitempty"`
	Trunk  VLANList `json:"trunk"`
	Native uint16   `json:"native,omitempty"`
	// NativeTagged: the trunk's native VLAN leaves it tagged; QinQ: an
	// access port that takes frames with a second tag behind a priority
	// tag or an S-tag (others drop them as double_tagged).
	NativeTagged bool `json:"native_tagged"`
	QinQ         bool `json:"qinq"`
	// Storm control, if any; Span names the mirror the port is the span
	// port of, Mirror the mirror that copies its frames.
	Storm  *Storm `json:"storm,omitempty"`
	Span   string `json:"span,omitempty"`
	Mirror string `json:"mirror,omitempty"`
	// Overlay: an overlay port's VNI and what FRR's EVPN holds of it.
	Overlay *Overlay `json:"overlay,omitempty"`
}

// Overlay is an overlay port as show gives it (docs/overlay.md): its VNI,
// this host's VTEP, the VXLAN device's MTU and UDP port, the remote VTEPs
// (those of the flood list, type-3 routes, and of remote MACs, type-2),
// the flood list, and the MACs remote and advertised.
type Overlay struct {
	VNI         uint32       `json:"vni"`
	VTEP        string       `json:"vtep"`
	MTU         int          `json:"mtu,omitempty"`
	DstPort     int          `json:"dstport"`
	RemoteVTEPs int          `json:"remote_vteps"`
	FloodList   List[string] `json:"flood_list"`
	RemoteMACs  int          `json:"remote_macs"`
	LocalMACs   int          `json:"local_macs"`
	// Stale: remote MACs and flood-list VTEPs zebra withdrew that are kept
	// for now; FRRRestarting: zebra exited after withdrawing them, and
	// they are kept until FRR is back.
	Stale         int  `json:"stale"`
	FRRRestarting bool `json:"frr_restarting,omitempty"`
}

// VLANStats is one VLAN of `trestle stats --vlan --json`: frames classified
// into it (rx_packets, rx_bytes), copies sent out of its ports (tx_packets,
// tx_bytes), and frames flooded in it (flooded), as fields of its object
// beside bridge, vlan and ports (the ports that carry it).
type VLANStats struct {
	Bridge   string
	VLAN     uint16
	Ports    []string
	Counters Counts
}

// Handler answers one request; the error becomes Response.Error.
type Handler func(ctx context.Context, req Request) (any, error)

// Server listens on a unix socket.
type Server struct {
	ln      net.Listener
	path    string
	streams map[string]StreamHandler
	// BadRequest, when set, hears of every request that could not be
	// read (not JSON, too large, too slow): the daemon logs them.
	BadRequest func(error)
	// AcceptError, when set, hears of each failure to accept a connection
	// (EMFILE: the process is out of file descriptors) and the pause
	// before the next try: the daemon logs them.
	AcceptError func(err error, retry time.Duration)
}

// Listen creates the socket (and its directory). It replaces a stale socket
// file, never anything else (a mistyped path must not delete a file), and
// refuses to take over a socket a live daemon answers on. The socket is
// created with mode 0600 (a umask while it is bound), so no other user can
// connect, not even for a moment.
func Listen(path string) (*Server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("control socket %s: a %s is there, not a socket: choose another path (it is not removed)", path, kind(fi))
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("control socket %s: another daemon is listening there", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("control socket %s: remove the stale socket: %w", path, err)
		}
	}
	// The umask is the process's: Listen runs before the daemon starts
	// anything that creates files.
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	// The listener unlinks its path when it closes; Close does, once.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	return &Server{ln: ln, path: path}, nil
}

func kind(fi os.FileInfo) string {
	switch t := fi.Mode().Type(); {
	case t == 0:
		return "regular file"
	case t&os.ModeDir != 0:
		return "directory"
	case t&os.ModeSymlink != 0:
		return "symbolic link"
	default:
		return "file of mode " + t.String()
	}
}

// Serve answers requests until Close is called. A failure to accept that
// is not the listener's closing (EMFILE, ENFILE, ENOBUFS: a client that
// opened connections until the process ran out of descriptors) pauses the
// loop, from 5 ms doubling up to a second, and it goes on: a socket that
// stopped for good would leave the datapath with no one to control it.
func (s *Server) Serve(ctx context.Context, h Handler) {
	var pause time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			if s.AcceptError != nil {
				s.AcceptError(err, pause)
			}
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return
			}
			continue
		}
		pause = 0
		go s.handle(ctx, c, h)
	}
}

// maxRequest is the most of a request the daemon reads: a request is a few
// hundred bytes (a rule's arguments are the most), and a client that sends
// more, or never ends, is cut off there with an error, so that a connection
// holds at most this much of the daemon's memory. A client that sends
// nothing is cut off by requestTimeout.
const maxRequest = 64 << 10

const requestTimeout = 30 * time.Second

func (s *Server) handle(ctx context.Context, c net.Conn, h Handler) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(requestTimeout))
	var req Request
	var resp Response
	in := &io.LimitedReader{R: c, N: maxRequest}
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		if in.N == 0 {
			err = fmt.Errorf("longer than %d bytes, the most the daemon reads of one", maxRequest)
		}
		resp.Error = fmt.Sprintf("bad request: %v", err)
		if s.BadRequest != nil {
			s.BadRequest(err)
		}
	} else if sh := s.streams[req.Cmd]; sh != nil {
		s.stream(ctx, c, req, sh)
		return
	} else if data, err := h(ctx, req); err != nil {
		resp.Error = err.Error()
		var refused problem.Errors
		if errors.As(err, &refused) {
			resp.Errors = refused
		}
	} else if resp.Data, err = json.Marshal(data); err != nil {
		resp.Error = fmt.Sprintf("encode answer: %v", err)
	}
	_ = json.NewEncoder(c).Encode(&resp)
}

// Close stops listening and removes the socket file.
func (s *Server) Close() error {
	err := s.ln.Close()
	_ = os.Remove(s.path)
	return err
}

// ErrNoDaemon means no daemon answers on the socket: there is no socket
// file there, or no process listens on it (a daemon that stopped left it
// behind), or it takes no connection. A socket this user may not open is
// not this error: a daemon may well be there.
var ErrNoDaemon = errors.New("no trestle daemon answers")

// DaemonError is the daemon's answer that a request failed: the daemon
// was there and said why (not a socket, connection or decoding problem).
type DaemonError struct{ Msg string }

func (e *DaemonError) Error() string { return e.Msg }

// dial connects to the daemon's socket, saying in the error why it could
// not, in words rather than the system call's.
func dial(path string, d time.Duration) (*net.UnixConn, error) {
	c, err := net.DialTimeout("unix", path, d)
	if err == nil {
		return c.(*net.UnixConn), nil
	}
	var why string
	switch {
	case errors.Is(err, syscall.ENOENT):
		why = "there is no socket there"
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "nothing listens on the socket (a daemon that stopped left it behind)"
	case errors.Is(err, syscall.ENOTSOCK):
		why = "that file is not a socket"
	case errors.Is(err, syscall.EAGAIN), os.IsTimeout(err):
		why = "the socket takes no connection (the daemon is hung, or too busy to accept)"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return nil, fmt.Errorf("connect to %s: permission denied: the daemon's socket is its own user's (root's): run as that user", path)
	default:
		return nil, fmt.Errorf("connect to %s: %s", path, sysText(err))
	}
	return nil, fmt.Errorf("%w at %s: %s", ErrNoDaemon, path, why)
}

// sysText is what a system call's error says, without the Go wrapping
// ("dial unix /run/x: connect: ").
func sysText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	if os.IsTimeout(err) {
		return "timed out"
	}
	return err.Error()
}

// answerError says why no answer to cmd came from the daemon at path.
func answerError(cmd, path string, d time.Duration, err error) error {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return fmt.Errorf("the daemon at %s closed the connection without answering %s (it stopped?)", path, cmd)
	case os.IsTimeout(err):
		return fmt.Errorf("the daemon at %s did not answer %s within %s", path, cmd, d)
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) {
		return fmt.Errorf("the daemon at %s answered %s with something this trestle cannot read (a daemon of another release?)", path, cmd)
	}
	return fmt.Errorf("talk to the daemon at %s (%s): %s", path, cmd, sysText(err))
}

// Call sends one request and decodes the answer's data into out (if non-nil).
func Call(path string, req Request, out any) error {
	return CallWithin(path, req, out, 60*time.Second)
}

// CallWithin is Call that gives up after d (connecting at most 3 s of it):
// for what must not wait long, such as a shell completing a bridge's name.
// A configuration the daemon refused comes back as problem.Errors.
func CallWithin(path string, req Request, out any, d time.Duration) error {
	c, err := dial(path, min(d, 3*time.Second))
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	if err := json.NewEncoder(c).Encode(&req); err != nil {
		return answerError(req.Cmd, path, d, err)
	}
	var resp Response
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return answerError(req.Cmd, path, d, err)
	}
	if len(resp.Errors) > 0 {
		return resp.Errors
	}
	if resp.Error != "" {
		return &DaemonError{Msg: resp.Error}
	}
	if out != nil && len(resp.Data) > 0 {
		if err := json.Unmarshal(resp.Data, out); err != nil {
			return answerError(req.Cmd, path, d, err)
		}
	}
	return nil
}
