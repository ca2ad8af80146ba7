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
	_ "github.com/trestle/trestle/internal/lab/kinds/all" // every kind registers itself
	"github.com/trestle/trestle/internal/lab/report"
)

func (e *env) labCmd() *cobra.Command {
	var (
		duts, sizes, chains, placement, outPath, reportDir string
		reps                                               int
		trial, confirm, settle, drain, iperfTime           time.Duration
		lossGoal, resolution                               float64
		keep, profile, bidirectional                       bool
		ndrLoss, pdrLoss                                   string
	)
	c := &cobra.Command{
		Use:   "lab SCENARIO [flags]",
		Short: "Measure bridges side by side: trestle, the Linux bridge, Open vSwitch, a straight veth path",
		Long: `Build test topologies out of network namespaces and veth pairs, put each
device under test (DUT) between the hosts in turn, drive it with trestle's
generator and sink (RFC 2544 and RFC 2889 methods) and iperf3, and report
medians, ratios to the straight veth path and to the floor (a bare XDP
redirect; floor:tc, a bare tc redirect, for trestle at tc) measured in the
same run, and ministat comparisons. Everything it
creates is named tl<PID>-... and removed when it ends, also on Ctrl-C or
failure ('trestle lab clean' removes what a killed run left).

Scenarios ('trestle lab SCENARIO --help' tells one in full):
` + labScenarioList() + `
DUTs (--dut, comma-separated):
  ` + strings.Join(lab.DUTNames, ", ") + `,
each with variants after @ (trestle:xdp@vlan, trestle:xdp@bin=./trestle-old,
linux-bridge@mirror, ...), and floor@vlan, floor@mirror, floor:tc@vlan,
floor:tc@mirror. The lab's manual, every DUT, variant and method:
'man trestle-lab' and docs/lab.md.

Examples:
  trestle lab quick
  trestle lab router-pps --dut direct,linux-bridge,trestle:xdp,ovs --reps 5
  trestle lab rfc2544 --sizes 64,512,1518 --output run.json --report out/
  trestle lab quick --json > run.json
  trestle lab chain --chains 1,2,4,8 --dut linux-bridge,trestle,trestle@veth,ovs@patch
  trestle lab restart --events sigkill=3,upgrade=2 --dut trestle:xdp@bin=./trestle-old
  trestle stat -C 1 a.txt b.txt      # compare figures the way the reports do`,
		Annotations: map[string]string{manLong: labManual()},
		Args: func(cmd *cobra.Command, args []string) error {
			// --json FILE, as it was, leaves FILE as an argument.
			if len(args) == 2 && strings.HasSuffix(args[1], ".json") && cmd.Flags().Changed("json") {
				return usagef("--json prints the record on stdout and takes no file: --output %s writes it there", args[1])
			}
			return nargs(0, 1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &usageError{cmd: cmd, err: errors.New("name a scenario: " + strings.Join(lab.ScenarioNames(), ", ") + " (see --help)")}
			}
			sc, ok := lab.Scenarios[args[0]]
			if !ok {
				return usagef("scenario %q: not one of %s", args[0], strings.Join(lab.ScenarioNames(), ", "))
			}
			if sc.Unavailable != "" {
				return fmt.Errorf("scenario %s cannot run yet: %s", sc.Name, sc.Unavailable)
			}
			// Everything up to the run checks the command line: what is
			// wrong with it is a usage error.
			if err := func() error {
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
				// The test kinds' own flags (--load, --rate, --duration, --events,
				// --sources, --window, --cpus, --ports and the others: rows of
				// their kinds, each refused where no kind of the scenario takes it).
				if err := sc.SetFlags(f); err != nil {
					return err
				}
				if err := sc.CheckPlacement(placement); err != nil {
					return err
				}
				if err := sc.CheckJoins(); err != nil {
					return err
				}
				if err := sc.CheckFilters(); err != nil {
					return err
				}
				if err := sc.CheckSnoop(); err != nil {
					return err
				}
				if err := sc.CheckFloor(); err != nil {
					return err
				}
				if f.Changed("bidirectional") {
					sc.Bidirectional = bidirectional
				}
				return sc.CheckBidirectional()
			}(); err != nil {
				return &usageError{err: err}
			}
			return e.runLab(sc, placement, outPath, reportDir, keep, profile)
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
	f.StringVar(&placement, "placement", "auto", "auto, shared or split (docs/lab.md, \"Placement\")")
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
	lab.DeclareFlags(f)
	f.BoolVar(&e.json, "json", false, "print the run's record as JSON on stdout (every trial, the settings and the\nmachine) instead of its table")
	f.StringVarP(&outPath, "output", "o", "", "write the run's record as JSON to this file (what 'trestle lab report' reads)")
	f.StringVar(&reportDir, "report", "", "write report.md and SVG charts into this directory")
	f.BoolVar(&keep, "keep-workdir", false, "keep the run's directory of configs and logs")
	f.BoolVar(&profile, "profile", false, "after each throughput search, measure where a frame's time goes: the\ngenerator's, the DUT's and the sink's eBPF programs (kernel BPF run-time\nstatistics), and what measuring them costs")
	var again string
	show := &cobra.Command{
		Use:   "report RUN.json [--report DIR]",
		Short: "Print the table of a saved run (from --output or --json) again, and write its report with --report DIR",
		Args:  nargs(1, 1),
		RunE: func(_ *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("%s: cannot read it: %w", args[0], errors.Unwrap(err))
			}
			var run lab.Run
			if err := json.Unmarshal(b, &run); err != nil {
				return fmt.Errorf("%s: not the record of a lab run (%s)", args[0], jsonProblem(b, err))
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
		Args:  nargs(0, 0),
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

// jsonProblem says where JSON that does not parse goes wrong, in words:
// "not JSON at line 3" rather than the decoder's message.
func jsonProblem(b []byte, err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("not JSON at line %d", 1+strings.Count(string(b[:min(int(syntax.Offset), len(b))]), "\n"))
	case errors.As(err, &typ):
		return fmt.Sprintf("%s holds a %s, not what a run record has there", typ.Field, typ.Value)
	}
	return "unreadable"
}

func (e *env) runLab(sc lab.Scenario, placement, outPath, reportDir string, keep, profile bool) error {
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
	// With --json, stdout is the record alone, or on a failure the
	// failure's object alone (--output keeps the record all the same);
	// what was written is said on stderr.
	said := e.stdout
	switch {
	case e.json && err != nil:
		said = e.stderr
		if outPath == "" {
			fmt.Fprintln(e.stderr, "lab: the record of what was measured is not printed with a failure: --output FILE keeps it")
		}
	case e.json:
		said = e.stderr
		if jerr := e.printJSON(run); jerr != nil {
			return jerr
		}
	default:
		report.Terminal(e.stdout, run)
	}
	if outPath != "" {
		b, jerr := json.MarshalIndent(run, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(outPath, b, 0o644)
		}
		if jerr != nil {
			return fmt.Errorf("write %s: %w", outPath, jerr)
		}
		fmt.Fprintln(said, "wrote", outPath)
	}
	if reportDir != "" {
		if rerr := report.Write(reportDir, run); rerr != nil {
			return fmt.Errorf("write report to %s: %w", reportDir, rerr)
		}
		fmt.Fprintf(said, "wrote %s/report.md\n", reportDir)
	}
	return err
}
