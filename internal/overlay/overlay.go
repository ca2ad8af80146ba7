// Package overlay keeps a VNI's kernel objects and FRR's EVPN in step with
// trestle's table (issue 30, docs/overlay.md).
//
// FRR's contract with a dataplane is Linux devices and netlink: zebra
// advertises a VNI whose vxlan device is up and in a bridge, learns local
// MACs from AF_BRIDGE neighbour entries on that bridge's ports, and writes
// remote MACs and the flood list (zero-MAC entries, one a remote VTEP) into
// the vxlan device's FDB. Per VNI the daemon creates and owns the kernel
// objects (Names): a bridge (not VLAN-aware), the vxlan device (local =
// the VTEP, nolearning, its bridge port learning off), which is trestle's
// overlay port, an idle "advertise" veth in the bridge that the bridge
// never floods to, and a veth pair outside the bridge through which the
// frames of xdp ports reach the vxlan device (Names.Tramp). The Manager
//
//   - writes each local address of trestle's table (SyncLocal) on the
//     advertise port as an extern-learned entry (NTF_MASTER|NTF_EXT_LEARNED,
//     NUD_REACHABLE, replace), a static one (a static entry, allowed_macs)
//     as a static sticky entry (NTF_MASTER|NTF_STICKY, NUD_NOARP), which
//     zebra advertises sticky (sticky.go), and deletes it when trestle's
//     entry goes, which withdraws zebra's type-2 route;
//   - reads the vxlan device's FDB (a dump when it takes a VNI, then the
//     kernel's RTM_NEWNEIGH/RTM_DELNEIGH, Handle): remote MACs with their
//     VTEP and the flood list, for the daemon to mirror into its table.
//     The entries on the vxlan device are zebra's, and zebra puts back
//     what is taken; trestle writes there only what zebra withdrew, back,
//     as its own (NUD_PERMANENT, which zebra ignores), while FRR restarts
//     (stale.go), here or at the peer whose BGP session carried it
//     (bgp.go: bgpd's word on the session).
//
// zebra writes a remote MAC twice: in the bridge's FDB on the vxlan port
// (master, extern_learn) and in the vxlan device's own (self, with the
// VTEP). The bridge's entry is the one that says where the MAC is, as it
// does for the Linux bridge: zebra moves it to the vxlan port when the MAC
// becomes remote, and our write on the advertise port moves it back when
// it becomes local, while the device's own entry may stay behind (zebra
// 8.4 leaves it when a remote MAC is learned locally). So a MAC is remote
// while the bridge's entry is on the vxlan port, behind the VTEP of the
// device's entry; each time zebra puts the bridge's entry there is a
// Change, even if nothing else changed, because it is zebra saying that the
// MAC is remote now (a newer sequence number won).
//
// The kernel side is behind Kernel, so that the sync logic is tested
// without namespaces (overlay_test.go); Netlink is the real one.
package overlay

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Names are the kernel objects of one VNI: deterministic, so that a
// restarted daemon finds them, and each at most 15 bytes (IFNAMSIZ-1;
// a VNI has 8 digits at most).
type Names struct {
	Bridge  string // the kernel bridge: tbrVNI
	VXLAN   string // the vxlan device, trestle's overlay port: tvxVNI
	Adv     string // the advertise port, a veth in the bridge: tadVNI
	AdvPeer string // its idle peer: tapVNI
	// The way in for frames of xdp ports (a vxlan device takes no XDP
	// redirect): a veth pair. XDP ports redirect into Tramp; its peer
	// TrampPeer (GRO on, so that the redirects are delivered) hands each
	// frame to the vxlan device at its tc ingress (Spec.Via).
	Tramp     string // ttrVNI
	TrampPeer string // ttpVNI
}

// Prefixes of the names; VNIOf reads a VNI back from any of them.
var prefixes = [...]string{"tbr", "tvx", "tad", "tap", "ttr", "ttp"}

// NamesOf returns the names of VNI vni's objects. The vxlan device's is
// config.OverlayDevice's.
func NamesOf(vni uint32) Names {
	n := strconv.FormatUint(uint64(vni), 10)
	return Names{Bridge: "tbr" + n, VXLAN: "tvx" + n, Adv: "tad" + n, AdvPeer: "tap" + n, Tramp: "ttr" + n, TrampPeer: "ttp" + n}
}

// VNIOf reads the VNI from the name of one of a VNI's objects; false for
// any other name.
func VNIOf(name string) (uint32, bool) {
	for _, p := range prefixes {
		rest, ok := strings.CutPrefix(name, p)
		if !ok || rest == "" || rest[0] == '0' {
			continue
		}
		v, err := strconv.ParseUint(rest, 10, 32)
		if err == nil && v >= 1 && v <= MaxVNI {
			return uint32(v), true
		}
	}
	return 0, false
}

// MaxVNI is the largest VNI: 24 bits.
const MaxVNI = 1<<24 - 1

// Spec is what the configuration asks of one VNI.
type Spec struct {
	VNI     uint32
	VTEP    netip.Addr
	MTU     int // 0: the underlay's minus the encapsulation
	DstPort int
	// Via is the program at the far end of the xdp way in (the
	// datapath's trestle_via); none (FD 0): no way in is made, and xdp
	// ports cannot reach the overlay.
	Via Prog
}

// Prog is a loaded program: its FD to attach it, its ID to know it again.
type Prog struct {
	FD int
	ID uint32
}

// Devices are the ifindexes of a VNI's objects as the kernel has them.
type Devices struct {
	Bridge, VXLAN, Adv int
	// Tramp, TrampPeer: the ends of the xdp way in (0: none).
	Tramp, TrampPeer int
	MTU              int // the vxlan device's
}

// Neigh is an AF_BRIDGE neighbour (FDB) entry, as a dump or an event gives it.
type Neigh struct {
	Ifindex int
	MAC     net.HardwareAddr
	// Dst is the remote VTEP (NDA_DST) of a vxlan device's own entry;
	// invalid for a bridge's entry.
	Dst netip.Addr
	// Master: an entry of the bridge's FDB (NTF_MASTER); else one of the
	// device's own (NTF_SELF), such as the vxlan device's remotes.
	Master bool
	// ExtLearned: written by a control plane (zebra, or trestle on the
	// advertise port), not learned by the kernel nor its own address.
	ExtLearned bool
	// Sticky (NTF_STICKY): a bridge entry that does not move. zebra
	// writes a remote sticky MAC so on the vxlan port (not extern-learned),
	// trestle a static local one on the advertise port (sticky.go).
	Sticky  bool
	Deleted bool // RTM_DELNEIGH
}

// Kernel is what the Manager needs of the kernel. Netlink is the real one.
type Kernel interface {
	// Ensure creates what is missing of spec's objects and corrects what
	// differs (a vxlan device of other parameters is made again), and
	// returns them. ErrNoVTEP when spec.VTEP is no address of the
	// namespace.
	Ensure(Spec) (Devices, error)
	// Remove deletes a VNI's objects, those that exist.
	Remove(vni uint32) error
	// Owned lists the VNIs whose objects (any of them) exist.
	Owned() ([]uint32, error)
	// FDB dumps the AF_BRIDGE entries of one device, its own and its
	// bridge's.
	FDB(ifindex int) ([]Neigh, error)
	// SetLocal writes mac on the advertise port adv as an entry of the
	// bridge, replacing any: a static one as a static sticky entry
	// (NUD_NOARP, NTF_STICKY), which zebra advertises sticky, any other
	// as an extern-learned one (NUD_REACHABLE). The kernel keeps the
	// sticky flag when an extern-learned write replaces such an entry:
	// the Manager deletes it first. DelLocal deletes it.
	SetLocal(adv int, mac net.HardwareAddr, static bool) error
	DelLocal(adv int, mac net.HardwareAddr) error
	// SetStale writes an entry zebra withdrew back on the vxlan device
	// vx, as trestle's own (stale.go): mac (the zero MAC: a flood-list
	// entry, appended) behind dst, NUD_PERMANENT, which zebra ignores;
	// DelStale deletes it (gone already is no error).
	SetStale(vx int, mac net.HardwareAddr, dst netip.Addr) error
	DelStale(vx int, mac net.HardwareAddr, dst netip.Addr) error
}

// ErrNoVTEP: the VTEP is no address of the namespace.
var ErrNoVTEP = errors.New("is not an address of this namespace")

// ErrNoWayIn: the VNI is made but its xdp way in could not be: its
// overlay port serves tc ports, and is down beside xdp ports.
var ErrNoWayIn = errors.New("no xdp way in")

// Remote is a remote MAC of a VNI and the VTEP it lives behind.
type Remote struct {
	MAC  net.HardwareAddr
	VTEP netip.Addr
	// Sticky: advertised sticky (a static of its VTEP's): no learn
	// takes it (sticky.go).
	Sticky bool
	// Stale: zebra withdrew it and trestle keeps it, for now (stale.go).
	Stale bool
}

// Change is what an event changed of a VNI's remote addresses, for the
// daemon to mirror into its table: MAC is now behind VTEP, or, Gone, no
// longer remote.
type Change struct {
	VNI    uint32
	MAC    net.HardwareAddr
	VTEP   netip.Addr
	Sticky bool
	Gone   bool
}

// VNI is one VNI as the Manager keeps it.
type VNI struct {
	Spec
	Dev Devices
	// dst: MAC -> VTEP, from the vxlan device's own entries; onVX: the
	// MACs whose bridge entry is on the vxlan port (remote: see the
	// package's comment); flood: the VTEPs of its zero-MAC entries
	// (type-3 routes).
	dst   map[[6]byte]netip.Addr
	onVX  map[[6]byte]bool
	flood map[netip.Addr]bool
	// local: what is written on the advertise port, MAC -> static.
	local map[[6]byte]bool
	// sticky: the remote MACs zebra wrote sticky (sticky.go).
	sticky map[[6]byte]bool
	// What zebra withdrew and trestle keeps, for now (stale.go): remote
	// MACs, and flood-list VTEPs (written back each); ownDel: flood-list
	// entries trestle deleted itself, whose events are not zebra's.
	stale      map[[6]byte]staleMAC
	staleFlood map[netip.Addr]time.Time
	ownDel     map[netip.Addr]bool
}

// Manager keeps the VNIs the daemon owns. Its methods are safe for
// concurrent use.
type Manager struct {
	k    Kernel
	mu   sync.Mutex
	vnis map[uint32]*VNI
	// now is the clock of stale entries (stale.go); hold is the hold of
	// an FRR restart, zero when none.
	now  func() time.Time
	hold hold
	errs []error // of stale entries, for Settle
	// sessions: BGP's word on a withdrawal (bgp.go), nil when none.
	sessions Sessions
}

// NewManager returns a Manager that owns no VNI yet.
func NewManager(k Kernel) *Manager {
	return &Manager{k: k, vnis: map[uint32]*VNI{}, now: time.Now}
}

// Adopt takes over the VNIs of recorded whose objects exist: an earlier
// daemon's (persist, or a crash), which recorded them. Only recorded
// ones, so that another daemon's VNIs in the same namespace are left
// alone. It returns those it took; the daemon removes those the
// configuration no longer has.
func (m *Manager) Adopt(recorded []uint32) ([]uint32, error) {
	if len(recorded) == 0 {
		return nil, nil
	}
	owned, err := m.k.Owned()
	if err != nil {
		return nil, fmt.Errorf("overlay: list the VNIs' devices: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var took []uint32
	for _, v := range owned {
		if slices.Contains(recorded, v) && m.vnis[v] == nil {
			m.vnis[v] = &VNI{Spec: Spec{VNI: v}}
			took = append(took, v)
		}
	}
	return took, nil
}

// Ensure makes VNI spec's objects what spec says (creating them, or
// taking over those that exist) and, for a VNI it did not hold with
// devices yet or whose vxlan device is new, reads the state of both FDBs:
// the remote addresses and flood list, and the local addresses already
// advertised (kept, so that nothing still true is withdrawn). created
// says whether the VNI is new to the Manager, for an undo (Remove).
//
// An error that wraps ErrNoWayIn leaves the VNI made and held, without
// its xdp way in: the caller says so and goes on. After any other error
// for a VNI it did not hold, what the kernel made of it is removed, so
// that zebra advertises no VNI that no port serves.
func (m *Manager) Ensure(spec Spec) (dev Devices, created bool, err error) {
	dev, err = m.k.Ensure(spec)
	var wayIn error
	if errors.Is(err, ErrNoWayIn) {
		wayIn, err = fmt.Errorf("overlay VNI %d: %w", spec.VNI, err), nil
	}
	if err != nil {
		m.mu.Lock()
		held := m.vnis[spec.VNI] != nil
		m.mu.Unlock()
		if !held {
			if rerr := m.k.Remove(spec.VNI); rerr != nil {
				err = errors.Join(err, fmt.Errorf("remove what was made: %w", rerr))
			}
		}
		return dev, false, fmt.Errorf("overlay VNI %d: %w", spec.VNI, err)
	}
	defer func() {
		if err == nil {
			err = wayIn
		}
	}()
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vnis[spec.VNI]
	created = v == nil
	fresh := v == nil || v.Dev != dev
	if v == nil {
		v = &VNI{}
		m.vnis[spec.VNI] = v
	}
	v.Spec = spec
	if !fresh {
		return dev, created, nil
	}
	v.Dev = dev
	if err := m.load(v); err != nil {
		return dev, created, fmt.Errorf("overlay VNI %d: %w", spec.VNI, err)
	}
	return dev, created, nil
}

// load reads v's FDBs: the vxlan device's remotes and flood list, and the
// extern-learned entries of the advertise port (what a daemon before
// wrote). Called with m.mu held.
func (m *Manager) load(v *VNI) error {
	v.dst, v.onVX, v.flood, v.local = map[[6]byte]netip.Addr{}, map[[6]byte]bool{}, map[netip.Addr]bool{}, map[[6]byte]bool{}
	v.sticky = map[[6]byte]bool{}
	if v.stale == nil {
		// Kept across a Reload: what trestle wrote back is its own.
		v.stale, v.staleFlood, v.ownDel = map[[6]byte]staleMAC{}, map[netip.Addr]time.Time{}, map[netip.Addr]bool{}
	}
	vx, err := m.k.FDB(v.Dev.VXLAN)
	if err != nil {
		return fmt.Errorf("read the FDB of its vxlan device: %w", err)
	}
	for _, n := range vx {
		m.entry(v, n)
	}
	adv, err := m.k.FDB(v.Dev.Adv)
	if err != nil {
		return fmt.Errorf("read the FDB of its advertise port: %w", err)
	}
	for _, n := range adv {
		if n.Master && (n.ExtLearned || n.Sticky) && n.Ifindex == v.Dev.Adv && len(n.MAC) == 6 && !v.onVX[mac6(n.MAC)] {
			// A static one is written sticky.
			v.local[mac6(n.MAC)] = n.Sticky
		}
	}
	return nil
}

// entry enters an entry of the vxlan device or the advertise port (see
// the package's comment); a Change when it made a MAC remote, moved it to
// another VTEP, or made it no longer remote. What zebra withdraws is kept
// for now, stale (stale.go). Called with m.mu held.
func (m *Manager) entry(v *VNI, n Neigh) (Change, bool) {
	if len(n.MAC) != 6 || (n.Ifindex != v.Dev.VXLAN && n.Ifindex != v.Dev.Adv) {
		return Change{}, false
	}
	k := mac6(n.MAC)
	wasAt, was := v.remoteAt(k)
	switch {
	case n.Ifindex == v.Dev.Adv:
		// The bridge's entry moved to the advertise port: local (our
		// write, or its echo). Deleted: it went, wherever to.
		if n.Master && !n.Deleted {
			delete(v.onVX, k)
			delete(v.sticky, k)
			m.unkeep(v, k)
		}
	case !n.Master && n.Dst.IsValid():
		if k == ([6]byte{}) {
			m.floodEntry(v, n)
			return Change{}, false // the flood list is the kernel's to use
		}
		if !n.Deleted {
			v.dst[k] = n.Dst
		} else if v.dst[k] == n.Dst {
			delete(v.dst, k)
			if was {
				// zebra withdrew the device's entry: written back.
				m.keep(v, k, n.Dst, true)
			}
		}
	case n.Master && (n.ExtLearned || n.Sticky) && k != ([6]byte{}):
		// zebra's: extern-learned, or sticky (a remote sticky MAC is
		// written static sticky, not extern-learned: sticky.go).
		if n.Deleted {
			if v.onVX[k] {
				delete(v.onVX, k)
				if was {
					m.keep(v, k, wasAt, false)
				} else {
					delete(v.sticky, k)
				}
			}
		} else {
			v.onVX[k] = true
			if n.Sticky {
				v.sticky[k] = true
			} else {
				delete(v.sticky, k)
			}
			// Off the advertise port: written again when local again.
			delete(v.local, k)
			m.claimed(v, k)
		}
	default:
		return Change{}, false
	}
	at, now := v.remoteAt(k)
	c := Change{VNI: v.VNI, MAC: slices.Clone(n.MAC), VTEP: at, Sticky: v.sticky[k]}
	switch {
	case now && n.Master && n.Ifindex == v.Dev.VXLAN && !n.Deleted:
		return c, true // zebra (re)installed it: remote now
	case now && (!was || wasAt != at):
		return c, true
	case was && !now:
		c.VTEP, c.Gone = wasAt, true
		return c, true
	}
	return Change{}, false
}

// remoteAt says whether k is remote, and behind which VTEP: the bridge's
// entry is on the vxlan port and the device's own names the VTEP, or
// zebra withdrew it and trestle keeps it, stale.
func (v *VNI) remoteAt(k [6]byte) (netip.Addr, bool) {
	d, ok := v.dst[k]
	if st, kept := v.stale[k]; kept {
		if !ok {
			d = st.vtep
		}
		return d, true
	}
	return d, ok && v.onVX[k]
}

// Handle enters an event of the kernel's; a Change when it moved a remote
// address (a flood-list entry changes no address, and entries of other
// devices are none of the Manager's).
func (m *Manager) Handle(n Neigh) (Change, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range m.vnis {
		if v.dst != nil && (n.Ifindex == v.Dev.VXLAN || n.Ifindex == v.Dev.Adv) {
			return m.entry(v, n)
		}
	}
	return Change{}, false
}

// Reload reads a VNI's FDBs again, as at Ensure: after the kernel's
// events were lost. It returns the remote addresses then.
func (m *Manager) Reload(vni uint32) ([]Remote, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vnis[vni]
	if v == nil || v.dst == nil {
		return nil, fmt.Errorf("overlay VNI %d: not held", vni)
	}
	if err := m.load(v); err != nil {
		return nil, fmt.Errorf("overlay VNI %d: %w", vni, err)
	}
	return v.remotes(), nil
}

// Remove deletes VNI vni's objects, which withdraws every route zebra
// advertised for it.
func (m *Manager) Remove(vni uint32) error {
	m.mu.Lock()
	delete(m.vnis, vni)
	m.mu.Unlock()
	if err := m.k.Remove(vni); err != nil {
		return fmt.Errorf("overlay VNI %d: remove: %w", vni, err)
	}
	return nil
}

// Held are the VNIs the Manager holds, sorted.
func (m *Manager) Held() []uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []uint32
	for v := range m.vnis {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// SyncLocal makes the advertise port of VNI vni hold want (MAC -> static),
// trestle's local addresses of the VLAN the VNI carries: each missing or
// changed is written (replace: a MAC zebra has as remote becomes local,
// with a higher sequence number), each it holds and want lacks deleted
// (zebra withdraws its route). A MAC want holds that is remote is written
// too: trestle learned it locally, so it moved here. It returns what it
// wrote and deleted; on errors it goes on with the others and returns
// them joined.
func (m *Manager) SyncLocal(vni uint32, want map[[6]byte]bool) (added, deleted int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vnis[vni]
	if v == nil || v.local == nil {
		return 0, 0, fmt.Errorf("overlay VNI %d: not held", vni)
	}
	var errs []error
	for _, k := range sortedKeys(want) {
		static := want[k]
		cur, had := v.local[k]
		if had && cur == static {
			continue
		}
		if had && cur {
			// No longer static: the kernel would keep the sticky
			// flag over an extern-learned write (sticky.go).
			if err := m.k.DelLocal(v.Dev.Adv, k[:]); err != nil {
				errs = append(errs, fmt.Errorf("advertise %s not sticky: %w", net.HardwareAddr(k[:]), err))
				continue
			}
			delete(v.local, k)
		}
		if err := m.k.SetLocal(v.Dev.Adv, k[:], static); err != nil {
			errs = append(errs, fmt.Errorf("advertise %s: %w", net.HardwareAddr(k[:]), err))
			continue
		}
		v.local[k] = static
		added++
	}
	for _, k := range sortedKeys(v.local) {
		if _, ok := want[k]; ok {
			continue
		}
		if err := m.k.DelLocal(v.Dev.Adv, k[:]); err != nil {
			errs = append(errs, fmt.Errorf("withdraw %s: %w", net.HardwareAddr(k[:]), err))
			continue
		}
		delete(v.local, k)
		deleted++
	}
	if err := errors.Join(errs...); err != nil {
		return added, deleted, fmt.Errorf("overlay VNI %d: %w", vni, err)
	}
	return added, deleted, nil
}

// AddLocal advertises one local address of VNI vni, as SyncLocal would
// with mac in want: a learn or a move the datapath told of, at once, rather
// than at the next comparison of the whole table. One advertised already
// is left as it is (a static one stays static); true when it wrote.
func (m *Manager) AddLocal(vni uint32, mac [6]byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vnis[vni]
	if v == nil || v.local == nil {
		return false, fmt.Errorf("overlay VNI %d: not held", vni)
	}
	if _, ok := v.local[mac]; ok {
		return false, nil
	}
	if err := m.k.SetLocal(v.Dev.Adv, mac[:], false); err != nil {
		return false, fmt.Errorf("overlay VNI %d: advertise %s: %w", vni, net.HardwareAddr(mac[:]), err)
	}
	v.local[mac] = false
	return true, nil
}

// DropLocal withdraws one local address of VNI vni (a station that moved
// behind the overlay), as SyncLocal would without mac in want; true when
// it was advertised.
func (m *Manager) DropLocal(vni uint32, mac [6]byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vnis[vni]
	if v == nil || v.local == nil {
		return false, fmt.Errorf("overlay VNI %d: not held", vni)
	}
	if _, ok := v.local[mac]; !ok {
		return false, nil
	}
	if err := m.k.DelLocal(v.Dev.Adv, mac[:]); err != nil {
		return false, fmt.Errorf("overlay VNI %d: withdraw %s: %w", vni, net.HardwareAddr(mac[:]), err)
	}
	delete(v.local, mac)
	return true, nil
}

// Status is what show says of a VNI.
type Status struct {
	VNI         uint32
	VTEP        netip.Addr
	Devices     Devices
	FloodVTEPs  []netip.Addr // the flood list: a VTEP per type-3 route, sorted
	RemoteVTEPs int          // VTEPs of the flood list and the remote MACs together
	Remotes     []Remote     // sorted by MAC
	Local       int          // addresses advertised
	// Stale: remote MACs and flood-list VTEPs zebra withdrew that trestle
	// keeps (stale.go); Holding: FRR is restarting, and they are kept
	// until it is back.
	Stale   int
	Holding bool
}

// Status returns VNI vni's status; false when it is not held.
func (m *Manager) Status(vni uint32) (Status, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vnis[vni]
	if v == nil {
		return Status{}, false
	}
	s := Status{VNI: vni, VTEP: v.VTEP, Devices: v.Dev, Remotes: v.remotes(), Local: len(v.local), Stale: len(v.stale) + len(v.staleFlood), Holding: m.hold.active}
	vteps := map[netip.Addr]bool{}
	for a := range v.flood {
		s.FloodVTEPs = append(s.FloodVTEPs, a)
		vteps[a] = true
	}
	for _, r := range s.Remotes {
		vteps[r.VTEP] = true
	}
	slices.SortFunc(s.FloodVTEPs, netip.Addr.Compare)
	s.RemoteVTEPs = len(vteps)
	return s, true
}

// VTEPs counts the remote VTEPs of VNI vni: those of its flood list and
// of its remote MACs together, as Status does, without listing the MACs.
func (m *Manager) VTEPs(vni uint32) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vnis[vni]
	if v == nil {
		return 0
	}
	vteps := map[netip.Addr]bool{}
	for a := range v.flood {
		vteps[a] = true
	}
	for k := range v.onVX {
		if a, ok := v.remoteAt(k); ok {
			vteps[a] = true
		}
	}
	for k := range v.stale {
		if a, ok := v.remoteAt(k); ok {
			vteps[a] = true
		}
	}
	return len(vteps)
}

// RemoteOf says behind which VTEP mac is in VNI vni; false when it is not
// remote.
func (m *Manager) RemoteOf(vni uint32, mac net.HardwareAddr) (netip.Addr, bool) {
	if len(mac) != 6 {
		return netip.Addr{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vnis[vni]
	if v == nil {
		return netip.Addr{}, false
	}
	return v.remoteAt(mac6(mac))
}

// Remotes returns VNI vni's remote addresses, sorted by MAC.
func (m *Manager) Remotes(vni uint32) []Remote {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := m.vnis[vni]; v != nil {
		return v.remotes()
	}
	return nil
}

func (v *VNI) remotes() []Remote {
	keys := map[[6]byte]bool{}
	for k := range v.onVX {
		keys[k] = true
	}
	for k := range v.stale {
		keys[k] = true
	}
	var out []Remote
	for _, k := range sortedKeys(keys) {
		if at, ok := v.remoteAt(k); ok {
			_, stale := v.stale[k]
			out = append(out, Remote{MAC: net.HardwareAddr(slices.Clone(k[:])), VTEP: at, Stale: stale, Sticky: v.sticky[k]})
		}
	}
	return out
}

func mac6(mac net.HardwareAddr) (k [6]byte) {
	copy(k[:], mac)
	return k
}

// MAC6 is mac as the key SyncLocal's want takes.
func MAC6(mac net.HardwareAddr) [6]byte { return mac6(mac) }

func sortedKeys[V any](m map[[6]byte]V) [][6]byte {
	ks := make([][6]byte, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b [6]byte) int { return strings.Compare(string(a[:]), string(b[:])) })
	return ks
}
