package lab_test

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/trestle/trestle/internal/lab"
	_ "github.com/trestle/trestle/internal/lab/kinds/all"
)

func TestCheckFilters(t *testing.T) {
	veb := Scenarios["veb-vs-bridge"]
	if err := veb.CheckFilters(); err != nil {
		t.Errorf("veb-vs-bridge: %v", err)
	}
	veb.DUTs = append(slices.Clone(veb.DUTs), MustSpec("trestle@rules=10"))
	if err := veb.CheckFilters(); err == nil || !strings.Contains(err.Error(), "iperf3") {
		t.Errorf("rules=10 with iperf3: %v", err)
	}
	veb.DUTs = MustSpecs("trestle@rules=0", "trestle@filter")
	if err := veb.CheckFilters(); err != nil {
		t.Errorf("rules=0 and filter with iperf3: %v", err)
	}
	if err := Scenarios["filter-scale"].CheckFilters(); err != nil {
		t.Errorf("filter-scale: %v", err)
	}
}

// TestFilterScaleScenario: every rule count for trestle:xdp and
// linux-bridge:nft, stateless and keeping state, and the filter off for
// both; the goals; the rules in --help.
func TestFilterScaleScenario(t *testing.T) {
	s := checkVariantScenario(t, "filter-scale", "rules=100", []string{"trestle:xdp"}, 35*time.Minute,
		"rules=0", "1, 10, 100 and 1000 rules", "default block", "established,related", "at least 0.8x trestle:xdp", "linux-bridge:nft@rules=1000:")
	want := []string{"trestle:xdp", "linux-bridge:nft@rules=0"} // the filter off
	for _, n := range FilterScaleRules {
		for _, kind := range []string{"trestle:xdp", "linux-bridge:nft"} {
			for _, state := range []string{"", ",state"} {
				want = append(want, kind+"@rules="+strconv.Itoa(n)+state)
			}
		}
	}
	for _, d := range want {
		if !slices.Contains(SpecTexts(s.DUTs), d) {
			t.Errorf("%s not in %v", d, s.DUTs)
		}
	}
	if len(s.DUTs) != 18 || s.Hosts != 2 || !slices.Equal(s.TestNames(), []string{TestThroughput}) || !slices.Equal(s.Sizes, []FrameSize{"64"}) {
		t.Errorf("%d DUTs, %d hosts, tests %v, sizes %v", len(s.DUTs), s.Hosts, s.Tests, s.Sizes)
	}
	if !slices.Contains(SpecTexts(Scenarios["veb-vs-bridge"].DUTs), "trestle@filter") {
		t.Errorf("veb-vs-bridge has no trestle@filter: %v", Scenarios["veb-vs-bridge"].DUTs)
	}
}

// TestExecuteFilter runs the Linux bridge with nftables rules (and with
// rules=0, no table), stateless and keeping state, and trestle with
// rules and with @filter, for a very short search each: every DUT with
// rules passes the filter check first. Keeping state on the Linux bridge
// may be unavailable (no bridge conntrack), and trestle's filter on a
// build without the stage; both must say so as the DUT being unavailable.
func TestExecuteFilter(t *testing.T) {
	RequireRoot(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skipf("nftables is not installed: %v", err)
	}
	bin := TrestleBinary(t)
	duts := []string{"linux-bridge:nft@rules=0", "linux-bridge:nft@rules=10", "linux-bridge:nft@rules=3,state", "trestle:xdp@rules=10", "trestle:xdp@rules=10,state", "trestle@filter"}
	allowed := map[string]string{"linux-bridge:nft@rules=3,state": "no connection tracking of bridged frames"}
	if !TrestleTakesFilters(t, bin) {
		for _, d := range duts {
			if strings.HasPrefix(d, "trestle") {
				allowed[d] = "takes no filter rules"
			}
		}
	}
	sc := Scenario{Name: "test", DUTs: MustSpecs(duts...), Hosts: 2, Chain: []int{1}, Sizes: []FrameSize{"64"}, Tests: TestsOf(TestThroughput), Reps: 1, Timing: TinyTiming()}
	runUnits(t, bin, sc, allowed, func(d string, u UnitRecord, _ map[string]float64) {
		_, f := FilterOf(d)
		if u.Settings["variant: filter"] != f.String() {
			t.Errorf("%s: variant: filter %q", d, u.Settings["variant: filter"])
		}
		check := u.Settings["filter check"]
		switch {
		case f.Off() || f.All:
			if check != "" {
				t.Errorf("%s: a filter check with no rules to check: %q", d, check)
			}
		case !strings.HasPrefix(check, "passed: ") || strings.Count(check, ";") != 2:
			t.Errorf("%s: filter check %q", d, check)
		default:
			t.Logf("%s: filter check %s", d, check)
		}
		if strings.HasPrefix(d, "linux-bridge") {
			nft := u.Settings["nftables"]
			if f.Off() != strings.HasPrefix(nft, "none (rules=0") || !f.Off() && !strings.Contains(nft, "policy drop;\n  ip saddr 172.16.0.0/24 ip daddr 198.18.0.2 udp dport 9 counter drop\n") {
				t.Errorf("%s: nftables %q", d, nft)
			}
		}
	})
}
