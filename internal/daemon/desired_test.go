package daemon

import (
	"fmt"
	"testing"
)

// The merge leaves the file's config as it is, and a reload that makes a
// bridge VLAN-aware makes its run-time ports without a VLAN access ports
// of VLAN 1, as the file's are.
func TestDesiredMerge(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "r1"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1"))
	w.mustPortAdd("br0", "r1", "")
	file := cfgOf(t, bridges("br0=p1")+"vlan = 10\n")
	w.d.mu.Lock()
	err := w.d.apply(file)
	w.d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if len(file.Bridges[0].Ports) != 1 || len(w.d.cfg.Bridges[0].Ports) != 1 {
		t.Errorf("the merge changed the file's config: %+v", file.Bridges[0].Ports)
	}
	got := w.list("br0")
	if got["br0/r1"].VLAN != 1 || got["br0/p1"].VLAN != 10 || got["br0/r1"].Origin != originRun {
		t.Errorf("after the reload: %+v", got)
	}
	if vs := w.dp.bridges[w.d.bridges["br0"].id].VLANs; fmt.Sprint(vs) != "[1 10]" {
		t.Errorf("br0's VLANs: %v", vs)
	}
}

// A reload whose file names a patch port like a run-time port's interface
// wins: a port's name is unique in its bridge.
func TestRunPortGivesWayToAPatchName(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "q1", "patch-br1"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1", "br1=q1"))
	w.mustPortAdd("br0", "patch-br1", "")
	w.mustApply(bridges("br0=p1,@br1", "br1=q1,@br0"))
	got := w.list("br0")
	if len(got) != 2 || got["br0/patch-br1"].Patch != "br1" || len(w.d.run) != 0 {
		t.Errorf("after the reload: %+v, store %d", got, len(w.d.run))
	}
}
