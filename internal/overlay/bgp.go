package overlay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// BGP's word on a withdrawal (docs/overlay.md, "FRR restarts").
//
// FRR 8.4's bgpd is no graceful-restart helper for EVPN: it counts a
// session's address families for graceful restart with
// FOREACH_AFI_SAFI_NSF, which stops at SAFI_MPLS_VPN, so an EVPN session
// is never in NSF mode; when a peer's session goes (its FRR restarting),
// bgp_clear_route_node unimports and removes the peer's EVPN routes at
// once, and zebra takes its MACs and its flood-list entry off the vxlan
// device, whatever `bgp graceful-restart` and `preserve-fw-state` say
// (FRR 10.6 counts EVPN). From the kernel, that looks the same as the
// peer withdrawing its VNI over a live session (its `trestle down`), which
// must go at once. bgpd knows which it was: a Sessions answers it from
// bgpd's own state, and the Manager keeps a withdrawn VTEP's entries while
// the session that carried them is away (Settle).

// Sessions says whether the BGP session that carried a remote VTEP's
// routes went.
type Sessions interface {
	// Away says whether the session that carried vtep's routes went at
	// or after since, when its routes were withdrawn, and is not back
	// (or back for less than about HoldQuiet, its routes still coming):
	// the VTEP's stale entries are kept. False when it does not know (the
	// VTEP's peer unknown, bgpd never answered): they go after
	// StaleWait.
	Away(vtep netip.Addr, since time.Time) bool
}

// SetSessions gives the Manager BGP's word on withdrawals (nil: none, a
// withdrawn entry goes after StaleWait).
func (m *Manager) SetSessions(s Sessions) {
	m.mu.Lock()
	m.sessions = s
	m.mu.Unlock()
}

// BGPNeeds says what the Manager would ask of a Sessions now: whether
// something is stale (Away will be asked), and whether a flood list has a
// remote VTEP that known (the Sessions' knowledge) does not know, whose
// session the caller should learn before it is withdrawn.
func (m *Manager) BGPNeeds(known func(netip.Addr) bool) (stale, unknown bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range m.vnis {
		stale = stale || len(v.stale) > 0 || len(v.staleFlood) > 0
		for a := range v.flood {
			if _, held := v.staleFlood[a]; !held && !known(a) {
				unknown = true
			}
		}
	}
	return stale, unknown
}

// sessionSlack: bgpd gives the time of a session's last change in whole
// seconds, so a change up to this long before a withdrawal is taken as
// its cause.
const sessionSlack = 2 * time.Second

// BGPView is a Sessions from bgpd's answers (Update): which peers'
// sessions carried each remote VTEP's type-3 route (kept when the route
// goes, for HoldLimit: it goes with the sessions), and each peer's session
// state.
type BGPView struct {
	mu       sync.Mutex
	peerOf   map[netip.Addr]vtepPeer
	peers    map[string]bgpPeer
	at       time.Time // of the last query, answered or not
	answered bool      // bgpd answered once
	failed   error     // the last query's when bgpd did not answer, else nil
	// unreadable: the last query's answer could not be read (ErrUnreadable):
	// bgpd is there, but its word is not known, so nothing is held.
	unreadable error
}

// vtepPeer is the peers whose sessions carried a VTEP's type-3 route
// (two route reflectors: two), last seen at seen.
type vtepPeer struct {
	peers []string
	seen  time.Time
}

// ErrNotReady is bgpd answering without its EVPN sessions: no BGP
// instance (the summary is {} and the routes nothing), or none with an
// EVPN neighbour (the summary is {}), as while a bgpd that was just
// started is given its configuration (FRR's integrated configuration
// comes after the daemons, from vtysh -b). It is taken as bgpd's silence,
// not as an answer.
var ErrNotReady = errors.New("bgpd has no EVPN neighbour (starting?)")

// ErrUnreadable wraps the error of an answer of bgpd that cannot be read
// (too long, no JSON, not the JSON expected): unlike bgpd's silence, it
// holds nothing.
var ErrUnreadable = errors.New("unreadable answer")

// bgpPeer is a session as bgpd gave it: up (Established) or not, and
// since when (bgpd's last change of it, to a second).
type bgpPeer struct {
	up      bool
	changed time.Time
}

// NewBGPView returns a view with no answer yet.
func NewBGPView() *BGPView { return &BGPView{} }

// Update enters a query of bgpd made at at: its answers to `show bgp
// l2vpn evpn summary json` and `show bgp l2vpn evpn route type multicast
// json`, or the error that kept it from answering. It returns the error
// of reading the answers, if any (entered as a failed query).
//
// An answer it cannot read (its error, or err, wraps ErrUnreadable) is
// bgpd's, but says nothing: until one it can read, Away is false (the
// withdrawn entries go after StaleWait). Any other err is bgpd not
// answering.
func (b *BGPView) Update(at time.Time, summary, routes []byte, err error) error {
	var peers map[string]bgpPeer
	var peerOf map[netip.Addr][]string
	if err == nil {
		peers, err = parseSummary(at, summary)
	}
	if err == nil {
		peerOf, err = parseIMET(routes)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.at, b.failed, b.unreadable = at, nil, nil
	switch {
	case errors.Is(err, ErrUnreadable):
		b.unreadable = err
		return err
	case err != nil:
		b.failed = err
		return err
	}
	b.peers, b.answered = peers, true
	// A VTEP keeps its peer when its route goes (its session went with
	// it), until it has been gone for HoldLimit.
	if b.peerOf == nil {
		b.peerOf = map[netip.Addr]vtepPeer{}
	}
	for vtep, ps := range peerOf {
		b.peerOf[vtep] = vtepPeer{peers: ps, seen: at}
	}
	for vtep, p := range b.peerOf {
		if at.Sub(p.seen) >= HoldLimit {
			delete(b.peerOf, vtep)
		}
	}
	return nil
}

// Knows says whether the view knows which peer carried vtep.
func (b *BGPView) Knows(vtep netip.Addr) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.peerOf[vtep]
	return ok
}

// Answering says whether bgpd answered once, and whether its last query
// did (an unreadable answer is an answer).
func (b *BGPView) Answering() (once, now bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.answered, b.failed == nil && b.answered
}

// Away is Sessions' Away from the last query:
//   - before any answer: false (the withdrawal is the fabric's);
//   - no query since the withdrawal yet: true (one is due);
//   - bgpd answered once and the last query did not: this host's bgpd is
//     away (restarting alone: zebra withdraws every route and stays),
//     true;
//   - its last answer could not be read: false (nothing is known);
//   - the VTEP's peer unknown: false;
//   - else whether every session that carried the VTEP's route (two
//     route reflectors' sessions: both) went (sessionAway): with one of
//     them live, the route was withdrawn over it.
func (b *BGPView) Away(vtep netip.Addr, since time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.answered:
		return false
	case b.at.Before(since):
		return true
	case b.failed != nil:
		return true
	case b.unreadable != nil:
		return false
	}
	vp, ok := b.peerOf[vtep]
	if !ok || len(vp.peers) == 0 {
		return false
	}
	for _, peer := range vp.peers {
		if !b.sessionAway(peer, since) {
			return false
		}
	}
	return true
}

// sessionAway says whether peer's session went at or after since:
//   - no longer a neighbour: false;
//   - down: true;
//   - up, and last changed (came up) at or after since (less
//     sessionSlack): it went with the withdrawal and is back; true for
//     HoldQuiet after it came up (a second more: bgpd's times are whole
//     seconds), while the peer's routes come back; else false, the
//     peer withdrew them over a live session.
//
// Called with b.mu held.
func (b *BGPView) sessionAway(peer string, since time.Time) bool {
	p, ok := b.peers[peer]
	switch {
	case !ok:
		return false
	case !p.up:
		return true
	}
	return !p.changed.Before(since.Add(-sessionSlack)) && b.at.Sub(p.changed) < HoldQuiet+time.Second
}

// parseSummary reads `show bgp l2vpn evpn summary json` answered at at:
// each peer's state, and since when (peerUptimeMsec: the time since its
// session last went up or down).
func parseSummary(at time.Time, out []byte) (map[string]bgpPeer, error) {
	var s struct {
		Peers map[string]struct {
			State    string `json:"state"`
			UptimeMs *int64 `json:"peerUptimeMsec"`
		} `json:"peers"`
	}
	if err := json.Unmarshal(out, &s); err != nil {
		return nil, fmt.Errorf("bgpd's EVPN summary: %w: %w", ErrUnreadable, err)
	}
	if s.Peers == nil {
		return nil, fmt.Errorf("bgpd's EVPN summary: %w", ErrNotReady)
	}
	peers := make(map[string]bgpPeer, len(s.Peers))
	for addr, p := range s.Peers {
		if p.UptimeMs == nil || *p.UptimeMs < 0 {
			return nil, fmt.Errorf("bgpd's EVPN summary: %w: peer %s has no peerUptimeMsec", ErrUnreadable, addr)
		}
		// Past maxUptime, a time.Duration would wrap: a session up
		// that long is up since long before any withdrawal.
		up := min(*p.UptimeMs, maxUptime.Milliseconds())
		peers[peerKey(addr)] = bgpPeer{up: p.State == "Established", changed: at.Add(-time.Duration(up) * time.Millisecond)}
	}
	return peers, nil
}

// peerKey is a peer's name as both answers give it: an address without
// its zone (a link-local peer's), IPv4 unmapped; an interface name (BGP
// unnumbered, in the summary) as it is.
func peerKey(s string) string {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.WithZone("").Unmap().String()
	}
	return s
}

// maxUptime bounds a session's uptime as bgpd gives it (a year).
const maxUptime = 365 * 24 * time.Hour

// parseIMET reads `show bgp l2vpn evpn route type multicast json`: the
// peers each remote VTEP's type-3 route came from (its paths' peerId, one
// path a peer: two route reflectors give two; this host's own routes have
// none), each VTEP's sorted.
func parseIMET(out []byte) (map[netip.Addr][]string, error) {
	var rds map[string]json.RawMessage
	if err := json.Unmarshal(out, &rds); err != nil {
		return nil, fmt.Errorf("bgpd's EVPN type-3 routes: %w: %w", ErrUnreadable, err)
	}
	peerOf := map[netip.Addr][]string{}
	for _, raw := range rds {
		var rd map[string]json.RawMessage
		if json.Unmarshal(raw, &rd) != nil {
			continue // numPrefix, numPaths
		}
		for key, raw := range rd {
			if !strings.HasPrefix(key, "[3]:") {
				continue
			}
			var r struct {
				Paths [][]struct {
					IP     string `json:"ip"`
					PeerID string `json:"peerId"`
				} `json:"paths"`
			}
			if err := json.Unmarshal(raw, &r); err != nil {
				return nil, fmt.Errorf("bgpd's EVPN type-3 route %s: %w: %w", key, ErrUnreadable, err)
			}
			for _, ps := range r.Paths {
				for _, p := range ps {
					vtep, err1 := netip.ParseAddr(p.IP)
					if _, err2 := netip.ParseAddr(p.PeerID); err1 != nil || err2 != nil {
						continue // this host's own ("(unspec)")
					}
					vtep = vtep.Unmap()
					if peer := peerKey(p.PeerID); !slices.Contains(peerOf[vtep], peer) {
						peerOf[vtep] = append(peerOf[vtep], peer)
					}
				}
			}
		}
	}
	for _, ps := range peerOf {
		slices.Sort(ps)
	}
	return peerOf, nil
}

// maxAnswer bounds what the daemon reads of vtysh's answer (its standard
// output), and maxStderr what it keeps of its complaints. Type-3 routes
// take about 400 bytes each (a VTEP a VNI), the summary about 500 a peer:
// 64 MiB is some 150,000 of them.
const (
	maxAnswer = 64 << 20
	maxStderr = 4 << 10
)

// ErrNoBGPd is the error of Vtysh when bgpd has no vty socket in the
// directory: bgpd is not running there (or FRR is not installed), and
// vtysh is not started.
var ErrNoBGPd = errors.New("no bgpd vty socket")

// Vtysh asks bgpd, through vtysh and FRR's vty sockets in dir, what a
// BGPView's Update takes: its EVPN summary and type-3 routes. It starts
// no vtysh when dir has no bgpd.vty (ErrNoBGPd): a host without FRR asks
// for nothing but a stat. vtysh is killed when ctx ends, and waited for
// (a second at most for its output once killed); it writes no command
// history (VTYSH_HISTFILE): asked four times a second, it would rewrite
// root's ~/.history_frr each time. An answer longer than maxAnswer, or
// not the two JSON documents asked for, is an error that wraps
// ErrUnreadable.
func Vtysh(ctx context.Context, dir string) (summary, routes []byte, err error) {
	return vtysh(ctx, "vtysh", dir, maxAnswer)
}

// vtysh is Vtysh with bin for vtysh and limit for maxAnswer (tests).
func vtysh(ctx context.Context, bin, dir string, limit int) (summary, routes []byte, err error) {
	sock := filepath.Join(dir, "bgpd.vty")
	if _, err := os.Stat(sock); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNoBGPd, err)
	}
	cmd := exec.CommandContext(ctx, bin, "--vty_socket", dir, "-d", "bgpd",
		"-c", "show bgp l2vpn evpn summary json", "-c", "show bgp l2vpn evpn route type multicast json")
	cmd.Env = append(os.Environ(), "VTYSH_HISTFILE=/dev/null")
	cmd.WaitDelay = time.Second
	out := &capped{max: limit}
	stderr := &capped{max: maxStderr}
	cmd.Stdout, cmd.Stderr = out, stderr
	err = cmd.Run()
	switch {
	case out.over && err == nil:
		return nil, nil, fmt.Errorf("vtysh --vty_socket %s -d bgpd: %w: longer than %d bytes", dir, ErrUnreadable, limit)
	case err != nil:
		return nil, nil, fmt.Errorf("vtysh --vty_socket %s -d bgpd: %w: %s", dir, err, strings.TrimSpace(stderr.b.String()))
	}
	// Two JSON documents, one after the other.
	dec := json.NewDecoder(bytes.NewReader(out.b.Bytes()))
	var s, r json.RawMessage
	for _, doc := range []struct {
		what string
		v    *json.RawMessage
	}{{"the EVPN summary", &s}, {"the EVPN type-3 routes", &r}} {
		switch err := dec.Decode(doc.v); {
		case errors.Is(err, io.EOF):
			// Nothing: bgpd has no BGP instance (yet).
			return nil, nil, fmt.Errorf("vtysh --vty_socket %s -d bgpd: no answer for %s: %w", dir, doc.what, ErrNotReady)
		case err != nil:
			return nil, nil, fmt.Errorf("vtysh --vty_socket %s -d bgpd: %s: %w: %w", dir, doc.what, ErrUnreadable, err)
		}
	}
	return s, r, nil
}

// capped keeps the first max bytes written to it, and says whether more
// came (over); it takes the rest without keeping it, so that the writer
// is not blocked.
type capped struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); len(p) > room {
		c.over = true
		c.b.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.b.Write(p)
}
