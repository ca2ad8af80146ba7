package lab

import (
	"context"
	"encoding/binary"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/config"
)

func TestSplitVariantFilter(t *testing.T) {
	for _, c := range []struct {
		spec, name string
		want       *Filter
		err        string
	}{
		{spec: "trestle:xdp@rules=100", name: "trestle:xdp", want: &Filter{Rules: 100}},
		{spec: "trestle:xdp@rules=100,state", name: "trestle:xdp", want: &Filter{Rules: 100, State: true}},
		{spec: "trestle@state,rules=1", name: "trestle", want: &Filter{Rules: 1, State: true}},
		{spec: "trestle:tc@rules=0", name: "trestle:tc", want: &Filter{}},
		{spec: "trestle:xdp@rules=4096,bin=/tmp/x", name: "trestle:xdp", want: &Filter{Rules: 4096}},
		{spec: "trestle@filter", name: "trestle", want: &Filter{All: true}},
		{spec: "linux-bridge:nft@rules=10", name: "linux-bridge:nft", want: &Filter{Rules: 10}},
		{spec: "linux-bridge:nft@rules=10,state", name: "linux-bridge:nft", want: &Filter{Rules: 10, State: true}},
		{spec: "linux-bridge:nft@rules=0", name: "linux-bridge:nft", want: &Filter{}},
		{spec: "trestle:xdp", name: "trestle:xdp"},
		{spec: "trestle@rules=4097", err: "a number of rules 0..4096"},
		{spec: "trestle@rules=-1", err: "a number of rules 0..4096"},
		{spec: "trestle@rules=many", err: "a number of rules 0..4096"},
		{spec: "trestle@state", err: "N at least 1"},
		{spec: "trestle@rules=0,state", err: "N at least 1"},
		{spec: "trestle@filter,rules=3", err: "filter or rules=N, not both"},
		{spec: "linux-bridge@rules=10", err: "linux-bridge:nft@rules=N"},
		{spec: "linux-bridge:nft@filter", err: "the Linux bridge's is linux-bridge:nft"},
		{spec: "ovs@rules=10", err: "no OpenFlow rules"},
		{spec: "direct@rules=1", err: "no bridge to filter"},
		{spec: "trestle@filter=1", err: "rules=N, state, filter, nosnoop or suppress"},
	} {
		v, err := ParseSpec(c.spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one with %q", c.spec, err, c.err)
			}
			continue
		}
		if err != nil || v.Name != c.name || (v.Filter == nil) != (c.want == nil) || c.want != nil && *v.Filter != *c.want {
			t.Errorf("%s: %+v (filter %+v), %v; want name %s, filter %+v", c.spec, v, v.Filter, err, c.name, c.want)
		}
		if d, err := ParseDUT(c.spec); err != nil || d.Name() != c.spec {
			t.Errorf("ParseDUT(%s): %v", c.spec, err)
		}
	}
	// linux-bridge:nft@rules=0 is the Linux bridge with no table; plain
	// linux-bridge:nft keeps its accepting chain.
	for spec, nft := range map[string]bool{"linux-bridge:nft@rules=0": false, "linux-bridge:nft": true, "linux-bridge:nft@rules=5": true} {
		d, _ := ParseDUT(spec)
		if b := d.(*linuxBridge); b.nft != nft || b.off == nft {
			t.Errorf("%s: nft %v, off %v", spec, b.nft, b.off)
		}
	}
}

func TestFilterOf(t *testing.T) {
	for spec, want := range map[string]string{
		"trestle:xdp@rules=100,state":    "trestle:xdp",
		"trestle@filter":                 "trestle",
		"trestle:xdp@bin=/x,rules=10":    "trestle:xdp@bin=/x",
		"linux-bridge:nft@rules=0":       "linux-bridge:nft",
		"trestle:xdp@vlan":               "trestle:xdp@vlan",
		"linux-bridge:nft":               "linux-bridge:nft",
		"trestle:xdp@rules=1,state,vlan": "trestle:xdp@vlan",
	} {
		base, f := FilterOf(spec)
		if base != want || (f == nil) != (base == spec) {
			t.Errorf("FilterOf(%s) = %s, %+v; want %s", spec, base, f, want)
		}
	}
}

// TestFilterRules: N rules, the N-1 first blocking sources the lab's
// frames do not come from, all of one shape, the last passing the
// generator's frames.
func TestFilterRules(t *testing.T) {
	for _, n := range []int{1, 2, 10, 1000, config.MaxRules} {
		for _, state := range []bool{false, true} {
			rules := Filter{Rules: n, State: state}.rules()
			if len(rules) != n {
				t.Fatalf("rules=%d: %d rules", n, len(rules))
			}
			gen := netip.MustParseAddr("198.18.0.1")
			seen := map[netip.Prefix]bool{}
			for i, r := range rules[:n-1] {
				if !r.Block || r.Proto != "udp" || r.DstPort != 9 || r.Dst.String() != "198.18.0.2/32" || r.KeepState || r.Src.Bits() != 24 {
					t.Fatalf("rules=%d: block rule %d is %+v", n, i, r)
				}
				if r.Src.Contains(gen) || !filterBlock.Contains(r.Src.Addr()) || seen[r.Src] {
					t.Fatalf("rules=%d: block rule %d's source %s: matches the generator, is outside %s, or is another's", n, i, r.Src, filterBlock)
				}
				seen[r.Src] = true
			}
			pass := rules[n-1]
			if pass.Block || !pass.Src.Contains(gen) || pass.Dst.String() != "198.18.0.2/32" || pass.DstPort != 9 || pass.KeepState != state {
				t.Errorf("rules=%d: the pass rule is %+v", n, pass)
			}
		}
	}
	if r := (Filter{All: true}).rules(); len(r) != 1 || r[0] != (filterRule{}) {
		t.Errorf("filter: %+v, want one rule matching everything", r)
	}
	if r := (Filter{}).rules(); len(r) != 0 {
		t.Errorf("rules=0: %+v", r)
	}
}

// filterTopo is a 2-port bridge with f's rules, without namespaces.
func filterTopo(f Filter) *Topo {
	return &Topo{Bridges: []Bridge{{Name: "br1", Ports: []string{"p1", "p2"}}}, Filter: &f}
}

// TestTrestleConfigFilter: the rules are the contract's [[bridge.rule]]
// tables, in order, which trestle's config reads back as written; the
// filter is on with default block (pass for @filter).
func TestTrestleConfigFilter(t *testing.T) {
	for _, f := range []Filter{{Rules: 1}, {Rules: 100, State: true}, {Rules: config.MaxRules}, {All: true}} {
		text := trestleConfig(filterTopo(f), &Env{}, "xdp", "/run/x.sock")
		if !strings.Contains(text, "name = \"br1\"\nfilter = true\ndefault = \""+f.defaultAction()+"\"\n") {
			t.Errorf("%s: no filter keys:\n%.400s", f.Knobs(), text)
		}
		// The rules are checked whether the stage is on or not: off, the
		// config must parse on any build that reads rules.
		off := strings.Replace(text, "filter = true", "filter = false", 1)
		c, err := config.Parse("lab.toml", []byte(off))
		if err != nil {
			t.Fatalf("%s: the config's rules are refused:\n%v", f.Knobs(), err)
		}
		b := c.Bridges[0]
		if len(b.Rules) != len(f.rules()) || b.DefaultBlock != !f.All {
			t.Fatalf("%s: %d rules, default block %v", f.Knobs(), len(b.Rules), b.DefaultBlock)
		}
		for i, want := range f.rules() {
			got := b.Rules[i]
			if got.Block != want.Block || got.Src != want.Src || got.Dst != want.Dst || got.KeepState != want.KeepState ||
				got.HasProto != (want.Proto != "") || want.Proto == "udp" && got.Proto != 17 ||
				got.DstPort.Set() != (want.DstPort != 0) || want.DstPort != 0 && (got.DstPort.Lo != want.DstPort || got.DstPort.Hi != want.DstPort) {
				t.Fatalf("%s: rule %d reads back as %+v, written as %+v", f.Knobs(), i+1, got, want)
			}
		}
		// On, it parses once trestle has the filter stage.
		if _, err := config.Parse("lab.toml", []byte(text)); err != nil {
			if !strings.Contains(err.Error(), "filter stage is not implemented yet") {
				t.Errorf("%s: %v", f.Knobs(), err)
			} else {
				t.Logf("%s: this trestle's config takes no filter yet: %v", f.Knobs(), err)
			}
		}
	}
	plain := filterTopo(Filter{})
	plain.Filter = nil
	if text := trestleConfig(plain, &Env{}, "xdp", "/run/x.sock"); strings.Contains(text, "filter") || strings.Contains(text, "rule") {
		t.Errorf("a config without a filter has one:\n%s", text)
	}
	if filterTopo(Filter{Rules: 1}).features() != "filter rules" || plain.features() != "" {
		t.Errorf("features %q and %q", filterTopo(Filter{Rules: 1}).features(), plain.features())
	}
}

// TestTrestleConfigBrief: the record's config leaves a long list's middle
// out and says how much; a short list whole.
func TestTrestleConfigBrief(t *testing.T) {
	full := configText(filterTopo(Filter{Rules: 1000, State: true}), &Env{}, "xdp", "/run/x.sock", false)
	brief := configText(filterTopo(Filter{Rules: 1000, State: true}), &Env{}, "xdp", "/run/x.sock", true)
	if n := strings.Count(brief, "[[bridge.rule]]"); n != 4 {
		t.Errorf("brief config: %d rules, want 4", n)
	}
	if n := strings.Count(full, "[[bridge.rule]]"); n != 1000 {
		t.Errorf("full config: %d rules", n)
	}
	for _, want := range []string{"# ... 996 more block rules of the same shape, their sources 172.16.2.0/24 to 172.19.229.0/24 ...", "src = \"172.19.230.0/24\"", "keep_state = true"} {
		if !strings.Contains(brief, want) {
			t.Errorf("brief config lacks %q:\n%s", want, brief)
		}
	}
	if _, err := config.Parse("lab.toml", []byte(strings.Replace(brief, "filter = true", "filter = false", 1))); err != nil {
		t.Errorf("the brief config is no config: %v", err)
	}
	short := configText(filterTopo(Filter{Rules: 4}), &Env{}, "xdp", "/run/x.sock", true)
	if strings.Contains(short, "more block rules") || strings.Count(short, "[[bridge.rule]]") != 4 {
		t.Errorf("a short list is cut:\n%s", short)
	}
}

func TestNFTRuleset(t *testing.T) {
	got := Filter{Rules: 3, State: true}.nftRuleset(false)
	want := `table bridge trestle_lab {
 chain forward {
  type filter hook forward priority 0; policy drop;
  ct state established,related counter accept
  ip saddr 172.16.0.0/24 ip daddr 198.18.0.2 udp dport 9 counter drop
  ip saddr 172.16.1.0/24 ip daddr 198.18.0.2 udp dport 9 counter drop
  ip saddr 198.18.0.0/15 ip daddr 198.18.0.2 udp dport 9 ct state new counter accept
 }
}
`
	if got != want {
		t.Errorf("rules=3,state:\n%s\nwant\n%s", got, want)
	}
	// @filter is linux-bridge:nft's chain: one counted rule accepting all.
	all := Filter{All: true}.nftRuleset(false)
	if !strings.Contains(all, "policy accept;\n  counter accept\n }") {
		t.Errorf("filter:\n%s", all)
	}
	if n := strings.Count(Filter{Rules: 1000}.nftRuleset(false), " counter drop\n"); n != 999 {
		t.Errorf("rules=1000: %d block rules", n)
	}
	brief := Filter{Rules: 1000}.nftRuleset(true)
	if strings.Count(brief, "counter drop") != 3 || !strings.Contains(brief, "  # ... 996 more block rules") {
		t.Errorf("brief:\n%s", brief)
	}
}

// TestNFTRulesetLoads checks the rulesets with nft itself (nft -c: checked
// by the kernel, not applied), in a network namespace of its own. A
// stateful one may be refused only for want of bridge connection
// tracking, and then the DUT is unavailable, saying so.
func TestNFTRulesetLoads(t *testing.T) {
	requireRoot(t)
	for _, tool := range []string{"nft", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	dir := t.TempDir()
	for _, f := range []Filter{{All: true}, {Rules: 1}, {Rules: 100}, {Rules: config.MaxRules}, {Rules: 10, State: true}} {
		for _, brief := range []bool{false, true} {
			file := filepath.Join(dir, "rules.nft")
			if err := os.WriteFile(file, []byte(f.nftRuleset(brief)), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("unshare", "--net", "nft", "-c", "-f", file).CombinedOutput()
			switch why := nftUnavailable(&f, string(out)); {
			case err == nil:
			case why != "":
				t.Logf("%s: unavailable here, as the report will say: %s", f.Knobs(), why)
			default:
				t.Errorf("%s (brief %v): nft -c: %v: %s", f.Knobs(), brief, err, out)
			}
		}
	}
	if nftUnavailable(&Filter{Rules: 10}, "Error: Could not process rule: Protocol error") != "" {
		t.Errorf("a stateless ruleset's failure is taken for missing bridge conntrack")
	}
}

func TestFilterSteps(t *testing.T) {
	for _, state := range []bool{false, true} {
		steps := filterSteps(&Filter{Rules: 10, State: state})
		if len(steps) != 3 {
			t.Fatalf("%d steps", len(steps))
		}
		pass, other, reply := steps[0], steps[1], steps[2]
		if pass.wantNone || pass.udp.dport != 9 || pass.udp.src.String() != "198.18.0.1" || pass.udp.dst.String() != "198.18.0.2" || pass.from != 0 || pass.to != 1 {
			t.Errorf("pass step %+v %+v", pass, pass.udp)
		}
		if !other.wantNone || other.udp.dport == 9 {
			t.Errorf("blocked step %+v %+v", other, other.udp)
		}
		if reply.wantNone == state || reply.from != 1 || reply.to != 0 || reply.udp.src != pass.udp.dst || reply.udp.dst != pass.udp.src {
			t.Errorf("state %v: reply step %+v %+v", state, reply, reply.udp)
		}
	}
}

func TestUDPCheckFrame(t *testing.T) {
	marker := []byte("trestle lab: filter check 0123 1")
	u := &udpCheck{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), 9, 10}
	f, err := udpCheckFrame(HostMAC(2), HostMAC(1), u, marker)
	if err != nil {
		t.Fatal(err)
	}
	be := binary.BigEndian
	if be.Uint16(f[12:]) != 0x0800 || f[23] != 17 || netip.AddrFrom4([4]byte(f[26:30])) != u.src || netip.AddrFrom4([4]byte(f[30:34])) != u.dst {
		t.Errorf("not UDP from %s to %s: % x", u.src, u.dst, f[:42])
	}
	if be.Uint16(f[34:]) != 9 || be.Uint16(f[36:]) != 10 || be.Uint16(f[40:]) != 0 || !strings.HasSuffix(string(f), string(marker)) {
		t.Errorf("ports, checksum or marker: % x", f)
	}
}

// trestleTakesFilters says whether bin's `trestle check` takes the config
// the lab writes for trestle@rules=N.
func trestleTakesFilters(t *testing.T, bin string) bool {
	t.Helper()
	f := filepath.Join(t.TempDir(), "filter.toml")
	if err := os.WriteFile(f, []byte(trestleConfig(filterTopo(Filter{Rules: 2}), &Env{}, "xdp", "/run/x.sock")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", f).CombinedOutput(); err != nil {
		t.Logf("this trestle takes no filter yet (issue 14): trestle check: %v: %s", err, strings.TrimSpace(string(out)))
		return false
	}
	return true
}

// TestCheckFilterCatchesABridgeWithout: a bridge that ignores the rules
// forwards the frame no rule passes, and the check says so rather than
// letting it be measured as if it filtered.
func TestCheckFilterCatchesABridgeWithout(t *testing.T) {
	requireRoot(t)
	n := NewNet("fc")
	t.Cleanup(func() { n.Close() })
	ctx := context.Background()
	topo, err := Build(ctx, n, Shape{Hosts: 2, Chain: 1})
	if err != nil {
		t.Fatal(err)
	}
	place, err := ChoosePlacement("shared")
	if err != nil {
		t.Fatal(err)
	}
	// The Linux bridge as it is, without nftables.
	rig, err := NewRig(ctx, topo, &linuxBridge{name: "linux-bridge"}, place, &Env{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer rig.Close(ctx)
	if err := topo.SetFilter(Filter{Rules: 10}); err != nil {
		t.Fatal(err)
	}
	_, err = rig.CheckFilter(ctx)
	if err == nil || !strings.Contains(err.Error(), "filter check failed: h1's UDP frame to 198.18.0.2:10, which no rule passes, does not reach h2: it arrived") {
		t.Errorf("check of a bridge without a filter: %v", err)
	}
}

// The lab's copy of the config file's action words and rule limit is the
// file format trestle's config reads: the two must not drift.
func TestFilterConfigContract(t *testing.T) {
	if actionPass != config.ActionPass || actionBlock != config.ActionBlock || maxRules != config.MaxRules {
		t.Fatalf("lab: pass %q block %q max %d; config: pass %q block %q max %d",
			actionPass, actionBlock, maxRules, config.ActionPass, config.ActionBlock, config.MaxRules)
	}
}
