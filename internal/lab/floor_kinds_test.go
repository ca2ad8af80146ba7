package lab_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/trestle/trestle/internal/lab"
	_ "github.com/trestle/trestle/internal/lab/kinds/all"
)

// TestFloorSpec: the floor parses, takes the knobs a bare redirect can
// have (host offloads, veth joins) and refuses the others, and a scenario
// whose bridge has more than two ports refuses it up front.
func TestFloorSpec(t *testing.T) {
	d, err := ParseDUT("floor")
	if err != nil || d.Name() != "floor" || d.Learns() {
		t.Fatalf("ParseDUT(floor): %v, %v", d, err)
	}
	for _, ok := range []string{"floor@veth", "floor@gso=off", "floor@tx=off,gro=on", "floor@vlan", "floor@mirror", "floor:tc", "floor:tc@vlan", "floor:tc@mirror", "floor:tc@veth"} {
		if _, err := ParseDUT(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if d, err := ParseDUT("floor:tc"); err != nil || d.Name() != "floor:tc" || d.Learns() {
		t.Errorf("ParseDUT(floor:tc): %v, %v", d, err)
	}
	// Each DUT is held against the floor of its own mode and set-up.
	for spec, want := range map[string]string{
		"trestle:xdp": "floor", "trestle:xdp@vlan": "floor@vlan", "trestle:xdp@mirror,bin=/x": "floor@mirror",
		"trestle:tc": "floor:tc", "trestle": "floor:tc", "trestle@vlan": "floor:tc@vlan", "trestle:tc@mirror": "floor:tc@mirror",
		"floor:tc@vlan": "floor:tc@vlan", "floor": "floor", "linux-bridge": "floor", "ovs@vlan": "floor@vlan",
	} {
		if got := MustSpec(spec).Floor(); got != want {
			t.Errorf("%s is held against %s, want %s", spec, got, want)
		}
	}
	for spec, want := range map[string]string{
		"floor:xdp":      "not one of",
		"floor:tc@patch": "the floor has no patch ports",
		"floor@patch":    "the floor has no patch ports",
		"floor@rules=10": "the floor has no filter",
		"floor@filter":   "the floor has no filter",
		"floor@capture":  "it is for trestle DUTs",
		"floor@bin=/x":   "bin= is for trestle DUTs",
	} {
		if _, err := ParseDUT(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", spec, err, want)
		}
	}
	if v, _ := ParseSpec("floor"); v.Patched() {
		t.Error("the floor's chains are joined by patch ports")
	}

	for _, name := range []string{"quick", "router-pps"} {
		s := Scenarios[name]
		if !slices.Contains(SpecTexts(s.DUTs), "floor") || !slices.Contains(SpecTexts(s.DUTs), "direct") {
			t.Errorf("%s measures %v: the floor and direct are the baselines of its ratios", name, s.DUTs)
		}
		if err := s.CheckFloor(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	flood := Scenarios["flood"]
	if err := flood.CheckFloor(); err != nil {
		t.Errorf("flood without the floor: %v", err)
	}
	for _, f := range []string{"floor@gso=off", "floor:tc"} {
		flood := flood
		flood.DUTs = append(slices.Clone(flood.DUTs), MustSpec(f))
		if err := flood.CheckFloor(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf(`DUT %q: flood has 4 hosts`, f)) {
			t.Errorf("%s on a 4-port bridge: %v", f, err)
		}
	}
	for _, s := range Scenarios {
		if slices.Contains(SpecTexts(s.DUTs), "floor") && s.Hosts > 2 {
			t.Errorf("%s has the floor on %d hosts", s.Name, s.Hosts)
		}
	}
}

// TestFloor runs the floor and floor:tc for real, each on one bridge and
// on a chain of three joined by veth pairs: each forwards generator frames
// and host TCP both ways, every port redirects (at XDP, or at tc ingress)
// to the other port of its bridge, the hosts are set up as trestle sets up
// the peers of its ports in that mode (GRO on and TX checksum off for
// xdp, left alone for tc), and nothing is left behind.
func TestFloor(t *testing.T) {
	RequireRoot(t)
	ports := map[int][]string{1: {"p1", "p2"}, 3: {"p1", "c1a", "c1b", "c2a", "c2b", "p2"}}
	for _, c := range []struct{ dut, says string }{{"floor", "xdp (native)"}, {"floor:tc", "tc"}} {
		run, _ := execute(t, tinyScenario([]string{c.dut}, 1, 3), "")
		var units int
		for _, u := range run.Units {
			if u.Skipped != "" {
				t.Fatalf("%s x%d skipped: %s", c.dut, u.Chain, u.Skipped)
			}
			units++
			for i, p := range ports[u.Chain] {
				// Ports pair up in order: p1-c1a (br1), c1b-c2a (br2), ...
				other := ports[u.Chain][i^1]
				if got := u.Settings["port "+p]; got != c.says+": every frame to "+other {
					t.Errorf("%s x%d: port %s: %q, want a redirect to %s", c.dut, u.Chain, p, got, other)
				}
			}
			for _, p := range []string{"p1", "p2"} {
				got := u.Settings["peer of "+p]
				fixed := strings.Contains(got, "rx-gro on (was off)") && strings.Contains(got, "tx-checksum-ip-generic off (was on)")
				if c.dut == "floor" && !fixed || c.dut == "floor:tc" && got != "" {
					t.Errorf("%s x%d: peer of %s: %q, want what trestle's daemon does in that mode", c.dut, u.Chain, p, got)
				}
			}
			for dev, f := range u.Offloads {
				if c.dut == "floor" && strings.HasSuffix(dev, "/eth0") && (!f["rx-gro"] || f["tx-checksum-ip-generic"]) {
					t.Errorf("x%d: %s measured with %v", u.Chain, dev, f)
				}
			}
		}
		if units != 2 {
			t.Errorf("%s: %d units, want one bridge and a chain of 3", c.dut, units)
		}
		for _, r := range run.Results {
			if r.Value <= 0 {
				t.Errorf("%s x%d %s: %v %s (%s)", c.dut, r.Chain, r.Test, r.Value, r.Unit, r.Error)
			}
		}
	}
}

// TestFloorVariants runs the VLAN and mirror floors of both modes for real:
// the lab's checks pass (each tags toward the trunk, takes the tag off the
// other way and keeps VLAN 20 apart; each mirror's span host receives h1's
// and h2's frames), and each forwards.
func TestFloorVariants(t *testing.T) {
	RequireRoot(t)
	runVLAN(t, "", []string{"floor@vlan", "floor:tc@vlan"}, nil)
	runMirror(t, "", []string{"floor@mirror", "floor:tc@mirror"}, nil)
}
