package overlay

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Stale entries: an FRR restart without loss (docs/overlay.md, "FRR
// restarts").
//
// zebra 8.4 takes every remote MAC and every flood-list VTEP of every VNI
// off the vxlan devices when bgpd leaves it (zebra_evpn_cfg_cleanup, run
// on the BGP client's close, which a zebra that stops goes through too),
// and writes them again only once BGP has converged; neither -K nor -r
// keeps them (both are about the RIB's routes). Meanwhile the vxlan device
// would drop every frame to a remote MAC. So trestle keeps what zebra
// withdraws, marked stale, and decides later whether FRR went away:
//
//   - each remote MAC and flood-list VTEP zebra withdraws is written back
//     on the vxlan device at once (SetStale: NUD_PERMANENT, which zebra
//     ignores when it reads the FDB) and stays in trestle's table;
//   - when zebra then exits (ZebraExited: its nexthop objects go, the last
//     thing a stopping zebra does to the kernel) having withdrawn every
//     flood-list VTEP it had, FRR is restarting: the Manager holds every
//     stale entry until zebra writes remote MACs again and then falls
//     quiet for HoldQuiet (BGP converged), or for HoldLimit at most;
//   - otherwise, a stale entry goes after StaleWait, unless bgpd says the
//     BGP session that carried it went (Sessions, bgp.go: a peer's FRR
//     restarting, which FRR 8.4's bgpd does not hold for EVPN, or this
//     host's bgpd restarting alone): then it is kept while the session is
//     away, HoldLimit at most. A route a peer withdrew over a live
//     session (its VNI removed) goes after StaleWait.
//
// When a hold ends, the stale entries zebra did not write again go, from
// the table and the vxlan device: what the fabric no longer has. A stale
// flood-list VTEP is deleted then too: zebra writes back a VTEP it has
// when its entry is deleted (zebra_vxlan_check_readd_vtep), since it
// cannot be seen writing one that is there already.

// How long stale entries live.
const (
	// StaleWait: a withdrawn entry is kept this long for ZebraExited to
	// come; after it, a withdrawal no restart followed holds.
	StaleWait = 1500 * time.Millisecond
	// HoldQuiet: a hold ends once zebra has written remote MACs again and
	// written none for this long.
	HoldQuiet = 2 * time.Second
	// HoldLimit: a hold ends after this long whatever zebra did: FRR's
	// own bound on stale routes (BGP graceful restart's restart-time).
	HoldLimit = 120 * time.Second
)

// staleMAC is a remote MAC zebra withdrew: the VTEP it was behind, since
// when, and whether trestle wrote its entry back on the vxlan device.
type staleMAC struct {
	vtep  netip.Addr
	since time.Time
	wrote bool
}

// hold is the hold of an FRR restart: since when, and zebra's writes of
// remote MACs since (the last one's time).
type hold struct {
	active    bool
	since     time.Time
	claims    int
	lastClaim time.Time
}

// zeroMAC is the MAC of a flood-list entry.
var zeroMAC = net.HardwareAddr{0, 0, 0, 0, 0, 0}

// keep keeps remote MAC k of v, stale, behind vtep, written back on the
// vxlan device when write (zebra deleted the device's entry). Called with
// m.mu held.
func (m *Manager) keep(v *VNI, k [6]byte, vtep netip.Addr, write bool) {
	st, ok := v.stale[k]
	if !ok {
		st = staleMAC{vtep: vtep, since: m.now()}
	}
	if write && !st.wrote {
		if err := m.k.SetStale(v.Dev.VXLAN, k[:], vtep); err != nil {
			m.staleErr(v, fmt.Errorf("keep %s behind %s: %w", net.HardwareAddr(k[:]), vtep, err))
		} else {
			st.wrote = true
		}
	}
	v.stale[k] = st
}

// unkeep drops stale MAC k of v (its time is up, or it is local now),
// deleting the entry trestle wrote back. (One zebra wrote again is no
// longer stale: claimed.) Called with m.mu held.
func (m *Manager) unkeep(v *VNI, k [6]byte) {
	st, ok := v.stale[k]
	if !ok {
		return
	}
	delete(v.stale, k)
	if !v.onVX[k] {
		delete(v.sticky, k)
	}
	if st.wrote {
		if d, ok := v.dst[k]; ok && d == st.vtep {
			if err := m.k.DelStale(v.Dev.VXLAN, k[:], st.vtep); err != nil {
				m.staleErr(v, fmt.Errorf("remove stale %s: %w", net.HardwareAddr(k[:]), err))
			}
		}
	}
}

// claimed: zebra wrote remote MAC k again (its bridge entry on the vxlan
// port, with the device's own, which replaces trestle's): it is no longer
// stale. During a hold it is FRR back. Called with m.mu held.
func (m *Manager) claimed(v *VNI, k [6]byte) {
	delete(v.stale, k)
	if m.hold.active {
		m.hold.claims++
		m.hold.lastClaim = m.now()
	}
}

// floodEntry enters a flood-list entry of v's vxlan device. One zebra
// deletes is written back, stale. Called with m.mu held.
func (m *Manager) floodEntry(v *VNI, n Neigh) {
	if !n.Deleted {
		v.flood[n.Dst] = true
		return
	}
	delete(v.flood, n.Dst)
	if v.ownDel[n.Dst] {
		delete(v.ownDel, n.Dst)
		return
	}
	if _, ok := v.staleFlood[n.Dst]; !ok {
		v.staleFlood[n.Dst] = m.now()
	}
	if err := m.k.SetStale(v.Dev.VXLAN, zeroMAC, n.Dst); err != nil {
		m.staleErr(v, fmt.Errorf("keep flood-list VTEP %s: %w", n.Dst, err))
	}
}

// staleErr keeps an error of writing or deleting a stale entry for
// Settle to return. Called with m.mu held.
func (m *Manager) staleErr(v *VNI, err error) {
	if len(m.errs) < maxStaleErrs {
		m.errs = append(m.errs, fmt.Errorf("overlay VNI %d: %w", v.VNI, err))
	}
}

// maxStaleErrs bounds the errors kept between two Settles (a kernel that
// refuses every write says so in the first few).
const maxStaleErrs = 8

// ZebraExited tells the Manager that zebra exited (Watch: its nexthop
// objects went). If it had withdrawn every flood-list VTEP of every VNI
// first (what it does when bgpd leaves it) and something is stale, FRR is
// restarting: the stale entries are held until it is back (Settle). It
// says whether a hold began; in one already, what zebra wrote since it
// began no longer counts (FRR restarted again).
func (m *Manager) ZebraExited() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	now, recent := m.now(), false
	for _, v := range m.vnis {
		if v.dst == nil {
			continue
		}
		for a := range v.flood {
			if _, ok := v.staleFlood[a]; !ok {
				return false // zebra's yet: not its cleanup
			}
		}
		for _, st := range v.stale {
			recent = recent || now.Sub(st.since) < StaleWait
		}
		for _, at := range v.staleFlood {
			recent = recent || now.Sub(at) < StaleWait
		}
	}
	if !recent && !m.hold.active {
		return false
	}
	began := !m.hold.active
	if began {
		m.hold = hold{active: true, since: now}
	}
	m.hold.claims = 0
	return began
}

// Settled is what a Settle did.
type Settled struct {
	// Ended: a hold ended (Claimed: zebra wrote remote MACs again; else it
	// reached HoldLimit).
	Ended, Claimed bool
	// Removed: stale remote MACs and flood-list VTEPs that went.
	Removed int
	// Away: stale entries past StaleWait kept because the BGP session
	// that carried them went (Sessions).
	Away int
}

// Settle removes the stale entries whose time is up: all of them when a
// hold ends (zebra wrote remote MACs again and then none for HoldQuiet, or
// HoldLimit passed), else those older than StaleWait; but not those whose
// BGP session went (Sessions: they are kept while it is away, HoldLimit
// at most). A stale MAC goes from
// the vxlan device and from Remotes (the daemon's next sync deletes its
// table entry); a stale flood-list VTEP from the vxlan device, which zebra
// writes again if it has it. It returns what it did, and the errors of
// writing and deleting stale entries since the last call.
func (m *Manager) Settle() (Settled, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var done Settled
	now := m.now()
	all := false
	if m.hold.active {
		quiet := m.hold.claims > 0 && now.Sub(m.hold.lastClaim) >= HoldQuiet
		if !quiet && now.Sub(m.hold.since) < HoldLimit {
			return done, m.takeErrs()
		}
		done.Ended, done.Claimed, all = true, quiet, true
		m.hold = hold{}
	}
	// due: a stale entry of vtep since since whose time is up. One whose
	// BGP session is away is kept even when a hold ends: the peer may
	// have gone while this host's FRR came back.
	due := func(vtep netip.Addr, since time.Time) bool {
		switch {
		case !all && now.Sub(since) < StaleWait:
			return false
		case m.sessions != nil && now.Sub(since) < HoldLimit && m.sessions.Away(vtep, since):
			done.Away++
			return false
		}
		return true
	}
	for _, v := range m.vnis {
		if v.dst == nil {
			continue
		}
		for _, k := range sortedKeys(v.stale) {
			if st := v.stale[k]; due(st.vtep, st.since) {
				m.unkeep(v, k)
				done.Removed++
			}
		}
		for a, at := range v.staleFlood {
			if !due(a, at) {
				continue
			}
			delete(v.staleFlood, a)
			v.ownDel[a] = true
			if err := m.k.DelStale(v.Dev.VXLAN, zeroMAC, a); err != nil {
				delete(v.ownDel, a)
				m.staleErr(v, fmt.Errorf("remove stale flood-list VTEP %s: %w", a, err))
			}
			done.Removed++
		}
	}
	return done, m.takeErrs()
}

func (m *Manager) takeErrs() error {
	err := errors.Join(m.errs...)
	m.errs = nil
	return err
}

// IsStale says whether mac is a stale remote MAC of VNI vni.
func (m *Manager) IsStale(vni uint32, mac net.HardwareAddr) bool {
	if len(mac) != 6 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vnis[vni]
	if v == nil {
		return false
	}
	_, ok := v.stale[mac6(mac)]
	return ok
}

// Now is the time on the clock of stale entries, which a Sessions'
// answers are timed by.
func (m *Manager) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now()
}

// SetClock sets the clock of stale entries (tests).
func (m *Manager) SetClock(now func() time.Time) {
	m.mu.Lock()
	m.now = now
	m.mu.Unlock()
}
