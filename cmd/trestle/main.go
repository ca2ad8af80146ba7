// Command trestle is the eBPF Ethernet switch: `trestle run` is the daemon,
// the other verbs talk to it over its control socket.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/daemon"
	"github.com/trestle/trestle/internal/overlay"
)

// version is set by the Makefile from git describe.
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// env is what a command may touch of the world, so commands run in tests.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	socket         string
	json           bool
}

func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{stdout: stdout, stderr: stderr, getenv: getenv}
	root := e.rootCmd()
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(stderr, "trestle:", err)
		return 1
	}
	return 0
}

// rootCmd is the whole command tree: what run executes, and what the man
// pages and shell completions are generated from (man.go).
func (e *env) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "trestle",
		Short: "An Ethernet learning switch whose datapath runs in the kernel as eBPF",
		Long: `trestle is an Ethernet learning switch. Its datapath is an eBPF program attached
to each port, at XDP (packet rate) or at tc (keeps the host stack's GSO and
checksum offload); the daemon, 'trestle run', configures it from a TOML file.

Start the daemon in the network namespace of its ports:

  trestle run --config /etc/trestle/trestle.toml

then inspect it from the same machine:

  trestle show                  bridges, ports, each port's attach mode and why
  trestle fdb show              learned and static addresses
  trestle stats                 per-port counters and drops by reason

Every inspecting command takes --json. The daemon's socket is
/run/trestle/trestle.sock unless --socket or TRESTLE_SOCKET say otherwise.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	// --version: what was built (git describe, set by the Makefile), by which Go, for where.
	root.SetVersionTemplate(fmt.Sprintf("trestle %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH))
	daemon.Build = version
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.PersistentFlags().StringVar(&e.socket, "socket", "", "control socket of the daemon (default $TRESTLE_SOCKET or "+ctl.DefaultSocket+")")
	root.AddCommand(e.runCmd(), e.downCmd(), e.checkCmd(), e.showCmd(), e.fdbCmd(), e.statsCmd(), e.reloadCmd(), e.portCmd(), e.ruleCmd(), e.stateCmd(), e.captureCmd(), e.eventsCmd(), e.topCmd(), e.genCmd(), e.sinkCmd(), e.statCmd(), e.labCmd())
	root.AddCommand(e.manCmd(root))
	completeArgs(root, e)
	return root
}

func (e *env) sock() string { return ctl.SocketPath(e.socket, e.getenv) }

func (e *env) call(req ctl.Request, out any) error { return ctl.Call(e.sock(), req, out) }

func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (e *env) runCmd() *cobra.Command {
	var cfgPath, level, metrics string
	var persist bool
	c := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Run the switch daemon in the foreground",
		Long: `Run the switch in the foreground, logging to stderr.

The whole config is checked before anything is applied; a bad file is
rejected with its file, line and field. SIGHUP (or 'trestle reload')
re-reads the file and applies only the difference: ports that did not
change keep forwarding, and a bad file leaves the running state as it was.

Without persist, SIGTERM or SIGINT detach every program the daemon attached,
and a daemon killed any other way leaves none behind either.

With persist ([daemon] persist = true, or --persist) the datapath is pinned
under /sys/fs/bpf/trestle/ and outlives the daemon: stopped, killed or
crashed, it goes on forwarding with its last state, and the next
'trestle run' (of this or a newer build) adopts it without losing a frame:
learned entries with their ages, counters, attachments (moved to the new
program in place). 'trestle down' removes it. Persist needs the host's BPF
filesystem: start the daemon in a namespace with
'nsenter --net=/run/netns/NAME trestle run ...' rather than 'ip netns exec',
whose private /sys hides it.

With --metrics ADDR ([daemon] metrics = "127.0.0.1:9470") it serves its
counters to Prometheus at http://ADDR/metrics, read from the datapath at
each scrape (docs/operations.md lists the metrics).

A minimal config:

  [daemon]
  persist = true            # optional

  [[bridge]]
  name = "br0"

  [[bridge.port]]
  interface = "veth-a"      # mode = "auto" (default), "xdp" or "tc"

  [[bridge.port]]
  interface = "veth-b"

docs/configuration.md lists every key, with its values and default.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfgPath == "" {
				return fmt.Errorf("--config FILE is required")
			}
			var lv slog.Level
			if err := lv.UnmarshalText([]byte(level)); err != nil {
				return fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
			}
			log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: lv}))
			// --socket, then TRESTLE_SOCKET, then the config's daemon.socket.
			sock := e.socket
			if sock == "" {
				sock = e.getenv("TRESTLE_SOCKET")
			}
			if metrics != "" {
				if err := config.CheckListenAddr(metrics); err != nil {
					return fmt.Errorf("--metrics: %w", err)
				}
			}
			return daemon.Run(context.Background(), daemon.Options{ConfigPath: cfgPath, Socket: sock, Persist: persist, Metrics: metrics, Log: log})
		},
	}
	c.Flags().StringVarP(&cfgPath, "config", "c", "", "config file (TOML)")
	c.Flags().StringVar(&level, "log-level", "info", "debug, info, warn or error")
	c.Flags().BoolVar(&persist, "persist", false, "pin the datapath so that it outlives the daemon (as [daemon] persist = true)")
	c.Flags().StringVar(&metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9470 (as [daemon] metrics)")
	return c
}

func (e *env) downCmd() *cobra.Command {
	var cfgPath string
	var stale, force bool
	c := &cobra.Command{
		Use:   "down [--config FILE] [--force] | down --stale",
		Short: "Remove a persisted datapath: detach, unpin, restore veth peers",
		Long: `Remove the datapath a daemon with persist left forwarding: detach its
programs, unpin its maps from /sys/fs/bpf/trestle/, and give the veth peers
it changed (GRO, TX checksum offload) their settings back.

It finds the datapath of the daemon that listened on the control socket
(--socket, TRESTLE_SOCKET, the config's [daemon] socket, or the default),
in this network namespace: run it where the daemon ran, e.g.

  nsenter --net=/run/netns/sw trestle down --config /etc/trestle/sw.toml

It refuses while a daemon holds the socket, answering or hung, and says
what it would remove; --force removes it anyway (a hung daemon's datapath
then stops forwarding). Nothing to remove is no error.

--stale removes instead every persisted datapath whose network namespace is
gone (its interfaces went with it; its maps would stay pinned until reboot).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stale {
				removed, err := daemon.DownStale()
				if err != nil {
					return fmt.Errorf("down --stale: %w", err)
				}
				if e.json {
					return e.printJSON(map[string]any{"removed": removed})
				}
				fmt.Fprintf(e.stdout, "removed %d persisted datapaths of namespaces that are gone\n", len(removed))
				for _, r := range removed {
					fmt.Fprintf(e.stdout, "  %s\n", r)
				}
				return nil
			}
			sock, err := e.sockOf(cfgPath)
			if err != nil {
				return err
			}
			res, err := daemon.Down(sock, force)
			if err != nil {
				return fmt.Errorf("down: %w", err)
			}
			if e.json {
				return e.printJSON(res)
			}
			// Veth peers' names are their tenants' to choose.
			e.plainText()
			if !res.Found {
				fmt.Fprintf(e.stdout, "nothing to remove: no persisted datapath for %s in this namespace (%s)\n", sock, res.PinDir)
				return nil
			}
			for _, d := range res.Detached {
				fmt.Fprintln(e.stdout, d)
			}
			for _, p := range res.PeersRestored {
				fmt.Fprintf(e.stdout, "restored veth peer %s\n", p)
			}
			for _, v := range res.VNIsRemoved {
				fmt.Fprintf(e.stdout, "removed overlay VNI %d (%s, %s, %s)\n", v, overlay.NamesOf(v).VXLAN, overlay.NamesOf(v).Bridge, overlay.NamesOf(v).Adv)
			}
			fmt.Fprintf(e.stdout, "removed %s\n", res.PinDir)
			return nil
		},
	}
	c.Flags().StringVarP(&cfgPath, "config", "c", "", "the daemon's config file, for its socket")
	c.Flags().BoolVar(&stale, "stale", false, "remove every persisted datapath whose network namespace is gone")
	c.Flags().BoolVar(&force, "force", false, "remove the datapath even while a daemon holds the socket (a hung one)")
	c.Flags().BoolVar(&e.json, "json", false, "print JSON")
	return c
}

func (e *env) checkCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "check FILE",
		Short: "Check a config file without applying it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(args[0])
			if err != nil {
				return err
			}
			ports := 0
			for _, b := range cfg.Bridges {
				ports += len(b.Ports)
			}
			if e.json {
				return e.printJSON(map[string]any{"ok": true, "file": args[0], "bridges": len(cfg.Bridges), "ports": ports})
			}
			fmt.Fprintf(e.stdout, "%s: ok (%d bridges, %d ports)\n", args[0], len(cfg.Bridges), ports)
			return nil
		},
	}
	c.Flags().BoolVar(&e.json, "json", false, "print JSON")
	return c
}

func (e *env) showCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "show",
		Short: "Show bridges and ports, with each port's attach mode and why",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st ctl.Status
			if err := e.call(ctl.Request{Cmd: ctl.CmdShow}, &st); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(st)
			}
			e.plainText()
			if st.Persist {
				fmt.Fprintf(e.stdout, "persist: the datapath outlives the daemon, pinned at %s\n", st.PinDir)
			}
			for _, b := range st.Bridges {
				fmt.Fprintf(e.stdout, "bridge %s (id %d): %d entries, max %d, aging %gs\n", b.Name, b.ID, b.Entries, b.MaxEntries, b.AgingSeconds)
				tw := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', 0)
				fmt.Fprintln(tw, "  PORT\tSTATE\tMODE\tVLANS\tMACS\tWHY")
				for _, p := range b.Ports {
					macs := fmt.Sprint(p.MACs)
					if p.MaxMACs > 0 {
						macs += fmt.Sprintf("/%d", p.MaxMACs)
					}
					m := p.Mode
					if p.Patch != "" {
						m = "patch"
					}
					fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.State, m, portVLANs(p), macs, p.Reason)
					if p.Peer != "" {
						fmt.Fprintf(tw, "  \t\t\t\t\tpeer: %s\n", p.Peer)
					}
					if pol := portPolicies(p); pol != "" {
						fmt.Fprintf(tw, "  \t\t\t\t\t%s\n", pol)
					}
					if o := p.Overlay; o != nil {
						fmt.Fprintf(tw, "  \t\t\t\t\t%s\n", overlayLine(o))
					}
				}
				tw.Flush()
				for _, m := range b.Mirrors {
					fmt.Fprintf(e.stdout, "  mirror %s: %s (%s) to %s", m.Name, strings.Join(m.Ports, ", "), m.Direction, m.To)
					if m.VLANs != "" {
						fmt.Fprintf(e.stdout, ", VLANs %s", m.VLANs)
					}
					if !m.Active {
						fmt.Fprintf(e.stdout, "; inactive: %s is not up", m.To)
					}
					fmt.Fprintln(e.stdout)
				}
				switch {
				case b.Filter:
					fmt.Fprintf(e.stdout, "  filter on: %d rules, default %s ('trestle rule show')\n", b.Rules, b.DefaultAction)
				case b.Rules > 0:
					fmt.Fprintf(e.stdout, "  filter off: %d rules kept, not applied\n", b.Rules)
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&e.json, "json", false, "print JSON")
	return c
}

// portPolicies is what `show` says of a port's policies and mirrors, ""
// when it has none.
func portPolicies(p ctl.PortStatus) string {
	var say []string
	if p.Span != "" {
		say = append(say, "span port of mirror "+p.Span)
	}
	if p.Mirror != "" {
		say = append(say, "mirrored by "+p.Mirror)
	}
	if p.Protected {
		say = append(say, "protected")
	}
	if p.Locked {
		lock := "locked"
		if len(p.AllowedMACs) > 0 {
			lock += " (allowed " + strings.Join(p.AllowedMACs, ", ") + ")"
		}
		say = append(say, lock)
	}
	if p.IPGuard {
		say = append(say, "ip_guard ("+strings.Join(p.AllowedIPs, ", ")+")")
	}
	if !p.Learning {
		say = append(say, "no learning")
	}
	if p.MACLimitAction == config.LimitForward {
		say = append(say, "forwards unlearned at max_macs")
	}
	for _, f := range []struct {
		on   bool
		what string
	}{{p.Flood, "unknown unicast"}, {p.McastFlood, "multicast"}, {p.BcastFlood, "broadcast"}} {
		if !f.on && p.Patch == "" && p.Span == "" {
			say = append(say, "no "+f.what+" flooded out")
		}
	}
	if st := p.Storm; st != nil {
		var lim []string
		for _, k := range []struct {
			n    int
			what string
		}{{st.Broadcast, "broadcast"}, {st.Multicast, "multicast"}, {st.UnknownUnicast, "unknown unicast"}} {
			if k.n > 0 {
				lim = append(lim, fmt.Sprintf("%s %d/s", k.what, k.n))
			}
		}
		say = append(say, "storm control: "+strings.Join(lim, ", "))
	}
	return strings.Join(say, "; ")
}

// overlayLine is what `show` says of an overlay port (docs/overlay.md).
func overlayLine(o *ctl.Overlay) string {
	s := fmt.Sprintf("overlay: VNI %d, VTEP %s, dstport %d", o.VNI, o.VTEP, o.DstPort)
	if o.MTU > 0 {
		s += fmt.Sprintf(", mtu %d", o.MTU)
	}
	s += fmt.Sprintf("; remote VTEPs %d", o.RemoteVTEPs)
	if len(o.FloodList) > 0 {
		s += " (flood list " + strings.Join(o.FloodList, ", ") + ")"
	}
	return s + fmt.Sprintf("; MACs remote %d, advertised %d", o.RemoteMACs, o.LocalMACs)
}

// portVLANs is a port's VLANs as `show` prints them: "10" for an access
// port ("10 qinq" for an 802.1ad tunnel port), "trunk 10,20-29" (and
// "native 10", "native 10 tagged") for a trunk, "-" on a bridge that is
// not VLAN-aware.
func portVLANs(p ctl.PortStatus) string {
	switch {
	case p.Trunk != "" && p.Native != 0 && p.NativeTagged:
		return fmt.Sprintf("trunk %s native %d tagged", p.Trunk, p.Native)
	case p.Trunk != "" && p.Native != 0:
		return fmt.Sprintf("trunk %s native %d", p.Trunk, p.Native)
	case p.Trunk != "":
		return "trunk " + p.Trunk
	case p.VLAN != 0 && p.QinQ:
		return fmt.Sprintf("%d qinq", p.VLAN)
	case p.VLAN != 0:
		return fmt.Sprint(p.VLAN)
	}
	return "-"
}

func (e *env) fdbCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "fdb",
		Short: "Show and change the learning table",
	}
	var vlan uint16
	var port string
	show := &cobra.Command{
		Use:   "show [BRIDGE]",
		Short: "List learned and static entries",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The daemon sends the table in chunks; FDB gathers them
			// into one, sorted (ctl/fdb.go).
			es, err := ctl.FDB(e.sock(), first(args))
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(es)
			}
			e.plainText()
			tw := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "BRIDGE\tMAC\tVLAN\tPORT\tTYPE\tAGE")
			for _, x := range es {
				kind, age := "learned", fmt.Sprintf("%.1fs", x.AgeSeconds)
				switch {
				case x.Static:
					kind, age = "static", "-"
				case x.VTEP != "":
					kind = "remote " + x.VTEP
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", x.Bridge, x.MAC, x.VLAN, x.Port, kind, age)
			}
			return tw.Flush()
		},
	}
	show.Flags().BoolVar(&e.json, "json", false, "print JSON")
	add := &cobra.Command{
		Use:   "add BRIDGE MAC PORT",
		Short: "Add a static entry (kept across reloads, and restarts with persist; the config keeps it always)",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.call(ctl.Request{Cmd: ctl.CmdFDBAdd, Bridge: args[0], MAC: args[1], Port: args[2], VLAN: vlan}, nil); err != nil {
				return err
			}
			if vlan == 0 {
				return e.done(fmt.Sprintf("added static %s on %s (untagged: the port's access or native VLAN on a VLAN-aware bridge)", args[1], args[2]))
			}
			return e.done(fmt.Sprintf("added static %s vlan %d on %s", args[1], vlan, args[2]))
		},
	}
	add.Flags().Uint16Var(&vlan, "vlan", 0, "VLAN of the entry (0: untagged; on a VLAN-aware bridge the port's access or native VLAN, and it must be one the port carries)")
	add.Flags().BoolVar(&e.json, "json", false, "print JSON")
	del := &cobra.Command{
		Use:   "del BRIDGE MAC",
		Short: "Delete an entry, learned or static",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.call(ctl.Request{Cmd: ctl.CmdFDBDel, Bridge: args[0], MAC: args[1], VLAN: vlan}, nil); err != nil {
				return err
			}
			return e.done(fmt.Sprintf("deleted %s vlan %d", args[1], vlan))
		},
	}
	del.Flags().Uint16Var(&vlan, "vlan", 0, "VLAN of the entry (0: untagged)")
	del.Flags().BoolVar(&e.json, "json", false, "print JSON")
	flush := &cobra.Command{
		Use:   "flush [BRIDGE]",
		Short: "Delete learned entries (static entries stay)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res daemon.FlushResult
			if err := e.call(ctl.Request{Cmd: ctl.CmdFDBFlush, Bridge: first(args), Port: port}, &res); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(res)
			}
			fmt.Fprintf(e.stdout, "removed %d learned entries\n", res.Removed)
			return nil
		},
	}
	flush.Flags().StringVar(&port, "port", "", "only entries learned on this port")
	flush.Flags().BoolVar(&e.json, "json", false, "print JSON")
	c.AddCommand(show, add, del, flush)
	return c
}

func (e *env) statsCmd() *cobra.Command {
	var perVLAN bool
	c := &cobra.Command{
		Use:   "stats [BRIDGE]",
		Short: "Per-port counters, with drops by reason (--vlan: per-VLAN counters)",
		Long: `Per-port counters, with drops by reason.

With --vlan, the counters of each VLAN of the VLAN-aware bridges instead:
frames classified into the VLAN (RX), copies sent out of its ports (TX),
and frames flooded within it. Drops stay per port: vlan_untagged,
vlan_tagged_on_access, vlan_not_carried, vlan_egress and double_tagged
are among the reasons.`,
		Example: `  trestle stats
  trestle stats br0 --json
  trestle stats --vlan`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if perVLAN {
				return e.vlanStats(first(args))
			}
			var ps []ctl.PortStats
			if err := e.call(ctl.Request{Cmd: ctl.CmdStats, Bridge: first(args)}, &ps); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(ps)
			}
			e.plainText()
			tw := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', tabwriter.AlignRight)
			var names []string
			if len(ps) > 0 {
				names = countNames(ps[0].Counters)
			}
			fmt.Fprintf(tw, "BRIDGE\tPORT\tMODE\t%sDROPS\t\n", countHeads(names))
			for _, p := range ps {
				var total uint64
				for _, n := range p.Drops {
					total += n
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s%d\t\n", p.Bridge, p.Port, p.Mode, countCells(p.Counters, names), total)
			}
			tw.Flush()
			for _, p := range ps {
				if d := dropSummary(p.Drops); d != "" {
					fmt.Fprintf(e.stdout, "drops on %s: %s\n", p.Port, d)
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&e.json, "json", false, "print JSON")
	c.Flags().BoolVar(&perVLAN, "vlan", false, "per-VLAN counters of the VLAN-aware bridges")
	return c
}

func (e *env) vlanStats(bridge string) error {
	var vs []ctl.VLANStats
	if err := e.call(ctl.Request{Cmd: ctl.CmdVLANStats, Bridge: bridge}, &vs); err != nil {
		return err
	}
	if e.json {
		return e.printJSON(vs)
	}
	e.plainText()
	if len(vs) == 0 {
		fmt.Fprintln(e.stdout, "no VLAN-aware bridge: set vlan or trunk on a port to make one")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', tabwriter.AlignRight)
	names := countNames(vs[0].Counters)
	fmt.Fprintf(tw, "BRIDGE\tVLAN\t%sPORTS\t\n", countHeads(names))
	for _, v := range vs {
		fmt.Fprintf(tw, "%s\t%d\t%s%s\t\n", v.Bridge, v.VLAN, countCells(v.Counters, names), strings.Join(v.Ports, ","))
	}
	return tw.Flush()
}

// The stats tables have a column per counter the daemon reports, in its
// order: a counter added to bpf/types.h appears with no change here.
func countNames(c ctl.Counts) []string {
	names := make([]string, len(c))
	for i, x := range c {
		names[i] = x.Name
	}
	return names
}

// countHeads are the columns' heads: rx_packets is "RX PKTS".
func countHeads(names []string) string {
	var b strings.Builder
	for _, n := range names {
		h := strings.ToUpper(strings.ReplaceAll(n, "_", " "))
		b.WriteString(strings.Replace(h, "PACKETS", "PKTS", 1) + "\t")
	}
	return b.String()
}

func countCells(c ctl.Counts, names []string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%d\t", c.Get(n))
	}
	return b.String()
}

func dropSummary(drops map[string]uint64) string {
	var parts []string
	for name, n := range drops {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", name, n))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func (e *env) reloadCmd() *cobra.Command {
	var cfgPath string
	c := &cobra.Command{
		Use:   "reload [--config FILE]",
		Short: "Make the daemon re-read its config and apply the difference",
		Long: `Make the daemon re-read its config file and apply the difference: ports
whose settings did not change keep forwarding. A file with errors is refused
with file, line and field, and the running state stays.

The daemon is the one on --socket, TRESTLE_SOCKET, the [daemon] socket of
--config FILE (what the systemd unit's ExecReload gives), or the default.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sock, err := e.sockOf(cfgPath)
			if err != nil {
				return err
			}
			if err := ctl.Call(sock, ctl.Request{Cmd: ctl.CmdReload}, nil); err != nil {
				return fmt.Errorf("reload rejected, running state kept: %w", err)
			}
			return e.done("reloaded")
		},
	}
	c.Flags().StringVarP(&cfgPath, "config", "c", "", "the daemon's config file, for its socket")
	c.Flags().BoolVar(&e.json, "json", false, "print JSON")
	return c
}

// sockOf is the control socket a command talks to: --socket, then
// TRESTLE_SOCKET, then the [daemon] socket of the config file cfgPath names
// (if any), then the default.
func (e *env) sockOf(cfgPath string) (string, error) {
	if s := e.socket; s != "" {
		return s, nil
	}
	if s := e.getenv("TRESTLE_SOCKET"); s != "" {
		return s, nil
	}
	if cfgPath != "" {
		cfg, err := config.Load(cfgPath)
		if err != nil {
			return "", err
		}
		if cfg.Daemon.Socket != "" {
			return cfg.Daemon.Socket, nil
		}
	}
	return ctl.DefaultSocket, nil
}

// done reports a change that has no data to show.
func (e *env) done(msg string) error {
	if e.json {
		return e.printJSON(map[string]any{"ok": true, "message": msg})
	}
	_, err := fmt.Fprintln(e.stdout, msg)
	return err
}

func first(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return ""
}
