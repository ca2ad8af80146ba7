package all

import (
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/kinds/b2b"
	"github.com/trestle/trestle/internal/lab/kinds/cache"
	"github.com/trestle/trestle/internal/lab/kinds/flood"
	"github.com/trestle/trestle/internal/lab/kinds/latency"
	"github.com/trestle/trestle/internal/lab/kinds/learn"
	"github.com/trestle/trestle/internal/lab/kinds/loadlatency"
	"github.com/trestle/trestle/internal/lab/kinds/loss"
	"github.com/trestle/trestle/internal/lab/kinds/macflood"
	"github.com/trestle/trestle/internal/lab/kinds/podchurn"
	"github.com/trestle/trestle/internal/lab/kinds/portscale"
	"github.com/trestle/trestle/internal/lab/kinds/restart"
	"github.com/trestle/trestle/internal/lab/kinds/table"
	"github.com/trestle/trestle/internal/lab/kinds/tcp"
	"github.com/trestle/trestle/internal/lab/kinds/throughput"
	"github.com/trestle/trestle/internal/lab/kinds/udp"
)

// presets are the scenarios that combine kinds (a kind's own preset is
// its package's, Preset): the core, which imports no kind, cannot name
// them, and every kind is registered by the time this package's
// variables are set.
var presets = map[string]lab.Scenario{
	"quick": {
		Name: "quick", Title: "Quick look: 64-byte frames through a 2-port bridge",
		About: "direct, the floor (a bare XDP redirect between the bridge's two ports), the Linux bridge and trestle in xdp mode, 64-byte throughput (RFC 2544 search with short trials), 3 repetitions; about a minute",
		DUTs:  lab.MustSpecs("direct", "floor", "linux-bridge", "trestle:xdp"), Hosts: 2, Chain: []int{1},
		Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{throughput.Kind{}}, Reps: 3, Timing: lab.QuickTiming(),
	},
	"router-pps": {
		Name: "router-pps", Title: "Packets per second at the smallest frame and IMIX", Seed: "001_d9f4f4a0a59eb3ef.txt",
		About: "RFC 2544 throughput at 64 bytes and IMIX through a 2-port bridge, the NDR (zero loss) and the PDR (at most 0.5% lost) from one search, with the IMIX bandwidth estimate, repeated for ministat; each DUT against direct and against the floor (a bare XDP redirect between the bridge's two ports); then latency under load at 10, 50 and 90% of the PDR",
		DUTs:  lab.MustSpecs("direct", "floor", "linux-bridge", "trestle:xdp", "ovs"), Hosts: 2, Chain: []int{1},
		Sizes: []lab.FrameSize{"64", "imix"}, Tests: []lab.Kind{throughput.Kind{}, loadlatency.Kind{Shares: lab.CSITLoadShares}}, Reps: 3, Timing: lab.DefaultTiming, Flows: 1,
	},
	"rfc2544": {
		Name: "rfc2544", Title: "RFC 2544: throughput, latency, frame loss and back-to-back at every frame size",
		About: "every RFC 2544 frame size and IMIX through a 2-port bridge: throughput (the NDR, and the PDR at 0.5% loss from the same search), latency at 10/50/90/100% of the NDR (RFC 2544) and under load at 10, 50 and 90% of the PDR (CSIT), the loss curve, back-to-back bursts",
		DUTs:  lab.MustSpecs("direct", "floor", "linux-bridge", "trestle:xdp"), Hosts: 2, Chain: []int{1},
		Sizes: lab.RFC2544Sizes, BySize: true, Tests: []lab.Kind{throughput.Kind{}, loadlatency.Kind{Shares: lab.CSITLoadShares}, latency.Kind{Fractions: []float64{0.1, 0.5, 0.9, 1.0}}, loss.Kind{}, b2b.Kind{}},
		Reps: 1, Timing: lab.DefaultTiming,
	},
	"rfc2889": {
		Name: "rfc2889", Title: "RFC 2889: address caching capacity and learning rate",
		About: "a 3-port bridge: how many addresses it holds without flooding, and how fast it learns new ones",
		DUTs:  lab.MustSpecs("linux-bridge", "trestle:xdp", "ovs"), Hosts: 3, Chain: []int{1},
		Tests: []lab.Kind{cache.Kind{Max: 1 << 17}, learn.Kind{Addrs: 8192}}, Reps: 1, Timing: lab.DefaultTiming,
	},
	"speed": {
		Name: "speed", Title: "trestle against its peers: 64-byte frames, broadcast and host TCP",
		About: "a 4-port bridge: 64-byte throughput h1 to h2, broadcast from h1 to the three others, iperf3 TCP with 1 and 4 streams; trestle in xdp mode and in its default mode, the Linux bridge, Open vSwitch, and the straight path",
		DUTs:  lab.MustSpecs("direct", "linux-bridge", "ovs", "trestle:xdp", "trestle"), Hosts: 4, Chain: []int{1},
		Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{throughput.Kind{}, flood.Kind{}, tcp.Kind{Streams: []int{1, 4}}}, IperfTime: 5 * time.Second,
		Reps: 5, Timing: lab.DefaultTiming,
	},
	"flood": {
		Name: "flood", Title: "Broadcast from one port to three others",
		About: "a 4-port bridge: the RFC 2544 search for broadcast 64-byte frames from h1, every frame due at h2, h3 and h4",
		DUTs:  lab.MustSpecs("linux-bridge", "trestle:xdp", "trestle:tc", "ovs"), Hosts: 4, Chain: []int{1},
		Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{flood.Kind{}}, Reps: 3, Timing: lab.DefaultTiming,
	},
	"fdb-scale": {
		Name: "fdb-scale", Title: "Does the table's size matter? Throughput to 1,000 and to 1,000,000 learned addresses",
		About: "learn N addresses behind one port (N = 1,000 and 1,000,000) and check that the table holds them all (h3 sees any flooded), then the RFC 2544 search from h1 to h2, and with every frame to another of the N",
		DUTs:  lab.MustSpecs("linux-bridge", "trestle:xdp", "ovs"), Hosts: 3, Chain: []int{1},
		Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{table.Kind{Sizes: []int{1000, 1000000}}}, Reps: 3, Timing: lab.DefaultTiming,
	},
	"veb-vs-bridge": {
		Name: "veb-vs-bridge", Title: "A 4-port bridge, plain and with a filter", Seed: "000_5de8b09844379080.txt",
		About: "iperf3 TCP with 1, 2 and 4 streams through a 4-port bridge, with and without a filter stage on every frame, and broadcast to three ports: " +
			"the Linux bridge plain and with an nftables bridge-family chain whose one rule accepts every frame (linux-bridge:nft), " +
			"trestle in its default mode plain and with its filter on, the same one rule passing every frame (trestle@filter; the OpenBSD benchmarks' pf.conf was `pass`)",
		DUTs: lab.MustSpecs("direct", "linux-bridge", "linux-bridge:nft", "trestle", "trestle@filter", "ovs"), Hosts: 4, Chain: []int{1},
		Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{tcp.Kind{Streams: []int{1, 2, 4}}, flood.Kind{}}, IperfTime: 5 * time.Second, Reps: 3, Timing: lab.DefaultTiming,
	},
	"inline": {
		Name: "inline", Title: "A bridge inline between client and server", Seed: "004_ec52c11c7ab3a191.txt",
		About: "iperf3 TCP and UDP straight through against bridged: rate, loss, jitter and the CPU load of each",
		DUTs:  lab.MustSpecs("direct", "linux-bridge", "trestle", "ovs:system"), Hosts: 2, Chain: []int{1},
		Tests: []lab.Kind{tcp.Kind{Streams: []int{1}}, udp.Kind{Rate: "1G"}}, IperfTime: 5 * time.Second, Reps: 3, Timing: lab.DefaultTiming,
	},
	"chain": {
		Name: "chain", Title: "Bridges in a row, joined by patch ports or by veth pairs", Seed: "003_3e6f4237fce17ad8.txt",
		About: "1 to 9 bridges in one namespace, the hosts on the first and the last: 64-byte throughput and iperf3 TCP against the chain's length. " +
			"trestle's bridges are joined by its patch ports (its default; the frame crosses every bridge in one program run) and, as trestle@veth, by veth pairs, " +
			"in xdp and in its default mode; Open vSwitch's (userspace datapath) by veth pairs and, as ovs@patch, by its patch ports; the Linux bridge's by veth pairs, its only way. " +
			"The report draws each against the chain's length, and each relative to its own one-bridge figure, as the chained Open vSwitch bridges report did",
		DUTs: lab.MustSpecs("direct", "linux-bridge", "trestle", "trestle@veth", "trestle:xdp", "trestle:xdp@veth", "ovs", "ovs@patch"), Hosts: 2, Chain: []int{1, 3, 5, 7, 9},
		Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{throughput.Kind{}, tcp.Kind{Streams: []int{1}}}, IperfTime: 5 * time.Second, Reps: 1, Timing: lab.DefaultTiming,
		Goals: []lab.Goal{
			{Test: lab.TestThroughput, Param: "64", DUT: "trestle:xdp", Chain: 9, Base: "trestle:xdp", BaseChain: 1, Min: 0.9, Why: "9 bridges joined by patch ports keep 90% of one bridge's frames, in xdp mode (the chained Open vSwitch bridges report found Open vSwitch's patch ports free)"},
			{Test: lab.TestTCP, Param: "streams=1", DUT: "trestle", Chain: 9, Base: "trestle", BaseChain: 1, Min: 0.9, Why: "9 bridges joined by patch ports keep 90% of one bridge's host TCP, in the default mode"},
			{Test: lab.TestThroughput, Param: "64", DUT: "trestle:xdp", Chain: 9, Base: "ovs@patch", BaseChain: 9, Min: 5, Why: "9 patched trestle bridges at least 5x 9 patched Open vSwitch bridges"},
		},
	},
	"restart": {
		Name: "restart", Title: "Restarts under traffic: frames lost and flooded per daemon restart (RFC 6201)",
		About: "a 3-port bridge, a stream h1 -> h2 at 50% of the measured 64-byte throughput while the daemon is killed (SIGKILL) and started again 10 times, " +
			"stopped (SIGTERM) and started again 10 times, replaced by another build and back 5 times: frames lost and frames flooded to h3 per event; " +
			"trestle with persist, Open vSwitch's ovs-vswitchd restarted the same way, the Linux bridge (no daemon) the reference",
		DUTs: lab.MustSpecs("linux-bridge", "trestle:xdp", "trestle", "ovs"), Hosts: 3, Chain: []int{1},
		Sizes: []lab.FrameSize{"64"}, Reps: 1, Timing: lab.DefaultTiming,
		Tests: []lab.Kind{throughput.Kind{}, restart.Kind{Events: []lab.EventCount{{Kind: lab.EventSIGKILL, Count: 10}, {Kind: lab.EventSIGTERM, Count: 10}, {Kind: lab.EventUpgrade, Count: 5}}, Lead: time.Second, Tail: time.Second}},
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
		DUTs: lab.MustSpecs("trestle:xdp", "trestle", "linux-bridge", "ovs"), Hosts: 4, Chain: []int{1},
		Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{throughput.Kind{}, macflood.Kind{Sources: 1000000}}, Reps: 1, Timing: lab.DefaultTiming,
		Load: 0.5, Duration: 30 * time.Second, MaxEntries: 65536,
	},
	"port-scale": {
		Name: "port-scale", Title: "Port scale: throughput against the number of ports of a bridge",
		About: "one bridge with 2, 16, 64, 256 and 1024 ports (--ports; counts above what a DUT takes are listed, not run), 3 of them with sinks: 64-byte zero-loss throughput of known unicast h1 -> h2 and of broadcast from h1, " +
			"each against the 2-port figure; then pod churn: 100 CNI ADDs then 100 DELs through cnitool with host-local, the trestle plugin against the bridge plugin, each timed (median, p99); " +
			"trestle in xdp and default mode, the Linux bridge; goals: unicast at the largest count within 5% of 2 ports, broadcast no worse than the Linux bridge's, a trestle ADD's and DEL's median and p99 each at most 1.2x the bridge plugin's",
		DUTs:  lab.MustSpecs("linux-bridge", "trestle:xdp", "trestle"),
		Hosts: 2, Chain: []int{1}, Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{portscale.Kind{}, podchurn.Kind{Pods: 100}}, Reps: 3, Timing: lab.DefaultTiming,
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
		DUTs:  lab.MustSpecs("floor@mirror", "trestle:xdp", "trestle:xdp@mirror", "trestle:xdp@capture", "trestle", "trestle@mirror", "trestle@capture", "linux-bridge", "linux-bridge@mirror", "ovs", "ovs@mirror"),
		Hosts: 3, Chain: []int{1}, Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{throughput.Kind{}}, Reps: 3, Timing: lab.DefaultTiming,
		Goals: []lab.Goal{
			{Test: lab.TestThroughput, Param: "64", DUT: "trestle:xdp@mirror", Base: "floor@mirror", Min: 0.9, Why: "a mirrored port in xdp mode forwards at 0.9x the mirror floor or more (no XDP mirror here beats one devmap broadcast to two ports, itself about half a single redirect)"},
			{Test: lab.TestThroughput, Param: "64", DUT: "trestle@mirror", Base: "trestle", Min: 0.6, Why: "a mirrored port forwards at 0.6x its unmirrored rate or more in the default mode (every frame becomes two)"},
			{Test: lab.TestSpan, Param: "64", DUT: "trestle:xdp@mirror", Min: 100, Unit: lab.UnitOfH2, Why: "no loss on the span port at the rate found, xdp mode"},
			{Test: lab.TestSpan, Param: "64", DUT: "trestle@mirror", Min: 100, Unit: lab.UnitOfH2, Why: "no loss on the span port at the rate found, default mode"},
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
		DUTs:  lab.FilterScaleDUTs(),
		Hosts: 2, Chain: []int{1}, Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{throughput.Kind{}}, Reps: 3, Timing: lab.DefaultTiming,
		Goals: lab.FilterScaleGoals(),
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
		DUTs: lab.MustSpecs("floor@vlan", "trestle:xdp", "trestle:xdp@vlan", "trestle", "trestle@vlan", "ovs", "ovs@vlan", "linux-bridge", "linux-bridge@vlan"), Hosts: 2, Chain: []int{1},
		Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{throughput.Kind{}, tcp.Kind{Streams: []int{1}}}, IperfTime: 5 * time.Second, Reps: 5, Timing: lab.DefaultTiming,
		Goals: []lab.Goal{
			{Test: lab.TestThroughput, Param: "64", DUT: "trestle:xdp@vlan", Base: "trestle:xdp", Min: 0.95, Why: "trestle's VLAN cost in xdp mode at most 5% (vlan(4) lost 38%)"},
			{Test: lab.TestThroughput, Param: "64", DUT: "trestle:xdp@vlan", Base: "floor@vlan", Min: 0.98, Why: "trestle tagged at least 0.98x the VLAN floor (a bare XDP tag push and redirect) in xdp mode"},
			{Test: lab.TestThroughput, Param: "64", DUT: "trestle:xdp@vlan", Base: "ovs@vlan", Min: 5, Why: "trestle at least 5x Open vSwitch on the same VLAN set-up"},
		},
	},
}

func init() {
	for _, n := range lab.SortedKeys(presets) {
		lab.AddScenario(presets[n])
	}
}
