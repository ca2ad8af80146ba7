package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/report"
)

func (e *env) labCmd() *cobra.Command {
	var (
		duts, sizes, chains, placement, jsonPath, reportDir string
		reps                                                int
		trial, confirm, settle, drain, iperfTime            time.Duration
		duration                                            time.Duration
		maxEntries                                          int
		lossGoal, resolution, load, streamRate              float64
		keep, profile, bidirectional                        bool
		ndrLoss, pdrLoss                                    string
	)
	c := &cobra.Command{
		Use:   "lab SCENARIO [flags]",
		Short: "Measure bridges side by side: trestle, the Linux bridge, Open vSwitch, a straight veth path",
		Long: `Build test topologies out of network namespaces and veth pairs, put each
device under test (DUT) between the hosts in turn, drive it with trestle's
generator and sink (RFC 2544 and RFC 2889 methods) and iperf3, and report
medians, ratios to the straight veth path and to the floor (a bare XDP
redirect) measured in the same run, and ministat comparisons. Everything it
creates is named tl<PID>-... and removed when it ends, also on Ctrl-C or
failure ('trestle lab clean' removes what a killed run left).

Scenarios:
` + lab.DescribeScenarios() + `
DUTs (--dut, comma-separated): ` + strings.Join(lab.DUTNames, ", ") + `
  direct          a veth pair from host to host: the baseline
  floor           a bare XDP program on each port of the bridge's two, sending
                  every frame out of the other through a devmap: the fastest
                  any XDP bridge can be on the same topology (with 3 or more
                  hosts there is none: the lab refuses it). floor@vlan pushes
                  the access port's tag and takes it off at the trunk (the VLAN
                  floor); floor@mirror sends each frame to the other port and
                  the span port in one devmap broadcast (the mirror floor): a
                  DUT@vlan or DUT@mirror's "vs floor" is against those
  linux-bridge    the kernel's bridge, netfilter on bridged frames off (:nft adds
                  an nftables bridge-family chain every frame passes, whose one
                  rule accepts it, counted; see @rules for others)
  trestle         trestle's daemon; :xdp or :tc force the attach mode, plain
                  trestle lets it choose (tc on veth)
  ovs             Open vSwitch's userspace datapath, started by the lab inside the
                  DUT namespace; :afxdp ports (default) or :system ports
  DUT@knob=...    a variant, measured side by side with the DUT and compared with
                  it: host offloads (linux-bridge@gso=off,tso=off; ethtool names
                  or tso, gso, gro, lro, tx, sg) or, for trestle, another build
                  (trestle:xdp@bin=/tmp/trestle-old)
  DUT@vlan        the bridge with VLANs (seed 002): h1 on an access port of VLAN
                  10, h2 on a trunk carrying 10 and 20, its frames tagged 10; the
                  report gives the VLAN cost, DUT@vlan against DUT (vlan-overhead)
  DUT@patch       a chain's bridges joined by the DUT's patch ports, no veth
                  pairs between them (seed 003): trestle's default (the frame
                  crosses the bridges in one program run), ovs@patch for Open
                  vSwitch's; the Linux bridge has none
  DUT@veth        a chain's bridges joined by veth pairs: trestle@veth (also
                  :xdp, :tc), and Open vSwitch's and the Linux bridge's default
                  (ovs@veth says it again); @patch and @veth are for chains of
                  2 or more bridges (the chain scenario, or --chains)
  DUT@mirror      h1's port mirrored both ways to a span port, whose host (the
                  last) receives the copies: trestle's [[bridge.mirror]], a tc
                  mirred mirror on the Linux bridge, an Open vSwitch Mirror; a
                  check first that the copies arrive, and with the throughput,
                  the span host's frames as a share of h2's (the mirror scenario)
  DUT@capture     trestle with 'trestle capture' running on h1's port (into
                  /dev/null) through the packet tests, stopped by its PID after;
                  unavailable with a build that has no capture command
  DUT@rules=N     an access list of N rules on every bridge, default block, that
                  each test frame crosses in order: N-1 block rules it does not
                  match (UDP from a /24 of 172.16.0.0/12 to 198.18.0.2 port 9),
                  then the rule passing the generator's frames (UDP from
                  198.18.0.0/15 to 198.18.0.2 port 9); trestle's [[bridge.rule]]
                  tables, or for linux-bridge:nft the same rules in its nftables
                  chain (policy drop); rules=0 is the filter off (for
                  linux-bridge:nft, no table); a check first that the DUT
                  filters; for packet tests only: the rules block iperf3
                  (the filter-scale scenario)
  DUT@rules=N,state
                  the pass rule keeps state: trestle's keep_state; nftables'
                  'ct state new' on it after 'ct state established,related
                  accept', unavailable on a kernel without bridge connection
                  tracking (CONFIG_NF_CONNTRACK_BRIDGE)
  DUT@filter      trestle with its filter on and one rule passing every frame,
                  default pass: the rules of linux-bridge:nft's chain
                  (veb-vs-bridge)

The restart scenario (RFC 6201's reset characterisation): one stream from
h1 to h2 per event, at --load of each DUT's measured 64-byte throughput (or
--rate), after learning frames from every host; the event --event-lead into
it; the stream going on until it has reached h2 for --event-tail without a
gap after the daemon is back. Per event, the frames lost (sent less received
by h2) and the frames flooded to h3 (sent to h2's learned address); the
report gives the most in one event, the median and the total. --events sets the events and their order: sigkill=N (SIGKILL, then the
same build started again), sigterm=N (SIGTERM, then started again),
upgrade=N (SIGTERM, then another build started in its place; the events
alternate: to the other build, back, to it, ...). trestle runs with persist
(started with nsenter --net; 'trestle down' removes its datapath at the
end). The other build is --upgrade-to PATH; else, for trestle@bin=PATH (the
DUT's build), the lab's own; else a variant the lab builds from the source
tree it runs from (the switch program with its memos disabled; needs clang
and go); else the same build, and the report says so. Open vSwitch's
ovs-vswitchd is restarted the same way (no upgrade events); the Linux bridge
has no daemon: it gets the same streams with no event, the reference.

The mac-flood scenario: a stream from h1 to h2 at --load of each DUT's
measured 64-byte throughput (default 0.5: its path then has CPU to spare
on a 2-CPU machine), once alone and once while h3 sends frames to h4 from
--sources random source addresses (default 1000000) at its generator's
full rate for --duration (default 30s). Every DUT's table holds
--max-entries addresses (default 65536: trestle's max_entries, the Linux
bridge's fdb_max_learned, Open vSwitch's mac-table-size). Reported: the
stream's loss and rate with the flood against without, the table's size
every second, 4 static entries checked after, a second bridge of the same
DUT learning 1000 addresses, the daemon's memory. Goal: 0 lost, 90% of
the rate kept.

The soak scenario: the zero-loss rate of IMIX frames in 1000 flows, then
a stream at --load of it (default 0.9) for --duration (default 10m):
loss and latency percentiles per --window (default 1m), the daemon's
memory and every eBPF map's entries every sixth of a window. Goals: 0
lost, latency stable from the first window to the last, memory and maps
flat.

NDR and PDR (the throughput test): one search finds both the highest
rate that loses at most --ndr-loss (default 0: RFC 2544's throughput, the
NDR) and the highest that loses at most --pdr-loss (default 0.5%, CSIT's
PDR), the way CSIT's MLRsearch does: short --trial trials bracket both
rates, every trial narrowing each bracket its rate falls in, then --confirm
trials confirm each, stepping down if one loses more. The tables give the
NDR as the median and the PDR beside it, each with its ratios to direct
and the floor (of the medians). Other searches (broadcast, fdb-scale, the
restart, mac-flood and soak streams' rates) look for the NDR only.

--bidirectional (the throughput test, and rfc2544's latency and loss
tests): h1 -> h2 and h2 -> h1 at once, two generators on the generator's
CPU, a sink at each end, each direction at half the rate; the rates are
the sums, each direction beside them, and a trial passes on the sum's
loss. On 2 CPUs (shared placement) both directions are forwarded on one
CPU: the sum shows the DUT forwarding both ways at once, not whether it
spreads them over cores (the run's notes say so).

Latency under load (router-pps, rfc2544): after each search, a stream of
the search's frames for --confirm at 10, 50 and 90% of the PDR, 1 frame in
64 timed by the sink as in every trial: p50, p90, p99, p99.9 and max, in a
table and a chart.

The cores scenario (seed 000: veb(4) spread its work over cores where
bridge(4) saturated one): 64-byte zero-loss throughput with the generator
on each count of CPUs in --cpus (default 1, 2, 4 ... up to every CPU the
lab may use), one thread and one flow per CPU. A veth delivers on the
sending CPU, so each CPU forwards its own thread's frames, start to end:
the report gives the aggregate rate against the CPU count, the factor over
1 CPU (2.0 at 2 CPUs is perfect scaling), every CPU's load, and a chart.
Counts above the CPUs the lab may use are refused. On a 2-CPU machine
1 -> 2 is the only step, the generator and the forwarding share both CPUs
at 2, and Open vSwitch's one PMD thread (its userspace datapath's
forwarding) has no core of its own at 2; on a bigger one, say
--cpus 1,2,4,8: with a CPU beyond the largest count, the DUT's own threads
get it. Placement is shared, always.

Placement (--placement): shared runs the generator, the DUT's forwarding and
the sink on one core (a veth delivers on the sending CPU: lossless, and the
rate is that of the whole path); split pins the DUT's and the sinks' NAPI
threads to other cores. auto is split with 3 or more CPUs, shared otherwise.

Examples:
  trestle lab quick
  trestle lab router-pps --dut direct,linux-bridge,trestle:xdp,ovs --reps 5
  trestle lab rfc2544 --sizes 64,512,1518 --json run.json --report out/
  trestle lab router-pps --bidirectional --sizes 64 --pdr-loss 0.1%
  trestle lab chain --chains 1,2,4,8 --dut linux-bridge,trestle,trestle@veth,ovs@patch
  trestle lab mirror --dut trestle:xdp,trestle:xdp@mirror,linux-bridge,linux-bridge@mirror
  trestle lab restart --events sigkill=3,upgrade=2 --dut trestle:xdp@bin=/tmp/trestle-old
  trestle lab filter-scale --dut trestle:xdp,trestle:xdp@rules=100,trestle:xdp@rules=100,state,linux-bridge:nft@rules=100
  trestle lab mac-flood --dut trestle:xdp,linux-bridge --duration 10s --report out/
  trestle lab soak --duration 3m --window 30s --dut trestle:xdp
  trestle lab cores --cpus 1,2,4,8 --json cores.json --report out/
  trestle stat -C 1 a.txt b.txt      # compare figures the way the reports do`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("name a scenario: " + strings.Join(lab.ScenarioNames(), ", ") + " (see --help)")
			}
			sc, ok := lab.Scenarios[args[0]]
			if !ok {
				return fmt.Errorf("scenario %q: not one of %s", args[0], strings.Join(lab.ScenarioNames(), ", "))
			}
			if sc.Unavailable != "" {
				return fmt.Errorf("scenario %s cannot run yet: %s", sc.Name, sc.Unavailable)
			}
			f := cmd.Flags()
			var err error
			if f.Changed("dut") {
				sc.DUTs = nil
				for _, d := range splitDUTs(duts) {
					spec, err := lab.ParseSpec(d)
					if err != nil {
						return fmt.Errorf("--dut: %w", err)
					}
					sc.DUTs = append(sc.DUTs, spec)
				}
			}
			if f.Changed("sizes") {
				sc.Sizes = nil
				for _, s := range lab.SplitList(sizes) {
					fs := lab.FrameSize(s)
					if _, err := fs.Mix(); err != nil {
						return fmt.Errorf("--sizes: %w", err)
					}
					sc.Sizes = append(sc.Sizes, fs)
				}
			}
			if f.Changed("chains") {
				if sc.Chain, err = lab.ParseInts("--chains", chains, 1, 64); err != nil {
					return err
				}
			}
			if f.Changed("reps") {
				if reps < 1 {
					return fmt.Errorf("--reps %d: at least 1", reps)
				}
				sc.Reps = reps
			}
			tm := &sc.Timing
			for _, d := range []struct {
				name string
				v    time.Duration
				into *time.Duration
			}{{"trial", trial, &tm.Search.Trial}, {"confirm", confirm, &tm.Search.Confirm}, {"settle", settle, &tm.Settle}, {"drain", drain, &tm.Drain}, {"iperf-time", iperfTime, &sc.IperfTime}} {
				if f.Changed(d.name) {
					if d.v < 0 {
						return fmt.Errorf("--%s %v: must not be negative", d.name, d.v)
					}
					*d.into = d.v
				}
			}
			if f.Changed("loss-goal") && f.Changed("ndr-loss") {
				return errors.New("--loss-goal is --ndr-loss: give one")
			}
			if f.Changed("loss-goal") {
				if lossGoal < 0 || lossGoal >= 1 {
					return fmt.Errorf("--loss-goal %v: a ratio from 0 up to 1", lossGoal)
				}
				tm.Search.LossGoal = lossGoal
			}
			if f.Changed("ndr-loss") {
				v, off, err := parseLoss(ndrLoss)
				if err != nil || off {
					return fmt.Errorf("--ndr-loss %q: a share of the frames, 0 up to 100%%: 0, 0.1%% or 0.001", ndrLoss)
				}
				tm.Search.LossGoal = v
			}
			if f.Changed("pdr-loss") {
				v, off, err := parseLoss(pdrLoss)
				if err != nil {
					return fmt.Errorf("--pdr-loss %q: a share of the frames, above the NDR's, up to 100%%: 0.5%% or 0.005; or off", pdrLoss)
				}
				if off {
					v = 0
				} else if v <= tm.Search.LossGoal {
					return fmt.Errorf("--pdr-loss %s: must be above the NDR's loss goal (%g%%), or off", pdrLoss, 100*tm.Search.LossGoal)
				}
				tm.Search.PDRLoss = v
			} else if tm.Search.PDRLoss > 0 && tm.Search.PDRLoss <= tm.Search.LossGoal {
				return fmt.Errorf("the NDR's loss goal %g%% is not below the PDR's (%g%%): give --pdr-loss above it, or off", 100*tm.Search.LossGoal, 100*tm.Search.PDRLoss)
			}
			if f.Changed("resolution") {
				if resolution <= 0 || resolution >= 0.5 {
					return fmt.Errorf("--resolution %v: a ratio above 0 and below 0.5", resolution)
				}
				tm.Search.Resolution = resolution
			}
			if f.Changed("load") {
				if load <= 0 || load > 1 {
					return fmt.Errorf("--load %v: a fraction of the throughput above 0, up to 1", load)
				}
				sc.Load = load
			}
			if f.Changed("rate") {
				if streamRate <= 0 {
					return fmt.Errorf("--rate %v: frames a second, above 0", streamRate)
				}
				sc.StreamRate = streamRate
				// A fixed rate needs no throughput to take a fraction of.
				sc.WithoutTest(lab.TestThroughput)
			}
			if err := streamFlags(f.Changed, &sc, duration, maxEntries); err != nil {
				return err
			}
			// The test kinds' own flags (--events, --event-lead, --event-tail,
			// --upgrade-to, --sources, --window, --cpus, --streams, --udp-rate),
			// after the stream's that they may depend on (--window on --duration).
			if err := sc.SetFlags(f); err != nil {
				return err
			}
			if err := sc.CheckCores(placement); err != nil {
				return err
			}
			stream := sc.Has(lab.TestMACFlood) || sc.Has(lab.TestSoak)
			if !sc.Has(lab.TestRestart) {
				for _, name := range []string{"events", "load", "rate", "event-lead", "event-tail", "upgrade-to"} {
					if f.Changed(name) && !(stream && (name == "load" || name == "rate")) {
						return fmt.Errorf("--%s is for the restart scenario; %s has no restart test", name, sc.Name)
					}
				}
			}
			if err := sc.CheckJoins(); err != nil {
				return err
			}
			if err := sc.CheckFilters(); err != nil {
				return err
			}
			if err := sc.CheckFloor(); err != nil {
				return err
			}
			if f.Changed("bidirectional") {
				sc.Bidirectional = bidirectional
			}
			if err := sc.CheckBidirectional(); err != nil {
				return err
			}
			return e.runLab(sc, placement, jsonPath, reportDir, keep, profile)
		},
	}
	// `trestle lab NAME --help` says what the scenario NAME measures first.
	help := c.HelpFunc()
	c.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		if cmd == c {
			for _, a := range args {
				if sc, ok := lab.Scenarios[a]; ok {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\n", sc.Describe())
					break
				}
			}
		}
		help(cmd, args)
	})
	f := c.Flags()
	f.StringVar(&duts, "dut", "", "DUTs to measure, comma-separated (default: the scenario's)")
	f.StringVar(&sizes, "sizes", "", "frame sizes with FCS, comma-separated: 64,128,...,1518 or imix")
	f.StringVar(&chains, "chains", "", "chain lengths, comma-separated (chain scenario)")
	f.IntVar(&reps, "reps", 0, "repetitions of every DUT, interleaved (default: the scenario's)")
	f.StringVar(&placement, "placement", "auto", "auto, shared or split (see above)")
	f.DurationVar(&trial, "trial", 0, "length of an RFC 2544 search trial")
	f.DurationVar(&confirm, "confirm", 0, "length of the confirmation trial")
	f.DurationVar(&settle, "settle", 0, "wait after the learning frames")
	f.DurationVar(&drain, "drain", 0, "wait after a trial before counting")
	f.DurationVar(&iperfTime, "iperf-time", 0, "length of an iperf3 run")
	f.StringVar(&ndrLoss, "ndr-loss", "0", "the NDR's loss goal: the share of the frames a trial may lose and pass\n(RFC 2544: 0); 0.1% or 0.001")
	f.StringVar(&pdrLoss, "pdr-loss", "0.5%", "the PDR's loss goal, found by the same search (CSIT: 0.5%); above the\nNDR's, or off")
	f.Float64Var(&lossGoal, "loss-goal", 0, "the NDR's loss goal as a ratio (the same as --ndr-loss)")
	f.BoolVar(&bidirectional, "bidirectional", false, "send h1 -> h2 and h2 -> h1 at once in the throughput search and the\nlatency and loss tests (each at half the rate), and report the sum and\neach direction (not for restart, mac-flood, soak, fdb-scale or @mirror)")
	f.Float64Var(&resolution, "resolution", 0, "search resolution, a ratio of the rate (default 0.01)")
	f.Float64Var(&load, "load", 0, "restart, mac-flood, soak: the stream's rate, a fraction of the DUT's measured\nthroughput (default 0.5; soak 0.9 of the zero-loss rate)")
	f.Float64Var(&streamRate, "rate", 0, "restart, mac-flood: the stream's rate in frames a second, instead of --load (no search)")
	f.DurationVar(&duration, "duration", 0, "mac-flood: the flood's length (default 30s); soak: the stream's (default 10m)")
	f.IntVar(&maxEntries, "max-entries", 0, "mac-flood: the learning table size every DUT is given (default 65536)")
	lab.DeclareFlags(f)
	f.StringVar(&jsonPath, "json", "", "write every trial, the settings and the machine to this JSON file")
	f.StringVar(&reportDir, "report", "", "write report.md and SVG charts into this directory")
	f.BoolVar(&keep, "keep-workdir", false, "keep the run's directory of configs and logs")
	f.BoolVar(&profile, "profile", false, "after each throughput search, measure where a frame's time goes: the\ngenerator's, the DUT's and the sink's eBPF programs (kernel BPF run-time\nstatistics), and what measuring them costs")
	var again string
	show := &cobra.Command{
		Use:   "report RUN.json",
		Short: "Print the table of a saved run (from --json) again, and write its report with --report DIR",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			var run lab.Run
			if err := json.Unmarshal(b, &run); err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			report.Terminal(e.stdout, &run)
			if again != "" {
				if err := report.Write(again, &run); err != nil {
					return fmt.Errorf("write report to %s: %w", again, err)
				}
				fmt.Fprintf(e.stdout, "wrote %s/report.md\n", again)
			}
			return nil
		},
	}
	show.Flags().StringVar(&again, "report", "", "write report.md and SVG charts into this directory")
	c.AddCommand(show)
	c.AddCommand(&cobra.Command{
		Use:   "clean",
		Short: "Remove the namespaces of lab runs that were killed before they could clean up, and what their trestle daemons pinned",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			gone, err := lab.Sweep()
			for _, n := range gone {
				if strings.HasPrefix(n, "/") {
					fmt.Fprintln(e.stdout, "removed", n) // a persisted datapath or its state
				} else {
					fmt.Fprintln(e.stdout, "removed namespace", n)
				}
			}
			if len(gone) == 0 && err == nil {
				fmt.Fprintln(e.stdout, "nothing to remove")
			}
			return err
		},
	})
	return c
}

// parseLoss reads a loss goal: a percentage ("0.5%") or a ratio
// ("0.005"), from 0 up to (not including) all the frames; "off" says so.
func parseLoss(s string) (v float64, off bool, err error) {
	s = strings.TrimSpace(s)
	if s == "off" || s == "none" {
		return 0, true, nil
	}
	scale := 1.0
	if t, ok := strings.CutSuffix(s, "%"); ok {
		s, scale = strings.TrimSpace(t), 0.01
	}
	v, err = strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false, err
	}
	v *= scale
	if v < 0 || v >= 1 || v != v {
		return 0, false, fmt.Errorf("%v: not from 0 up to 1", v)
	}
	return v, false, nil
}

// streamFlags applies the flags of the stream that the mac-flood and
// soak tests share to sc, refusing them for a scenario without those
// tests (their own, --sources and --window, are theirs: lab's kinds).
func streamFlags(changed func(name string) bool, sc *lab.Scenario, duration time.Duration, maxEntries int) error {
	for _, c := range []struct {
		name string
		ok   bool
		scen string
	}{
		{"duration", sc.Has(lab.TestMACFlood) || sc.Has(lab.TestSoak), "the mac-flood or soak scenario"},
		{"max-entries", sc.Has(lab.TestMACFlood), "the mac-flood scenario"},
	} {
		if changed(c.name) && !c.ok {
			return fmt.Errorf("--%s is for %s, not %s", c.name, c.scen, sc.Name)
		}
	}
	if changed("duration") {
		if duration <= 0 {
			return fmt.Errorf("--duration %v: must be above 0", duration)
		}
		sc.Duration = duration
	}
	if changed("max-entries") {
		if maxEntries < 1 || maxEntries > 1<<24 {
			return fmt.Errorf("--max-entries %d: 1..%d", maxEntries, 1<<24)
		}
		sc.MaxEntries = maxEntries
	}
	return nil
}

// splitDUTs splits a --dut list at its commas, except those between the
// knobs of one DUT's variant: "trestle:xdp@vlan,bin=/tmp/x,ovs" is two DUTs.
func splitDUTs(s string) []string {
	var out []string
	for _, p := range lab.SplitList(s) {
		name, _, _ := strings.Cut(p, "@")
		kind, _, _ := strings.Cut(name, ":")
		knob := !slices.Contains(lab.DUTNames, name) && !slices.Contains(lab.DUTNames, kind)
		if n := len(out); n > 0 && knob && strings.Contains(out[n-1], "@") {
			out[n-1] += "," + p
			continue
		}
		out = append(out, p)
	}
	return out
}

func (e *env) runLab(sc lab.Scenario, placement, jsonPath, reportDir string, keep, profile bool) error {
	if os.Geteuid() != 0 {
		return errors.New("lab: needs root (network namespaces, veth pairs, eBPF programs)")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "trestle-lab-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(e.stderr, "lab: configs and logs in", work)
	} else {
		defer os.RemoveAll(work)
	}
	ctx, stop := signalContext()
	defer stop()
	tty := isTerminal(e.stderr)
	last := ""
	cfg := lab.Config{
		Scenario: sc, Placement: placement, Trestle: self, WorkDir: work, Version: version, Profile: profile,
		Command: "trestle " + strings.Join(os.Args[1:], " "),
		Progress: func(line string) {
			if line == last {
				return
			}
			last = line
			if tty {
				fmt.Fprintf(e.stderr, "\r\033[K%s", line)
			} else {
				fmt.Fprintln(e.stderr, line)
			}
		},
		Logf: func(format string, args ...any) {
			if tty {
				fmt.Fprint(e.stderr, "\r\033[K")
			}
			fmt.Fprintf(e.stderr, "lab: "+format+"\n", args...)
		},
	}
	if sc.Unavailable == "" {
		fmt.Fprintf(e.stderr, "lab %s: %s\n", sc.Name, sc.About)
	}
	run, err := lab.Execute(ctx, cfg)
	if tty {
		fmt.Fprint(e.stderr, "\r\033[K")
	}
	if run == nil {
		return err
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "lab: stopped early (%v); reporting what was measured\n", err)
	}
	report.Terminal(e.stdout, run)
	if jsonPath != "" {
		b, jerr := json.MarshalIndent(run, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(jsonPath, b, 0o644)
		}
		if jerr != nil {
			return fmt.Errorf("write %s: %w", jsonPath, jerr)
		}
		fmt.Fprintln(e.stdout, "wrote", jsonPath)
	}
	if reportDir != "" {
		if rerr := report.Write(reportDir, run); rerr != nil {
			return fmt.Errorf("write report to %s: %w", reportDir, rerr)
		}
		fmt.Fprintf(e.stdout, "wrote %s/report.md\n", reportDir)
	}
	return err
}
