package daemon

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/netdev"
	"github.com/trestle/trestle/internal/overlay"
)

// Unit tests of the overlay's half of the daemon: the reconcile makes and
// removes VNIs, the sync advertises and withdraws the table's local
// addresses, and zebra's remote ones are mirrored into the table and never
// aged. The kernel is a fake (ovKernel) that makes each VNI's vxlan device
// an interface of the fake system.

// ovKernel is an overlay.Kernel over the fake system.
type ovKernel struct {
	sys *fakeSys
	// tramp: Ensure makes the xdp way in too (the real one does when the
	// dataplane has trestle_via, which the fake has not).
	tramp   bool
	devs    map[uint32]overlay.Devices
	adv     map[string]bool // MAC -> static, what the advertise ports hold
	writes  []string
	removed []uint32
	// made: the VNIs whose devices Ensure created, in order; advWrites:
	// the writes of each advertise port (by its ifindex).
	made      []uint32
	advWrites map[int][]string
}

func (k *ovKernel) Ensure(s overlay.Spec) (overlay.Devices, error) {
	if d, ok := k.devs[s.VNI]; ok {
		return d, nil
	}
	n := overlay.NamesOf(s.VNI)
	l := k.sys.add(n.VXLAN, "vxlan")
	d := overlay.Devices{Bridge: l.Index + 1000, VXLAN: l.Index, Adv: l.Index + 2000, MTU: 1450}
	if k.tramp {
		// Its far end has GRO on: XDP redirects into the pair are sent.
		d.Tramp = k.sys.add(n.Tramp, "veth").Index
		k.sys.set(n.Tramp, func(l *Link) { l.XDP |= netdev.XDPNdoXmit })
		d.TrampPeer = k.sys.add(n.TrampPeer, "veth").Index
	}
	k.devs[s.VNI] = d
	k.made = append(k.made, s.VNI)
	return d, nil
}

func (k *ovKernel) Remove(vni uint32) error {
	k.sys.del(overlay.NamesOf(vni).VXLAN)
	delete(k.devs, vni)
	k.removed = append(k.removed, vni)
	return nil
}

func (k *ovKernel) Owned() ([]uint32, error)                 { return nil, nil }
func (k *ovKernel) FDB(ifindex int) ([]overlay.Neigh, error) { return nil, nil }

func (k *ovKernel) SetLocal(adv int, mac net.HardwareAddr, static bool) error {
	k.adv[mac.String()] = static
	k.wrote(adv, "set "+mac.String())
	return nil
}

func (k *ovKernel) DelLocal(adv int, mac net.HardwareAddr) error {
	delete(k.adv, mac.String())
	k.wrote(adv, "del "+mac.String())
	return nil
}

// SetStale and DelStale write on the vxlan device: logged in writes.
func (k *ovKernel) SetStale(vx int, mac net.HardwareAddr, dst netip.Addr) error {
	k.writes = append(k.writes, "stale "+mac.String()+" "+dst.String())
	return nil
}

func (k *ovKernel) DelStale(vx int, mac net.HardwareAddr, dst netip.Addr) error {
	k.writes = append(k.writes, "unstale "+mac.String()+" "+dst.String())
	return nil
}

func (k *ovKernel) wrote(adv int, w string) {
	k.writes = append(k.writes, w)
	if k.advWrites == nil {
		k.advWrites = map[int][]string{}
	}
	k.advWrites[adv] = append(k.advWrites[adv], w)
}

// ovDP is the fake dataplane with PutLearned and the XDP encapsulations
// (encaps, by key).
type ovDP struct {
	*fakeDP
	encaps map[datapath.EncapKey]datapath.Encap
	// puts stamps each put entry's SeenNs: the later, the younger.
	puts *uint64
}

func (o ovDP) SetEncap(bridge, vlan uint16, mac net.HardwareAddr, e datapath.Encap) error {
	o.encaps[datapath.EncapKey{Bridge: bridge, VLAN: vlan, MAC: overlay.MAC6(mac)}] = e
	return nil
}

func (o ovDP) DelEncap(bridge, vlan uint16, mac net.HardwareAddr) error {
	delete(o.encaps, datapath.EncapKey{Bridge: bridge, VLAN: vlan, MAC: overlay.MAC6(mac)})
	return nil
}

func (o ovDP) Encaps() (map[datapath.EncapKey]datapath.Encap, error) {
	out := map[datapath.EncapKey]datapath.Encap{}
	for k, e := range o.encaps {
		out[k] = e
	}
	return out, nil
}

func (o ovDP) PutLearned(e datapath.FDBEntry) (datapath.FDBEntry, bool, error) {
	cur, ok := o.fdb[fdbKeyOf(e.Bridge, e.VLAN, e.MAC)]
	if ok && cur.Static {
		return datapath.FDBEntry{}, false, datapath.ErrStatic
	}
	*o.puts++
	e.SeenNs = *o.puts
	o.fdb[fdbKeyOf(e.Bridge, e.VLAN, e.MAC)] = e
	return cur, ok, nil
}

type ovWorld struct {
	*world
	k     *ovKernel
	addrs map[netip.Addr]bool
	odp   ovDP
	// clock: the Manager's, for stale entries; advance moves it.
	clock time.Time
}

// advance moves the clock of stale entries on by d.
func (w *ovWorld) advance(d time.Duration) { w.clock = w.clock.Add(d) }

func newOvWorld(t *testing.T) *ovWorld {
	dp, sys := newFakeDP(), newFakeSys()
	odp := ovDP{fakeDP: dp, encaps: map[datapath.EncapKey]datapath.Encap{}, puts: new(uint64)}
	w := &world{t: t, dp: dp, sys: sys, d: newDaemon(quietLog(), odp, sys, 1<<20, time.Second)}
	ow := &ovWorld{world: w, k: &ovKernel{sys: sys, devs: map[uint32]overlay.Devices{}, adv: map[string]bool{}},
		addrs: map[netip.Addr]bool{netip.MustParseAddr("192.0.2.1"): true}, odp: odp}
	w.d.ovl = newOverlayState(ow.k, odp)
	w.d.ovl.nextHop = func(local, vtep netip.Addr) (overlay.NextHop, error) {
		return overlay.NextHop{}, overlay.ErrUnresolved
	}
	w.d.ovl.hasAddr = func(a netip.Addr) (bool, error) { return ow.addrs[a], nil }
	ow.clock = time.Unix(1e9, 0)
	w.d.ovl.mgr.SetClock(func() time.Time { return ow.clock })
	return ow
}

const ovConfig = `[daemon]
vtep = "192.0.2.1"
[[bridge]]
name = "br0"
aging = "10s"
[[bridge.port]]
interface = "p1"
[[bridge.port]]
interface = "p2"
[[bridge.port]]
vxlan = 1000
[[bridge.static]]
mac = "02:00:00:00:00:5a"
port = "p2"
`

func (w *ovWorld) sync() {
	w.t.Helper()
	if err := w.d.syncOverlay(); err != nil {
		w.t.Fatalf("sync: %v", err)
	}
}

// remote gives the events of zebra writing (or deleting) a remote MAC:
// the vxlan device's own entry with the VTEP, and the bridge's on the
// vxlan port. A deleted one is a withdrawal no FRR restart follows: kept
// stale, then gone once overlay.StaleWait has passed (the clock is moved
// on, and the stale entries settled).
func (w *ovWorld) remote(mac string, deleted bool) {
	w.t.Helper()
	if deleted {
		w.zebraDel(mac)
		m, _ := net.ParseMAC(mac)
		if !w.d.ovl.mgr.IsStale(1000, m) {
			w.t.Fatalf("zebra's deletion of %s: not kept stale", mac)
		}
		w.advance(overlay.StaleWait)
		w.d.settleStale()
		if _, ok := w.d.ovl.mgr.RemoteOf(1000, m); ok {
			w.t.Fatalf("zebra's deletion of %s: still remote after %v", mac, overlay.StaleWait)
		}
		return
	}
	w.zebraWrite(mac, false)
}

// zebraDel gives the events of zebra deleting a remote MAC (the bridge's
// entry first, as the kernel tells them), which change nothing for now:
// kept stale.
func (w *ovWorld) zebraDel(mac string) { w.zebraWrite(mac, true) }

// zebraWrite gives zebra's events of a remote MAC (see remote); when it
// writes, something must change.
func (w *ovWorld) zebraWrite(mac string, deleted bool) { w.zebraWriteAs(mac, deleted, false) }

// zebraWriteAs is zebraWrite of a MAC advertised sticky or not: zebra
// writes a sticky one's bridge entry static sticky, not extern-learned.
func (w *ovWorld) zebraWriteAs(mac string, deleted, sticky bool) {
	w.t.Helper()
	w.zebraAt(mac, "192.0.2.2", deleted, sticky)
}

// zebraAt is zebraWriteAs of a MAC behind VTEP vtep.
func (w *ovWorld) zebraAt(mac, vtep string, deleted, sticky bool) {
	w.t.Helper()
	m, _ := net.ParseMAC(mac)
	vx := w.k.devs[1000].VXLAN
	if !deleted {
		// The bridge has one entry a MAC: zebra's on the vxlan port
		// takes it off the advertise port.
		delete(w.k.adv, m.String())
	}
	changed := false
	ns := []overlay.Neigh{
		{Ifindex: vx, MAC: m, Dst: netip.MustParseAddr(vtep), Deleted: deleted},
		{Ifindex: vx, MAC: m, Master: true, ExtLearned: !sticky, Sticky: sticky, Deleted: deleted},
	}
	if deleted {
		ns[0], ns[1] = ns[1], ns[0]
	}
	for _, n := range ns {
		c, ok := w.d.ovl.mgr.Handle(n)
		if !ok {
			continue
		}
		changed = true
		w.d.mu.Lock()
		w.d.overlayChange(c)
		w.d.mu.Unlock()
	}
	if !changed && !deleted {
		w.t.Fatalf("zebra's entries for %s changed nothing", mac)
	}
}

func (w *ovWorld) entry(mac string) (datapath.FDBEntry, bool) {
	for _, e := range w.dp.fdb {
		if e.MAC.String() == mac {
			return e, true
		}
	}
	return datapath.FDBEntry{}, false
}

func TestOverlayVTEPNotHere(t *testing.T) {
	w := newOvWorld(t)
	w.sys.add("p1", "veth")
	w.sys.add("p2", "veth")
	w.addrs = nil
	err := w.apply(ovConfig)
	if err == nil || !strings.Contains(err.Error(), "test.toml:2: daemon.vtep: 192.0.2.1 is not an address of this namespace") {
		t.Fatalf("apply with a VTEP of no interface: %v", err)
	}
	if len(w.k.devs) != 0 {
		t.Errorf("a refused apply made VNIs %v", w.k.devs)
	}
}

func TestOverlaySync(t *testing.T) {
	w := newOvWorld(t)
	w.sys.add("p1", "veth")
	w.sys.add("p2", "veth")
	w.mustApply(ovConfig)
	ov := w.port("br0", "tvx1000")
	if ov.state() != stateUp || ov.mode != "tc" || ov.ifindex != w.k.devs[1000].VXLAN {
		t.Fatalf("overlay port: %s %s ifindex %d, devices %+v", ov.state(), ov.mode, ov.ifindex, w.k.devs)
	}
	br, p1 := w.d.bridges["br0"], w.port("br0", "p1")

	// Local addresses out: learned and static, not the overlay port's own.
	w.dp.learn(br.id, p1.slot, p1.ifindex, "02:00:00:00:00:01", time.Second)
	w.sync()
	if static, ok := w.k.adv["02:00:00:00:00:01"]; !ok || static {
		t.Errorf("learned address on the advertise port: %v, %v; want written, not static", static, ok)
	}
	if static, ok := w.k.adv["02:00:00:00:00:5a"]; !ok || !static {
		t.Errorf("static address on the advertise port: %v, %v; want written static", static, ok)
	}

	// Remote addresses in: put at once, as a learned entry of the
	// overlay port, with its VTEP in fdb show.
	w.remote("02:00:00:00:00:b1", false)
	if e, ok := w.entry("02:00:00:00:00:b1"); !ok || e.Slot != ov.slot || e.Static {
		t.Fatalf("remote entry %+v, %v; want learned on the overlay port's slot %d", e, ok, ov.slot)
	}
	es, err := w.d.fdbShow("")
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(es, func(e ctl.FDBEntry) bool { return e.MAC == "02:00:00:00:00:b1" }); i < 0 || es[i].VTEP != "192.0.2.2" || es[i].Port != "tvx1000" {
		t.Errorf("fdb show: %+v", es)
	}
	if i := slices.IndexFunc(es, func(e ctl.FDBEntry) bool { return e.MAC == "02:00:00:00:00:01" }); i < 0 || es[i].VTEP != "" {
		t.Errorf("a local entry has a vtep: %+v", es)
	}
	if o := w.d.overlayStatus(ov); o.VNI != 1000 || o.VTEP != "192.0.2.1" || o.RemoteMACs != 1 || o.RemoteVTEPs != 1 || o.LocalMACs != 2 {
		t.Errorf("show: %+v", o)
	}
	w.sync() // the remote one is not advertised back
	if _, ok := w.k.adv["02:00:00:00:00:b1"]; ok {
		t.Error("a remote address was written on the advertise port")
	}

	// Never aged: zebra withdraws it.
	w.dp.fdb[fdbKeyOf(br.id, 0, mustMAC("02:00:00:00:00:b1"))] = func() datapath.FDBEntry {
		e, _ := w.entry("02:00:00:00:00:b1")
		e.Age = time.Hour
		return e
	}()
	if err := w.d.sweep(); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.entry("02:00:00:00:00:b1"); !ok {
		t.Error("the sweep aged a remote entry out")
	}

	// Flushed from the table (fdb del): put back at the next sync.
	delete(w.dp.fdb, fdbKeyOf(br.id, 0, mustMAC("02:00:00:00:00:b1")))
	w.sync()
	if e, ok := w.entry("02:00:00:00:00:b1"); !ok || e.Slot != ov.slot {
		t.Errorf("a remote entry lost from the table is not put back: %+v, %v", e, ok)
	}

	// A remote address the station of which shows up here: the datapath
	// moves it, and the sync advertises it (replace: zebra raises the
	// sequence number).
	w.dp.learn(br.id, p1.slot, p1.ifindex, "02:00:00:00:00:b1", 0)
	w.sync()
	if _, ok := w.k.adv["02:00:00:00:00:b1"]; !ok {
		t.Error("a station that moved here from a remote VTEP is not advertised")
	}
	if e, _ := w.entry("02:00:00:00:00:b1"); e.Slot != p1.slot {
		t.Errorf("the sync took a local entry back to the overlay: %+v", e)
	}
	// And zebra moving it back (a newer remote) moves it in the table,
	// and the sync withdraws the local one.
	w.remote("02:00:00:00:00:b1", true)
	w.remote("02:00:00:00:00:b1", false)
	if e, _ := w.entry("02:00:00:00:00:b1"); e.Slot != ov.slot {
		t.Errorf("a newer remote did not move the entry to the overlay: %+v", e)
	}
	w.sync()
	if _, ok := w.k.adv["02:00:00:00:00:b1"]; ok {
		t.Error("a station that moved away is still advertised")
	}

	// A remote zebra withdraws goes at the next sync; a local one that
	// goes (aged, deleted) is withdrawn.
	w.remote("02:00:00:00:00:b1", true)
	delete(w.dp.fdb, fdbKeyOf(br.id, 0, mustMAC("02:00:00:00:00:01")))
	w.k.writes = nil
	w.sync()
	if _, ok := w.entry("02:00:00:00:00:b1"); ok {
		t.Error("a withdrawn remote entry stayed")
	}
	if !slices.Equal(w.k.writes, []string{"del 02:00:00:00:00:01"}) {
		t.Errorf("writes when a local entry went: %q", w.k.writes)
	}

	// A reload without the overlay port removes the VNI.
	w.mustApply(strings.Replace(ovConfig, "[[bridge.port]]\nvxlan = 1000\n", "", 1))
	if !slices.Equal(w.k.removed, []uint32{1000}) || len(w.d.ovl.mgr.Held()) != 0 {
		t.Errorf("VNI removed %v, held %v", w.k.removed, w.d.ovl.mgr.Held())
	}
}

// ovSecond is a bridge with VNI 2000, for ovConfig's end.
const ovSecond = `[[bridge]]
name = "br1"
[[bridge.port]]
interface = "p3"
[[bridge.port]]
vxlan = 2000
`

// TestOverlayReloadDiff: a reload adds and removes overlay ports as a diff
// (issue 30): adding VNI 2000 makes its objects and leaves VNI 1000's as
// they are (not made again, nothing withdrawn, its remote entry in the
// table, no write on its advertise port); removing VNI 2000 removes its
// objects alone. An apply that made VNI 2000 and then failed removes it
// again (the journal), and leaves VNI 1000 alone.
func TestOverlayReloadDiff(t *testing.T) {
	w := newOvWorld(t)
	for _, n := range []string{"p1", "p2", "p3"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(ovConfig)
	br, p1, ov := w.d.bridges["br0"], w.port("br0", "p1"), w.port("br0", "tvx1000")
	w.dp.learn(br.id, p1.slot, p1.ifindex, "02:00:00:00:00:01", time.Second)
	w.sync()
	w.remote("02:00:00:00:00:b1", false)
	dev1000, vx1000 := w.k.devs[1000], w.sys.links["tvx1000"]
	untouched := func(when string) {
		t.Helper()
		if d := w.k.devs[1000]; d != dev1000 || w.sys.links["tvx1000"] != vx1000 {
			t.Errorf("%s: VNI 1000's devices %+v (vxlan %+v), were %+v (%+v)", when, d, w.sys.links["tvx1000"], dev1000, vx1000)
		}
		if p := w.port("br0", "tvx1000"); p.slot != ov.slot || p.ifindex != ov.ifindex || p.state() != stateUp {
			t.Errorf("%s: VNI 1000's port: slot %d ifindex %d %s, was slot %d ifindex %d", when, p.slot, p.ifindex, p.state(), ov.slot, ov.ifindex)
		}
		if e, ok := w.entry("02:00:00:00:00:b1"); !ok || e.Slot != ov.slot || e.Static {
			t.Errorf("%s: VNI 1000's remote entry %+v, %v; want learned on the overlay port's slot %d", when, e, ok, ov.slot)
		}
		if a, ok := w.d.ovl.mgr.RemoteOf(1000, mustMAC("02:00:00:00:00:b1")); !ok || a != netip.MustParseAddr("192.0.2.2") {
			t.Errorf("%s: VNI 1000's remote address behind %v, %v; want 192.0.2.2", when, a, ok)
		}
		if ws := w.k.advWrites[dev1000.Adv]; len(ws) != 0 {
			t.Errorf("%s: writes on VNI 1000's advertise port: %q", when, ws)
		}
		if _, ok := w.k.adv["02:00:00:00:00:01"]; !ok {
			t.Errorf("%s: VNI 1000's local address withdrawn: %v", when, w.k.adv)
		}
	}

	// Add VNI 2000, with a station of its own.
	w.k.writes, w.k.advWrites = nil, nil
	w.mustApply(ovConfig + ovSecond)
	br1, p3 := w.d.bridges["br1"], w.port("br1", "p3")
	w.dp.learn(br1.id, p3.slot, p3.ifindex, "02:00:00:00:00:03", time.Second)
	w.sync()
	if len(w.k.removed) != 0 || !slices.Equal(w.k.made, []uint32{1000, 2000}) || !slices.Equal(w.d.ovl.mgr.Held(), []uint32{1000, 2000}) {
		t.Errorf("adding VNI 2000: removed %v, made %v, held %v; want nothing removed, VNI 2000 made, both held", w.k.removed, w.k.made, w.d.ovl.mgr.Held())
	}
	if p := w.port("br1", "tvx2000"); p.state() != stateUp || p.ifindex != w.k.devs[2000].VXLAN {
		t.Errorf("VNI 2000's port: %s ifindex %d, devices %+v", p.state(), p.ifindex, w.k.devs[2000])
	}
	if ws := w.k.advWrites[w.k.devs[2000].Adv]; !slices.Equal(ws, []string{"set 02:00:00:00:00:03"}) {
		t.Errorf("writes on VNI 2000's advertise port: %q, want its station's", ws)
	}
	if len(w.k.writes) != 1 {
		t.Errorf("writes on the advertise ports: %q, want VNI 2000's one", w.k.writes)
	}
	untouched("VNI 2000 added")

	// And remove it again.
	w.k.writes, w.k.advWrites = nil, nil
	w.mustApply(ovConfig)
	w.sync()
	if !slices.Equal(w.k.removed, []uint32{2000}) || !slices.Equal(w.d.ovl.mgr.Held(), []uint32{1000}) {
		t.Errorf("removing VNI 2000: removed %v, held %v", w.k.removed, w.d.ovl.mgr.Held())
	}
	if _, ok := w.sys.links["tvx2000"]; ok {
		t.Error("VNI 2000's vxlan device stayed")
	}
	if len(w.k.writes) != 0 {
		t.Errorf("removing VNI 2000 wrote %q", w.k.writes)
	}
	untouched("VNI 2000 removed")

	// An apply that makes VNI 2000 and fails after: the rollback removes it.
	w.k.removed, w.k.made = nil, nil
	w.dp.fail = func(op string) error {
		if strings.HasPrefix(op, "SetBridge br1") {
			return fmt.Errorf("injected: %s", op)
		}
		return nil
	}
	if err := w.apply(ovConfig + ovSecond); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("apply with br1's bridge refused: %v", err)
	}
	w.dp.fail = nil
	if !slices.Equal(w.k.made, []uint32{2000}) || !slices.Equal(w.k.removed, []uint32{2000}) || !slices.Equal(w.d.ovl.mgr.Held(), []uint32{1000}) {
		t.Errorf("a failed apply that made VNI 2000: made %v, removed %v, held %v; want it made and removed again", w.k.made, w.k.removed, w.d.ovl.mgr.Held())
	}
	if _, ok := w.sys.links["tvx2000"]; ok {
		t.Error("a failed apply left VNI 2000's vxlan device")
	}
	w.sync()
	untouched("a failed apply")
}

// TestOverlayRemoteRoom: remote addresses are bounded as learning is, by
// the bridge's max_entries and the overlay port's max_macs: those beyond
// are left out of the table (their frames flood to the VNI's VTEPs), and
// put in once there is room.
func TestOverlayRemoteRoom(t *testing.T) {
	w := newOvWorld(t)
	w.sys.add("p1", "veth")
	w.sys.add("p2", "veth")
	cfg := strings.Replace(ovConfig, "vxlan = 1000\n", "vxlan = 1000\nmax_macs = 2\n", 1)
	w.mustApply(cfg)
	br, p1 := w.d.bridges["br0"], w.port("br0", "p1")
	w.dp.learn(br.id, p1.slot, p1.ifindex, "02:00:00:00:00:01", time.Second)
	for _, m := range []string{"02:00:00:00:00:b1", "02:00:00:00:00:b2", "02:00:00:00:00:b3"} {
		w.remote(m, false)
	}
	w.sync()
	count := func() int {
		n := 0
		for _, m := range []string{"02:00:00:00:00:b1", "02:00:00:00:00:b2", "02:00:00:00:00:b3"} {
			if _, ok := w.entry(m); ok {
				n++
			}
		}
		return n
	}
	if n := count(); n != 2 {
		t.Errorf("%d remote entries with max_macs = 2", n)
	}
	if !w.d.ovl.full[1000] {
		t.Error("remote addresses left out, and not said")
	}
	// Room again: the third goes in.
	w.remote("02:00:00:00:00:b1", true)
	w.sync()
	if n := count(); n != 2 || w.d.ovl.full[1000] {
		t.Errorf("after one remote went: %d entries, full %v; want the third in, 2 in all, no longer full", n, w.d.ovl.full[1000])
	}
	if _, ok := w.entry("02:00:00:00:00:b3"); !ok {
		t.Error("the remote address left out is not put in once there is room")
	}
}

// TestOverlaySticky: a remote address advertised sticky is held as a
// static entry of the overlay port (so that no frame from another port
// takes it), replacing a learned entry of a local port (which is not
// advertised then); one no longer sticky becomes a learned entry, and one
// withdrawn goes; a static of the operator's is left alone, and is
// advertised static (sticky).
func TestOverlaySticky(t *testing.T) {
	w := newOvWorld(t)
	w.sys.add("p1", "veth")
	w.sys.add("p2", "veth")
	w.mustApply(ovConfig)
	br, p1, ov := w.d.bridges["br0"], w.port("br0", "p1"), w.port("br0", "tvx1000")
	const m = "02:00:00:00:00:c1"
	is := func(what string, static bool, slot uint16) {
		t.Helper()
		if e, ok := w.entry(m); !ok || e.Static != static || e.Slot != slot {
			t.Errorf("%s: entry %+v, %v; want static %v on slot %d", what, e, ok, static, slot)
		}
	}

	w.zebraWriteAs(m, false, true)
	is("a sticky remote", true, ov.slot)
	w.sync()
	is("a sticky remote after a sync", true, ov.slot)
	if _, ok := w.k.adv[m]; ok {
		t.Errorf("a sticky remote is advertised as local")
	}
	w.zebraWriteAs(m, false, false)
	is("no longer sticky", false, ov.slot)
	w.zebraWriteAs(m, false, true)
	is("sticky again", true, ov.slot)

	// Its static taken out behind the daemon's back (a flush): put back.
	if _, err := w.dp.DelFDB(br.id, 0, mustMAC(m)); err != nil {
		t.Fatal(err)
	}
	w.dp.learn(br.id, p1.slot, p1.ifindex, m, time.Second)
	w.sync()
	is("a sticky remote the table lost, learned on a local port since", true, ov.slot)
	if _, ok := w.k.adv[m]; ok {
		t.Errorf("the local learn of a sticky remote is advertised")
	}

	// Withdrawn: its static goes at the sync after.
	w.zebraWriteAs(m, true, true)
	w.advance(overlay.StaleWait)
	w.d.settleStale()
	w.sync()
	if e, ok := w.entry(m); ok {
		t.Errorf("a withdrawn sticky remote: entry %+v left", e)
	}

	// The operator's static wins over a sticky remote of the same MAC,
	// and stays when it goes.
	const op = "02:00:00:00:00:5a"
	w.zebraWriteAs(op, false, true)
	w.sync()
	if e, ok := w.entry(op); !ok || !e.Static || e.Slot != w.port("br0", "p2").slot {
		t.Errorf("the operator's static under a sticky remote: %+v, %v; want static on p2", e, ok)
	}
	if static, ok := w.k.adv[op]; !ok || !static {
		t.Errorf("the operator's static: advertised %v, static %v; want static (sticky)", ok, static)
	}
}

// TestOverlayFairShare: each remote VTEP holds a share of the table as a
// port does. A bridge of 32 entries (mark 30) with two ports and an
// overlay port whose addresses are behind two VTEPs has 4 share holders
// (the two ports, the two VTEPs), a share of 8 each. A flood of 40
// addresses behind one VTEP fills the table to the mark and no further;
// the other VTEP's newcomer is put all the same (under its share), which
// takes the bridge past its mark; the next look evicts the flooding VTEP
// down to its share, and the syncs after do not put its evicted addresses
// back, nor its others: it holds its share, not more. A newcomer behind
// the other VTEP is still put; an evicted address whose route changes (it
// moved behind the other VTEP) is put again; and once the flood is
// withdrawn, the VTEP is held to nothing.
func TestOverlayFairShare(t *testing.T) {
	w := newOvWorld(t)
	w.sys.add("p1", "veth")
	w.sys.add("p2", "veth")
	w.mustApply(strings.Replace(ovConfig, "aging = \"10s\"\n", "aging = \"10s\"\nmax_entries = 32\n", 1))
	br, p1, ov := w.d.bridges["br0"], w.port("br0", "p1"), w.port("br0", "tvx1000")
	const vtepB, vtepC = "192.0.2.2", "192.0.2.3"
	w.dp.learn(br.id, p1.slot, p1.ifindex, "02:00:00:00:00:01", time.Second)
	w.zebraAt("02:00:00:00:0c:01", vtepC, false, false)
	flood := func(i int) string { return fmt.Sprintf("02:00:00:00:0b:%02x", i) }
	for i := range 40 {
		w.zebraAt(flood(i), vtepB, false, false)
	}
	w.sync()
	behind := func(vtep string) int {
		n := 0
		for _, e := range w.dp.fdb {
			if a, ok := w.d.ovl.mgr.RemoteOf(1000, e.MAC); ok && e.Slot == ov.slot && a.String() == vtep {
				n++
			}
		}
		return n
	}
	total := func() int { n, _ := w.d.counters.BridgeMACs(br.id); return n }
	if m, vteps := w.d.holderMarks(br); m.High != 30 || m.Fair != 8 || vteps != 2 {
		t.Fatalf("marks of 32 entries over 2 ports and 2 VTEPs: %+v, %d VTEPs; want high 30, share 8, 2 VTEPs", m, vteps)
	}
	if n := total(); n != 30 {
		t.Errorf("the flood filled the table to %d, want the mark, 30", n)
	}
	w.zebraAt("02:00:00:00:0c:02", vtepC, false, false)
	w.sync()
	if n, c := total(), behind(vtepC); n != 31 || c != 2 {
		t.Errorf("a newcomer behind the VTEP under its share at the mark: %d entries, %d behind it; want 31, 2", n, c)
	}
	if err := w.d.makeRoom(); err != nil {
		t.Fatal(err)
	}
	if b := behind(vtepB); b != 8 {
		t.Errorf("the look evicted the flooding VTEP down to %d, want its share, 8", b)
	}
	for range 3 {
		w.sync()
	}
	if b, n := behind(vtepB), total(); b != 8 || n != 11 {
		t.Errorf("syncs after the eviction: the flooding VTEP holds %d, the bridge %d; want its share, 8, and 11", b, n)
	}
	w.zebraAt("02:00:00:00:0c:03", vtepC, false, false)
	w.sync()
	if c := behind(vtepC); c != 3 {
		t.Errorf("a newcomer behind the other VTEP after the eviction: %d behind it, want 3", c)
	}
	// An evicted address moves behind the other VTEP: put again.
	var moved string
	for i := range 40 {
		if _, ok := w.entry(flood(i)); !ok {
			moved = flood(i)
			break
		}
	}
	w.zebraAt(moved, vtepC, false, false)
	w.sync()
	if e, ok := w.entry(moved); !ok || e.Slot != ov.slot {
		t.Errorf("an evicted address whose route changed: %+v, %v; want put again", e, ok)
	}
	// The flood withdrawn: its evictions are forgotten.
	for i := range 40 {
		if flood(i) != moved {
			w.zebraAt(flood(i), vtepB, true, false)
		}
	}
	w.advance(overlay.StaleWait)
	w.d.settleStale()
	w.sync()
	if b, ev := behind(vtepB), len(w.d.ovl.evicted[1000]); b != 0 || ev != 0 {
		t.Errorf("after the flood's withdrawal: %d entries behind its VTEP, %d evictions remembered; want none", b, ev)
	}
}

// TestOverlayVLAN: on a VLAN-aware bridge an overlay port carries its
// VLAN: the local addresses of that VLAN only are advertised, and remote
// ones are put in it.
func TestOverlayVLAN(t *testing.T) {
	w := newOvWorld(t)
	w.sys.add("p1", "veth")
	w.sys.add("p2", "veth")
	w.mustApply(`[daemon]
vtep = "192.0.2.1"
[[bridge]]
name = "br0"
[[bridge.port]]
interface = "p1"
trunk = [10, 20]
[[bridge.port]]
interface = "p2"
vlan = 20
[[bridge.port]]
vxlan = 1000
vlan = 10
`)
	br, p1, ov := w.d.bridges["br0"], w.port("br0", "p1"), w.port("br0", "tvx1000")
	for _, e := range []datapath.FDBEntry{
		{Bridge: br.id, VLAN: 10, MAC: mustMAC("02:00:00:00:00:10"), Slot: p1.slot, Ifindex: uint32(p1.ifindex)},
		{Bridge: br.id, VLAN: 20, MAC: mustMAC("02:00:00:00:00:20"), Slot: p1.slot, Ifindex: uint32(p1.ifindex)},
	} {
		w.dp.fdb[fdbKeyOf(e.Bridge, e.VLAN, e.MAC)] = e
	}
	w.sync()
	if _, ok := w.k.adv["02:00:00:00:00:10"]; !ok || len(w.k.adv) != 1 {
		t.Errorf("advertised %v; want VLAN 10's address only", w.k.adv)
	}
	w.remote("02:00:00:00:00:b1", false)
	e, ok := w.dp.fdb[fdbKeyOf(br.id, 10, mustMAC("02:00:00:00:00:b1"))]
	if !ok || e.Slot != ov.slot {
		t.Errorf("remote entry in VLAN 10: %+v, %v; table %s", e, ok, w.dp.snapshot())
	}
}

// While a bridge has an overlay port, every link event takes an apply:
// its VNI's kernel objects (a bridge, an advertise veth) are no ports.
func TestOverlayEventsMatter(t *testing.T) {
	w := newOvWorld(t)
	w.mustApply(ovConfig)
	if !w.d.eventsMatter([]LinkEvent{{Index: 9999, Name: "not-a-port"}}) {
		t.Error("an event of an interface of no port takes no apply while a bridge has an overlay port")
	}
}

// TestOverlayLearnEvents: a station the datapath learns beside an overlay
// port is advertised from its event at once, with no comparison of the
// table; one that moves onto the overlay port is withdrawn; a learn in a
// bridge without an overlay port writes nothing. A comparison of the
// whole table that walked past a station before its event came does not
// withdraw it (nor re-advertise one whose move came during the walk).
func TestOverlayLearnEvents(t *testing.T) {
	w := newOvWorld(t)
	w.sys.add("p1", "veth")
	w.sys.add("p2", "veth")
	w.mustApply(ovConfig)
	w.sync() // the static entry
	br, p1, ov := w.d.bridges["br0"], w.port("br0", "p1"), w.port("br0", "tvx1000")
	event := func(mac string, to *portState) {
		w.dp.learn(br.id, to.slot, to.ifindex, mac, 0)
		w.d.mu.Lock()
		w.d.overlayEvent(datapath.Move{Learn: true, Bridge: br.id, MAC: mustMAC(mac), ToSlot: to.slot, ToIfindex: uint32(to.ifindex)})
		w.d.mu.Unlock()
	}
	w.k.writes = nil
	event("02:00:00:00:00:01", p1)
	if !slices.Equal(w.k.writes, []string{"set 02:00:00:00:00:01"}) {
		t.Errorf("writes for a learned station: %q, want it set at once", w.k.writes)
	}
	event("02:00:00:00:00:01", p1) // told again (a move back): no write
	if len(w.k.writes) != 1 {
		t.Errorf("writes for an advertised station told again: %q", w.k.writes)
	}
	w.d.mu.Lock()
	w.d.overlayEvent(datapath.Move{Learn: true, Bridge: br.id + 7, MAC: mustMAC("02:00:00:00:00:09"), ToSlot: p1.slot})
	w.d.mu.Unlock()
	if len(w.k.writes) != 1 {
		t.Errorf("a learn of another bridge wrote %q", w.k.writes)
	}
	event("02:00:00:00:00:01", ov)
	if !slices.Equal(w.k.writes, []string{"set 02:00:00:00:00:01", "del 02:00:00:00:00:01"}) {
		t.Errorf("writes for a station that moved onto the overlay: %q", w.k.writes)
	}

	// The race: the walk's view lacks 02 (learned after it passed) and
	// still has 03 on p1 (moved onto the overlay after it passed).
	event("02:00:00:00:00:03", p1)
	w.d.mu.Lock()
	accs := w.d.overlayAccs()
	w.d.mu.Unlock()
	for _, e := range w.dp.fdb {
		for _, a := range accs {
			a.add(e)
		}
	}
	event("02:00:00:00:00:02", p1)
	event("02:00:00:00:00:03", ov)
	w.d.mu.Lock()
	err := w.d.applyOverlay(accs)
	w.d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := w.k.adv["02:00:00:00:00:02"]; !ok {
		t.Error("a station learned while the table was walked was withdrawn by the comparison")
	}
	if _, ok := w.k.adv["02:00:00:00:00:03"]; ok {
		t.Error("a station that moved onto the overlay while the table was walked was advertised again")
	}
}

// xdpOvConfig is a bridge of host port p1 in mode %s and VNI 1000.
const xdpOvConfig = `[daemon]
vtep = "192.0.2.1"
[[bridge]]
name = "br0"
[[bridge.port]]
interface = "p1"
mode = "%s"
[[bridge.port]]
vxlan = 1000
`

// TestOverlayXDPVia: an overlay port beside an xdp port comes up when its
// VNI has the xdp way in, and the port maps send XDP copies there (Via)
// while tc ports keep the vxlan device; without the way in it is down,
// saying why (a vxlan device takes no XDP redirect).
func TestOverlayXDPVia(t *testing.T) {
	for _, tramp := range []bool{false, true} {
		t.Run(fmt.Sprintf("tramp=%v", tramp), func(t *testing.T) {
			w := newOvWorld(t)
			w.k.tramp = tramp
			w.sys.add("p1", "veth")
			w.mustApply(fmt.Sprintf(xdpOvConfig, "xdp"))
			p := w.port("br0", "tvx1000")
			if !tramp {
				if p.state() != stateDown || !strings.Contains(p.why, "ndo_xdp_xmit") {
					t.Errorf("overlay port with no xdp way in beside an xdp port: %s (%s)", p.state(), p.why)
				}
				return
			}
			n := overlay.NamesOf(1000)
			via, peer := w.sys.links[n.Tramp].Index, w.sys.links[n.TrampPeer].Index
			if p.state() != stateUp || p.mode != mode.TC {
				t.Fatalf("overlay port beside an xdp port: %s %s (%s)", p.state(), p.mode, p.why)
			}
			got := w.dp.topo.ports[uint32(p.ifindex)]
			if got.Via != uint32(via) || got.ViaPeer != uint32(peer) || !got.IsOverlay() {
				t.Errorf("overlay port written %+v, want Via %d ViaPeer %d", got, via, peer)
			}
			for _, bp := range w.dp.topo.bridges[p.bridge.id].Ports {
				if bp.Ifindex == uint32(p.ifindex) && bp.Via != uint32(via) {
					t.Errorf("the bridge's port list has the overlay port %+v, want Via %d", bp, via)
				}
			}
			if p1 := w.port("br0", "p1"); p1.mode != mode.XDP || w.dp.topo.ports[uint32(p1.ifindex)].Via != 0 {
				t.Errorf("p1: %s, %+v", p1.mode, w.dp.topo.ports[uint32(p1.ifindex)])
			}
			// The way in made again (deleted by hand, say): new
			// ifindexes, which the next apply writes though nothing
			// else of the port changed.
			for _, name := range []string{n.Tramp, n.TrampPeer} {
				w.sys.del(name)
				w.sys.add(name, "veth")
			}
			w.sys.set(n.Tramp, func(l *Link) { l.XDP |= netdev.XDPNdoXmit })
			via, peer = w.sys.links[n.Tramp].Index, w.sys.links[n.TrampPeer].Index
			w.mustApply(fmt.Sprintf(xdpOvConfig, "xdp"))
			if got := w.dp.topo.ports[uint32(p.ifindex)]; got.Via != uint32(via) || got.ViaPeer != uint32(peer) {
				t.Errorf("after the way in was made again: overlay port written %+v, want Via %d ViaPeer %d", got, via, peer)
			}
		})
	}
}

// TestOverlayEncaps: the daemon writes the outer headers of each remote
// MAC of an overlay port, for the XDP and tc programs to encapsulate known
// unicast themselves, where the next hop is resolved and its device has
// room; a MAC that goes or changes VTEP loses them at once; an unresolved
// neighbour or an underlay too small gets none; an underlay that takes no
// XDP redirect gets them for tc alone (NoXDP); a bridge whose host ports
// are all at tc gets them as one with xdp ports.
func TestOverlayEncaps(t *testing.T) {
	w := newOvWorld(t)
	w.k.tramp = true
	w.sys.add("p1", "veth")
	ul := w.sys.add("ul0", "veth")
	w.sys.set("ul0", func(l *Link) { l.XDP |= netdev.XDPNdoXmit })
	nh := overlay.NextHop{Ifindex: ul.Index, Src: net.HardwareAddr{2, 0, 0, 0, 0xee, 1}, Dst: net.HardwareAddr{2, 0, 0, 0, 0xee, 2}, MTU: 1500}
	resolved := true
	w.d.ovl.nextHop = func(local, vtep netip.Addr) (overlay.NextHop, error) {
		if !resolved {
			return overlay.NextHop{}, overlay.ErrUnresolved
		}
		return nh, nil
	}
	w.mustApply(fmt.Sprintf(xdpOvConfig, "xdp"))
	br := w.d.bridges["br0"]
	mac := "02:00:00:00:00:b1"
	hw, _ := net.ParseMAC(mac)
	k := datapath.EncapKey{Bridge: br.id, MAC: overlay.MAC6(hw)}
	w.remote(mac, false)
	w.sync()
	want := datapath.Encap{Ifindex: uint32(ul.Index), Hdr: overlay.Header(nh, netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), 1000, 4789)}
	if got, ok := w.odp.encaps[k]; !ok || got != want {
		t.Fatalf("encapsulation of %s: %+v, %v; want %+v", mac, got, ok, want)
	}
	// Kept while the MAC is stale (an FRR restart keeps its frames
	// encapsulated), and gone with it at the sync after it went.
	w.zebraDel(mac)
	w.sync()
	if _, ok := w.odp.encaps[k]; !ok {
		t.Errorf("the encapsulation of a stale remote MAC went")
	}
	// zebra writes it again behind the same VTEP (FRR back): its headers
	// stay, before any comparison; behind another VTEP, they go at once
	// (the next comparison writes the new ones).
	w.zebraWrite(mac, false)
	if got, ok := w.odp.encaps[k]; !ok || got != want {
		t.Errorf("zebra wrote %s again behind the same VTEP: encapsulation %+v, %v; want kept, %+v", mac, got, ok, want)
	}
	w.zebraAt(mac, "192.0.2.3", false, false)
	if got, ok := w.odp.encaps[k]; ok {
		t.Errorf("%s moved to another VTEP: encapsulation %+v still there", mac, got)
	}
	w.zebraWrite(mac, false)
	w.sync()
	if got := w.odp.encaps[k]; got != want {
		t.Fatalf("%s back behind its VTEP: encapsulation %+v, want %+v", mac, got, want)
	}
	w.zebraDel(mac)
	w.advance(overlay.StaleWait)
	w.d.settleStale()
	w.sync()
	if _, ok := w.odp.encaps[k]; ok {
		t.Errorf("the encapsulation of a remote MAC that went is still there")
	}
	w.remote(mac, false)
	w.sync()
	if len(w.odp.encaps) != 1 {
		t.Fatalf("encapsulations %v, want one again", w.odp.encaps)
	}
	// An underlay that takes no XDP redirect: for tc alone (XDP's frames
	// take the way in).
	w.sys.set("ul0", func(l *Link) { l.XDP &^= netdev.XDPNdoXmit })
	w.sync()
	tcOnly := want
	tcOnly.NoXDP = true
	if got, ok := w.odp.encaps[k]; len(w.odp.encaps) != 1 || !ok || got != tcOnly {
		t.Errorf("encapsulations into an underlay that takes no XDP redirect: %v, want only %+v", w.odp.encaps, tcOnly)
	}
	w.sys.set("ul0", func(l *Link) { l.XDP |= netdev.XDPNdoXmit })
	w.sync()
	if got := w.odp.encaps[k]; got != want {
		t.Errorf("encapsulation once the underlay takes XDP redirects again: %+v, want %+v", got, want)
	}
	// An underlay whose MTU has no room for the overlay's frames
	// encapsulated (an IPv4 packet of the overlay's MTU, 1450, plus the
	// 50 bytes of outer headers and the inner Ethernet header): none.
	nh.MTU = 1499
	w.sync()
	if len(w.odp.encaps) != 0 {
		t.Errorf("encapsulations into an underlay too small for them: %v", w.odp.encaps)
	}
	nh.MTU = 1500
	resolved = false
	w.sync()
	if len(w.odp.encaps) != 0 {
		t.Errorf("encapsulations with an unresolved next hop: %v", w.odp.encaps)
	}
	resolved = true
	w.sync()
	if len(w.odp.encaps) != 1 {
		t.Errorf("encapsulations once resolved: %v", w.odp.encaps)
	}
	// Host ports at tc: the tc program reads them.
	w.mustApply(fmt.Sprintf(xdpOvConfig, "tc"))
	w.sync()
	if got, ok := w.odp.encaps[k]; len(w.odp.encaps) != 1 || !ok || got != want {
		t.Errorf("encapsulations in a bridge whose host ports are at tc: %v, want only %+v", w.odp.encaps, want)
	}
}
