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
	// settings (TCPTest{Streams: ...}), in the order the description
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
	// The stream of the restart, mac-flood and soak tests (RestartTest,
	// MACFloodTest, SoakTest): at Load times the DUT's zero-loss
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

func quickTiming() Timing {
	t := DefaultTiming
	t.Search.Trial, t.Search.Confirm = time.Second, 2*time.Second
	t.Settle, t.Drain = 100*time.Millisecond, 200*time.Millisecond
	return t
}

// Scenarios are the presets, by name.
var Scenarios = registeredPresets(map[string]Scenario{
	"quick": {
		Name: "quick", Title: "Quick look: 64-byte frames through a 2-port bridge",
		About: "direct, the floor (a bare XDP redirect between the bridge's two ports), the Linux bridge and trestle in xdp mode, 64-byte throughput (RFC 2544 search with short trials), 3 repetitions; about a minute",
		DUTs:  MustSpecs("direct", "floor", "linux-bridge", "trestle:xdp"), Hosts: 2, Chain: []int{1},
		Sizes: []FrameSize{"64"}, Tests: TestsOf(TestThroughput), Reps: 3, Timing: quickTiming(),
	},
	"router-pps": {
		Name: "router-pps", Title: "Packets per second at the smallest frame and IMIX", Seed: "001_d9f4f4a0a59eb3ef.txt",
		About: "RFC 2544 throughput at 64 bytes and IMIX through a 2-port bridge, the NDR (zero loss) and the PDR (at most 0.5% lost) from one search, with the IMIX bandwidth estimate, repeated for ministat; each DUT against direct and against the floor (a bare XDP redirect between the bridge's two ports); then latency under load at 10, 50 and 90% of the PDR",
		DUTs:  MustSpecs("direct", "floor", "linux-bridge", "trestle:xdp", "ovs"), Hosts: 2, Chain: []int{1},
		Sizes: []FrameSize{"64", "imix"}, Tests: []Kind{ThroughputTest{}, LoadLatencyTest{Shares: CSITLoadShares}}, Reps: 3, Timing: DefaultTiming, Flows: 1,
	},
	"rfc2544": {
		Name: "rfc2544", Title: "RFC 2544: throughput, latency, frame loss and back-to-back at every frame size",
		About: "every RFC 2544 frame size and IMIX through a 2-port bridge: throughput (the NDR, and the PDR at 0.5% loss from the same search), latency at 10/50/90/100% of the NDR (RFC 2544) and under load at 10, 50 and 90% of the PDR (CSIT), the loss curve, back-to-back bursts",
		DUTs:  MustSpecs("direct", "floor", "linux-bridge", "trestle:xdp"), Hosts: 2, Chain: []int{1},
		Sizes: RFC2544Sizes, BySize: true, Tests: []Kind{ThroughputTest{}, LoadLatencyTest{Shares: CSITLoadShares}, LatencyTest{Fractions: []float64{0.1, 0.5, 0.9, 1.0}}, LossTest{}, B2BTest{}},
		Reps: 1, Timing: DefaultTiming,
	},
	"rfc2889": {
		Name: "rfc2889", Title: "RFC 2889: address caching capacity and learning rate",
		About: "a 3-port bridge: how many addresses it holds without flooding, and how fast it learns new ones",
		DUTs:  MustSpecs("linux-bridge", "trestle:xdp", "ovs"), Hosts: 3, Chain: []int{1},
		Tests: []Kind{CacheTest{Max: 1 << 17}, LearnTest{Addrs: 8192}}, Reps: 1, Timing: DefaultTiming,
	},
	"speed": {
		Name: "speed", Title: "trestle against its peers: 64-byte frames, broadcast and host TCP",
		About: "a 4-port bridge: 64-byte throughput h1 to h2, broadcast from h1 to the three others, iperf3 TCP with 1 and 4 streams; trestle in xdp mode and in its default mode, the Linux bridge, Open vSwitch, and the straight path",
		DUTs:  MustSpecs("direct", "linux-bridge", "ovs", "trestle:xdp", "trestle"), Hosts: 4, Chain: []int{1},
		Sizes: []FrameSize{"64"}, Tests: []Kind{ThroughputTest{}, FloodTest{}, TCPTest{Streams: []int{1, 4}}}, IperfTime: 5 * time.Second,
		Reps: 5, Timing: DefaultTiming,
	},
	"flood": {
		Name: "flood", Title: "Broadcast from one port to three others",
		About: "a 4-port bridge: the RFC 2544 search for broadcast 64-byte frames from h1, every frame due at h2, h3 and h4",
		DUTs:  MustSpecs("linux-bridge", "trestle:xdp", "trestle:tc", "ovs"), Hosts: 4, Chain: []int{1},
		Sizes: []FrameSize{"64"}, Tests: TestsOf(TestFlood), Reps: 3, Timing: DefaultTiming,
	},
	"fdb-scale": {
		Name: "fdb-scale", Title: "Does the table's size matter? Throughput to 1,000 and to 1,000,000 learned addresses",
		About: "learn N addresses behind one port (N = 1,000 and 1,000,000) and check that the table holds them all (h3 sees any flooded), then the RFC 2544 search from h1 to h2, and with every frame to another of the N",
		DUTs:  MustSpecs("linux-bridge", "trestle:xdp", "ovs"), Hosts: 3, Chain: []int{1},
		Sizes: []FrameSize{"64"}, Tests: []Kind{TableTest{Sizes: []int{1000, 1000000}}}, Reps: 3, Timing: DefaultTiming,
	},
	"veb-vs-bridge": {
		Name: "veb-vs-bridge", Title: "A 4-port bridge, plain and with a filter", Seed: "000_5de8b09844379080.txt",
		About: "iperf3 TCP with 1, 2 and 4 streams through a 4-port bridge, with and without a filter stage on every frame, and broadcast to three ports: " +
			"the Linux bridge plain and with an nftables bridge-family chain whose one rule accepts every frame (linux-bridge:nft), " +
			"trestle in its default mode plain and with its filter on, the same one rule passing every frame (trestle@filter; the OpenBSD benchmarks' pf.conf was `pass`)",
		DUTs: MustSpecs("direct", "linux-bridge", "linux-bridge:nft", "trestle", "trestle@filter", "ovs"), Hosts: 4, Chain: []int{1},
		Sizes: []FrameSize{"64"}, Tests: []Kind{TCPTest{Streams: []int{1, 2, 4}}, FloodTest{}}, IperfTime: 5 * time.Second, Reps: 3, Timing: DefaultTiming,
	},
	"inline": {
		Name: "inline", Title: "A bridge inline between client and server", Seed: "004_ec52c11c7ab3a191.txt",
		About: "iperf3 TCP and UDP straight through against bridged: rate, loss, jitter and the CPU load of each",
		DUTs:  MustSpecs("direct", "linux-bridge", "trestle", "ovs:system"), Hosts: 2, Chain: []int{1},
		Tests: []Kind{TCPTest{Streams: []int{1}}, UDPTest{Rate: "1G"}}, IperfTime: 5 * time.Second, Reps: 3, Timing: DefaultTiming,
	},
	"chain": {
		Name: "chain", Title: "Bridges in a row, joined by patch ports or by veth pairs", Seed: "003_3e6f4237fce17ad8.txt",
		About: "1 to 9 bridges in one namespace, the hosts on the first and the last: 64-byte throughput and iperf3 TCP against the chain's length. " +
			"trestle's bridges are joined by its patch ports (its default; the frame crosses every bridge in one program run) and, as trestle@veth, by veth pairs, " +
			"in xdp and in its default mode; Open vSwitch's (userspace datapath) by veth pairs and, as ovs@patch, by its patch ports; the Linux bridge's by veth pairs, its only way. " +
			"The report draws each against the chain's length, and each relative to its own one-bridge figure, as the chained Open vSwitch bridges report did",
		DUTs: MustSpecs("direct", "linux-bridge", "trestle", "trestle@veth", "trestle:xdp", "trestle:xdp@veth", "ovs", "ovs@patch"), Hosts: 2, Chain: []int{1, 3, 5, 7, 9},
		Sizes: []FrameSize{"64"}, Tests: []Kind{ThroughputTest{}, TCPTest{Streams: []int{1}}}, IperfTime: 5 * time.Second, Reps: 1, Timing: DefaultTiming,
		Goals: []Goal{
			{Test: TestThroughput, Param: "64", DUT: "trestle:xdp", Chain: 9, Base: "trestle:xdp", BaseChain: 1, Min: 0.9, Why: "9 bridges joined by patch ports keep 90% of one bridge's frames, in xdp mode (the chained Open vSwitch bridges report found Open vSwitch's patch ports free)"},
			{Test: TestTCP, Param: "streams=1", DUT: "trestle", Chain: 9, Base: "trestle", BaseChain: 1, Min: 0.9, Why: "9 bridges joined by patch ports keep 90% of one bridge's host TCP, in the default mode"},
			{Test: TestThroughput, Param: "64", DUT: "trestle:xdp", Chain: 9, Base: "ovs@patch", BaseChain: 9, Min: 5, Why: "9 patched trestle bridges at least 5x 9 patched Open vSwitch bridges"},
		},
	},
	"restart": {
		Name: "restart", Title: "Restarts under traffic: frames lost and flooded per daemon restart (RFC 6201)",
		About: "a 3-port bridge, a stream h1 -> h2 at 50% of the measured 64-byte throughput while the daemon is killed (SIGKILL) and started again 10 times, " +
			"stopped (SIGTERM) and started again 10 times, replaced by another build and back 5 times: frames lost and frames flooded to h3 per event; " +
			"trestle with persist, Open vSwitch's ovs-vswitchd restarted the same way, the Linux bridge (no daemon) the reference",
		DUTs: MustSpecs("linux-bridge", "trestle:xdp", "trestle", "ovs"), Hosts: 3, Chain: []int{1},
		Sizes: []FrameSize{"64"}, Reps: 1, Timing: DefaultTiming,
		Tests: []Kind{ThroughputTest{}, RestartTest{Events: []EventCount{{EventSIGKILL, 10}, {EventSIGTERM, 10}, {EventUpgrade, 5}}, Lead: time.Second, Tail: time.Second}},
		Load:  0.5,
	},
	"mac-flood": {
		Name: "mac-flood", Title: "MAC flood: a known stream while another host sends from 1,000,000 random source addresses",
		About: "a 4-port bridge and, in the same DUT, a second bridge with two hosts of its own. A stream h1 -> h2 at 50% of the DUT's measured 64-byte throughput for 32 s, " +
			"alone, then again while h3 sends 64-byte frames to h4 from 1,000,000 random source addresses at its generator's full rate for 30 s (on the other CPU): " +
			"the stream's loss and received rate with the flood against without, the flooded bridge's learned addresses every second (never above its limit: every DUT's table holds 65,536), " +
			"4 static entries added before (all still there, static, on their port, after), the second bridge learning 1,000 new addresses in each run (unaffected: the same time with the flood), " +
			"and the daemon's resident memory every second (trestle's, ovs-vswitchd's; the Linux bridge has none). " +
			"Why half the throughput: the stream's own path then has CPU to spare on a 2-CPU machine, so a loss is the table's doing, not two generators sharing two CPUs. " +
			"During the flood a newcomer, an address never seen before, streams from h4's port to h1: the time to its first frame delivered and to its entry in the table, and its loss. " +
			"Goal: the stream loses 0 frames and keeps at least 90% of its rate; trestle's newcomer delivered within 1 s and learned within 5 s. " +
			"trestle in xdp and in its default mode, the Linux bridge (fdb_max_learned) and Open vSwitch (mac-table-size); about 8 minutes",
		DUTs: MustSpecs("trestle:xdp", "trestle", "linux-bridge", "ovs"), Hosts: 4, Chain: []int{1},
		Sizes: []FrameSize{"64"}, Tests: []Kind{ThroughputTest{}, MACFloodTest{Sources: 1000000}}, Reps: 1, Timing: DefaultTiming,
		Load: 0.5, Duration: 30 * time.Second, MaxEntries: 65536,
	},
	"soak": {
		Name: "soak", Title: "Soak: 10 minutes at 90% of the zero-loss rate, IMIX, 1000 flows",
		About: "a 2-port bridge: the zero-loss rate (NDR, the RFC 2544 search) of IMIX frames in 1000 flows (UDP source ports 1024-2023, each flow with its own sequence numbers), " +
			"then a stream at 90% of it for --duration (default 10m): loss and latency percentiles per minute, the daemon's resident memory and the size of every eBPF map of the programs on the DUT's ports " +
			"(hash maps counted key by key, arrays fixed) every 10 s, and the learning table's size. " +
			"Goals: 0 frames lost; p50, p90 and p99 of the last minute within 25% (or 2 us) of the first's; the daemon's memory flat and no map growing. trestle in xdp and in its default mode",
		DUTs: MustSpecs("trestle:xdp", "trestle"), Hosts: 2, Chain: []int{1},
		Sizes: []FrameSize{"imix"}, Tests: []Kind{SoakTest{Window: time.Minute}}, Reps: 1, Timing: DefaultTiming, Flows: 1000,
		Load: 0.9, Duration: 10 * time.Minute,
	},
	"mirror": {
		Name: "mirror", Title: "Port mirroring: what a span port costs, and whether it keeps up",
		About: "a 3-port bridge: 64-byte throughput h1 to h2 with no mirror (DUT), with h1's port mirrored both ways to a span port whose host h3 receives the copies (DUT@mirror), " +
			"and with `trestle capture` running on h1's port, into /dev/null (trestle DUTs, @capture; unavailable with a build that has no capture command); " +
			"for trestle in xdp and in its default mode, the Linux bridge with a tc mirred mirror (clsact on h1's port, a filter matching every frame at ingress and egress, the span port out of the bridge) " +
			"and Open vSwitch (userspace datapath) with a Mirror row; and the mirror floor (floor@mirror: a bare XDP program on h1's and h2's ports sending each frame to the other and to the span port in one devmap broadcast, " +
			"the least any XDP mirror must do there), against which trestle's xdp mirror is measured. " +
			"A check first that the span host gets what goes into h1's port and what comes out of it; at the throughput found, the span host's frames as a share of h2's (span: 100% is no loss on the span port). " +
			"The report gives each DUT's mirror cost, mirrored/unmirrored, and the capture's, with ministat's verdict. " +
			"Goals: trestle mirrored in xdp mode at least 0.9x the mirror floor, in its default mode at least 0.6x its unmirrored rate (every frame becomes two), with no loss on the span port at that rate. " +
			"A capture that is not running costs nothing: the figures without @capture are trestle with none, and the capture unit records that the ports run the same programs after it as before " +
			"(trestle:xdp@bin=OLD with a build from before capture compares the two builds). 3 repetitions, about 22 minutes",
		DUTs:  MustSpecs("floor@mirror", "trestle:xdp", "trestle:xdp@mirror", "trestle:xdp@capture", "trestle", "trestle@mirror", "trestle@capture", "linux-bridge", "linux-bridge@mirror", "ovs", "ovs@mirror"),
		Hosts: 3, Chain: []int{1}, Sizes: []FrameSize{"64"}, Tests: TestsOf(TestThroughput), Reps: 3, Timing: DefaultTiming,
		Goals: []Goal{
			{Test: TestThroughput, Param: "64", DUT: "trestle:xdp@mirror", Base: "floor@mirror", Min: 0.9, Why: "a mirrored port in xdp mode forwards at 0.9x the mirror floor or more (no XDP mirror here beats one devmap broadcast to two ports, itself about half a single redirect)"},
			{Test: TestThroughput, Param: "64", DUT: "trestle@mirror", Base: "trestle", Min: 0.6, Why: "a mirrored port forwards at 0.6x its unmirrored rate or more in the default mode (every frame becomes two)"},
			{Test: TestSpan, Param: "64", DUT: "trestle:xdp@mirror", Min: 100, Unit: UnitOfH2, Why: "no loss on the span port at the rate found, xdp mode"},
			{Test: TestSpan, Param: "64", DUT: "trestle@mirror", Min: 100, Unit: UnitOfH2, Why: "no loss on the span port at the rate found, default mode"},
		},
	},
	"filter-scale": {
		Name: "filter-scale", Title: "The filter stage against its rule count: trestle and nftables with 0 to 1000 rules",
		About: "64-byte throughput h1 to h2 through a 2-port bridge (the RFC 2544 search) with the filter off (rules=0) and with access lists of 1, 10, 100 and 1000 rules: " +
			"N-1 block rules of one shape that the generator's frames do not match (UDP from a /24 of 172.16.0.0/12 to 198.18.0.2 port 9), then the rule that passes them (UDP from 198.18.0.0/15 to 198.18.0.2 port 9), default block; " +
			"with the pass rule keeping state too (rules=N,state). trestle in xdp mode with [[bridge.rule]] tables; the Linux bridge with the same rules in an nftables bridge-family chain on the forward hook, policy drop " +
			"(keeping state: `ct state established,related accept` first and `ct state new` on the pass rule; unavailable, and said so, on a kernel without bridge connection tracking). " +
			"A check first that each DUT filters: the generator's frame passes, one to another port does not, h2's reply passes only with state. " +
			"The report gives each rate against the same DUT with the filter off and trestle against nftables with the same rules, and draws the rate against the rule count. " +
			"Goals: 100 rules at most 20% below the filter off; trestle at least 3x nftables at every count. 3 repetitions, about 30 minutes",
		DUTs:  filterScaleDUTs(),
		Hosts: 2, Chain: []int{1}, Sizes: []FrameSize{"64"}, Tests: TestsOf(TestThroughput), Reps: 3, Timing: DefaultTiming,
		Goals: filterScaleGoals(),
	},
	"vlan-overhead": {
		Name: "vlan-overhead", Title: "The cost of VLAN tagging", Seed: "002_1c7bd735c1257602.txt",
		About: "a 2-port bridge untagged, and the same bridge with VLANs (DUT@vlan): h1 on an access port of VLAN 10, h2 on a trunk carrying 10 and 20, " +
			"its frames tagged 10 both ways (h2's tx-vlan-hw-insert off; tc programs tag and untag its stack's frames, since this kernel has no 802.1Q devices); " +
			"a check first that h1's frames reach h2 tagged 10, h2's reach h1 untagged and VLAN 20 stays apart; " +
			"then 64-byte throughput h1 to h2 (68 bytes on the trunk) and iperf3 TCP, 1 stream, for trestle in xdp and in its default mode and Open vSwitch (userspace datapath, tag= and trunks=), " +
			"and the Linux bridge, with VLAN filtering where the kernel has it (where not, the report says so, and the untagged bridge is a reference); " +
			"and the VLAN floor (floor@vlan: a bare XDP program that pushes the access VLAN's tag toward the trunk and takes it off the other way, the least a bridge with VLANs must do), against which trestle's xdp mode is measured. " +
			"The report gives each DUT's VLAN cost, tagged/untagged, with ministat's verdict, and trestle against Open vSwitch, both tagged. " +
			"Goals: trestle's cost at most 5% in xdp mode (OpenBSD's vlan(4) lost 38%), trestle tagged at least 0.98x the VLAN floor in xdp mode, and trestle at least 5x Open vSwitch with VLANs. " +
			"5 repetitions, about 27 minutes (Open vSwitch's searches take longest)",
		DUTs: MustSpecs("floor@vlan", "trestle:xdp", "trestle:xdp@vlan", "trestle", "trestle@vlan", "ovs", "ovs@vlan", "linux-bridge", "linux-bridge@vlan"), Hosts: 2, Chain: []int{1},
		Sizes: []FrameSize{"64"}, Tests: []Kind{ThroughputTest{}, TCPTest{Streams: []int{1}}}, IperfTime: 5 * time.Second, Reps: 5, Timing: DefaultTiming,
		Goals: []Goal{
			{Test: TestThroughput, Param: "64", DUT: "trestle:xdp@vlan", Base: "trestle:xdp", Min: 0.95, Why: "trestle's VLAN cost in xdp mode at most 5% (vlan(4) lost 38%)"},
			{Test: TestThroughput, Param: "64", DUT: "trestle:xdp@vlan", Base: "floor@vlan", Min: 0.98, Why: "trestle tagged at least 0.98x the VLAN floor (a bare XDP tag push and redirect) in xdp mode"},
			{Test: TestThroughput, Param: "64", DUT: "trestle:xdp@vlan", Base: "ovs@vlan", Min: 5, Why: "trestle at least 5x Open vSwitch on the same VLAN set-up"},
		},
	},
})

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
