package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/ctl"
)

// looked are the interfaces the fake was asked for by name since the
// calls were last cleared.
func (w *world) looked() map[string]bool {
	w.sys.mu.Lock()
	defer w.sys.mu.Unlock()
	out := map[string]bool{}
	for _, c := range w.sys.calls {
		if n, ok := strings.CutPrefix(c, "LinkByName "); ok {
			out[n] = true
		}
	}
	w.sys.calls = nil
	return out
}

// snapshot is what the model says of every port, for comparing a scoped
// apply with the full one.
func (w *world) snapshot() string {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	return fmt.Sprint(w.d.portStates(), w.dp.attachedKeys())
}

// A run-time port added to, or removed from, a bridge of tc ports is a
// scoped apply: no other port's interface is looked up again, and the
// switch ends where a full apply takes it (which then changes nothing).
func TestRunPortAddScoped(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "r1", "r2"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1,p2"))
	w.looked()
	e := w.mustPortAdd("br0", "r1", "net1/c1/eth0")
	if e.State != stateUp || e.Mode != "tc" {
		t.Errorf("port add answered %+v", e)
	}
	if got := w.looked(); got["p1"] || got["p2"] || !got["r1"] {
		t.Errorf("a scoped add looked up %v, want r1 alone", got)
	}
	if got := w.flooding("br0"); len(got) != 3 {
		t.Errorf("br0 floods to %v, want p1, p2 and r1", got)
	}
	w.mustPortAdd("br0", "r2", "net1/c2/eth0", "max_macs=4")
	after := w.snapshot()
	w.d.reconcile()
	if full := w.snapshot(); full != after {
		t.Errorf("a full apply after the scoped adds changed the switch:\nscoped %s\nfull   %s", after, full)
	}
	w.looked()
	if _, err := w.d.portDel(ctl.Request{Cmd: ctl.CmdPortDel, Bridge: "br0", Owner: "net1/c1/eth0"}); err != nil {
		t.Fatal(err)
	}
	if got := w.looked(); len(got) != 0 {
		t.Errorf("a scoped del looked up %v, want none", got)
	}
	if got := w.flooding("br0"); len(got) != 3 {
		t.Errorf("br0 floods to %v, want p1, p2 and r2", got)
	}
	if p := w.d.bridges["br0"].port("r1"); p != nil {
		t.Errorf("r1 is still a port: %+v", p)
	}
	after = w.snapshot()
	w.d.reconcile()
	if full := w.snapshot(); full != after {
		t.Errorf("a full apply after the scoped del changed the switch:\nscoped %s\nfull   %s", after, full)
	}
}

// Where a port's mode depends on the others (a bridge with an XDP port,
// whose redirects a tc port must take; a port added at XDP), a run-time
// port takes a full apply, which prepares its peer as before.
func TestRunPortAddFullWithXDP(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "r1", "r2", "q1", "q2"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1:xdp,p2", "br1=q1"))
	w.looked()
	e := w.mustPortAdd("br0", "r1", "")
	if got := w.looked(); !got["p1"] || !got["p2"] {
		t.Errorf("an add to a bridge with an xdp port looked up %v, want every port", got)
	}
	if e.State != stateUp || e.Mode != "tc" {
		t.Errorf("port add answered %+v", e)
	}
	if p := w.sys.peers[w.sys.links["r1"].Index]; p == nil || !p.f[featGRO] {
		t.Errorf("r1's peer was not prepared for the xdp port's redirects: %+v", p)
	}
	// A port added at XDP changes what its bridge's tc ports need.
	w.looked()
	if e := w.mustPortAdd("br1", "q2", "", "mode=xdp"); e.Mode != "xdp" {
		t.Errorf("port add answered %+v", e)
	}
	if got := w.looked(); !got["q1"] {
		t.Errorf("an add at xdp looked up %v, want every port", got)
	}
	if p := w.sys.peers[w.sys.links["q1"].Index]; p == nil || !p.f[featGRO] {
		t.Errorf("q1's peer was not prepared for the new xdp port's redirects: %+v", p)
	}
}
