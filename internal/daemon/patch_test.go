package daemon

import (
	"slices"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/datapath"
)

// Patch ports in the reconcile (fake dataplane): up with no interface,
// paired by slot, in every tree bridge's reach; kept across reloads by
// peer; a patch that goes takes its entries.

// chained is br0 [h1, h2, patch br1] - br1 [patch br0, h3, patch br2] -
// br2 [patch br1, h4], the middle patch named as given ("" for default),
// or left out when cut.
func chained(name string, cut bool) string {
	if cut {
		return bridges("br0=h1,h2,@br1", "br1=@br0,h3", "br2=h4")
	}
	mid := "@br2"
	if name != "" {
		mid += "/" + name
	}
	return bridges("br0=h1,h2,@br1", "br1=@br0,h3,"+mid, "br2=@br1,h4")
}

func (w *world) reach(bridge string) []uint32 {
	var out []uint32
	for _, p := range w.dp.bridges[w.d.bridges[bridge].id].Reach {
		out = append(out, p.Ifindex)
	}
	slices.Sort(out)
	return out
}

func (w *world) ifindexes(names ...string) []uint32 {
	var out []uint32
	for _, n := range names {
		l, err := w.sys.LinkByName(n)
		if err != nil {
			w.t.Fatal(err)
		}
		out = append(out, uint32(l.Index))
	}
	slices.Sort(out)
	return out
}

func TestPatchPorts(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"h1", "h2", "h3", "h4"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(chained("", false))

	a, b := w.port("br0", "patch-br1"), w.port("br1", "patch-br0")
	for _, p := range []*portState{a, b} {
		if p.state() != stateUp || p.written == nil {
			t.Fatalf("patch port %s: %s (%s), written %v", p.name(), p.state(), p.why, p.written)
		}
	}
	if a.written.Ifindex != datapath.PatchIfindex(a.slot) || a.written.Peer != b.slot || b.written.Peer != a.slot {
		t.Errorf("the pair is written %+v / %+v, want each the other's slot", *a.written, *b.written)
	}
	all := w.ifindexes("h1", "h2", "h3", "h4")
	for _, br := range []string{"br0", "br1", "br2"} {
		if got := w.reach(br); !slices.Equal(got, all) {
			t.Errorf("%s reaches %v, want every host port %v", br, got, all)
		}
	}
	st, err := w.d.status()
	if err != nil {
		t.Fatal(err)
	}
	ps := st.Bridges[0].Ports[2]
	if ps.Name != "patch-br1" || ps.Patch != "br1" || ps.Interface != "" || ps.Mode != "" || ps.State != stateUp {
		t.Errorf("show: %+v, want patch-br1 up with patch br1 and no interface or mode", ps)
	}

	// A port that goes down leaves the reach of every bridge of its tree.
	w.sys.del("h4")
	w.mustApply(chained("", false))
	want := w.ifindexes("h1", "h2", "h3")
	if got := w.reach("br0"); !slices.Equal(got, want) {
		t.Errorf("after h4 went, br0 reaches %v, want %v", got, want)
	}
	w.sys.add("h4", "veth")
	w.mustApply(chained("", false))
	all = w.ifindexes("h1", "h2", "h3", "h4")

	// A rename keeps the slot (and so the entries) of the middle patch.
	mid := w.port("br1", "patch-br2").slot
	w.dp.learn(w.d.bridges["br1"].id, mid, int(datapath.PatchIfindex(mid)), "02:00:00:00:00:04", 0)
	w.mustApply(chained("to-br2", false))
	if p := w.port("br1", "to-br2"); p.slot != mid || len(w.dp.fdb) != 1 {
		t.Errorf("renamed patch: slot %d (was %d), %d entries (want 1)", p.slot, mid, len(w.dp.fdb))
	}

	// Cutting the middle patch removes both of its ports and their
	// entries; br2 then reaches only its own host, br0 and br1 theirs.
	w.dp.ops = nil
	w.mustApply(chained("", true))
	if len(w.dp.fdb) != 0 {
		t.Errorf("entries of the cut patch left: %v", w.dp.fdb)
	}
	if got := w.reach("br2"); got != nil {
		t.Errorf("br2, with no patch left, still has a reach %v", got)
	}
	if got, want := w.reach("br0"), w.ifindexes("h1", "h2", "h3"); !slices.Equal(got, want) {
		t.Errorf("after the cut br0 reaches %v, want %v", got, want)
	}
	dels := 0
	for _, op := range w.dp.ops {
		if strings.HasPrefix(op, "DelPort ") {
			dels++
		}
	}
	if dels != 2 {
		t.Errorf("the cut deleted %d ports, want the 2 patch ports: %v", dels, w.dp.ops)
	}

	// Joined again: new slots, paired, and every bridge reaches all hosts.
	w.mustApply(chained("", false))
	c, d := w.port("br1", "patch-br2"), w.port("br2", "patch-br1")
	if c.written == nil || c.written.Peer != d.slot || d.written.Peer != c.slot {
		t.Errorf("rejoined pair: %+v / %+v", c.written, d.written)
	}
	if got := w.reach("br2"); !slices.Equal(got, all) {
		t.Errorf("rejoined br2 reaches %v, want %v", got, all)
	}
}

// A tc port takes the XDP redirects of the XDP ports of every bridge
// patched to its own: its veth peer gets GRO on, or frames from br0's XDP
// port through the patch would vanish at it.
func TestPatchTreeXDPRedirects(t *testing.T) {
	w := newWorld(t)
	w.sys.add("v1", "veth")
	v2 := w.sys.add("v2", "veth")
	w.mustApply(bridges("br0=v1:xdp,@br1", "br1=@br0,v2"))
	if p := w.port("br1", "v2"); p.state() != stateUp || p.mode != "tc" {
		t.Fatalf("v2: %s %s (%s)", p.state(), p.mode, p.why)
	}
	if got := w.sys.peers[v2.Index].features(); got != "rx-gro=on tx-checksum-ip-generic=on" {
		t.Errorf("peer of tc v2 in a bridge patched to an xdp port: %s, want GRO on", got)
	}
}
