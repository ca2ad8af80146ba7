package lab

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Scenario is a named preset; command-line flags override its fields.
type Scenario struct {
	Name  string
	Title string
	// Seed is the file name of the published report it reproduces, kept
	// in the run's record; SourceOf names that report to a reader.
	Seed  string
	About string
	DUTs  []Spec
	Hosts int   // hosts on the bridge (2: a 2-port bridge)
	Chain []int // bridges in a row; one unit per length
	Sizes []FrameSize
	// BySize: one unit per DUT and frame size, the DUTs rotated within
	// each size, so that the figures compared at a size are minutes apart
	// rather than a DUT's whole run (rfc2544: seven sizes and IMIX, every
	// test at each, about ten minutes a DUT).
	BySize bool
	// Tests are the scenario's tests: each a registered kind with its own
	// settings (tcp.Kind{Streams: ...}), in the order the description
	// names them; a unit runs them in the order of Kinds.
	Tests []Kind
	// IperfTime is the length of an iperf3 run, TCP's and UDP's.
	IperfTime time.Duration
	Reps      int
	Timing    Timing
	Flows     int
	// Bidirectional: the throughput search, and the latency and loss
	// tests that go from h1 to h2, send both ways at once (--bidirectional).
	Bidirectional bool
	// The stream of the restart, mac-flood and soak tests: at Load times the DUT's zero-loss
	// throughput at the first frame size (or at StreamRate frames a
	// second, if set, with no search), for Duration (mac-flood, soak);
	// every DUT's learning table holds MaxEntries addresses (0: its
	// default).
	Load, StreamRate float64
	Duration         time.Duration
	MaxEntries       int
	// Goals are what the scenario's figures should show, checked in the report.
	Goals []Goal
	// Unavailable, if set, is why the scenario cannot run yet.
	Unavailable string
}

// Goal is a target for one test of a scenario: DUT's median at least Min
// times Base's, both measured in the same run; in a chain of Chain
// bridges and of BaseChain (0: one bridge, or the straight path for direct).
// A goal with no Base is one for DUT's median itself: at least Min, in
// Unit (the span host's share of h2's frames, which is a ratio already).
type Goal struct {
	Test      string  `json:"test"`
	Param     string  `json:"param"`
	DUT       string  `json:"dut"`
	Chain     int     `json:"chain,omitempty"`
	Base      string  `json:"base"`
	BaseChain int     `json:"base_chain,omitempty"`
	Min       float64 `json:"min_ratio"`
	Unit      string  `json:"unit,omitempty"`
	Why       string  `json:"why"`
}

func (g Goal) String() string {
	param := g.Param
	if g.Test == TestThroughput || g.Test == TestFlood || g.Test == TestSpan {
		param = FrameSize(g.Param).Label()
	}
	if g.Base == "" {
		return fmt.Sprintf("%s %s: %s at least %g%s: %s", g.Test, param, g.DUT, g.Min, g.Unit, g.Why)
	}
	at := func(c int) string {
		if c > 0 || g.Chain > 0 || g.BaseChain > 0 {
			return fmt.Sprintf(" x%d", max(c, 1))
		}
		return ""
	}
	return fmt.Sprintf("%s %s: %s%s at least %gx %s%s: %s", g.Test, param, g.DUT, at(g.Chain), g.Min, g.Base, at(g.BaseChain), g.Why)
}

// CSITLoadShares are the shares of the PDR at which CSIT measures latency
// under load.
var CSITLoadShares = []float64{0.1, 0.5, 0.9}

func QuickTiming() Timing {
	t := DefaultTiming
	t.Search.Trial, t.Search.Confirm = time.Second, 2*time.Second
	t.Settle, t.Drain = 100*time.Millisecond, 200*time.Millisecond
	return t
}

// Scenarios are the presets, by name: each kind's own (Register adds it)
// and those that combine kinds (internal/lab/kinds/all adds them,
// AddScenario), which the core, importing no kind, cannot name.
var Scenarios = map[string]Scenario{}

// The presets of the kinds still in the core's package, once its
// variables are set (a preset's are found through an interface, which the
// order of initialisation does not follow).
func init() { registeredPresets(Scenarios) }

// AddScenario adds a preset that combines kinds; a name taken twice is a
// mistake in the code.
func AddScenario(s Scenario) {
	if _, ok := Scenarios[s.Name]; ok {
		panic(fmt.Sprintf("lab: scenario %q added twice", s.Name))
	}
	Scenarios[s.Name] = s
}

// publishedReports are the reports the scenarios reproduce, by Seed, as
// a reader knows them.
var publishedReports = map[string]string{
	"000_5de8b09844379080.txt": "the OpenBSD 6.9 benchmarks of veb(4) against bridge(4)",
	"001_d9f4f4a0a59eb3ef.txt": `the BSD Router Project's "How to bench a router"`,
	"002_1c7bd735c1257602.txt": "the OpenBSD profile of vlan(4)'s forwarding cost",
	"003_3e6f4237fce17ad8.txt": "the chained Open vSwitch bridges report",
	"004_ec52c11c7ab3a191.txt": "the FreeBSD report of a bridge inline between client and server",
}

// SourceOf names the published report a scenario reproduces, from the
// file name its Seed or a run's record holds.
func SourceOf(seed string) string {
	if s, ok := publishedReports[seed]; ok {
		return s
	}
	return "the report " + seed
}

// ScenarioNames lists the presets in a stable order.
func ScenarioNames() []string {
	var out []string
	for n := range Scenarios {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// DescribeScenarios is the presets as text, for --help.
func DescribeScenarios() string {
	var b strings.Builder
	for _, n := range ScenarioNames() {
		s := Scenarios[n]
		about := s.About
		if s.Unavailable != "" {
			about = "not yet: " + s.Unavailable
		}
		fmt.Fprintf(&b, "  %-14s %s\n", n, about)
	}
	return b.String()
}

// Describe is the scenario in full, for `trestle lab NAME --help`: what it
// measures, on which DUTs, and its goals.
func (s Scenario) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Scenario %s: %s\n", s.Name, s.Title)
	if s.Seed != "" {
		fmt.Fprintf(&b, "Reproduces %s.\n", SourceOf(s.Seed))
	}
	if s.Unavailable != "" {
		fmt.Fprintf(&b, "\nNot yet: %s\n", s.Unavailable)
		return b.String()
	}
	b.WriteString("\n" + wrap(s.About, 80, "", "") + "\n\n")
	fmt.Fprintf(&b, "DUTs:     %s\n", strings.Join(SpecTexts(s.DUTs), ", "))
	fmt.Fprintf(&b, "Tests:    %s", strings.Join(s.TestNames(), ", "))
	if len(s.Sizes) > 0 {
		var sizes []string
		for _, z := range s.Sizes {
			sizes = append(sizes, z.Label())
		}
		fmt.Fprintf(&b, "; frame sizes %s", strings.Join(sizes, ", "))
	}
	for _, k := range s.kinds() {
		if l, ok := k.(testsLiner); ok {
			b.WriteString(l.TestsLine(s))
		}
	}
	if s.has(TestThroughput) && slices.ContainsFunc(s.DUTs, func(d Spec) bool { return d.Mirror }) {
		b.WriteString("; with a mirror, span: the span host's frames as a share of h2's at the throughput")
	}
	for _, k := range s.kinds() {
		if d, ok := k.(describer); ok {
			if line := d.Describe(s); line != "" {
				b.WriteString("\n" + line)
			}
		}
	}
	if s.BySize && len(s.Sizes) > 1 {
		fmt.Fprintf(&b, "\nRepeats:  %d, each frame size in turn (a unit per DUT and size), the DUTs in an order rotated each size and repetition\n", s.Reps)
	} else {
		fmt.Fprintf(&b, "\nRepeats:  %d, the DUTs in an order rotated each repetition\n", s.Reps)
	}
	if len(s.Goals) > 0 {
		b.WriteString("Goals (checked in the report):\n")
		for _, g := range s.Goals {
			b.WriteString(wrap(g.String(), 80, "  - ", "    ") + "\n")
		}
	}
	return b.String()
}

// wrap breaks text into lines of at most width: the first starts with
// first, the others with rest.
func wrap(text string, width int, first, rest string) string {
	var lines []string
	indent := first
	line := indent
	for _, w := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(w) > width {
			lines = append(lines, line)
			indent = rest
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}

// Has says whether the scenario runs a test kind.
func (s Scenario) Has(test string) bool { return s.has(test) }

func (s Scenario) has(test string) bool {
	for _, t := range s.Tests {
		if t.Name() == test {
			return true
		}
	}
	return false
}

// TestNames are the names of the scenario's tests, in its order.
func (s Scenario) TestNames() []string {
	out := make([]string, len(s.Tests))
	for i, t := range s.Tests {
		out[i] = t.Name()
	}
	return out
}

// shape is the topology of one unit: the straight path for direct.
func (s Scenario) shape(v Spec, chain int) Shape {
	if v.Direct() {
		return Shape{Hosts: 2, Chain: 0, Queues: s.needs().Queues}
	}
	return Shape{Hosts: max(s.Hosts, 2), Chain: chain, Patch: v.Patched(), Queues: s.needs().Queues}
}

// CheckJoins refuses the knobs that choose how a chain's bridges are
// joined (@patch, @veth) when no chain of the scenario is longer than one
// bridge: there is nothing to join, and the variant would measure its DUT
// again under another name.
func (s Scenario) CheckJoins() error {
	if slices.Max(append([]int{0}, s.Chain...)) > 1 {
		return nil
	}
	for _, v := range s.DUTs {
		if v.Join() != "" {
			return fmt.Errorf("DUT %q: @%s chooses how a chain's bridges are joined, and %s has no chain of 2 or more bridges (chains %s): measure it in the chain scenario, or give --chains", v.Text, v.Join(), s.Name, strings.Trim(fmt.Sprint(s.Chain), "[]"))
		}
	}
	return nil
}

// CheckFloor refuses the floor DUT in a scenario whose bridge has more than
// two ports: the floor is a redirect from one port to the other, and such
// a bridge floods and learns, which it has no floor for. floor@mirror has
// three: the two it redirects between and the mirror's span port.
func (s Scenario) CheckFloor() error {
	why := floorRefusal(s.Hosts)
	if why == "" {
		return nil
	}
	for _, v := range s.DUTs {
		if v.Kind == "floor" && !(v.Mirror && s.Hosts == 3) {
			return fmt.Errorf("DUT %q: %s has %d hosts: %s", v.Text, s.Name, s.Hosts, why)
		}
	}
	return nil
}

// CheckBidirectional refuses --bidirectional where it does not apply: a
// scenario with no throughput test, one whose streams take a share of the
// one-way throughput (restart, mac-flood, soak, table), and a mirror (the
// span host would count both directions).
func (s Scenario) CheckBidirectional() error {
	if !s.Bidirectional {
		return nil
	}
	if !s.has(TestThroughput) {
		return fmt.Errorf("--bidirectional is for the throughput test; %s has none", s.Name)
	}
	for _, k := range s.kinds() {
		if k.Needs(s).OneWay {
			return fmt.Errorf("--bidirectional: %s's %s test runs one way, at a share of the one-way throughput", s.Name, k.Name())
		}
	}
	for _, v := range s.DUTs {
		if v.Mirror {
			return fmt.Errorf("--bidirectional: DUT %q: the span host would count both directions", v.Text)
		}
	}
	return nil
}

// BidirectionalNote says what a run both ways measures, where.
func BidirectionalNote(s Scenario, p Placement) string {
	n := fmt.Sprintf("bidirectional: every throughput trial, and the latency and loss-curve trials, send h1 -> h2 and h2 -> h1 at once (two generators, both on CPU %d, "+
		"a sink at each end), each direction at half the rate asked for: the rates reported are the sums of both directions (CSIT's aggregate), each direction's beside them; "+
		"a trial passes on the sum's loss. Back-to-back bursts stay one way. ", p.GenCPU)
	if p.Mode == "shared" {
		n += "On this placement a veth forwards each frame on its sender's CPU, so both directions' frames are forwarded on that one CPU: the sum is the path's rate on one core, " +
			"shared by two directions. It shows that the DUT forwards both ways at once, in equal shares, with its table learned and used both ways, and what a frame costs then; " +
			"it cannot show whether the DUT spreads two directions over two cores (that needs a CPU for each direction's generator and forwarding: the cores scenario, or a machine with more CPUs)"
	} else {
		n += "Both generators share one CPU: with a CPU for each direction's generator the sum could be higher"
	}
	return n
}
