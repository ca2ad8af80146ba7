package daemon

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// Unit tests of the run-time port commands (portcmds.go) against the
// fakes; the store's are in portstore_test.go, the merge's in
// desired_test.go, the scoped applies' in scoped_test.go.

func (w *world) portAdd(bridge, iface, owner string, args ...string) (ctl.PortEntry, error) {
	return w.d.portAdd(ctl.Request{Cmd: ctl.CmdPortAdd, Bridge: bridge, Port: iface, Owner: owner, Args: args})
}

func (w *world) mustPortAdd(bridge, iface, owner string, args ...string) ctl.PortEntry {
	w.t.Helper()
	e, err := w.portAdd(bridge, iface, owner, args...)
	if err != nil {
		w.t.Fatalf("port add %s %s: %v", bridge, iface, err)
	}
	return e
}

func (w *world) list(bridge string) map[string]ctl.PortEntry {
	w.t.Helper()
	es, err := w.d.portList(bridge)
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]ctl.PortEntry{}
	for _, e := range es {
		out[e.Bridge+"/"+e.Name] = e
	}
	return out
}

func TestRunPortAddForwardsAndIsListed(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "r1", "r2"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1") + "[[bridge]]\nname = \"empty\"\n")
	if got := w.list("empty"); len(got) != 0 {
		t.Fatalf("a bridge without ports lists %v", got)
	}
	e := w.mustPortAdd("br0", "r1", "net1/c1/eth0", "max_macs=4", "protected=true")
	if e.State != stateUp || e.Origin != originRun || e.Owner != "net1/c1/eth0" || e.MaxMACs != 4 || !e.Protected {
		t.Errorf("port add answered %+v", e)
	}
	w.mustPortAdd("empty", "r2", "")
	if got := w.flooding("br0"); len(got) != 2 {
		t.Errorf("br0 floods to %v, want p1 and r1", got)
	}
	if got := w.flooding("empty"); len(got) != 1 {
		t.Errorf("the bridge without file ports floods to %v, want r2", got)
	}
	all := w.list("")
	if len(all) != 3 || all["br0/p1"].Origin != originFile || all["br0/r1"].Origin != originRun || all["empty/r2"].Origin != originRun {
		t.Errorf("port list: %+v", all)
	}
	// The same add again (a retried CNI ADD) is the same answer.
	if _, err := w.portAdd("br0", "r1", "net1/c1/eth0", "max_macs=4", "protected=true"); err != nil {
		t.Errorf("the same add again: %v", err)
	}
	if len(w.d.run) != 2 {
		t.Errorf("store holds %d ports, want 2", len(w.d.run))
	}
}

// Every refused add leaves the dataplane, the model and the store as
// they were, with an error that says why.
func TestRunPortAddErrors(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "q1", "r1", "r2"} {
		w.sys.add(n, "veth")
	}
	w.sys.add("patch-br2", "veth")
	w.mustApply(bridges("br0=p1,p2", "br1=q1,@br2", "br2=@br1"))
	w.mustPortAdd("br1", "r1", "own1")
	_, fileErr := config.ParsePortArgs(&config.Bridge{Name: "br0"}, []string{"interface=r2", "max_macs=-1"})
	if fileErr == nil {
		t.Fatal("max_macs=-1 parses")
	}
	for _, c := range []struct {
		name, bridge, iface string
		args                []string
		want                string
	}{
		{"unknown bridge", "nope", "r2", nil, `no bridge "nope"`},
		{"missing interface", "br0", "ghost0", nil, `no interface named "ghost0"`},
		{"a port of the file", "br0", "q1", nil, `interface "q1" is already a port of bridge "br1" (from the config file`},
		{"a port of the file, same bridge", "br0", "p2", nil, `interface "p2" is already a port of bridge "br0" (from the config file`},
		{"a run-time port", "br0", "r1", nil, `interface "r1" is already a port of bridge "br1" (added at run time by "own1")`},
		{"a bad key", "br0", "r2", []string{"max_macs=-1"}, fileErr.Error()},
		{"an unknown key", "br0", "r2", []string{"stp=true"}, "unknown field"},
		{"a patch", "br0", "r2", []string{"patch=br1"}, "patch ports are the config file's"},
		{"interface twice", "br0", "r2", []string{"interface=r2"}, "the interface is the port's name"},
		{"a VLAN flip", "br0", "r2", []string{"vlan=10"}, `bridge "br0" is not VLAN-aware`},
		{"a bad name", "br0", "a/b", nil, "not a valid interface name"},
		{"a patch port's name", "br1", "patch-br2", nil, `"patch-br2" is already the name of patch port to bridge "br2" of bridge "br1"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, shown, run := w.dp.snapshot(), w.show(), len(w.d.run)
			_, err := w.portAdd(c.bridge, c.iface, "", c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			if w.dp.snapshot() != before || w.show() != shown || len(w.d.run) != run {
				t.Errorf("a refused add changed the running state")
			}
		})
	}
}

func TestRunPortAddFullBridge(t *testing.T) {
	w := newWorld(t)
	var ports []string
	for i := 0; i < config.MaxPortsPerBridge; i++ {
		n := fmt.Sprintf("f%d", i)
		w.sys.add(n, "veth")
		ports = append(ports, n)
	}
	w.sys.add("r1", "veth")
	w.mustApply(bridges("br0=" + strings.Join(ports[:config.MaxPortsPerBridge-1], ",")))
	w.mustPortAdd("br0", ports[config.MaxPortsPerBridge-1], "")
	before := w.dp.snapshot()
	_, err := w.portAdd("br0", "r1", "")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("bridge \"br0\" is full: it has %d ports", config.MaxPortsPerBridge)) || !strings.Contains(err.Error(), "another bridge") {
		t.Fatalf("add to a full bridge: %v", err)
	}
	if w.dp.snapshot() != before {
		t.Error("a refused add changed the dataplane")
	}
}

// A port whose interface refuses every attach is not added: the answer
// says why, and nothing of it stays.
func TestRunPortAddThatDoesNotAttach(t *testing.T) {
	w := newWorld(t)
	w.sys.add("p1", "veth")
	w.sys.add("r1", "veth")
	w.mustApply(bridges("br0=p1"))
	before := w.dp.snapshot()
	w.dp.fail = func(op string) error {
		if strings.HasPrefix(op, "Attach") {
			return fmt.Errorf("injected: attach refused")
		}
		return nil
	}
	_, err := w.portAdd("br0", "r1", "", "mode=tc")
	w.dp.fail = nil
	if err == nil || !strings.Contains(err.Error(), "does not attach") || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("add with the attach refused: %v", err)
	}
	if w.dp.snapshot() != before || len(w.d.run) != 0 || w.d.bridges["br0"].port("r1") != nil {
		t.Errorf("a failed add left something: %s", w.dp.snapshot())
	}
}

// The merge: the file's ports are the file's; run-time ones stay across a
// reload unless the file names their interface, or drops their bridge.
func TestRunPortsAcrossReload(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "r1", "r2", "r3"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1") + "[[bridge]]\nname = \"br1\"\n")
	w.mustPortAdd("br0", "r1", "a")
	w.mustPortAdd("br0", "r2", "b")
	w.mustPortAdd("br1", "r3", "c")
	slot := w.port("br0", "r1").slot
	w.d.fromFile = true
	w.mustApply(bridges("br0=p1,r2") + "[[bridge]]\nname = \"br1\"\n")
	if got := w.list(""); got["br0/r1"].Origin != originRun || got["br0/r2"].Origin != originFile || got["br1/r3"].Origin != originRun {
		t.Errorf("after a reload naming r2: %+v", got)
	}
	if w.port("br0", "r1").slot != slot {
		t.Error("a run-time port changed slot across a reload")
	}
	if w.d.runPortOf("br0", "r2") != nil {
		t.Error("the file's r2 is still recorded as a run-time port")
	}
	// Taking r2 out of the file does not bring the run-time port back;
	// dropping br1 takes its run-time port with it.
	w.mustApply(bridges("br0=p1"))
	if got := w.list(""); len(got) != 2 || got["br0/r1"].Origin != originRun {
		t.Errorf("after br1 went: %+v", got)
	}
	if len(w.d.run) != 1 {
		t.Errorf("store: %d ports, want r1 only", len(w.d.run))
	}
	if got := w.flooding("br0"); len(got) != 2 {
		t.Errorf("br0 floods to %v, want p1 and r1", got)
	}
}

// A run-time port whose interface is deleted goes: no stale port, and its
// slot is free for the next one.
func TestRunPortGoneWithItsInterface(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "r1", "r2"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1"))
	w.mustPortAdd("br0", "r1", "")
	slot := w.port("br0", "r1").slot
	w.sys.del("r1")
	w.d.reconcile()
	if w.d.bridges["br0"].port("r1") != nil || len(w.d.run) != 0 {
		t.Fatalf("r1 stayed after its interface was deleted: %+v", w.list(""))
	}
	if len(w.dp.ports) != 1 {
		t.Errorf("the port maps still hold r1: %s", w.dp.snapshot())
	}
	w.mustPortAdd("br0", "r2", "")
	if w.port("br0", "r2").slot != slot {
		t.Errorf("r2 took slot %d, not r1's freed %d", w.port("br0", "r2").slot, slot)
	}
	// A name that comes back as another interface is not the port.
	w.sys.del("r2")
	w.sys.add("r2", "veth")
	w.d.reconcile()
	if w.d.bridges["br0"].port("r2") != nil {
		t.Error("a run-time port followed its name to a new interface")
	}
}

func TestRunPortDel(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "r1", "r2", "r3", "r4"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1", "br1=r4"))
	w.mustPortAdd("br0", "r1", "pod-a")
	w.mustPortAdd("br0", "r2", "pod-a")
	w.mustPortAdd("br0", "r3", "pod-b")
	del := func(bridge, iface, owner string) ([]ctl.PortEntry, error) {
		return w.d.portDel(ctl.Request{Cmd: ctl.CmdPortDel, Bridge: bridge, Port: iface, Owner: owner})
	}
	for _, c := range []struct{ bridge, iface, owner, want string }{
		{"br0", "p1", "", "is the config file's"},
		{"br0", "nope", "", `bridge "br0" has no port "nope"`},
		{"br9", "r1", "", `no bridge "br9"`},
		{"br0", "", "", "which port?"},
		{"br0", "r1", "pod-a", "not both"},
	} {
		before := w.dp.snapshot()
		if _, err := del(c.bridge, c.iface, c.owner); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("del %s %s %s: %v, want %q", c.bridge, c.iface, c.owner, err, c.want)
		}
		if w.dp.snapshot() != before {
			t.Errorf("a refused del changed the dataplane")
		}
	}
	gone, err := del("br0", "", "pod-a")
	if err != nil || len(gone) != 2 {
		t.Fatalf("del --owner pod-a: %v %+v", gone, err)
	}
	if got := w.list("br0"); len(got) != 2 || got["br0/r3"].Owner != "pod-b" {
		t.Errorf("after del --owner: %+v", got)
	}
	if gone, err := del("br0", "", "pod-a"); err != nil || len(gone) != 0 {
		t.Errorf("del --owner of an owner with no ports: %v %v", gone, err)
	}
	if gone, err := del("br0", "r3", ""); err != nil || len(gone) != 1 || gone[0].Name != "r3" {
		t.Errorf("del r3: %v %v", gone, err)
	}
	if len(w.d.run) != 0 || len(w.flooding("br0")) != 1 {
		t.Errorf("after every del: store %d, floods %v", len(w.d.run), w.flooding("br0"))
	}
}

// A run-time port that makes an empty bridge VLAN-aware: the ports added
// after it without a VLAN are access ports of VLAN 1, as in the file.
func TestRunPortVLANs(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"r1", "r2", "r3"} {
		w.sys.add(n, "veth")
	}
	w.mustApply("[[bridge]]\nname = \"br0\"\n")
	w.mustPortAdd("br0", "r1", "", "vlan=10")
	w.mustPortAdd("br0", "r2", "", "trunk=10,20-29", "native=10")
	e := w.mustPortAdd("br0", "r3", "")
	if e.VLAN != 1 {
		t.Errorf("a port without a VLAN on a VLAN-aware bridge: %+v", e)
	}
	if got := w.list("br0"); got["br0/r2"].Trunk.String() != "10,20-29" || got["br0/r1"].VLAN != 10 {
		t.Errorf("list: %+v", got)
	}
	if !w.dp.bridges[w.d.bridges["br0"].id].VLANAware {
		t.Error("br0 is not VLAN-aware in the dataplane")
	}
	// Without the ports that set a VLAN, the bridge is no longer
	// VLAN-aware, and r3 is a plain port again: what it was before the
	// others came, and what a restart would make of it.
	for _, n := range []string{"r1", "r2"} {
		if _, err := w.d.portDel(ctl.Request{Cmd: ctl.CmdPortDel, Bridge: "br0", Port: n}); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.list("br0"); got["br0/r3"].VLAN != 0 || w.dp.bridges[w.d.bridges["br0"].id].VLANAware {
		t.Errorf("after the VLAN ports went: %+v", got)
	}
}

// The switch is full at MaxPorts in all bridges together, whatever the
// bridge asked for has.
func TestRunPortAddFullSwitch(t *testing.T) {
	w := newWorld(t)
	var spec []string
	n := 0
	for b := 0; n < config.MaxPorts; b++ {
		var ports []string
		for i := 0; i < config.MaxPortsPerBridge && n < config.MaxPorts; i++ {
			name := fmt.Sprintf("f%d", n)
			w.sys.add(name, "veth")
			ports = append(ports, name)
			n++
		}
		spec = append(spec, fmt.Sprintf("b%d=%s", b, strings.Join(ports, ",")))
	}
	w.sys.add("r1", "veth")
	w.mustApply(bridges(spec...) + "[[bridge]]\nname = \"empty\"\n")
	_, err := w.portAdd("empty", "r1", "")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("the switch is full: its bridges have %d ports", config.MaxPorts)) {
		t.Errorf("add to a full switch: %v", err)
	}
}

// An owner is free text within bounds: what would reach a terminal as a
// control, or come back from ports.json changed, is refused, and nothing
// changes.
func TestRunPortOwnerRefused(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "r1"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1"))
	for _, c := range []struct{ name, owner, want string }{
		{"newline", "net c1\neth0", "control character"},
		{"escape", "vm\x1b]0;x\x07", "control character"},
		{"C1", "vm\u009b31m", "control character"},
		{"not UTF-8", "vm\xff", "not UTF-8"},
		{"too long", strings.Repeat("o", maxOwner+1), fmt.Sprintf("longer than %d bytes", maxOwner)},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, run := w.dp.snapshot(), len(w.d.run)
			if _, err := w.portAdd("br0", "r1", c.owner); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("owner %q: %v, want %q", c.owner, err, c.want)
			}
			if w.dp.snapshot() != before || len(w.d.run) != run {
				t.Errorf("a refused owner changed the running state")
			}
		})
	}
	w.mustPortAdd("br0", "r1", strings.Repeat("o", maxOwner-len("ü"))+"ü")
}

// An interface that went and came back under the same name before the
// daemon handled the link events (a CNI ADD retried for the same container
// and interface in a fresh namespace: the host end's name is the same) is
// a new interface: the same add again attaches it, not answers with the
// old port, which the next reconcile would drop as "now another interface".
func TestRunPortAddOfARecreatedInterface(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "r1"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1"))
	w.mustPortAdd("br0", "r1", "net c1 eth0", "max_macs=4")
	w.sys.del("r1")
	l := w.sys.add("r1", "veth") // no reconcile yet: the events are queued
	e := w.mustPortAdd("br0", "r1", "net c1 eth0", "max_macs=4")
	if e.Ifindex != l.Index {
		t.Errorf("the add answered ifindex %d, the interface is %d now", e.Ifindex, l.Index)
	}
	w.d.reconcile() // the link events, handled late
	got := w.list("br0")["br0/r1"]
	if got.Origin != originRun || got.Ifindex != l.Index || got.State != stateUp {
		t.Errorf("after the link events: %+v", got)
	}
	if w.d.runPortOf("br0", "r1") == nil {
		t.Errorf("the store lost the port")
	}
}

// Link events of interfaces the switch has nothing to do with (a
// container's veth before its CNI ADD names it) take no apply; those of
// a port's interface, attached or awaited, and of a held peer do, but for
// those that end saying what the model holds of a tc port (the veth's
// making and setting up, read after its port.add).
func TestEventsMatter(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "r1", "other"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1:xdp,missing") + "[[bridge]]\nname = \"pods\"\n")
	w.mustPortAdd("br0", "r1", "")
	w.sys.add("r2", "veth")
	w.mustPortAdd("pods", "r2", "")
	p1, r2 := w.sys.links["p1"], w.sys.links["r2"].Index
	for _, tc := range []struct {
		evs  []LinkEvent
		want bool
	}{
		{[]LinkEvent{{Index: w.sys.links["other"].Index, Name: "other"}}, false},
		{[]LinkEvent{{Index: 9999, Name: "tr0123456789ab"}}, false},
		{[]LinkEvent{{Index: 9999, Name: "tr0123456789ab"}, {Index: p1.Index, Name: "p1-renamed"}}, true},
		{[]LinkEvent{{Index: 9998, Name: "missing"}}, true},
		{[]LinkEvent{{Index: w.sys.links["r1"].Index, Name: "r1", Deleted: true}}, true},
		{[]LinkEvent{{Index: 9997, Name: "p1"}}, true},
		// r2: a tc port of a bridge without XDP ports.
		{[]LinkEvent{{Index: r2, Name: "r2", Running: true}}, false},
		{[]LinkEvent{{Index: r2, Name: "r2"}, {Index: 9999, Name: "tr0123456789ab"}, {Index: r2, Name: "r2", Running: true}}, false},
		{[]LinkEvent{{Index: r2, Name: "r2"}}, true},
		{[]LinkEvent{{Index: r2, Name: "r2", Running: true}, {Index: r2, Name: "r2"}}, true},
		{[]LinkEvent{{Index: r2, Name: "r2-renamed", Running: true}}, true},
		{[]LinkEvent{{Index: r2, Name: "r2", Running: true, Deleted: true}}, true},
		// r1: a tc port of a bridge with an XDP port, whose facts matter.
		{[]LinkEvent{{Index: w.sys.links["r1"].Index, Name: "r1", Running: true}}, true},
	} {
		if got := w.d.eventsMatter(tc.evs); got != tc.want {
			t.Errorf("events %+v matter: %v, want %v", tc.evs, got, tc.want)
		}
	}
}

// The loaded switch has the power to settle its bridges' writes ahead.
var _ settler = realDataplane{}

// A port added at run time at tc is attached in a tc filter
// (datapath.HookFilter: no grace period on a CNI ADD's or DEL's way), every
// other by a link: the file's ports, and a run-time port at xdp. A
// run-time port keeps its filter across reloads; when the file takes its
// interface over it moves to a link, so that the filters are always those
// of the run-time ports recorded, where the next daemon looks for them.
func TestRunPortAttachesInAFilter(t *testing.T) {
	w := worldWith(t, "p1", "r1", "r2")
	w.mustApply(bridges("br0=p1"))
	w.mustPortAdd("br0", "r1", "net1/c1/eth0")
	w.mustPortAdd("br0", "r2", "", "mode=xdp")
	att := func(name string) *fakeAtt {
		t.Helper()
		l, err := w.sys.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		var found *fakeAtt
		for _, a := range w.dp.attached {
			if a.ifindex == l.Index {
				if found != nil {
					t.Fatalf("%s has two attachments: %v", name, w.dp.attachedKeys())
				}
				found = a
			}
		}
		if found == nil {
			t.Fatalf("%s is not attached", name)
		}
		return found
	}
	for _, c := range []struct {
		port string
		want datapath.Hook
	}{{"p1", datapath.HookLink}, {"r1", datapath.HookFilter}, {"r2", datapath.HookLink}} {
		if h := att(c.port).hook; h != c.want {
			t.Errorf("%s is attached with hook %d, want %d", c.port, h, c.want)
		}
	}
	was := att("r1")
	w.mustApply(bridges("br0=p1"))
	if att("r1") != was {
		t.Error("a reload attached the run-time port again")
	}
	w.mustApply(bridges("br0=p1,r1"))
	if a := att("r1"); a.hook != datapath.HookLink {
		t.Errorf("the file's port on a run-time port's interface kept hook %d", a.hook)
	}
}

// A restarted daemon takes over the tc filters the last one left on its
// run-time ports (killed, or with persist: a filter is not pinned, and
// stays until removed), wherever the record says they may be: the apply
// keeps the one whose port stays, detaches the one whose port the file no
// longer lets be (its bridge gone), and looks at no other interface.
func TestRunPortFiltersAdopted(t *testing.T) {
	w, st, _ := storedWorld(t, "p1", "r1", "r2", "x1")
	w.mustApply(bridges("br0=p1") + "[[bridge]]\nname = \"pods\"\n")
	w.mustPortAdd("br0", "r1", "")
	w.mustPortAdd("pods", "r2", "")

	// Killed: the filters stay (x1's is no run-time port's: not looked at).
	w2 := w.restarted(st)
	idx := map[string]int{}
	for _, n := range []string{"r1", "r2", "x1"} {
		l, _ := w.sys.LinkByName(n)
		idx[n] = l.Index
		w2.dp.left[l.Index] = true
	}
	done := make(chan struct{})
	defer close(done)
	if _, err := w2.d.start(cfgOf(t, bridges("br0=p1")), done); err != nil {
		t.Fatal(err)
	}
	keys := w2.dp.attachedKeys()
	if !slices.Contains(keys, fmt.Sprintf("%d/tc-filter", idx["r1"])) {
		t.Errorf("r1's filter was not taken over: %v", keys)
	}
	if !slices.Contains(w2.dp.ops, fmt.Sprintf("Detach %d/tc-filter", idx["r2"])) {
		t.Errorf("r2's filter, of a bridge gone, was not detached: %v", w2.dp.ops)
	}
	if !w2.dp.left[idx["x1"]] {
		t.Error("an interface no run-time port names was looked at")
	}
	for _, op := range w2.dp.ops {
		if strings.HasPrefix(op, fmt.Sprintf("Attach %d ", idx["r1"])) {
			t.Errorf("r1 was attached again over its adopted filter: %v", w2.dp.ops)
		}
	}
	if got := w2.list("br0"); got["br0/r1"].State != stateUp {
		t.Errorf("r1 after the restart: %+v", got["br0/r1"])
	}
}

// On a kernel that takes no tc filter, a run-time port is attached by a
// link, said once, and the next run-time port does not try a filter
// again.
func TestRunPortFilterRefused(t *testing.T) {
	w := worldWith(t, "p1", "r1", "r2")
	w.dp.noFilters = true
	w.mustApply(bridges("br0=p1"))
	w.mustPortAdd("br0", "r1", "")
	before := len(w.dp.ops)
	w.mustPortAdd("br0", "r2", "")
	for _, n := range []string{"r1", "r2"} {
		l, _ := w.sys.LinkByName(n)
		a := w.dp.attached[fmt.Sprintf("%d/tc", l.Index)]
		if a == nil || a.hook != datapath.HookLink {
			t.Errorf("%s: %v, want a link (attached: %v)", n, a, w.dp.attachedKeys())
		}
	}
	if got := w.list("br0"); got["br0/r1"].State != stateUp || got["br0/r2"].State != stateUp {
		t.Errorf("ports: %+v", got)
	}
	if n := strings.Count(strings.Join(w.dp.ops[:before], "\n"), " refused"); n != 1 {
		t.Errorf("the first port tried %d filters, want 1: %v", n, w.dp.ops[:before])
	}
	if n := strings.Count(strings.Join(w.dp.ops[before:], "\n"), "Attach "); n != 1 {
		t.Errorf("the second port took %d attaches, want 1 (no filter tried): %v", n, w.dp.ops[before:])
	}
}

// A run-time port's tc filter that another took off is put back by the
// next full apply (a reload), not by a container's scoped one.
func TestRunPortFilterRestored(t *testing.T) {
	w := worldWith(t, "p1", "r1", "r2")
	w.mustApply(bridges("br0=p1"))
	w.mustPortAdd("br0", "r1", "")
	l1, _ := w.sys.LinkByName("r1")
	w.dp.removed[l1.Index] = true
	w.mustPortAdd("br0", "r2", "")
	restore := fmt.Sprintf("Restore %d", l1.Index)
	if w.opsAt(restore) >= 0 {
		t.Fatalf("a scoped apply restored a filter: %v", w.dp.ops)
	}
	w.mustApply(bridges("br0=p1"))
	if w.opsAt(restore) < 0 {
		t.Fatalf("a full apply did not restore the filter: %v", w.dp.ops)
	}
}

// A filter refused on one interface (another tool's filter at trestle's
// priority) gives that port a link, and the next run-time port still
// gets a filter; a run-time port on an interface that outlives its owner
// (a host's own) gets a link, which closes with the daemon.
func TestRunPortFilterRefusedHere(t *testing.T) {
	w := worldWith(t, "p1", "r1", "r2")
	w.sys.add("eth9", "device")
	l1, _ := w.sys.LinkByName("r1")
	w.dp.refuse[l1.Index] = errors.New("add the tc filter: invalid argument")
	w.mustApply(bridges("br0=p1"))
	w.mustPortAdd("br0", "r1", "")
	w.mustPortAdd("br0", "r2", "")
	w.mustPortAdd("br0", "eth9", "")
	want := map[string]datapath.Hook{"r1": datapath.HookLink, "r2": datapath.HookFilter, "eth9": datapath.HookLink}
	for n, h := range want {
		l, _ := w.sys.LinkByName(n)
		a := w.dp.attached[fmt.Sprintf("%d/tc", l.Index)]
		if a == nil {
			a = w.dp.attached[fmt.Sprintf("%d/tc-filter", l.Index)]
		}
		if a == nil || a.hook != h {
			t.Errorf("%s: %v, want hook %v (attached: %v)", n, a, h, w.dp.attachedKeys())
		}
	}
	if got := w.list("br0"); got["br0/r1"].State != stateUp || got["br0/r2"].State != stateUp || got["br0/eth9"].State != stateUp {
		t.Errorf("ports: %+v", got)
	}
	if n := strings.Count(strings.Join(w.dp.ops, "\n"), fmt.Sprintf("Attach %d tc refused", l1.Index)); n != 1 {
		t.Errorf("%s's filter was tried %d times, want once: %v", "r1", n, w.dp.ops)
	}
}

// The overlay's own kernel objects are refused as run-time ports: a port
// on the advertise port's idle peer (tapVNI) would switch the bridge's
// floods into the VNI. The same names for a VNI the daemon has not (QEMU
// calls its TAPs tap0, tap1, ...) are anyone's.
func TestRunPortAddOverlayObject(t *testing.T) {
	w := newOvWorld(t)
	for _, n := range []string{"p1", "p2", "tap1000", "ttp1000", "tap7"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(ovConfig)
	for iface, want := range map[string]string{
		"tap1000": `interface "tap1000" is VNI 1000's advertise port's peer, which the daemon made for the overlay`,
		"ttp1000": `interface "ttp1000" is VNI 1000's xdp way in's peer`,
		"tvx1000": `interface "tvx1000" is already a port of bridge "br0"`,
	} {
		before, run := w.dp.snapshot(), len(w.d.run)
		if _, err := w.portAdd("br0", iface, "thief"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("port add %s: %v, want an error with %q", iface, err, want)
		}
		if w.dp.snapshot() != before || len(w.d.run) != run {
			t.Errorf("the refused add of %s changed the running state", iface)
		}
	}
	w.mustPortAdd("br0", "tap7", "qemu/tap7")
}
