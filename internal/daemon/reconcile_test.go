package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
)

// Unit tests of the reconcile: a fake dataplane and a fake system, no root.

type world struct {
	t   *testing.T
	dp  *fakeDP
	sys *fakeSys
	d   *Daemon
}

func newWorld(t *testing.T) *world {
	dp, sys := newFakeDP(), newFakeSys()
	return &world{t: t, dp: dp, sys: sys, d: newDaemon(quietLog(), dp, sys, fakeSizes.FDBCapacity, fakeSizes.Refresh)}
}

func cfgOf(t *testing.T, body string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.toml", []byte(body))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// bridges writes a config: each bridge name with its ports; a port
// "p1:xdp" has a mode; "@br1" is a patch port to br1, "@br1/up" one named up.
func bridges(spec ...string) string {
	var b strings.Builder
	for _, s := range spec {
		name, ports, _ := strings.Cut(s, "=")
		fmt.Fprintf(&b, "[[bridge]]\nname = %q\n", name)
		for _, p := range strings.Split(ports, ",") {
			if peer, ok := strings.CutPrefix(p, "@"); ok {
				peer, pname, _ := strings.Cut(peer, "/")
				fmt.Fprintf(&b, "[[bridge.port]]\npatch = %q\n", peer)
				if pname != "" {
					fmt.Fprintf(&b, "name = %q\n", pname)
				}
				continue
			}
			ifname, m, _ := strings.Cut(p, ":")
			fmt.Fprintf(&b, "[[bridge.port]]\ninterface = %q\n", ifname)
			if m != "" {
				fmt.Fprintf(&b, "mode = %q\n", m)
			}
		}
	}
	return b.String()
}

func (w *world) apply(body string) error {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	return w.d.apply(cfgOf(w.t, body))
}

func (w *world) mustApply(body string) {
	w.t.Helper()
	if err := w.apply(body); err != nil {
		w.t.Fatalf("apply: %v", err)
	}
}

// applyAsFile applies body as the daemon's file, so that what applies it
// again later (a block, a reload) finds it.
func (w *world) applyAsFile(body string) {
	w.t.Helper()
	cfg := cfgOf(w.t, body)
	w.d.mu.Lock()
	w.d.cfg = cfg
	err := w.d.apply(cfg)
	w.d.mu.Unlock()
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) port(bridge, name string) *portState {
	w.t.Helper()
	b := w.d.bridges[bridge]
	if b == nil {
		w.t.Fatalf("no bridge %s", bridge)
	}
	p := b.port(name)
	if p == nil {
		w.t.Fatalf("no port %s in %s", name, bridge)
	}
	return p
}

func (w *world) show() string {
	w.t.Helper()
	st, err := w.d.status()
	if err != nil {
		w.t.Fatal(err)
	}
	return fmt.Sprint(st.Bridges)
}

func (w *world) flooding(bridge string) []uint32 {
	b := w.dp.bridges[w.d.bridges[bridge].id]
	var out []uint32
	for _, p := range b.Ports {
		out = append(out, p.Ifindex)
	}
	return out
}

func TestApplyAndReloadDiff(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "p3", "q1"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1,p2", "br1=q1"))
	if len(w.dp.ports) != 3 || len(w.dp.bridges) != 2 {
		t.Fatalf("after start: %s", w.dp.snapshot())
	}
	for _, p := range []*portState{w.port("br0", "p1"), w.port("br0", "p2")} {
		if p.state() != stateUp || p.mode != mode.TC {
			t.Errorf("port %s: %s %s (%s)", p.name(), p.state(), p.mode, p.why)
		}
	}
	slot1 := w.port("br0", "p1").slot

	// A reload that adds p3 and drops br1 touches neither p1 nor p2.
	w.dp.ops = nil
	w.mustApply(bridges("br0=p1,p2,p3"))
	for _, op := range w.dp.ops {
		for _, kept := range []string{"p1", "p2"} {
			idx := w.port("br0", kept).ifindex
			if strings.Contains(op, fmt.Sprintf("Attach %d ", idx)) || strings.Contains(op, fmt.Sprintf("Port %d ", idx)) || strings.HasPrefix(op, fmt.Sprintf("Detach %d/", idx)) {
				t.Errorf("the reload touched %s: %s", kept, op)
			}
		}
	}
	if w.port("br0", "p1").slot != slot1 {
		t.Errorf("p1 changed slot")
	}
	if _, ok := w.d.bridges["br1"]; ok || len(w.dp.bridges) != 1 {
		t.Errorf("br1 still there: %s", w.dp.snapshot())
	}
	if len(w.flooding("br0")) != 3 {
		t.Errorf("br0 floods to %v, want 3 ports", w.flooding("br0"))
	}
	// A new max_macs is a write in place.
	w.dp.ops = nil
	w.mustApply(bridges("br0=p1,p2,p3") + "max_macs = 5\n")
	if len(w.dp.ops) != 1 || !strings.HasPrefix(w.dp.ops[0], "SetPort") {
		t.Errorf("a new limit on p3 made %v, want one port write", w.dp.ops)
	}
}

// An apply that fails midway (a full table, a map write refused) undoes
// what it did: the dataplane and the model are as before, the old config
// still forwards, and show/stats answer.
func TestFailedApplyKeepsRunningState(t *testing.T) {
	for _, c := range []struct {
		name, failOn string
	}{
		{"a new bridge's write", "SetBridge br1"},
		{"a port's write", "SetPort"},
		{"a static entry", "AddFDB"},
		{"removing a bridge", "DelBridge"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			for _, n := range []string{"p1", "p2", "p3", "q1", "q2"} {
				w.sys.add(n, "veth")
			}
			start := bridges("br0=p1,p2", "br2=q2")
			w.mustApply(start)
			w.dp.learn(w.d.bridges["br0"].id, w.port("br0", "p1").slot, w.port("br0", "p1").ifindex, "02:00:00:00:00:01", time.Second)
			before, shown := w.dp.snapshot(), w.show()

			// p2 moves to br1, which also gets q1 and a static entry.
			next := bridges("br0=p1,p3", "br1=q1,p2") + "[[bridge.static]]\nmac = \"02:00:00:00:00:09\"\nport = \"q1\"\n"
			failed := false // once: the undo must go through
			w.dp.fail = func(op string) error {
				if !failed && strings.HasPrefix(op, c.failOn) {
					failed = true
					return errors.New("injected: no room")
				}
				return nil
			}
			err := w.apply(next)
			if err == nil || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("apply with %s failing: %v", c.failOn, err)
			}
			w.dp.fail = nil
			if after := w.dp.snapshot(); after != before {
				t.Errorf("the dataplane changed:\nbefore\n%s\nafter\n%s", before, after)
			}
			if got := w.show(); got != shown {
				t.Errorf("the model changed:\nbefore %s\nafter  %s", shown, got)
			}
			if _, err := w.d.stats(""); err != nil {
				t.Errorf("stats after a failed apply: %v", err)
			}
			// And the same change goes through once nothing refuses it.
			w.mustApply(next)
			if len(w.dp.bridges) != 2 || w.port("br0", "p3").state() != stateUp || w.port("br1", "p2").state() != stateUp {
				t.Errorf("apply after the failure: %s", w.dp.snapshot())
			}
		})
	}
}

// Defect 1: whether a port can take the XDP redirects of its bridge's xdp
// ports is what the kernel reports (ndo_xdp_xmit), not its device type: a
// NIC without XDP support at tc beside an xdp port is down, with the reason,
// instead of black-holing the frames sent to it.
func TestModeFromXDPFeatures(t *testing.T) {
	w := newWorld(t)
	nic := w.sys.add("eth1", "device")
	w.sys.set("eth1", func(l *Link) { l.XDP = 1 | 2 | 4 }) // basic, redirect, ndo-xmit
	w.sys.add("eth2", "device")                            // no XDP at all
	w.dp.refuse[w.sys.links["eth2"].Index] = errors.New("operation not supported")
	w.mustApply(bridges("br0=eth1:xdp,eth2"))
	if p := w.port("br0", "eth1"); p.mode != mode.XDP {
		t.Fatalf("eth1: %s (%s), want xdp", p.mode, p.why)
	}
	p := w.port("br0", "eth2")
	if p.state() != stateDown || !strings.Contains(p.why, "no ndo_xdp_xmit") {
		t.Errorf("eth2 beside an xdp port: %s (%s), want down: it cannot take their redirects", p.state(), p.why)
	}
	if fl := w.flooding("br0"); len(fl) != 1 || fl[0] != uint32(nic.Index) {
		t.Errorf("br0 floods to %v, want only eth1", fl)
	}
	// Alone with tc ports, it is fine at tc; and an auto NIC beside a
	// port that takes no redirects stays at tc.
	w.sys.add("v1", "veth")
	w.sys.add("lbr", "bridge")
	w.mustApply(bridges("br0=eth2,v1", "br1=eth1,lbr"))
	if p := w.port("br0", "eth2"); p.state() != stateUp || p.mode != mode.TC {
		t.Errorf("eth2 among tc ports: %s %s (%s)", p.state(), p.mode, p.why)
	}
	if p := w.port("br1", "eth1"); p.mode != mode.TC || !strings.Contains(p.why, `"lbr"`) {
		t.Errorf("auto eth1 beside a bridge device: %s (%s), want tc because of lbr", p.mode, p.why)
	}
}

// A veth at XDP gets its peer prepared (GRO on, TX checksum off); a veth at
// tc beside it gets GRO on its peer; both are given back when no longer
// needed, and on a stop without persist.
func TestPeersPreparedAndRestored(t *testing.T) {
	w := newWorld(t)
	v1, v2 := w.sys.add("v1", "veth"), w.sys.add("v2", "veth")
	w.mustApply(bridges("br0=v1:xdp,v2"))
	if got := w.sys.peers[v1.Index].features(); got != "rx-gro=on tx-checksum-ip-generic=off" {
		t.Errorf("peer of xdp v1: %s", got)
	}
	if got := w.sys.peers[v2.Index].features(); got != "rx-gro=on tx-checksum-ip-generic=on" {
		t.Errorf("peer of tc v2 beside an xdp port: %s", got)
	}
	// Applied again (any link event does), nothing is undone: the peer of
	// v2 reports ndo-xmit now, which is the daemon's own doing.
	for i := 0; i < 3; i++ {
		w.mustApply(bridges("br0=v1:xdp,v2"))
		if got := w.sys.peers[v2.Index].features(); got != "rx-gro=on tx-checksum-ip-generic=on" {
			t.Fatalf("peer of tc v2 after apply %d: %s", i+2, got)
		}
	}
	w.mustApply(bridges("br0=v1:tc,v2"))
	for _, v := range []Link{v1, v2} {
		if got := w.sys.peers[v.Index].features(); got != "rx-gro=off tx-checksum-ip-generic=on" {
			t.Errorf("peer of %s once no port is at xdp: %s", v.Name, got)
		}
	}
	if ks := w.dp.attachedKeys(); !slices.Equal(ks, []string{fmt.Sprintf("%d/tc", v1.Index), fmt.Sprintf("%d/tc", v2.Index)}) {
		t.Errorf("attached after v1 went to tc: %v", ks)
	}
	w.mustApply(bridges("br0=v1:xdp,v2"))
	w.d.shutdown()
	for _, v := range []Link{v1, v2} {
		if got := w.sys.peers[v.Index].features(); got != "rx-gro=off tx-checksum-ip-generic=on" {
			t.Errorf("peer of %s after stop: %s", v.Name, got)
		}
	}
	if len(w.dp.attached) != 0 {
		t.Errorf("still attached after stop: %v", w.dp.attachedKeys())
	}
}

// Defect 4: a port whose link goes down (admin or carrier) leaves the
// floods and loses its entries, and comes back when it is up.
func TestLinkDownLeavesFloods(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "p3"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1,p2,p3"))
	p3 := w.port("br0", "p3")
	w.dp.learn(w.d.bridges["br0"].id, p3.slot, p3.ifindex, "02:00:00:00:00:03", time.Second)
	w.sys.set("p3", func(l *Link) { l.Running = false })
	w.d.reconcile()
	p3 = w.port("br0", "p3")
	if p3.state() != stateLinkDown {
		t.Errorf("p3 without carrier: %s", p3.state())
	}
	if len(w.flooding("br0")) != 2 {
		t.Errorf("br0 floods to %v with p3 down", w.flooding("br0"))
	}
	if n, _ := w.dp.PortMACs(p3.slot); n != 0 {
		t.Errorf("p3's entries stayed after its link went down: %s", w.dp.snapshot())
	}
	w.sys.set("p3", func(l *Link) { l.Running = true })
	w.d.reconcile()
	if p := w.port("br0", "p3"); p.state() != stateUp || len(w.flooding("br0")) != 3 {
		t.Errorf("p3 back up: %s, floods %v", p.state(), w.flooding("br0"))
	}
}

// Defect 5: a renamed interface leaves its port (the program comes off);
// renamed to the name of another configured port, it becomes that port,
// once, with its program handed over.
func TestRenamedInterface(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "p3"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1,p2,p3", "br1=p4"))
	idx := w.port("br0", "p3").ifindex
	w.dp.learn(w.d.bridges["br0"].id, w.port("br0", "p3").slot, idx, "02:00:00:00:00:03", time.Second)

	w.sys.rename("p3", "other")
	w.d.reconcile()
	if p := w.port("br0", "p3"); p.state() != stateDown || !strings.Contains(p.why, `renamed to "other"`) {
		t.Errorf("p3 after its interface was renamed: %s (%s)", p.state(), p.why)
	}
	if len(w.dp.attached) != 2 || len(w.flooding("br0")) != 2 {
		t.Errorf("after the rename: attached %v, floods %v", w.dp.attachedKeys(), w.flooding("br0"))
	}
	if len(w.dp.fdb) != 0 {
		t.Errorf("the renamed port's entries stayed: %s", w.dp.snapshot())
	}

	w.sys.rename("other", "p4")
	w.d.reconcile()
	p4 := w.port("br1", "p4")
	if p4.state() != stateUp || p4.ifindex != idx {
		t.Errorf("p4 after an interface was renamed to it: %s (%s) ifindex %d", p4.state(), p4.why, p4.ifindex)
	}
	n := 0
	for _, b := range w.dp.bridges {
		for _, p := range b.Ports {
			if p.Ifindex == uint32(idx) {
				n++
			}
		}
	}
	if n != 1 {
		t.Errorf("ifindex %d floods from %d bridges, want 1: %s", idx, n, w.dp.snapshot())
	}
}

// Defect 6: a reload through the control socket, as much as SIGHUP, tells
// the loop that the aging times may have changed.
func TestReloadResetsAging(t *testing.T) {
	w := newWorld(t)
	w.sys.add("p1", "veth")
	dir := t.TempDir()
	path := filepath.Join(dir, "t.toml")
	if err := os.WriteFile(path, []byte(bridges("br0=p1")), 0o600); err != nil {
		t.Fatal(err)
	}
	w.d.opts.ConfigPath = path
	w.mustApply(bridges("br0=p1"))
	<-w.d.aging // the start's
	if iv := w.d.sweepInterval(); iv != 30*time.Second {
		t.Fatalf("sweep every %v with aging 300s", iv)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(bridges("br0=p1"), "[[bridge.port]]", "aging = \"4s\"\n[[bridge.port]]", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := w.d.handle(nil, ctl.Request{Cmd: ctl.CmdReload}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.d.aging:
	default:
		t.Fatal("a reload through the socket did not tell the loop to reset the sweep")
	}
	if iv := w.d.sweepInterval(); iv != time.Second {
		t.Errorf("sweep every %v with aging 4s, want 1s", iv)
	}
}

// Defect 8: interfaces are watched before the first apply, so one created
// while it runs is noticed.
func TestWatchBeforeFirstApply(t *testing.T) {
	w := newWorld(t)
	w.sys.add("p1", "veth")
	created := false
	w.sys.onLookup = func(name string) {
		// p3 is looked up first and is missing; it appears right after.
		if name == "p1" && !created {
			created = true
			w.sys.add("p3", "veth")
		}
	}
	done := make(chan struct{})
	defer close(done)
	links, err := w.d.start(cfgOf(t, bridges("br0=p3,p1")), done)
	if err != nil {
		t.Fatal(err)
	}
	if w.port("br0", "p3").state() != stateDown {
		t.Fatalf("p3 should have been missing at the first apply")
	}
	select {
	case <-links:
	default:
		t.Fatal("the interface created during the first apply sent no event")
	}
	w.d.reconcile()
	if p := w.port("br0", "p3"); p.state() != stateUp {
		t.Errorf("p3 after its event: %s (%s)", p.state(), p.why)
	}
}

// Defect 9: a port whose entries could not be flushed leaves its slot
// dirty: no new port gets it (and its entries) until a sweep flushes it.
func TestFailedFlushKeepsSlot(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "p3"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1,p2"))
	p2 := w.port("br0", "p2")
	w.dp.learn(w.d.bridges["br0"].id, p2.slot, p2.ifindex, "02:00:00:00:00:02", time.Second)
	w.dp.fdbErr = errors.New("injected: dump failed")
	w.mustApply(bridges("br0=p1"))
	if !w.d.alloc.slotIsDirty(p2.slot) {
		t.Fatalf("p2's slot %d is not dirty after a failed flush", p2.slot)
	}
	w.mustApply(bridges("br0=p1,p3"))
	if w.port("br0", "p3").slot == p2.slot {
		t.Errorf("p3 got the slot of p2, whose entries are still in the table")
	}
	w.dp.fdbErr = nil
	if err := w.d.sweep(); err != nil {
		t.Fatal(err)
	}
	if err := w.d.sweep(); err != nil {
		t.Fatal(err)
	}
	if w.d.alloc.slotIsDirty(p2.slot) || len(w.dp.fdb) != 0 {
		t.Errorf("after sweeps: dirty %v, table %s", w.d.alloc.slotIsDirty(p2.slot), w.dp.snapshot())
	}
}

// A port whose interface is deleted while its flush fails moves to a clean
// slot; when the clean slot's counters cannot be reset, the port keeps its
// own and the slot it was offered is given back, not held by no port.
func TestGoneFailedResetGivesSlotBack(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "p3"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1,p2,p3"))
	p3 := w.port("br0", "p3")
	old := p3.slot
	w.dp.learn(w.d.bridges["br0"].id, p3.slot, p3.ifindex, "02:00:00:00:00:03", time.Second)
	free := 0
	for s := uint16(1); s < uint16(len(w.d.alloc.slots)); s++ {
		if !w.d.alloc.slots[s].used && !w.d.alloc.slots[s].dirty {
			free++
		}
	}
	w.dp.fdbErr = errors.New("injected: dump failed")
	w.dp.resetErr = errors.New("injected: reset failed")
	w.sys.del("p3")
	w.d.reconcile()
	if p := w.port("br0", "p3"); p.slot != old || !w.d.alloc.slotIsDirty(old) {
		t.Fatalf("p3 after a failed flush and reset: slot %d (was %d), dirty %v", p.slot, old, w.d.alloc.slotIsDirty(old))
	}
	after := 0
	for s := uint16(1); s < uint16(len(w.d.alloc.slots)); s++ {
		if !w.d.alloc.slots[s].used && !w.d.alloc.slots[s].dirty {
			after++
		}
	}
	if after != free {
		t.Errorf("free clean slots: %d before, %d after: the slot offered to p3 leaked", free, after)
	}
}

// Adoption: a pinned dataplane's bridges, ports, links and static entries
// become the model, and a config that still has them changes nothing:
// no attach, no detach, no port or entry removed; links are upgraded in
// place. What the config no longer has goes.
func TestAdoptionIsADiff(t *testing.T) {
	w := newWorld(t)
	p1, p2, p3 := w.sys.add("p1", "veth"), w.sys.add("p2", "veth"), w.sys.add("p3", "veth")
	w.pinned([]Link{p1, p2, p3}, []Link{p1, p2, p3})
	w.dp.learn(1, 1, p1.Index, "02:00:00:00:00:01", 10*time.Second)
	w.dp.learn(1, 3, p3.Index, "02:00:00:00:00:03", 10*time.Second)
	user, _ := parseMAC("02:00:00:00:00:aa")
	w.dp.fdb[fdbKeyOf(1, 0, user)] = datapath.FDBEntry{Bridge: 1, MAC: user, Slot: 2, Ifindex: uint32(p2.Index), Static: true, User: true}
	w.d.persist = true
	done := make(chan struct{})
	defer close(done)
	if _, err := w.d.start(cfgOf(t, bridges("br0=p1,p2")), done); err != nil {
		t.Fatal(err)
	}
	for _, op := range w.dp.ops {
		if strings.HasPrefix(op, "Attach") || strings.Contains(op, fmt.Sprintf("Detach %d/", p1.Index)) || strings.Contains(op, fmt.Sprintf("Detach %d/", p2.Index)) ||
			strings.Contains(op, "02:00:00:00:00:01") || strings.Contains(op, "02:00:00:00:00:aa") || strings.HasPrefix(op, "SetPort") {
			t.Errorf("adoption did %q", op)
		}
	}
	for _, a := range w.dp.adopted[:2] {
		if !a.(*fakeAtt).upgraded {
			t.Errorf("link %s was not moved to the new program", a.(*fakeAtt).key())
		}
	}
	if _, ok := w.dp.attached[fmt.Sprintf("%d/tc", p3.Index)]; ok {
		t.Errorf("p3, which the config dropped, is still attached")
	}
	if _, ok := w.dp.fdb[fdbKeyOf(1, 0, mustMAC("02:00:00:00:00:03"))]; ok {
		t.Errorf("p3's entry stayed")
	}
	if _, ok := w.d.bridges["br0"].cliStatics[staticKey(config.Static{MAC: user})]; !ok {
		t.Errorf("the CLI's static entry was not adopted as the CLI's")
	}
	if p := w.port("br0", "p1"); p.slot != 1 || p.state() != stateUp {
		t.Errorf("p1 after adoption: slot %d %s", p.slot, p.state())
	}
}

// pinned makes the fake a pinned dataplane holding bridge br0 (id 1) with
// ports (slots 1, 2...), all forwarding, and a tc link on each of links.
func (w *world) pinned(ports []Link, links []Link) {
	w.dp.pinned = true
	b := datapath.BridgeInfo{ID: 1, Name: "br0", MaxEntries: 65536}
	for i, l := range ports {
		p := datapath.PortInfo{Ifindex: uint32(l.Index), Bridge: 1, Slot: uint16(i + 1)}
		b.Ports = append(b.Ports, p)
		w.dp.ports[p.Ifindex] = p
	}
	w.dp.bridges[1] = b
	for _, l := range links {
		a := &fakeAtt{att: w.dp.fakeAttacher, ifindex: l.Index, m: mode.TC, pinned: true}
		w.dp.attached[a.key()] = a
		w.dp.adopted = append(w.dp.adopted, a)
	}
}

func mustMAC(s string) []byte {
	m, err := parseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// An adopted link that no adopted port owns (a daemon died between an
// attach and the port's write) is kept for the port the config has on that
// interface: no detach and attach, no moment without a program.
func TestAdoptedLinkWithoutPort(t *testing.T) {
	w := newWorld(t)
	p1, p2 := w.sys.add("p1", "veth"), w.sys.add("p2", "veth")
	w.pinned([]Link{p1}, []Link{p1, p2})
	done := make(chan struct{})
	defer close(done)
	if _, err := w.d.start(cfgOf(t, bridges("br0=p1,p2")), done); err != nil {
		t.Fatal(err)
	}
	for _, op := range w.dp.ops {
		if strings.HasPrefix(op, "Attach") || strings.HasPrefix(op, "Detach") {
			t.Errorf("adoption did %q", op)
		}
	}
	if p := w.port("br0", "p2"); p.state() != stateUp {
		t.Errorf("p2: %s (%s)", p.state(), p.why)
	}
}

// Maps that started empty at adoption (a derived map of a new layout) get
// everything written again, not only what changed.
func TestFreshMapsAreRewritten(t *testing.T) {
	w := newWorld(t)
	p1 := w.sys.add("p1", "veth")
	w.pinned([]Link{p1}, []Link{p1})
	w.dp.fresh = []string{"tx_ports"}
	done := make(chan struct{})
	defer close(done)
	if _, err := w.d.start(cfgOf(t, bridges("br0=p1")), done); err != nil {
		t.Fatal(err)
	}
	ops := strings.Join(w.dp.ops, "\n")
	if !strings.Contains(ops, fmt.Sprintf("SetPort %d slot 1", p1.Index)) || !strings.Contains(ops, "SetBridge br0") {
		t.Errorf("after adopting into fresh maps, the port and bridge were not written again:\n%s", ops)
	}
}

// A bridge turning VLAN-aware: the programs with the VLAN stage first, on
// every port (a program without it would forward such a bridge's frames
// across VLANs), then the ports' VLANs, and only then the bridge's flag and
// VLANs; turning back, the flag goes first and the stage last.
func TestVLANApplyOrder(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "q1"} {
		w.sys.add(n, "veth")
	}
	plain := bridges("br0=p1,p2", "br1=q1")
	w.mustApply(plain)
	if w.dp.vlanStage {
		t.Fatalf("VLAN stage on without a VLAN-aware bridge")
	}
	i1, i2, iq := w.port("br0", "p1").ifindex, w.port("br0", "p2").ifindex, w.port("br1", "q1").ifindex
	aware := strings.Replace(plain, "interface = \"p1\"\n", "interface = \"p1\"\nvlan = 10\n", 1)
	aware = strings.Replace(aware, "interface = \"p2\"\n", "interface = \"p2\"\ntrunk = [10, \"20-21\"]\nnative = 21\n", 1)

	w.dp.ops = nil
	w.mustApply(aware)
	at := func(op string) int {
		t.Helper()
		i := slices.IndexFunc(w.dp.ops, func(s string) bool { return strings.HasPrefix(s, op) })
		if i < 0 {
			t.Fatalf("no %q in %q", op, w.dp.ops)
		}
		return i
	}
	stage, flag := at("vlan-stage true"), at("SetBridge br0 vlan-aware [10 20 21]")
	for _, idx := range []int{i1, i2, iq} {
		if up := at(fmt.Sprintf("Upgrade %d vlan-stage true", idx)); up < stage || up > flag {
			t.Errorf("ifindex %d moved to the VLAN stage at op %d; stage on at %d, bridge aware at %d: %q", idx, up, stage, flag, w.dp.ops)
		}
	}
	if p := at(fmt.Sprintf("SetPort %d slot %d bridge %d pvid 10 trunk []", i1, w.port("br0", "p1").slot, w.d.bridges["br0"].id)); p > flag {
		t.Errorf("br0 turned aware before p1's VLAN was written: %q", w.dp.ops)
	}
	if p := at(fmt.Sprintf("SetPort %d slot %d bridge %d pvid 21 trunk [10 20 21]", i2, w.port("br0", "p2").slot, w.d.bridges["br0"].id)); p > flag {
		t.Errorf("br0 turned aware before p2's VLANs were written: %q", w.dp.ops)
	}
	if b := w.dp.bridges[w.d.bridges["br1"].id]; b.VLANAware {
		t.Errorf("br1, with no VLAN settings, is VLAN-aware")
	}

	// A reload that changes nothing writes nothing.
	w.dp.ops = nil
	w.mustApply(aware)
	if len(w.dp.ops) != 0 {
		t.Errorf("an unchanged VLAN config made %q", w.dp.ops)
	}

	// Back to no VLANs: the flag off before the ports forget their VLANs,
	// the stage off at the end, every port back on the plain programs.
	w.dp.ops = nil
	w.mustApply(plain)
	off, unflag := at("vlan-stage false"), at("SetBridge br0")
	if unflag > at(fmt.Sprintf("SetPort %d ", i1)) || off < unflag {
		t.Errorf("turning VLANs off in the wrong order: %q", w.dp.ops)
	}
	for _, idx := range []int{i1, i2, iq} {
		if at(fmt.Sprintf("Upgrade %d vlan-stage false", idx)) < off {
			t.Errorf("ifindex %d left the VLAN stage before it was off: %q", idx, w.dp.ops)
		}
	}
}

// An apply that fails after the VLAN stage went on takes it off again, and
// the ports back to the plain programs.
func TestVLANFailedApplyRestoresStage(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2"} {
		w.sys.add(n, "veth")
	}
	plain := bridges("br0=p1,p2")
	w.mustApply(plain)
	w.dp.fail = func(op string) error {
		if strings.HasPrefix(op, "SetBridge br0 vlan-aware") {
			return errors.New("refused")
		}
		return nil
	}
	if err := w.apply(strings.Replace(plain, "interface = \"p1\"\n", "interface = \"p1\"\nvlan = 10\n", 1)); err == nil {
		t.Fatal("the apply did not fail")
	}
	w.dp.fail = nil
	if w.dp.vlanStage {
		t.Errorf("the VLAN stage stayed on after a failed apply")
	}
	for _, a := range w.dp.attached {
		if a.stage {
			t.Errorf("%s still runs the VLAN stage", a.key())
		}
	}
	for _, p := range w.dp.ports {
		if p.PVID != 0 {
			t.Errorf("port %d kept VLAN %d after a failed apply", p.Ifindex, p.PVID)
		}
	}
}

// Entries that no longer mean what they did go with the reload that
// changed their meaning: a port's entries in a VLAN it no longer carries,
// and every learned entry of a bridge that turns VLAN-aware or back.
func TestVLANChangeFlushes(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2"} {
		w.sys.add(n, "veth")
	}
	plain := bridges("br0=p1,p2")
	cfg := func(v1, v2 string) string {
		s := strings.Replace(plain, "interface = \"p1\"\n", "interface = \"p1\"\n"+v1+"\n", 1)
		return strings.Replace(s, "interface = \"p2\"\n", "interface = \"p2\"\n"+v2+"\n", 1)
	}
	w.mustApply(cfg("vlan = 10", "trunk = [10, 20]"))
	b, p1, p2 := w.d.bridges["br0"], w.port("br0", "p1"), w.port("br0", "p2")
	learn := func(p *portState, vlan uint16, mac string) {
		m, _ := net.ParseMAC(mac)
		w.dp.fdb[fdbKeyOf(b.id, vlan, m)] = datapath.FDBEntry{Bridge: b.id, VLAN: vlan, MAC: m, Slot: p.slot, Ifindex: uint32(p.ifindex)}
	}
	have := func() []string {
		var out []string
		for _, e := range w.dp.fdb {
			out = append(out, fmt.Sprintf("%s/%d", e.MAC, e.VLAN))
		}
		slices.Sort(out)
		return out
	}
	learn(p1, 10, "02:00:00:00:00:01")
	learn(p2, 10, "02:00:00:00:00:02")
	learn(p2, 20, "02:00:00:00:00:03")

	// p2 stops carrying 20: its VLAN-20 entry goes, the rest stay.
	w.mustApply(cfg("vlan = 10", "trunk = [10, 30]"))
	if got, want := have(), []string{"02:00:00:00:00:01/10", "02:00:00:00:00:02/10"}; !slices.Equal(got, want) {
		t.Errorf("after p2 left VLAN 20: %v, want %v", got, want)
	}
	// The bridge stops being VLAN-aware: its learned VLANs meant the
	// ports', not the frames' tags; every learned entry goes.
	w.mustApply(plain)
	if got := have(); len(got) != 0 {
		t.Errorf("after the bridge left VLANs: %v, want no learned entry", got)
	}
}

// A static entry from the CLI follows its port's VLANs: out of the table
// while the port does not carry its VLAN, kept, and back when it does.
func TestCLIStaticFollowsPortVLAN(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2"} {
		w.sys.add(n, "veth")
	}
	cfg := func(vid int) string {
		return strings.Replace(bridges("br0=p1,p2"), "interface = \"p1\"\n", fmt.Sprintf("interface = \"p1\"\nvlan = %d\n", vid), 1)
	}
	w.mustApply(cfg(10))
	err := w.d.fdbAdd(ctl.Request{Bridge: "br0", MAC: "02:00:00:00:00:77", Port: "p1"})
	if err != nil {
		t.Fatalf("fdb add: %v", err)
	}
	inTable := func() (uint16, bool) {
		for _, e := range w.dp.fdb {
			if e.MAC.String() == "02:00:00:00:00:77" {
				return e.VLAN, true
			}
		}
		return 0, false
	}
	if vid, ok := inTable(); !ok || vid != 10 {
		t.Fatalf("fdb add without --vlan on an access port of VLAN 10: in table %v, vlan %d", ok, vid)
	}
	err = w.d.fdbAdd(ctl.Request{Bridge: "br0", MAC: "02:00:00:00:00:78", Port: "p1", VLAN: 20})
	if err == nil || !strings.Contains(err.Error(), "does not carry VLAN 20") {
		t.Errorf("fdb add in a VLAN the port does not carry: %v", err)
	}
	w.mustApply(cfg(20))
	if _, ok := inTable(); ok {
		t.Errorf("the CLI entry of VLAN 10 stayed in the table after p1 moved to VLAN 20")
	}
	w.mustApply(cfg(10))
	if vid, ok := inTable(); !ok || vid != 10 {
		t.Errorf("the CLI entry did not come back with VLAN 10: in table %v, vlan %d", ok, vid)
	}
}
