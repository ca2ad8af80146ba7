package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The store is written atomically to the state directory and taken back
// by the next daemon, which drops what no longer exists.
func TestRunPortsStore(t *testing.T) {
	w, st, dir := storedWorld(t, "p1", "r1", "r2")
	w.mustApply(bridges("br0=p1"))
	w.mustPortAdd("br0", "r1", "own", "max_macs=3")
	w.mustPortAdd("br0", "r2", "")
	if _, err := os.Stat(filepath.Join(dir, runPortsFile+".new")); !os.IsNotExist(err) {
		t.Errorf("a temporary file stayed: %v", err)
	}

	// A daemon restarted without persist: the interfaces are as they
	// were but r2, deleted while no daemon ran.
	w.sys.del("r2")
	w2 := w.restarted(st)
	if len(w2.d.run) != 2 {
		t.Fatalf("taken back: %d ports, want 2", len(w2.d.run))
	}
	w2.mustApply(bridges("br0=p1"))
	got := w2.list("br0")
	if len(got) != 2 || got["br0/r1"].Owner != "own" || got["br0/r1"].MaxMACs != 3 || got["br0/r1"].State != stateUp {
		t.Errorf("after a restart: %+v", got)
	}
	rf, err := st.loadRun()
	if err != nil || len(rf.Ports) != 1 || rf.Ports[0].Interface != "r1" {
		t.Errorf("the store after the restart: %+v %v", rf, err)
	}
	// An unreadable store takes nothing back, and stops nothing.
	if err := os.WriteFile(st.runFile(), []byte("{nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	w3 := newWorld(t)
	w3.d.state = st
	w3.d.loadRun()
	if len(w3.d.run) != 0 {
		t.Errorf("an unreadable store gave %d ports", len(w3.d.run))
	}
	// It is kept aside for the operator, not written over by the next add.
	if b, err := os.ReadFile(st.runFile() + ".unreadable"); err != nil || string(b) != "{nope" {
		t.Errorf("the unreadable store was not kept aside: %q %v", b, err)
	}
	if _, err := os.Stat(st.runFile()); !os.IsNotExist(err) {
		t.Errorf("the unreadable store is still where the next add writes: %v", err)
	}
}

// storedWorld is a world whose daemon records its state in a directory
// of the test's (dir, st), with veths named links.
func storedWorld(t *testing.T, links ...string) (w *world, st *stateDir, dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "inst")
	st, err := openState(dir)
	if err != nil {
		t.Fatal(err)
	}
	w = worldWith(t, links...)
	w.d.state = st
	return w, st, dir
}

// worldWith is a world with veths named links.
func worldWith(t *testing.T, links ...string) *world {
	w := newWorld(t)
	for _, n := range links {
		w.sys.add(n, "veth")
	}
	return w
}

// restarted is the next daemon on w's interfaces, with a dataplane of
// its own, that has read the run-time ports st records.
func (w *world) restarted(st *stateDir) *world {
	w2 := &world{t: w.t, dp: newFakeDP(), sys: w.sys}
	w2.d = newDaemon(quietLog(), w2.dp, w2.sys, 1<<20, time.Second)
	w2.d.state = st
	w2.d.loadRun()
	return w2
}

// A state directory another user may write is refused.
func TestStateDirRefusedWhenOthersMayWrite(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "inst")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := openState(dir); err == nil || !strings.Contains(err.Error(), "writable by other users") {
		t.Errorf("a world-writable state directory: %v", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := openState(dir); err != nil {
		t.Errorf("a private state directory: %v", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		if _, err := openState(dir); err == nil || !strings.Contains(err.Error(), "owned by uid 4242") {
			t.Errorf("a state directory of another user: %v", err)
		}
	}
}

// A store that names an interface twice (in one bridge or two), or an
// owner port.add refuses, takes back the first entry of each interface
// only: the merge does not check the store again, and one ifindex made
// three ports with three slots.
func TestRunPortsStoreTakesBackWhatPortAddTakes(t *testing.T) {
	st, err := openState(filepath.Join(t.TempDir(), "inst"))
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	w.d.state = st
	for _, n := range []string{"p1", "r1", "r2"} {
		w.sys.add(n, "veth")
	}
	store := `{"ports":[{"bridge":"br0","interface":"r1","owner":"a"},{"bridge":"br1","interface":"r1"},{"bridge":"br0","interface":"r1","owner":"b"},` +
		`{"bridge":"br0","interface":"r2","owner":"x\n\u001b[2J"}]}`
	if err := os.WriteFile(st.runFile(), []byte(store), 0o600); err != nil {
		t.Fatal(err)
	}
	w.d.loadRun()
	w.mustApply(bridges("br0=p1") + "[[bridge]]\nname = \"br1\"\n")
	all := w.list("")
	if len(all) != 2 || all["br0/r1"].Owner != "a" {
		t.Errorf("ports after taking the store back: %+v", all)
	}
}
