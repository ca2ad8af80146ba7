package lab

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitVariantPatch(t *testing.T) {
	for _, c := range []struct{ spec, name, err string }{
		{spec: "ovs@patch", name: "ovs"},
		{spec: "ovs:system@patch", name: "ovs:system"},
		{spec: "ovs:afxdp@patch,gso=off", name: "ovs:afxdp"},
		{spec: "linux-bridge@patch", err: "the Linux bridge has no patch ports: bridges join only by veth pairs"},
		{spec: "linux-bridge:nft@patch", err: "the Linux bridge has no patch ports"},
		{spec: "trestle@patch", err: "trestle's patch ports are not built yet (issue 12)"},
		{spec: "trestle:xdp@patch", err: "trestle's patch ports are not built yet (issue 12)"},
		{spec: "direct@patch", err: "the straight path has no bridges to join"},
		{spec: "ovs@patch=1", err: "vlan or patch"},
	} {
		v, err := SplitVariant(c.spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one with %q", c.spec, err, c.err)
			}
			if _, err := ParseDUT(c.spec); err == nil {
				t.Errorf("ParseDUT(%s) accepted it", c.spec)
			}
			continue
		}
		if err != nil || v.Name != c.name || !v.Patch {
			t.Errorf("%s: %+v, %v; want name %s with patch", c.spec, v, err, c.name)
		}
		if d, err := ParseDUT(c.spec); err != nil || d.Name() != c.spec {
			t.Errorf("ParseDUT(%s): %v", c.spec, err)
		}
		if sh := Scenarios["chain"].shape(c.spec, 3); !sh.Patch || sh.Chain != 3 {
			t.Errorf("%s: shape %+v, want a patched chain of 3", c.spec, sh)
		}
	}
	if v, _ := SplitVariant("ovs"); v.Patch {
		t.Error("ovs: patch without @patch")
	}
	if sh := Scenarios["chain"].shape("ovs", 3); sh.Patch {
		t.Errorf("ovs: shape %+v patched", sh)
	}
}

// TestOVSArgsPatch: a patched chain of 3 bridges is three netdev bridges,
// the hosts' ports (AF_XDP) on the first and last only, and two pairs of
// patch ports, each the other's peer; no veth ports between bridges.
func TestOVSArgsPatch(t *testing.T) {
	brs, ps := patchedChain(3)
	tp := &Topo{Bridges: brs, Patches: ps}
	args := strings.Join(ovsArgs(tp, &Env{DUTCPU: 1}, "afxdp"), " ")
	want := []string{
		"set Open_vSwitch . other_config:pmd-cpu-mask=0x2",
		"-- add-br br1 -- set bridge br1 datapath_type=netdev",
		"-- add-br br2 -- set bridge br2 datapath_type=netdev",
		"-- add-br br3 -- set bridge br3 datapath_type=netdev",
		"-- add-port br1 p1 -- set interface p1 type=afxdp options:xdp-mode=native",
		"-- add-port br3 p2 -- set interface p2 type=afxdp options:xdp-mode=native",
		"-- add-port br1 p1-2 -- set interface p1-2 type=patch options:peer=p2-1",
		"-- add-port br2 p2-1 -- set interface p2-1 type=patch options:peer=p1-2",
		"-- add-port br2 p2-3 -- set interface p2-3 type=patch options:peer=p3-2",
		"-- add-port br3 p3-2 -- set interface p3-2 type=patch options:peer=p2-3",
	}
	for _, w := range want {
		if !strings.Contains(args, w) {
			t.Errorf("ovs-vsctl args lack %q:\n%s", w, args)
		}
	}
	if n := strings.Count(args, "add-port"); n != 6 {
		t.Errorf("%d ports added, want 6 (2 hosts', 4 patch):\n%s", n, args)
	}
	if strings.Contains(args, " c1a") || strings.Contains(args, " c1b") || strings.Count(args, "type=afxdp") != 2 {
		t.Errorf("inter-bridge veths or patch ports as AF_XDP:\n%s", args)
	}
	if got := tp.DUTPorts(); !slices.Equal(got, []string{"p1", "p2"}) {
		t.Errorf("DUT's kernel ports %v, want p1, p2", got)
	}
}

func TestChainScenarioPatch(t *testing.T) {
	s := Scenarios["chain"]
	if !slices.Contains(s.DUTs, "ovs@patch") || !strings.Contains(s.Title, "patch ports") || !strings.Contains(s.About, "patch ports") {
		t.Errorf("chain: DUTs %v, title %q, about %q", s.DUTs, s.Title, s.About)
	}
	for _, d := range s.DUTs {
		if _, err := ParseDUT(d); err != nil {
			t.Error(err)
		}
	}
}

// TestExecutePatch runs ovs@patch on chains of 1 and 3 bridges for a very
// short trial each: frames and TCP cross the patch ports, the DUT
// namespace has no veth pairs between bridges, and nothing is left behind.
func TestExecutePatch(t *testing.T) {
	requireRoot(t)
	if err := OVSAvailable(); err != nil {
		t.Skip(err)
	}
	sc := tinyScenario([]string{"ovs@patch"}, 1, 3)
	before := ours(t, "tl")
	run, all := execute(t, sc, "")
	got := all["ovs@patch"]
	for _, c := range sc.Chain {
		if got[c][TestThroughput] <= 0 || got[c][TestTCP] <= 0 {
			t.Errorf("ovs@patch x%d: throughput %v pps, TCP %v bit/s; want both above 0", c, got[c][TestThroughput], got[c][TestTCP])
		}
	}
	for _, u := range run.Units {
		if u.Skipped != "" {
			t.Errorf("unit skipped: %s", u.Skipped)
		}
		if u.Chain == 3 && !strings.Contains(u.Settings["bridges joined by"], "br1:p1-2 <-> br2:p2-1") {
			t.Errorf("x3: bridges joined by %q", u.Settings["bridges joined by"])
		}
		for k := range u.Offloads {
			if strings.HasPrefix(k, "dut/c") {
				t.Errorf("x%d: an inter-bridge veth %s", u.Chain, k)
			}
		}
	}
	if left := ours(t, "tl"); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
}
