package overlay

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// fakeKernel is a kernel of maps: devices by VNI, FDBs by ifindex, and a
// log of the writes on advertise ports.
type fakeKernel struct {
	next    int
	devs    map[uint32]Devices
	fdb     map[int][]Neigh
	writes  []string // "set MAC static" / "del MAC"
	failSet map[string]bool
	removed []uint32
}

func newFake() *fakeKernel {
	return &fakeKernel{next: 10, devs: map[uint32]Devices{}, fdb: map[int][]Neigh{}, failSet: map[string]bool{}}
}

func (k *fakeKernel) Ensure(s Spec) (Devices, error) {
	if s.VTEP != netip.MustParseAddr("192.0.2.1") {
		return Devices{}, ErrNoVTEP
	}
	if d, ok := k.devs[s.VNI]; ok {
		return d, nil
	}
	d := Devices{Bridge: k.next, VXLAN: k.next + 1, Adv: k.next + 2, MTU: 1450}
	k.next += 3
	k.devs[s.VNI] = d
	return d, nil
}

func (k *fakeKernel) Remove(vni uint32) error {
	delete(k.devs, vni)
	k.removed = append(k.removed, vni)
	return nil
}

func (k *fakeKernel) Owned() ([]uint32, error) {
	var out []uint32
	for v := range k.devs {
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil
}

func (k *fakeKernel) FDB(ifindex int) ([]Neigh, error) { return k.fdb[ifindex], nil }

func (k *fakeKernel) SetLocal(adv int, mac net.HardwareAddr, static bool) error {
	if k.failSet[mac.String()] {
		return errors.New("refused")
	}
	w := "set " + mac.String()
	if static {
		w += " static"
	}
	k.writes = append(k.writes, w)
	return nil
}

func (k *fakeKernel) DelLocal(adv int, mac net.HardwareAddr) error {
	k.writes = append(k.writes, "del "+mac.String())
	return nil
}

// SetStale and DelStale log "stale MAC DST" and "unstale MAC DST".
func (k *fakeKernel) SetStale(vx int, mac net.HardwareAddr, dst netip.Addr) error {
	k.writes = append(k.writes, "stale "+mac.String()+" "+dst.String())
	return nil
}

func (k *fakeKernel) DelStale(vx int, mac net.HardwareAddr, dst netip.Addr) error {
	k.writes = append(k.writes, "unstale "+mac.String()+" "+dst.String())
	return nil
}

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

var (
	vtep   = netip.MustParseAddr("192.0.2.1")
	vtepB  = netip.MustParseAddr("192.0.2.2")
	vtepC  = netip.MustParseAddr("192.0.2.3")
	zero   = mac("00:00:00:00:00:00")
	macA   = mac("02:00:00:00:00:0a")
	macB   = mac("02:00:00:00:00:0b")
	macC   = mac("02:00:00:00:00:0c")
	spec   = Spec{VNI: 1000, VTEP: vtep, DstPort: 4789}
	devs   = Devices{Bridge: 10, VXLAN: 11, Adv: 12, MTU: 1450}
	remote = func(m net.HardwareAddr, dst netip.Addr) Neigh { return Neigh{Ifindex: devs.VXLAN, MAC: m, Dst: dst} }
)

func TestNames(t *testing.T) {
	for _, vni := range []uint32{1, 1000, MaxVNI} {
		n := NamesOf(vni)
		for _, name := range []string{n.Bridge, n.VXLAN, n.Adv, n.AdvPeer} {
			if len(name) > 15 {
				t.Errorf("VNI %d: %q is longer than 15 bytes", vni, name)
			}
			if got, ok := VNIOf(name); !ok || got != vni {
				t.Errorf("VNIOf(%q) = %d, %v; want %d", name, got, ok, vni)
			}
		}
	}
	for _, name := range []string{"tvx", "tvx0", "tvx01", "tvx16777216", "eth0", "tvxa", "br1000"} {
		if v, ok := VNIOf(name); ok {
			t.Errorf("VNIOf(%q) = %d: not a name of a VNI's", name, v)
		}
	}
}

// TestEnsureLoads: taking a VNI reads the remote addresses and the flood
// list of its vxlan device, ignores the bridge's copies and entries of
// other devices, and takes the extern-learned entries of the advertise
// port as written (a restarted daemon withdraws nothing still true).
func TestEnsureLoads(t *testing.T) {
	k := newFake()
	k.devs[1000] = devs
	k.fdb[devs.VXLAN] = []Neigh{
		remote(zero, vtepB), remote(zero, vtepC), remote(macB, vtepB),
		{Ifindex: devs.VXLAN, MAC: macB, Master: true, ExtLearned: true}, // the bridge's: B is on the vxlan port
		remote(macC, vtepC), // the device's own only: C is not remote (left behind, say)
	}
	k.fdb[devs.Adv] = []Neigh{{Ifindex: devs.Adv, MAC: macA, Master: true, ExtLearned: true}}
	m := NewManager(k)
	if vnis, err := m.Adopt([]uint32{1000, 2000}); err != nil || !slices.Equal(vnis, []uint32{1000}) {
		t.Fatalf("Adopt = %v, %v", vnis, err)
	}
	dev, created, err := m.Ensure(spec)
	if err != nil || created || dev != devs {
		t.Fatalf("Ensure = %+v, %v, %v; want the adopted devices", dev, created, err)
	}
	st, ok := m.Status(1000)
	if !ok || st.RemoteVTEPs != 2 || !slices.Equal(st.FloodVTEPs, []netip.Addr{vtepB, vtepC}) || st.Local != 1 ||
		len(st.Remotes) != 1 || st.Remotes[0].MAC.String() != macB.String() || st.Remotes[0].VTEP != vtepB {
		t.Fatalf("status %+v", st)
	}
	if a, ok := m.RemoteOf(1000, macB); !ok || a != vtepB {
		t.Errorf("RemoteOf(B) = %v, %v", a, ok)
	}
	// What the advertise port holds is not written again; what trestle
	// no longer has goes.
	if _, _, err := m.SyncLocal(1000, map[[6]byte]bool{MAC6(macA): false}); err != nil || len(k.writes) != 0 {
		t.Errorf("SyncLocal of what is written: %v, writes %v", err, k.writes)
	}
}

// TestAdoptReconciles: a restarted daemon that adopts a VNI makes the
// advertise port what its table says and no more: of what an earlier
// daemon wrote (A and X, extern-learned), A stays unwritten, X (no longer
// in the table) is withdrawn, B (new) is written; an entry of the port
// that is not extern-learned (the kernel's, not trestle's) is none of its
// business, neither taken as written nor deleted.
func TestAdoptReconciles(t *testing.T) {
	k := newFake()
	k.devs[1000] = devs
	macX, macY := mac("02:00:00:00:00:58"), mac("02:00:00:00:00:59")
	k.fdb[devs.Adv] = []Neigh{
		{Ifindex: devs.Adv, MAC: macA, Master: true, ExtLearned: true},
		{Ifindex: devs.Adv, MAC: macX, Master: true, ExtLearned: true},
		{Ifindex: devs.Adv, MAC: macY, Master: true}, // the kernel's
	}
	m := NewManager(k)
	if vnis, err := m.Adopt([]uint32{1000}); err != nil || !slices.Equal(vnis, []uint32{1000}) {
		t.Fatalf("Adopt = %v, %v", vnis, err)
	}
	if _, created, err := m.Ensure(spec); err != nil || created {
		t.Fatalf("Ensure: created %v, %v; want the adopted VNI", created, err)
	}
	if st, _ := m.Status(1000); st.Local != 2 {
		t.Errorf("adopted with %d addresses advertised, want A and X", st.Local)
	}
	added, deleted, err := m.SyncLocal(1000, map[[6]byte]bool{MAC6(macA): false, MAC6(macB): false})
	if err != nil || added != 1 || deleted != 1 || !slices.Equal(k.writes, []string{"set " + macB.String(), "del " + macX.String()}) {
		t.Errorf("SyncLocal({A, B}) after adoption = %d, %d, %v, writes %q; want B set and X deleted, nothing else", added, deleted, err, k.writes)
	}
	if st, _ := m.Status(1000); st.Local != 2 {
		t.Errorf("%d addresses advertised after the sync, want A and B", st.Local)
	}
}

// TestSyncLocal: missing entries are written, changed ones rewritten,
// gone ones deleted, unchanged ones left; a failure stops no other write.
func TestSyncLocal(t *testing.T) {
	k := newFake()
	m := NewManager(k)
	if _, created, err := m.Ensure(spec); err != nil || !created {
		t.Fatalf("Ensure: created %v, %v", created, err)
	}
	step := func(want map[[6]byte]bool, add, del int, writes ...string) {
		t.Helper()
		k.writes = nil
		a, d, err := m.SyncLocal(1000, want)
		if err != nil || a != add || d != del || !slices.Equal(k.writes, writes) {
			t.Errorf("SyncLocal(%v) = %d, %d, %v, writes %q; want %d, %d, %q", want, a, d, err, k.writes, add, del, writes)
		}
	}
	step(map[[6]byte]bool{MAC6(macA): false, MAC6(macB): true}, 2, 0, "set "+macA.String(), "set "+macB.String()+" static")
	step(map[[6]byte]bool{MAC6(macA): false, MAC6(macB): true}, 0, 0)
	step(map[[6]byte]bool{MAC6(macA): true}, 1, 1, "set "+macA.String()+" static", "del "+macB.String())
	// A static address that is static no more is deleted before it is
	// written again: the kernel would keep the sticky flag.
	step(map[[6]byte]bool{MAC6(macA): false}, 1, 0, "del "+macA.String(), "set "+macA.String())
	step(nil, 0, 1, "del "+macA.String())

	k.failSet[macB.String()] = true
	k.writes = nil
	a, _, err := m.SyncLocal(1000, map[[6]byte]bool{MAC6(macB): false, MAC6(macC): false})
	if err == nil || a != 1 || !slices.Equal(k.writes, []string{"set " + macC.String()}) {
		t.Errorf("a refused write: added %d, %v, writes %q", a, err, k.writes)
	}
	// The refused one is tried again at the next sync.
	delete(k.failSet, macB.String())
	step(map[[6]byte]bool{MAC6(macB): false, MAC6(macC): false}, 1, 0, "set "+macB.String())
	if _, _, err := m.SyncLocal(7, nil); err == nil {
		t.Error("SyncLocal of a VNI not held: no error")
	}
}

// TestHandle: a MAC is remote while the bridge's entry is on the vxlan
// port and the device's own names its VTEP; each time zebra puts the
// bridge's entry there is a change; the flood list changes no address;
// entries of other devices are ignored.
func TestHandle(t *testing.T) {
	k := newFake()
	m := NewManager(k)
	clock := time.Unix(1e9, 0)
	m.SetClock(func() time.Time { return clock })
	if _, _, err := m.Ensure(spec); err != nil {
		t.Fatal(err)
	}
	onVX := func(m net.HardwareAddr) Neigh {
		return Neigh{Ifindex: devs.VXLAN, MAC: m, Master: true, ExtLearned: true}
	}
	onAdv := func(m net.HardwareAddr) Neigh {
		return Neigh{Ifindex: devs.Adv, MAC: m, Master: true, ExtLearned: true}
	}
	del := func(n Neigh) Neigh { n.Deleted = true; return n }
	type want struct {
		ok   bool
		vtep netip.Addr
		gone bool
	}
	for _, tc := range []struct {
		name string
		n    Neigh
		want want
	}{
		{"flood entry", remote(zero, vtepB), want{}},
		// C stays in the flood list (TestStaleWithdrawn).
		{"flood entry of C", remote(zero, vtepC), want{}},
		{"device's entry alone", remote(macB, vtepB), want{}},
		{"bridge's entry on the vxlan port", onVX(macB), want{true, vtepB, false}},
		{"device's entry again", remote(macB, vtepB), want{}},
		{"bridge's entry again: zebra says remote", onVX(macB), want{true, vtepB, false}},
		{"another VTEP", remote(macB, vtepC), want{true, vtepC, false}},
		{"stale delete", del(remote(macB, vtepB)), want{}},
		{"learned here: the bridge's entry on the advertise port", onAdv(macB), want{true, vtepC, true}},
		{"the device's entry left behind", remote(macB, vtepC), want{}},
		{"moved back by zebra", onVX(macB), want{true, vtepC, false}},
		{"kernel's own address", Neigh{Ifindex: devs.VXLAN, MAC: macC, Master: true}, want{}},
		{"other device", Neigh{Ifindex: 99, MAC: macC, Dst: vtepB}, want{}},
		// Withdrawn: kept stale (stale.go) until Settle, below.
		{"withdrawn: the device's entry goes", del(remote(macB, vtepC)), want{}},
		{"and the bridge's", del(onVX(macB)), want{}},
		{"flood entry gone", del(remote(zero, vtepB)), want{}},
	} {
		c, ok := m.Handle(tc.n)
		if ok != tc.want.ok || (ok && (c.VNI != 1000 || c.VTEP != tc.want.vtep || c.Gone != tc.want.gone || c.MAC.String() != tc.n.MAC.String())) {
			t.Errorf("%s: Handle = %+v, %v; want %+v", tc.name, c, ok, tc.want)
		}
	}
	st, _ := m.Status(1000)
	if st.Stale != 2 || len(st.Remotes) != 1 || !st.Remotes[0].Stale || st.Remotes[0].VTEP != vtepC {
		t.Errorf("after the deletes: %+v; want macB and the flood entry kept stale", st)
	}
	clock = clock.Add(StaleWait)
	if done, err := m.Settle(); err != nil || done.Removed != 2 || done.Ended {
		t.Errorf("Settle after StaleWait: %+v, %v", done, err)
	}
	st, _ = m.Status(1000)
	if st.RemoteVTEPs != 1 || len(st.FloodVTEPs) != 1 || len(st.Remotes) != 0 || st.Stale != 0 {
		t.Errorf("after the deletes, settled: %+v; want C alone in the flood list", st)
	}
	// A MAC zebra takes back from the advertise port is written again
	// once local again.
	if _, _, err := m.SyncLocal(1000, map[[6]byte]bool{MAC6(macA): false}); err != nil {
		t.Fatal(err)
	}
	m.Handle(remote(macA, vtepB))
	m.Handle(onVX(macA))
	k.writes = nil
	if _, _, err := m.SyncLocal(1000, map[[6]byte]bool{MAC6(macA): false}); err != nil || !slices.Equal(k.writes, []string{"set " + macA.String()}) {
		t.Errorf("a local MAC zebra had made remote: writes %q, %v; want it written again", k.writes, err)
	}
	if err := m.Remove(1000); err != nil || !slices.Equal(k.removed, []uint32{1000}) || len(m.Held()) != 0 {
		t.Errorf("Remove: %v, removed %v, held %v", err, k.removed, m.Held())
	}
	if _, ok := m.Handle(onVX(macB)); ok {
		t.Error("an event of a removed VNI moved an address")
	}
}

func TestEnsureRefusesVTEP(t *testing.T) {
	m := NewManager(newFake())
	s := spec
	s.VTEP = netip.MustParseAddr("198.51.100.1")
	if _, _, err := m.Ensure(s); !errors.Is(err, ErrNoVTEP) {
		t.Errorf("Ensure with a VTEP of no interface: %v", err)
	}
	if len(m.Held()) != 0 {
		t.Error("a refused VNI is held")
	}
}

// TestStickyRemote: zebra writes a remote sticky MAC as a static sticky
// bridge entry on the vxlan port, not an extern-learned one: it is remote
// and sticky, a later extern-learned write makes it plain remote again,
// and its deletion makes it gone. A static sticky entry of the advertise
// port (a daemon before wrote it for a static address) is taken as a
// static local one.
func TestStickyRemote(t *testing.T) {
	k := newFake()
	k.fdb[devs.Adv] = []Neigh{{Ifindex: devs.Adv, MAC: macC, Master: true, Sticky: true}}
	m := NewManager(k)
	if _, _, err := m.Ensure(spec); err != nil {
		t.Fatal(err)
	}
	k.writes = nil
	if _, _, err := m.SyncLocal(1000, map[[6]byte]bool{MAC6(macC): true}); err != nil || len(k.writes) != 0 {
		t.Errorf("the static sticky entry a daemon before wrote: writes %q, %v; want none", k.writes, err)
	}
	m.Handle(remote(macA, vtepB))
	c, ok := m.Handle(Neigh{Ifindex: devs.VXLAN, MAC: macA, Master: true, Sticky: true})
	if want := (Change{VNI: 1000, MAC: macA, VTEP: vtepB, Sticky: true}); !ok || c.VTEP != want.VTEP || !c.Sticky || c.Gone {
		t.Errorf("zebra's sticky entry: %+v, %v; want %+v", c, ok, want)
	}
	if rs := m.Remotes(1000); len(rs) != 1 || !rs[0].Sticky || rs[0].VTEP != vtepB {
		t.Errorf("Remotes: %+v; want %s sticky behind %s", rs, macA, vtepB)
	}
	c, ok = m.Handle(Neigh{Ifindex: devs.VXLAN, MAC: macA, Master: true, ExtLearned: true})
	if !ok || c.Sticky {
		t.Errorf("zebra's extern-learned entry after the sticky one: %+v, %v; want remote, not sticky", c, ok)
	}
	if rs := m.Remotes(1000); len(rs) != 1 || rs[0].Sticky {
		t.Errorf("Remotes: %+v; want %s not sticky", rs, macA)
	}
	m.Handle(Neigh{Ifindex: devs.VXLAN, MAC: macA, Master: true, Sticky: true})
	// Local again (our write's echo on the advertise port): not sticky.
	m.Handle(Neigh{Ifindex: devs.Adv, MAC: macA, Master: true, ExtLearned: true})
	m.Handle(Neigh{Ifindex: devs.VXLAN, MAC: macA, Master: true, ExtLearned: true})
	if rs := m.Remotes(1000); len(rs) != 1 || rs[0].Sticky {
		t.Errorf("Remotes after a move here and back: %+v; want %s not sticky", rs, macA)
	}
}
