package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/lab/gen"
)

// Filter is the rule set of a filter variant, which the DUT applies to
// every bridge it builds (Topo.Filter): trestle as [[bridge.rule]] tables,
// the Linux bridge (linux-bridge:nft) as an nftables bridge-family chain on
// the forward hook, the same rules in the same order.
//
// @rules=N is an access list of N rules that every test frame crosses in
// order, as a real one would be written: N-1 block rules of one shape that
// the lab's frames do not match (UDP from a /24 of 172.16.0.0/12 to the
// generator's destination, port 9), then the rule that passes them (UDP
// from 198.18.0.0/15, the benchmarking range the generator's addresses are
// in, to 198.18.0.2 port 9); the default blocks. The generator's frames
// need no ARP (their destination MAC is given), so there is no ARP rule,
// and a scenario whose hosts' stacks talk (iperf3) cannot take @rules
// (Scenario.CheckFilters). With State the pass rule keeps state: trestle's
// keep_state, nftables' `ct state new` on it after a first rule `ct state
// established,related accept`. @rules=0 is the filter off: trestle with
// none, the Linux bridge with no nftables table.
//
// @filter (All) is one rule that passes every frame, counted, and the
// default pass: linux-bridge:nft's chain (one `counter accept`), and seed
// 000's pf.conf (`pass`).
type Filter struct {
	Rules int  // @rules=N
	State bool // @rules=N,state
	All   bool // @filter
}

// Off says whether f is no filter at all: nil, or @rules=0.
func (f *Filter) Off() bool { return f == nil || !f.All && f.Rules == 0 }

// checked says whether f has rules whose effect the lab checks before it
// measures (CheckFilter): not nil, Off, or @filter, which passes all.
func (f *Filter) checked() bool { return !f.Off() && !f.All }

// Knobs is f as a variant's knobs: "rules=100,state", "filter".
func (f Filter) Knobs() string {
	switch {
	case f.All:
		return "filter"
	case f.State:
		return fmt.Sprintf("rules=%d,state", f.Rules)
	}
	return fmt.Sprintf("rules=%d", f.Rules)
}

// The addresses of the rules: the generator's frames, and the sources the
// block rules name.
var (
	filterSrc   = netip.MustParsePrefix("198.18.0.0/15") // RFC 2544's benchmarking range
	filterBlock = netip.MustParsePrefix("172.16.0.0/12") // its /24s: the block rules' sources
)

// filterDst is the generator's destination address, the pass rule's dst.
func filterDst() netip.Addr {
	a, _ := netip.AddrFromSlice(gen.DefaultDstIPs(false).First.To4())
	return a
}

// filterRule is one rule of a Filter, in the terms both DUTs write it in.
// A rule with no Proto matches every frame.
type filterRule struct {
	Block     bool
	Proto     string // "udp" or ""
	Src, Dst  netip.Prefix
	DstPort   uint16
	KeepState bool
}

// blockSource is the source of the block rule i (from 0): the i-th /24 of
// 172.16.0.0/12, of which there are 4096, as many as a bridge has rules.
func blockSource(i int) netip.Prefix {
	b := filterBlock.Addr().As4()
	b[1] += byte(i >> 8)
	b[2] = byte(i)
	return netip.PrefixFrom(netip.AddrFrom4(b), 24)
}

// rules lists f's rules in order.
func (f Filter) rules() []filterRule {
	if f.All {
		return []filterRule{{}}
	}
	if f.Rules <= 0 {
		return nil
	}
	dst := netip.PrefixFrom(filterDst(), 32)
	out := make([]filterRule, 0, f.Rules)
	for i := 0; i < f.Rules-1; i++ {
		out = append(out, filterRule{Block: true, Proto: "udp", Src: blockSource(i), Dst: dst, DstPort: gen.DefaultPort})
	}
	return append(out, filterRule{Proto: "udp", Src: filterSrc, Dst: dst, DstPort: gen.DefaultPort, KeepState: f.State})
}

// elided is how many of rules a brief rendering leaves out (the block
// rules after the first two and before the last), and the comment that
// stands in for them; 0 when it leaves none out.
func elided(rules []filterRule) (int, string) {
	n := len(rules) - 4 // two blocks first, a block and the pass rule last
	if n < 1 {
		return 0, ""
	}
	return n, fmt.Sprintf("# ... %d more block rules of the same shape, their sources %s to %s ...", n, rules[2].Src, rules[len(rules)-3].Src)
}

// TOML is the rule as a [[bridge.rule]] table of trestle's config, with
// no newline at its end.
func (r filterRule) TOML() string {
	var b strings.Builder
	action := actionPass
	if r.Block {
		action = actionBlock
	}
	fmt.Fprintf(&b, "[[bridge.rule]]\naction = %q\n", action)
	if r.Proto != "" {
		fmt.Fprintf(&b, "proto = %q\n", r.Proto)
	}
	for _, p := range []struct {
		key string
		pfx netip.Prefix
	}{{"src", r.Src}, {"dst", r.Dst}} {
		if p.pfx.IsValid() {
			s := p.pfx.String()
			if p.pfx.IsSingleIP() {
				s = p.pfx.Addr().String() // a bare address: what a person writes
			}
			fmt.Fprintf(&b, "%s = %q\n", p.key, s)
		}
	}
	if r.DstPort != 0 {
		fmt.Fprintf(&b, "dst_port = %d\n", r.DstPort)
	}
	if r.KeepState {
		b.WriteString("keep_state = true\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// NFT is the rule as a rule of an nftables bridge-family chain, counted
// as each of trestle's rules is.
func (r filterRule) NFT() string {
	var m []string
	if r.Src.IsValid() {
		m = append(m, "ip saddr "+nftPrefix(r.Src))
	}
	if r.Dst.IsValid() {
		m = append(m, "ip daddr "+nftPrefix(r.Dst))
	}
	switch {
	case r.DstPort != 0:
		m = append(m, fmt.Sprintf("%s dport %d", r.Proto, r.DstPort))
	case r.Proto != "":
		m = append(m, "meta l4proto "+r.Proto)
	}
	if r.KeepState {
		m = append(m, "ct state new")
	}
	m = append(m, "counter")
	if r.Block {
		return strings.Join(append(m, "drop"), " ")
	}
	return strings.Join(append(m, "accept"), " ")
}

func nftPrefix(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// defaultAction is what a frame no rule matches gets.
func (f Filter) defaultAction() string {
	if f.All {
		return actionPass
	}
	return actionBlock
}

// trestleKeys are the [[bridge]] keys that turn f on.
func (f Filter) trestleKeys() string {
	return fmt.Sprintf("filter = true\ndefault = %q\n", f.defaultAction())
}

// render is f's rules, each as text makes it and placed by line; brief
// puts a comment (placed by line too) in place of most block rules of a
// long list, for the record.
func (f Filter) render(brief bool, text func(filterRule) string, line func(string) string) string {
	rules := f.rules()
	skip, note := 0, ""
	if brief {
		skip, note = elided(rules)
	}
	var b strings.Builder
	for i, r := range rules {
		switch {
		case skip > 0 && i == 2:
			b.WriteString(line(note))
		case skip > 0 && i > 2 && i < 2+skip:
		default:
			b.WriteString(line(text(r)))
		}
	}
	return b.String()
}

// trestleRules are f's rules as [[bridge.rule]] tables, each after a blank
// line; brief leaves most block rules of a long list out (for the record).
func (f Filter) trestleRules(brief bool) string {
	return f.render(brief, filterRule.TOML, func(s string) string { return "\n" + s + "\n" })
}

// nftTable is the nftables table of the lab's filter.
// The lab writes trestle's config as text for the daemon to read, so the
// words of a rule's action and the most rules a bridge takes are the file
// format's, a contract like internal/ctl's wire, not config's constants (the
// lab imports nothing of the switch's): TestFilterConfigContract holds them
// to internal/config's.
const (
	actionPass  = "pass"
	actionBlock = "block"
	maxRules    = 4096
)

const nftTable = "trestle_lab"

// nftRuleset is f as an nftables bridge-family table: a chain on the
// forward hook, which every frame one of the namespace's bridges forwards
// passes (as every frame meets trestle's filter), whose policy is f's
// default; with State, `ct state established,related accept` first, as pf
// looks up its states before its rules. brief leaves most block rules of a
// long list out (for the record).
func (f Filter) nftRuleset(brief bool) string {
	policy := "accept"
	if f.defaultAction() == actionBlock {
		policy = "drop"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "table bridge %s {\n chain forward {\n  type filter hook forward priority 0; policy %s;\n", nftTable, policy)
	if f.State {
		b.WriteString("  ct state established,related counter accept\n")
	}
	b.WriteString(f.render(brief, filterRule.NFT, func(s string) string { return "  " + s + "\n" }))
	b.WriteString(" }\n}\n")
	return b.String()
}

// String describes f for a unit's record.
func (f Filter) String() string {
	switch {
	case f.All:
		return "1 rule, passing every frame (counted), default pass: linux-bridge:nft's chain, the OpenBSD benchmarks' pf.conf `pass`"
	case f.Rules <= 0:
		return "rules=0: the filter off (trestle without a filter stage, the Linux bridge without an nftables table)"
	}
	rules := f.rules()
	pass := rules[len(rules)-1]
	s := fmt.Sprintf("%d rule(s), default block, crossed in order by every test frame: ", f.Rules)
	if f.Rules > 1 {
		s += fmt.Sprintf("%d block rule(s) that the lab's frames do not match, UDP from %s", f.Rules-1, rules[0].Src)
		if f.Rules > 2 {
			s += fmt.Sprintf(" ... %s", rules[len(rules)-2].Src)
		}
		s += fmt.Sprintf(" to %s port %d; then ", nftPrefix(pass.Dst), pass.DstPort)
	}
	s += fmt.Sprintf("the pass rule, UDP from %s to %s port %d (the generator's frames)", pass.Src, nftPrefix(pass.Dst), pass.DstPort)
	if f.State {
		s += ", keeping state (trestle keep_state; nftables ct state, established and related accepted first)"
	}
	return s
}

// SetFilter gives the topology's bridges f's rules, which the DUT applies;
// @rules=0 (Off) leaves them without.
func (t *Topo) SetFilter(f Filter) error {
	if t.DUT == nil {
		return errors.New("filter: the straight path has no bridge to filter")
	}
	if !f.Off() {
		t.Filter = &f
	}
	return nil
}

// filterRules parses the rules= knob's value.
func filterRules(spec, val string) (int, error) {
	n, err := strconv.Atoi(val)
	if err != nil || n < 0 || n > maxRules {
		return 0, fmt.Errorf("DUT %q: rules=%s: a number of rules 0..%d (0: the filter off)", spec, val, maxRules)
	}
	return n, nil
}

// checkFilter refuses a filter variant on a DUT that cannot apply it, and
// knobs that contradict each other.
func checkFilter(spec, kind, opt string, f *Filter) error {
	switch {
	case kind == "direct":
		return fmt.Errorf("DUT %q: the straight path has no bridge to filter", spec)
	case kind == "floor":
		return fmt.Errorf("DUT %q: the floor has no filter: it redirects every frame", spec)
	case kind == "ovs":
		return fmt.Errorf("DUT %q: the lab writes no OpenFlow rules for Open vSwitch: rules= and filter are for trestle and linux-bridge:nft", spec)
	case f.All && kind != "trestle":
		return fmt.Errorf("DUT %q: filter is trestle's (one rule passing every frame): the Linux bridge's is linux-bridge:nft", spec)
	case f.All && (f.Rules > 0 || f.State):
		return fmt.Errorf("DUT %q: filter or rules=N, not both: filter is one rule passing every frame", spec)
	case kind == "linux-bridge" && opt != "nft":
		return fmt.Errorf("DUT %q: the Linux bridge's rules are written in nftables: linux-bridge:nft@rules=N", spec)
	case f.State && f.Rules == 0:
		return fmt.Errorf("DUT %q: state keeps state on the pass rule of rules=N, N at least 1 (rules=100,state)", spec)
	}
	return nil
}

// CheckFilters refuses @rules=N where the scenario's traffic is more than
// the generator's frames, which are all its rules pass: iperf3 between the
// hosts' stacks would be blocked (and would need ARP).
func (s Scenario) CheckFilters() error {
	if len(s.phase(Stack)) == 0 {
		return nil
	}
	for _, v := range s.DUTs {
		if v.Filter != nil && !v.Filter.Off() && !v.Filter.All {
			return fmt.Errorf("DUT %q: rules=N passes the generator's frames only, and %s runs iperf3 between the hosts' stacks, which it would block: measure it in filter-scale, or with --dut in a scenario of packet tests (filter passes every frame)", v.Text, s.Name)
		}
	}
	return nil
}

// udpCheck is a check frame that is a UDP datagram, which filter rules
// can match (frameStep.udp).
type udpCheck struct {
	src, dst     netip.Addr
	sport, dport uint16
}

// filterSteps check, before anything is measured, that the DUT applies
// f: the generator's frame passes, one to another port does not (the
// default blocks it), and h2's reply to the generator's frame passes only
// if the pass rule keeps state. A DUT that ignored the rules would be
// measured forwarding unfiltered and show no cost at all.
func filterSteps(f *Filter) []frameStep {
	src, _ := netip.AddrFromSlice(gen.DefaultSrcIPs(false).First.To4())
	dst, port := filterDst(), uint16(gen.DefaultPort)
	steps := []frameStep{
		{what: fmt.Sprintf("h1's UDP frame %s:%d to %s:%d (the generator's) reaches h2", src, port, dst, port), from: 0, to: 1, dst: 1,
			udp: &udpCheck{src, dst, port, port}},
		{what: fmt.Sprintf("h1's UDP frame to %s:%d, which no rule passes, does not reach h2", dst, port+1), from: 0, to: 1, dst: 1,
			udp: &udpCheck{src, dst, port, port + 1}, wantNone: true},
	}
	reply := frameStep{from: 1, to: 0, dst: 0, udp: &udpCheck{dst, src, port, port}}
	if f.State {
		reply.what = fmt.Sprintf("h2's reply %s:%d to %s:%d reaches h1 (the state the first frame opened)", dst, port, src, port)
	} else {
		reply.what = fmt.Sprintf("h2's reply %s:%d to %s:%d does not reach h1 (no rule passes it, no state is kept)", dst, port, src, port)
		reply.wantNone = true
	}
	return append(steps, reply)
}

// CheckFilter runs filterSteps and returns what it found, for the unit's
// record. @filter has nothing to check: every frame passes.
func (r *Rig) CheckFilter(ctx context.Context) (string, error) {
	if !r.T.Filter.checked() {
		return "", errors.New("filter check: the topology has no rules to check")
	}
	return r.checkFrames(ctx, "filter check", filterSteps(r.T.Filter))
}

// udpCheckFrame is a check frame from src to dst that is the UDP datagram
// u, carrying marker (its UDP checksum 0: none, as IPv4 allows).
func udpCheckFrame(dst, src net.HardwareAddr, u *udpCheck, marker []byte) ([]byte, error) {
	f, l, err := frame.Build(frame.Spec{Dst: dst, Src: src, SrcIP: u.src.AsSlice(), DstIP: u.dst.AsSlice(),
		SrcPort: u.sport, DstPort: u.dport, Size: frame.MinSize(false, false) + len(marker)})
	if err != nil {
		return nil, err
	}
	copy(f[len(f)-len(marker):], marker)
	f[l.UDPCsum], f[l.UDPCsum+1] = 0, 0
	return f, nil
}

// errNoBridgeConntrack is the kernel's answer to `ct state` in a bridge
// family chain without bridge connection tracking: EPROTO.
const errNoBridgeConntrack = "Protocol error"

// nftUnavailable says why a failed load of f's ruleset means the DUT
// cannot be measured here, or "" if it does not.
func nftUnavailable(f *Filter, out string) string {
	if f != nil && f.State && strings.Contains(out, errNoBridgeConntrack) {
		return "keep state is not measurable on this kernel's Linux bridge: it has no connection tracking of bridged frames (nf_conntrack_bridge, CONFIG_NF_CONNTRACK_BRIDGE), and nft refuses `ct state` in a bridge-family chain (" + errNoBridgeConntrack + ")"
	}
	return ""
}

// FilterScaleRules are the rule counts of the filter-scale scenario, after
// 0 (the filter off).
var FilterScaleRules = []int{1, 10, 100, 1000}

// filterScaleDUTs are trestle in xdp mode and the Linux bridge with
// nftables at each rule count, stateless and keeping state: in series, so
// that the report's table reads down each.
func FilterScaleDUTs() []Spec {
	out := []string{"trestle:xdp"}
	for _, state := range []string{"", ",state"} {
		for _, n := range FilterScaleRules {
			out = append(out, fmt.Sprintf("trestle:xdp@rules=%d%s", n, state))
		}
	}
	out = append(out, "linux-bridge:nft@rules=0")
	for _, state := range []string{"", ",state"} {
		for _, n := range FilterScaleRules {
			out = append(out, fmt.Sprintf("linux-bridge:nft@rules=%d%s", n, state))
		}
	}
	return MustSpecs(out...)
}

// filterScaleGoals are issue 14's: 100 rules cost at most 20% of the rate
// with the filter off; trestle at least 3x nftables with the same rules at
// every count, stateless and (where the kernel tracks bridged connections)
// keeping state.
func FilterScaleGoals() []Goal {
	goal := func(dut, base string, min float64, why string) Goal {
		return Goal{Test: TestThroughput, Param: "64", DUT: dut, Base: base, Min: min, Why: why}
	}
	out := []Goal{
		goal("trestle:xdp@rules=100", "trestle:xdp", 0.8, "100 rules cost at most 20% of the rate with the filter off"),
		goal("trestle:xdp@rules=100,state", "trestle:xdp", 0.8, "the same with the pass rule keeping state"),
		goal("trestle:xdp", "linux-bridge:nft@rules=0", 3, "trestle at least 3x nftables at every rule count: here none, the filter off for both"),
	}
	for _, state := range []string{"", ",state"} {
		for _, n := range FilterScaleRules {
			k := fmt.Sprintf("rules=%d%s", n, state)
			why := fmt.Sprintf("trestle at least 3x nftables' bridge family with the same %d rule(s)", n)
			if state != "" {
				why += ", keeping state"
			}
			out = append(out, goal("trestle:xdp@"+k, "linux-bridge:nft@"+k, 3, why))
		}
	}
	return out
}

// FilterOf takes a DUT spec apart into the spec without its filter knobs
// and its Filter (nil: it has none): "trestle:xdp@rules=100,state" is
// "trestle:xdp" with rules=100,state.
func FilterOf(spec string) (string, *Filter) {
	v, err := ParseSpec(spec)
	if err != nil {
		return spec, nil
	}
	return v.WithoutFilter(), v.Filter
}

// WithoutFilter is the spec as given without its filter knobs.
func (v Spec) WithoutFilter() string {
	if v.Filter == nil {
		return v.Text
	}
	name, knobs, _ := strings.Cut(v.Text, "@")
	var keep []string
	for _, k := range strings.Split(knobs, ",") {
		if k = strings.TrimSpace(k); k != "state" && k != "filter" && !strings.HasPrefix(k, "rules=") {
			keep = append(keep, k)
		}
	}
	if len(keep) > 0 {
		name += "@" + strings.Join(keep, ",")
	}
	return name
}
