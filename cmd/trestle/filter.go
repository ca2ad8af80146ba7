package main

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/trestle/trestle/internal/ctl"
)

// `trestle rule` and `trestle state`: the filter stage's rules and tracked
// connections (docs/filter.md).

func (e *env) ruleCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "rule",
		Short: "Show and change a bridge's filter rules",
		Long: `Show and change the rules of the bridges' filters ([[bridge.rule]] in the
config, with filter = true on the bridge).

Rules are in order and the first that matches a frame decides; a frame no
rule matches gets the bridge's default. 'rule add' and 'rule del' change the
running rules at once, atomically (a frame meets the old rules or the new,
never a mix), and they stay until the next reload from the file, which
puts the file's rules back.`,
	}
	var at int
	show := &cobra.Command{
		Use:   "show [BRIDGE]",
		Short: "List the rules in order, with the frames and bytes each decided",
		Long: `List each bridge's rules in order, with the frames and bytes each decided
(counted by every CPU, summed), then the frames passed as part of a tracked
connection (keep_state) and those the default decided.`,
		Example: `  trestle rule show
  trestle rule show br0 --json`,
		Args: nargs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rs []ctl.Rule
			if err := e.call(ctl.Request{Cmd: ctl.CmdRuleShow, Bridge: first(args)}, &rs); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(ctl.List[ctl.Rule](rs))
			}
			e.plainText()
			tw := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "BRIDGE\t#\tACTION\tMATCH\tPACKETS\tBYTES")
			for _, r := range rs {
				idx, match := strconv.Itoa(r.Index), ruleMatch(r)
				switch {
				case r.State:
					idx, match = "-", "(tracked connections)"
				case r.Default:
					idx, match = "-", "(default)"
				}
				if r.Off {
					match += "  [filter off]"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", r.Bridge, idx, r.Action, match, r.Packets, r.Bytes)
			}
			return tw.Flush()
		},
	}
	show.Flags().BoolVar(&e.json, "json", false, "print JSON")
	add := &cobra.Command{
		Use:   "add BRIDGE [--at N] KEY=VALUE...",
		Short: "Add a rule to a bridge's running rules (last, or at N)",
		Long: `Add a rule to a bridge's running rules, last or at position N (from 1; the
rule there and those after move down one). The keys are those of
[[bridge.rule]] in the config, checked the same way:

  action      pass or block (required)
  ethertype   arp, ipv4, ipv6 or a number
  in, out     the ingress or egress port (out applies to each copy of a flood)
  proto       tcp, udp, icmp, icmpv6 or a number
  src, dst    an IPv4 or IPv6 prefix; a bare address is /32 or /128
  src_port, dst_port   a port or a range 1000-2000 (with proto tcp or udp)
  icmp_type   0..255 (with proto icmp or icmpv6)
  src_mac, dst_mac, vlan
  keep_state  true: the connection the frame opens may carry its replies

The rule is kept until the next reload from the file.`,
		Example: `  trestle rule add br0 action=pass proto=icmp
  trestle rule add br0 --at 1 action=block src=10.254.0.66
  trestle rule add br0 action=pass in=p1 proto=tcp dst_port=5201 keep_state=true`,
		Args: nargs(2, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if at < 0 {
				return usagef("--at %d: a position from 1 (0 or none: last)", at)
			}
			for _, a := range args[1:] {
				if !strings.Contains(a, "=") {
					return &usageError{cmd: cmd, err: fmt.Errorf("%q is not KEY=VALUE: the rule's keys follow BRIDGE", a)}
				}
			}
			if err := e.call(ctl.Request{Cmd: ctl.CmdRuleAdd, Bridge: args[0], Args: args[1:], Index: at}, nil); err != nil {
				return err
			}
			where := "last"
			if at > 0 {
				where = fmt.Sprintf("at %d", at)
			}
			return e.done(fmt.Sprintf("added rule %s to %s (until the next reload from the file)", where, args[0]))
		},
	}
	add.Flags().IntVar(&at, "at", 0, "position of the new rule, from 1 (default: last)")
	add.Flags().BoolVar(&e.json, "json", false, "print JSON")
	del := &cobra.Command{
		Use:     "del BRIDGE N",
		Short:   "Delete rule N (from 1, as 'rule show' numbers them) of a bridge's running rules",
		Example: `  trestle rule del br0 3`,
		Args:    nargs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 1 {
				return &usageError{cmd: cmd, err: fmt.Errorf("%q is not a rule number: from 1, as 'trestle rule show' numbers them", args[1])}
			}
			if err := e.call(ctl.Request{Cmd: ctl.CmdRuleDel, Bridge: args[0], Index: n}, nil); err != nil {
				return err
			}
			return e.done(fmt.Sprintf("deleted rule %d of %s (until the next reload from the file)", n, args[0]))
		},
	}
	del.Flags().BoolVar(&e.json, "json", false, "print JSON")
	c.AddCommand(show, add, del)
	return c
}

// ruleMatch is a rule's match as KEY=VALUE words, the way 'rule add' takes it.
func ruleMatch(r ctl.Rule) string {
	var w []string
	add := func(k, v string) {
		if v != "" {
			w = append(w, k+"="+v)
		}
	}
	add("ethertype", r.EtherType)
	add("in", r.In)
	add("out", r.Out)
	add("proto", r.Proto)
	add("src", r.Src)
	add("dst", r.Dst)
	add("src_port", r.SrcPort)
	add("dst_port", r.DstPort)
	if r.ICMPType != nil {
		add("icmp_type", strconv.Itoa(int(*r.ICMPType)))
	}
	add("src_mac", r.SrcMAC)
	add("dst_mac", r.DstMAC)
	if r.VLAN != 0 {
		add("vlan", strconv.Itoa(int(r.VLAN)))
	}
	if r.KeepState {
		add("keep_state", "true")
	}
	if len(w) == 0 {
		return "(any)"
	}
	return strings.Join(w, " ")
}

func (e *env) stateCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "state",
		Short: "Show the connections keep_state rules track",
	}
	show := &cobra.Command{
		Use:   "show [BRIDGE]",
		Short: "List tracked connections",
		Long: `List the connections that keep_state rules opened, from the endpoint that
opened each to the other: frames of a tracked connection pass in both
directions before any rule is looked at; the frames they passed are the
'tracked connections' row of 'trestle rule show' (a connection has no
counters of its own, as conntrack has none without accounting). A
connection ends when it has
been idle for its timeout: TCP 30 s until a frame comes back, then 24 h,
and 60 s after a FIN or RST; UDP 60 s; ICMP 20 s.`,
		Example: `  trestle state show
  trestle state show br0 --json`,
		Args: nargs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ss []ctl.State
			if err := e.call(ctl.Request{Cmd: ctl.CmdStateShow, Bridge: first(args)}, &ss); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(ctl.List[ctl.State](ss))
			}
			e.plainText()
			tw := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "BRIDGE\tPROTO\tFROM\tTO\tSTATE\tRULE\tAGE\tIDLE\tEXPIRES")
			for _, s := range ss {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%.0fs\t%.0fs\t%.0fs\n", s.Bridge, s.Proto, s.From, s.To, s.State, s.Rule,
					s.AgeSeconds, s.IdleSeconds, s.ExpiresSeconds)
			}
			return tw.Flush()
		},
	}
	show.Flags().BoolVar(&e.json, "json", false, "print JSON")
	c.AddCommand(show)
	return c
}
