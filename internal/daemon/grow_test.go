package daemon

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/datapath"
)

// Unit tests of an apply that needs other load-time sizes than the running
// programs have (reconcile.go, grow): a reload adds a bridge whose
// max_entries the table has no room for, or shortens an aging time below
// four times the refresh.

// newSizedWorld is a world whose dataplane was loaded for cfg, as Run
// loads it: a table of fdbCapacity(cfg), refreshFor(cfg).
func newSizedWorld(t *testing.T, cfg string) *world {
	dp, sys := newFakeDP(), newFakeSys()
	c := cfgOf(t, cfg)
	dp.sizes = datapath.Sizes{FDBCapacity: fdbCapacity(c), Refresh: refreshFor(c)}
	return &world{t: t, dp: dp, sys: sys, d: newDaemon(quietLog(), dp, sys, dp.sizes.FDBCapacity, dp.sizes.Refresh)}
}

// runningOne is a world running one bridge (one) loaded for it, and a
// config that adds a second of the default max_entries (two).
func runningOne(t *testing.T) (w *world, one, two string) {
	one, two = bridges("br0=p1,p2"), bridges("br0=p1,p2", "br1=q1")
	w = newSizedWorld(t, one)
	for _, n := range []string{"p1", "p2", "q1"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(one)
	return w, one, two
}

// failOn fails the ops that start with prefix, with why.
func failOn(prefix, why string) func(string) error {
	return func(op string) error {
		if strings.HasPrefix(op, prefix) {
			return errors.New(why)
		}
		return nil
	}
}

// opsAt is the index of the first op with prefix, or -1.
func (w *world) opsAt(prefix string) int {
	return slices.IndexFunc(w.dp.ops, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// onCurrentLoad fails the test when an attachment runs programs of another
// load than the current one, or a resize let go of a load one ran.
func (w *world) onCurrentLoad(when string) {
	w.t.Helper()
	if b := w.dp.behind(); len(b) > 0 {
		w.t.Errorf("%s: %v run the programs of another load than %d", when, b, w.dp.load)
	}
	if len(w.dp.stale) > 0 {
		w.t.Errorf("%s: a resize ended while %v still ran the programs it let go of", when, w.dp.stale)
	}
	if w.dp.pending != nil {
		w.t.Errorf("%s: a resize was left under way", when)
	}
}

func TestReloadGrowsTable(t *testing.T) {
	w, one, two := runningOne(t)
	p1, p2 := w.port("br0", "p1"), w.port("br0", "p2")
	w.dp.learn(w.d.bridges["br0"].id, p1.slot, p1.ifindex, "02:00:00:00:00:01", time.Second)

	// A second bridge of the default max_entries: the table grows, and the
	// ports running move to the new programs in place before anything of
	// the new bridge is written; the old programs go at the end.
	w.dp.ops = nil
	w.mustApply(two)
	need := fdbCapacity(cfgOf(t, two))
	resize, kept := w.opsAt(fmt.Sprintf("Resize %d 1s", need)), w.opsAt("Resize kept")
	if resize < 0 || kept < 0 {
		t.Fatalf("adding a bridge that needs a table of %d entries: %q", need, w.dp.ops)
	}
	for _, p := range []*portState{p1, p2} {
		if up := w.opsAt(fmt.Sprintf("Upgrade %d vlan-stage false load 1", p.ifindex)); up < resize || up > w.opsAt("SetBridge br1") {
			t.Errorf("%s moved to the new programs at op %d (resize at %d): %q", p.name(), up, resize, w.dp.ops)
		}
	}
	// The old ones go once the commit is done, its fallible writes all made.
	if kept < w.opsAt("SetBridge br1") || kept < w.opsAt(fmt.Sprintf("Attach %d", w.port("br1", "q1").ifindex)) {
		t.Errorf("the old programs went before the commit ended: %q", w.dp.ops)
	}
	if slices.ContainsFunc(w.dp.ops, func(op string) bool { return strings.HasPrefix(op, "Detach ") }) {
		t.Errorf("a port was detached on the way: %q", w.dp.ops)
	}
	w.onCurrentLoad("after the reload that grew the table")
	if w.d.capacity != need || w.dp.sizes.FDBCapacity != need {
		t.Errorf("capacity: the daemon says %d, the dataplane %d; want %d", w.d.capacity, w.dp.sizes.FDBCapacity, need)
	}
	if len(w.dp.fdb) != 1 || w.port("br1", "q1").state() != stateUp {
		t.Errorf("after the reload: table %v, q1 %s", w.dp.fdb, w.port("br1", "q1").state())
	}

	// Grown only when needed: the same file again, a bridge that goes
	// (the table keeps its size), and one that comes back into its room.
	for _, cfg := range []string{two, one, two} {
		w.dp.ops = nil
		w.mustApply(cfg)
		if i := w.opsAt("Resize"); i >= 0 {
			t.Errorf("a reload that needs no other sizes resized: %q", w.dp.ops)
		}
	}
	if w.d.capacity != need {
		t.Errorf("the table shrank to %d", w.d.capacity)
	}

	// An aging time under four times the refresh: loaded again with a
	// shorter refresh, the table as it is.
	short := strings.Replace(two, "name = \"br1\"\n", "name = \"br1\"\naging = \"2s\"\n", 1)
	w.dp.ops = nil
	w.mustApply(short)
	if w.opsAt(fmt.Sprintf("Resize %d 500ms", need)) < 0 || w.opsAt("Resize kept") < 0 {
		t.Errorf("aging of 2 s with a refresh of 1 s: %q", w.dp.ops)
	}
	w.onCurrentLoad("after the reload that shortened the refresh")
	if w.d.refresh != 500*time.Millisecond {
		t.Errorf("refresh %v, want 500ms", w.d.refresh)
	}
	// Back to a longer one: a shorter refresh is kept, nothing loaded.
	w.dp.ops = nil
	w.mustApply(two)
	if w.opsAt("Resize") >= 0 {
		t.Errorf("a longer aging time reloaded the programs: %q", w.dp.ops)
	}
}

// A resize the dataplane refuses (no memory for so large a table) fails
// the reload with what happened and what to change, never a restart, and
// the running switch is as it was; one that fails later in the commit is
// undone with the rest, every port back on the programs of before.
func TestGrowFailsCleanly(t *testing.T) {
	w, _, two := runningOne(t)
	before, show, capacity := w.dp.snapshot(), w.show(), w.d.capacity

	w.dp.fail = failOn("Resize ", "create a learning table of 133120 entries: cannot allocate memory")
	err := w.apply(two)
	if err == nil {
		t.Fatal("a refused resize did not fail the reload")
	}
	for _, want := range []string{"test.toml", "max_entries need a learning table of 133120 entries (it holds 66560)", "cannot allocate memory", "lower max_entries"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "restart") {
		t.Errorf("error %q asks for a restart", err)
	}
	check := func(when string) {
		t.Helper()
		if got := w.dp.snapshot(); got != before {
			t.Errorf("%s: the dataplane changed:\n%s\nwas\n%s", when, got, before)
		}
		if got := w.show(); got != show {
			t.Errorf("%s: the model changed: %s, was %s", when, got, show)
		}
		if w.d.capacity != capacity || w.dp.sizes.FDBCapacity != capacity {
			t.Errorf("%s: capacity %d (dataplane %d), want %d", when, w.d.capacity, w.dp.sizes.FDBCapacity, capacity)
		}
		w.onCurrentLoad(when)
	}
	check("after a refused resize")

	// Refused after the resize: the bridge's write. Undone, last first.
	w.dp.fail = failOn("SetBridge br1", "refused")
	w.dp.ops = nil
	if err := w.apply(two); err == nil {
		t.Fatal("the apply did not fail")
	}
	if w.opsAt("Resize undone") < 0 {
		t.Errorf("the resize was not undone: %q", w.dp.ops)
	}
	for _, idx := range []int{w.port("br0", "p1").ifindex, w.port("br0", "p2").ifindex} {
		if w.opsAt(fmt.Sprintf("Upgrade %d vlan-stage false load 0", idx)) < w.opsAt("Resize undone") {
			t.Errorf("ifindex %d did not go back to the programs of before after the undo: %q", idx, w.dp.ops)
		}
	}
	check("after a failed apply that had resized")

	// A port that cannot move: the same.
	p2 := w.port("br0", "p2").ifindex
	w.dp.fail = func(op string) error {
		if strings.HasPrefix(op, fmt.Sprintf("Upgrade %d vlan-stage false load", p2)) && w.dp.pending != nil {
			return errors.New("link update refused")
		}
		return nil
	}
	if err := w.apply(two); err == nil || !strings.Contains(err.Error(), "link update refused") {
		t.Fatalf("an apply whose port could not move: %v", err)
	}
	check("after a port could not move")

	// With a stage switched on after the resize: both undone, last first.
	aware := strings.Replace(two, "interface = \"q1\"\n", "interface = \"q1\"\nvlan = 10\n", 1)
	w.dp.fail = failOn("SetBridge br1 vlan-aware", "refused")
	w.dp.ops = nil
	if err := w.apply(aware); err == nil {
		t.Fatal("the apply did not fail")
	}
	if on, undone := w.opsAt("vlan-stage false"), w.opsAt("Resize undone"); on < 0 || undone < on {
		t.Errorf("the stage and the resize were not undone in that order: %q", w.dp.ops)
	}
	for _, a := range w.dp.attached {
		if a.stage {
			t.Errorf("%s runs the VLAN stage after the undo", a.key())
		}
	}
	check("after a failed apply that resized and switched a stage on")

	// And the same reload, refused nothing, grows the table.
	w.dp.fail = nil
	w.mustApply(two)
	if w.d.capacity != 133120 {
		t.Errorf("capacity %d after the reload, want 133120", w.d.capacity)
	}
	w.onCurrentLoad("after the reload")
}
