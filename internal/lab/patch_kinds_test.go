package lab_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	. "github.com/trestle/trestle/internal/lab"
	_ "github.com/trestle/trestle/internal/lab/kinds/all"
)

// TestSplitVariantJoins: @patch and @veth choose how a chain's bridges
// are joined; trestle's default is patch ports, Open vSwitch's and the
// Linux bridge's veth pairs.
func TestSplitVariantJoins(t *testing.T) {
	for _, c := range []struct {
		spec, name string
		patched    bool // the bridges of a chain are joined by patch ports
		err        string
	}{
		{spec: "ovs@patch", name: "ovs", patched: true},
		{spec: "ovs:system@patch", name: "ovs:system", patched: true},
		{spec: "ovs:afxdp@patch,gso=off", name: "ovs:afxdp", patched: true},
		{spec: "ovs@veth", name: "ovs"},
		{spec: "ovs:system@veth", name: "ovs:system"},
		{spec: "trestle@patch", name: "trestle", patched: true},
		{spec: "trestle:xdp@patch", name: "trestle:xdp", patched: true},
		{spec: "trestle@veth", name: "trestle"},
		{spec: "trestle:xdp@veth", name: "trestle:xdp"},
		{spec: "trestle:tc@veth", name: "trestle:tc"},
		{spec: "trestle:xdp@veth,bin=/tmp/old", name: "trestle:xdp"},
		{spec: "linux-bridge@veth", name: "linux-bridge"},
		{spec: "linux-bridge@patch", err: "the Linux bridge has no patch ports: bridges join only by veth pairs"},
		{spec: "linux-bridge:nft@patch", err: "the Linux bridge has no patch ports"},
		{spec: "direct@patch", err: "the straight path has no bridges to join"},
		{spec: "direct@veth", err: "the straight path has no bridges to join"},
		{spec: "trestle@patch,veth", err: "patch or veth, not both"},
		{spec: "ovs@veth,patch", err: "patch or veth, not both"},
		{spec: "ovs@patch=1", err: "capture, patch, veth, rules=N, state, filter, nosnoop or suppress"},
		{spec: "trestle@veth=1", err: "capture, patch, veth, rules=N, state, filter, nosnoop or suppress"},
	} {
		v, err := ParseSpec(c.spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one with %q", c.spec, err, c.err)
			}
			if _, err := ParseDUT(c.spec); err == nil {
				t.Errorf("ParseDUT(%s) accepted it", c.spec)
			}
			continue
		}
		if err != nil || v.Name != c.name || v.Join() == "" || v.Patched() != c.patched {
			t.Errorf("%s: %+v (join %q, patched %v), %v; want name %s, patched %v", c.spec, v, v.Join(), v.Patched(), err, c.name, c.patched)
		}
		if d, err := ParseDUT(c.spec); err != nil || d.Name() != c.spec {
			t.Errorf("ParseDUT(%s): %v", c.spec, err)
		}
		if sh := Scenarios["chain"].Shape(MustSpec(c.spec), 3); sh.Patch != c.patched || sh.Chain != 3 {
			t.Errorf("%s: shape %+v, want a chain of 3, patched %v", c.spec, sh, c.patched)
		}
	}
	// Without a knob: trestle's chains are patched, the others' not.
	for spec, patched := range map[string]bool{"trestle": true, "trestle:xdp": true, "trestle:tc": true, "trestle@vlan": true,
		"ovs": false, "ovs:system": false, "linux-bridge": false, "linux-bridge:nft": false} {
		v, err := ParseSpec(spec)
		if err != nil || v.Join() != "" {
			t.Errorf("%s: %+v, %v", spec, v, err)
		}
		if sh := Scenarios["chain"].Shape(MustSpec(spec), 3); sh.Patch != patched {
			t.Errorf("%s: shape %+v, want patched %v", spec, sh, patched)
		}
	}
	if sh := Scenarios["chain"].Shape(MustSpec("direct"), 3); sh.Patch || sh.Chain != 0 {
		t.Errorf("direct: shape %+v", sh)
	}
}

// TestCheckJoins: a scenario with no chain longer than one bridge has no
// joins to choose, so it refuses @patch and @veth; the chain scenario takes
// them, unless --chains leaves it only chains of 1.
func TestCheckJoins(t *testing.T) {
	if err := Scenarios["chain"].CheckJoins(); err != nil {
		t.Errorf("chain: %v", err)
	}
	for name, sc := range Scenarios {
		if slices.Max(sc.Chain) > 1 {
			continue
		}
		if err := sc.CheckJoins(); err != nil {
			t.Errorf("%s with its own DUTs: %v", name, err)
		}
		for _, d := range []string{"trestle@veth", "trestle:xdp@patch", "ovs@patch", "ovs@veth", "linux-bridge@veth"} {
			sc.DUTs = MustSpecs("direct", d)
			if err := sc.CheckJoins(); err == nil || !strings.Contains(err.Error(), "has no chain of 2 or more bridges") {
				t.Errorf("%s with %s: %v, want it refused", name, d, err)
			}
		}
	}
	sc := Scenarios["chain"]
	sc.Chain = []int{1}
	if err := sc.CheckJoins(); err == nil || !strings.Contains(err.Error(), "chains 1") {
		t.Errorf("chain with chains 1 and its own DUTs: %v, want the join variants refused", err)
	}
	sc.Chain = []int{1, 2}
	if err := sc.CheckJoins(); err != nil {
		t.Errorf("chain with chains 1,2: %v", err)
	}
	sc = Scenarios["quick"]
	sc.DUTs = MustSpecs("trestle@veth")
	if _, err := Execute(context.Background(), Config{Scenario: sc}); err == nil || !strings.Contains(err.Error(), "@veth chooses how a chain's bridges are joined") {
		t.Errorf("Execute of quick with trestle@veth: %v", err)
	}
}

func TestChainScenarioPatch(t *testing.T) {
	s := Scenarios["chain"]
	if !strings.Contains(s.Title, "patch ports") || !strings.Contains(s.About, "patch ports") {
		t.Errorf("chain: title %q, about %q", s.Title, s.About)
	}
	// The four joins: trestle by patch ports (its default) and by veth
	// pairs, Open vSwitch by patch ports, the Linux bridge by veth pairs.
	for _, d := range []string{"trestle", "trestle@veth", "trestle:xdp", "trestle:xdp@veth", "ovs@patch", "linux-bridge", "direct"} {
		if !slices.Contains(SpecTexts(s.DUTs), d) {
			t.Errorf("chain: DUTs %v lack %s", s.DUTs, d)
		}
	}
	for _, d := range SpecTexts(s.DUTs) {
		if _, err := ParseDUT(d); err != nil {
			t.Error(err)
		}
	}
}

// TestExecutePatch runs ovs@patch on chains of 1 and 3 bridges for a very
// short trial each: frames and TCP cross the patch ports, the DUT
// namespace has no veth pairs between bridges, and nothing is left behind.
func TestExecutePatch(t *testing.T) {
	RequireRoot(t)
	if err := OVSAvailable(); err != nil {
		t.Skip(err)
	}
	sc := tinyScenario([]string{"ovs@patch"}, 1, 3)
	before := Ours(t, RunPrefix)
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
	if left := Ours(t, RunPrefix); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
}

// TestExecuteTrestlePatch runs trestle:xdp joined by its patch ports (its
// default) and by veth pairs (@veth) on chains of 1 and 3 bridges for a
// very short trial each: frames and TCP cross both, the patched chain has
// no veth pairs between bridges, and nothing is left behind.
func TestExecuteTrestlePatch(t *testing.T) {
	RequireRoot(t)
	bin := TrestleBinary(t)
	duts := []string{"trestle:xdp", "trestle:xdp@veth"}
	sc := tinyScenario(duts, 1, 3)
	before := Ours(t, RunPrefix)
	run, all := execute(t, sc, bin)
	for _, u := range run.Units {
		if u.Skipped != "" {
			t.Errorf("%s x%d skipped: %s", u.DUT, u.Chain, u.Skipped)
		}
		joined := u.Settings["bridges joined by"]
		switch {
		case u.Chain == 1 && joined != "":
			t.Errorf("%s x1: bridges joined by %q", u.DUT, joined)
		case u.Chain == 3 && u.DUT == "trestle:xdp" && !strings.Contains(joined, "patch ports, no veth pairs between bridges: br1:p1-2 <-> br2:p2-1, br2:p2-3 <-> br3:p3-2"):
			t.Errorf("trestle:xdp x3: bridges joined by %q", joined)
		case u.Chain == 3 && u.DUT == "trestle:xdp@veth" && joined != "veth pairs":
			t.Errorf("trestle:xdp@veth x3: bridges joined by %q", joined)
		}
		for k := range u.Offloads {
			if strings.HasPrefix(k, "dut/c") && u.DUT == "trestle:xdp" {
				t.Errorf("trestle:xdp x%d: an inter-bridge veth %s", u.Chain, k)
			}
		}
	}
	for _, d := range duts {
		for _, c := range sc.Chain {
			if got := all[d][c]; got[TestThroughput] <= 0 || got[TestTCP] <= 0 {
				t.Errorf("%s x%d: throughput %v pps, TCP %v bit/s; want both above 0", d, c, got[TestThroughput], got[TestTCP])
			}
		}
	}
	if left := Ours(t, RunPrefix); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
}
