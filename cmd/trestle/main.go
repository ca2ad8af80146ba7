// Command trestle is the eBPF Ethernet switch: `trestle run` is the daemon,
// the other verbs talk to it over its control socket.
package main

import (
	"context"
	"encoding/json"
	"errors"
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
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// env is what a command may touch of the world, so commands run in tests.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	socket         string
	json           bool
}

// run runs the command line args and returns its exit status, by the
// contract of errors.go: whatever failed, it is reported and classified
// there, in one place.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	root := e.rootCmd()
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	reportFailure(stdout, stderr, cmd, err, e.json || wantsJSON(args))
	return exitStatus(err)
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

A command that acts on a bridge takes it as its first argument (trestle
show br0, trestle capture br0 veth-a). Every inspecting command takes
--json; with it, a failure too prints one JSON object on stdout:
{"ok": false, "error": "...", "errors": [...]} (docs/operations.md, "The
JSON contract"). The daemon's socket is /run/trestle/trestle.sock unless
--socket or TRESTLE_SOCKET say otherwise.

Exit status:

` + exitStatusHelp(),
		Args:          cobra.ArbitraryArgs,
		RunE:          groupRun,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	// --version: what was built (git describe, set by the Makefile), by which Go, for where.
	root.SetVersionTemplate(fmt.Sprintf("trestle %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH))
	daemon.Build = version
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetFlagErrorFunc(flagError)
	root.PersistentFlags().StringVar(&e.socket, "socket", "", "control socket of the daemon (default $TRESTLE_SOCKET or "+ctl.DefaultSocket+")")
	root.AddCommand(e.runCmd(), e.downCmd(), e.checkCmd(), e.showCmd(), e.fdbCmd(), e.statsCmd(), e.reloadCmd(), e.portCmd(), e.ruleCmd(), e.stateCmd(), e.neighCmd(), e.mdbCmd(), e.captureCmd(), e.eventsCmd(), e.topCmd(), e.genCmd(), e.sinkCmd(), e.statCmd(), e.labCmd())
	root.AddCommand(e.manCmd(root))
	groups(root)
	completeArgs(root, e)
	return root
}

// groups makes every command that only holds subcommands (fdb, port,
// rule, state) answer a word that is none of them with a usage error,
// rather than with its help and success.
func groups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		groups(sub)
	}
	if c.HasSubCommands() && c.RunE == nil && c.Run == nil {
		c.Args, c.RunE = cobra.ArbitraryArgs, groupRun
	}
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
		Use:   "run --config FILE [--persist] [--metrics ADDR] [--log-level LEVEL]",
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
		Args: nargs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfgPath == "" {
				return &usageError{cmd: cmd, err: errors.New("--config FILE is required: the configuration to run")}
			}
			var lv slog.Level
			if err := lv.UnmarshalText([]byte(level)); err != nil {
				return usagef("--log-level %q: one of %s", level, strings.Join(logLevels, ", "))
			}
			log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: lv}))
			// --socket, then TRESTLE_SOCKET, then the config's daemon.socket.
			sock := e.socket
			if sock == "" {
				sock = e.getenv("TRESTLE_SOCKET")
			}
			if metrics != "" {
				if err := config.CheckListenAddr(metrics); err != nil {
					return usagef("--metrics: %w", err)
				}
			}
			err := daemon.Run(context.Background(), daemon.Options{ConfigPath: cfgPath, Socket: sock, Persist: persist, Metrics: metrics, Log: log})
			return refused("run: the configuration is refused, nothing was started", err)
		},
	}
	configFlag(c, &cfgPath, "the configuration file (TOML)")
	c.Flags().StringVar(&level, "log-level", "info", strings.Join(logLevels, ", "))
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
		Args: nargs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stale && (cfgPath != "" || force) {
				return usagef("--stale goes alone: it removes every persisted datapath whose namespace is gone, of whichever config")
			}
			if stale {
				removed, err := daemon.DownStale()
				if err != nil {
					return fmt.Errorf("down --stale: %w", err)
				}
				if e.json {
					return e.printJSON(map[string]any{"removed": ctl.List[string](removed)})
				}
				fmt.Fprintf(e.stdout, "removed %d persisted datapaths of namespaces that are gone\n", len(removed))
				for _, r := range removed {
					fmt.Fprintf(e.stdout, "  %s\n", r)
				}
				return nil
			}
			sock, err := e.sockOf(cfgPath)
			if err != nil {
				return refused("down: the configuration is refused", err)
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
			for _, u := range res.Unreadable {
				fmt.Fprintf(e.stderr, "trestle: warning: %s\n", u)
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
	configFlag(c, &cfgPath, "the daemon's configuration file, for its socket")
	c.Flags().BoolVar(&stale, "stale", false, "remove every persisted datapath whose network namespace is gone")
	c.Flags().BoolVar(&force, "force", false, "remove the datapath even while a daemon holds the socket (a hung one)")
	c.Flags().BoolVar(&e.json, "json", false, "print JSON")
	return c
}

func (e *env) checkCmd() *cobra.Command {
	var cfgPath string
	c := &cobra.Command{
		Use:   "check FILE | check --config FILE | check -",
		Short: "Check a configuration file without applying it",
		Long: `Check a configuration file as 'trestle run' and 'trestle reload' would,
and apply nothing. The file is named as run, reload and down name it
(--config FILE), or as the argument; - (or --config -) reads it from
standard input, named <stdin> in the messages.

A file with problems is refused with every one of them, each on a line of
its own that starts FILE:LINE: (FILE: alone for a file that cannot be
read), and exit status 4; with --json, stdout has one object whose errors
list them (file, line, field, message).`,
		Example: `  trestle check /etc/trestle/trestle.toml
  trestle check --config /etc/trestle/trestle.toml --json
  generate-config | trestle check -`,
		Args: nargs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := cfgPath
			if len(args) == 1 {
				if path != "" && path != args[0] {
					return usagef("the file is named twice (%s and --config %s): name it once", args[0], path)
				}
				path = args[0]
			}
			if path == "" {
				return &usageError{cmd: cmd, err: errors.New("name the file to check: FILE, --config FILE, or - for standard input")}
			}
			cfg, err := e.loadConfig(path)
			if err != nil {
				return err
			}
			ports := 0
			for _, b := range cfg.Bridges {
				ports += len(b.Ports)
			}
			if e.json {
				return e.printJSON(checkResult{OK: true, File: cfg.File, Bridges: len(cfg.Bridges), Ports: ports})
			}
			fmt.Fprintf(e.stdout, "%s: ok (%d bridges, %d ports)\n", cfg.File, len(cfg.Bridges), ports)
			return nil
		},
	}
	configFlag(c, &cfgPath, "the configuration file to check (- for standard input)")
	c.Flags().BoolVar(&e.json, "json", false, "print JSON")
	return c
}

// checkResult is what `check --json` prints of a file it accepts.
type checkResult struct {
	OK      bool   `json:"ok"`
	File    string `json:"file"`
	Bridges int    `json:"bridges"`
	Ports   int    `json:"ports"`
}

// stdinName is what messages call a configuration read from standard
// input (check -), as 'trestle stat' and compilers call it.
const stdinName = "<stdin>"

// loadConfig reads and checks a configuration: the file at path, or
// standard input for "-".
func (e *env) loadConfig(path string) (*config.Config, error) {
	if path != "-" {
		return config.Load(path)
	}
	data, err := io.ReadAll(e.stdin)
	if err != nil {
		return nil, config.Errors{{File: stdinName, Msg: "cannot read it: " + err.Error()}}
	}
	return config.Parse(stdinName, data)
}

// configFlag declares --config, named the same way by run, reload, down
// and check.
func configFlag(c *cobra.Command, p *string, usage string) {
	c.Flags().StringVar(p, "config", "", usage)
	_ = c.MarkFlagFilename("config", "toml")
}

// logLevels are what run's --log-level takes.
var logLevels = []string{"debug", "info", "warn", "error"}

func (e *env) showCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "show [BRIDGE]",
		Short: "Show bridges and ports, with each port's attach mode and why",
		Example: `  trestle show
  trestle show br0 --json`,
		Args: nargs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var st ctl.Status
			if err := e.call(ctl.Request{Cmd: ctl.CmdShow, Bridge: first(args)}, &st); err != nil {
				return err
			}
			if err := onlyBridge(&st, first(args)); err != nil {
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
					if len(m.VLANs) > 0 {
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
				if b.NeighSuppress {
					fmt.Fprintln(e.stdout, "  neigh_suppress: ARP and ND for the neighbour table's addresses answered by the switch ('trestle neigh show')")
				}
				if b.MulticastSnooping {
					fmt.Fprintln(e.stdout, "  multicast_snooping: a group's frames go to its members and router ports ('trestle mdb show')")
				}
				if b.MulticastQuerier {
					fmt.Fprintln(e.stdout, "  multicast_querier: the bridge sends IGMP and MLD queries while no querier with a lower address is heard")
				}
				for _, q := range b.Queriers {
					fmt.Fprintf(e.stdout, "  %s querier, VLAN %d: %s", strings.ToUpper(q.Family), q.VLAN, q.Address)
					if q.Own {
						fmt.Fprintln(e.stdout, " (this bridge)")
					} else {
						fmt.Fprintf(e.stdout, " (heard by %s, gone in %.0fs without another query)\n", q.Port, q.ExpiresSeconds)
					}
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&e.json, "json", false, "print JSON")
	return c
}

// onlyBridge keeps the bridge of `show BRIDGE` in st: a daemon of an
// earlier release answers with every bridge.
func onlyBridge(st *ctl.Status, name string) error {
	if name == "" {
		return nil
	}
	for _, b := range st.Bridges {
		if b.Name == name {
			st.Bridges = ctl.List[ctl.BridgeStatus]{b}
			return nil
		}
	}
	return fmt.Errorf("no bridge %q", name)
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
	if p.RAGuard {
		say = append(say, "ra_guard")
	}
	if p.DHCPGuard {
		say = append(say, "dhcp_guard")
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
	s += fmt.Sprintf("; MACs remote %d, advertised %d", o.RemoteMACs, o.LocalMACs)
	if o.Stale > 0 {
		s += fmt.Sprintf("; stale %d", o.Stale)
		if o.FRRRestarting {
			s += " (FRR restarting)"
		}
	}
	return s
}

// portVLANs is a port's VLANs as `show` prints them: "10" for an access
// port ("10 qinq" for an 802.1ad tunnel port), "trunk 10,20-29" (and
// "native 10", "native 10 tagged") for a trunk, "-" on a bridge that is
// not VLAN-aware.
func portVLANs(p ctl.PortStatus) string {
	trunk := len(p.Trunk) > 0
	switch {
	case trunk && p.Native != 0 && p.NativeTagged:
		return fmt.Sprintf("trunk %s native %d tagged", p.Trunk, p.Native)
	case trunk && p.Native != 0:
		return fmt.Sprintf("trunk %s native %d", p.Trunk, p.Native)
	case trunk:
		return "trunk " + p.Trunk.String()
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
	var showPort, flushPort string
	var showVLAN, flushVLAN, addVLAN, delVLAN uint16
	show := &cobra.Command{
		Use:   "show [BRIDGE] [--port PORT] [--vlan VLAN]",
		Short: "List learned and static entries, of a bridge, a port, a VLAN",
		Long: `List the entries of the learning table: of every bridge or of BRIDGE, and
with --port and --vlan only those on that port and of that VLAN (0: the
untagged entries of a bridge that is not VLAN-aware), as iproute2's
'bridge fdb show br BRIDGE dev PORT vlan VLAN' does.`,
		Example: `  trestle fdb show
  trestle fdb show br0 --port veth-a
  trestle fdb show br0 --vlan 10 --json`,
		Args: nargs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := ctl.Request{Bridge: first(args), Port: showPort}
			if cmd.Flags().Changed("vlan") {
				req.OnlyVLAN = &showVLAN
			}
			// The daemon sends the table in chunks; FDB gathers them
			// into one, sorted (ctl/fdb.go).
			es, err := ctl.FDBOf(e.sock(), req)
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
				case x.Frozen:
					kind, age = "frozen", "-"
				case x.Static && x.VTEP != "":
					// A remote MAC advertised sticky: held static.
					kind, age = "sticky "+x.VTEP, "-"
				case x.Static:
					kind, age = "static", "-"
				case x.VTEP != "":
					kind = "remote " + x.VTEP
					if x.Stale {
						kind += " stale"
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", x.Bridge, x.MAC, x.VLAN, x.Port, kind, age)
			}
			return tw.Flush()
		},
	}
	show.Flags().StringVar(&showPort, "port", "", "only the entries on this port")
	vlanFlag(show.Flags(), &showVLAN, "only the entries of this VLAN (0: untagged)")
	show.Flags().BoolVar(&e.json, "json", false, "print JSON")
	add := &cobra.Command{
		Use:   "add BRIDGE MAC PORT [--vlan VLAN]",
		Short: "Add a static entry (kept across reloads, and restarts with persist; the config keeps it always)",
		Args:  nargs(3, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.call(ctl.Request{Cmd: ctl.CmdFDBAdd, Bridge: args[0], MAC: args[1], Port: args[2], VLAN: addVLAN}, nil); err != nil {
				return err
			}
			if addVLAN == 0 {
				return e.done(fmt.Sprintf("added static %s on %s (untagged: the port's access or native VLAN on a VLAN-aware bridge)", args[1], args[2]))
			}
			return e.done(fmt.Sprintf("added static %s vlan %d on %s", args[1], addVLAN, args[2]))
		},
	}
	vlanFlag(add.Flags(), &addVLAN, "VLAN of the entry (0: untagged; on a VLAN-aware bridge the port's access or native VLAN, and it must be one the port carries)")
	add.Flags().BoolVar(&e.json, "json", false, "print JSON")
	del := &cobra.Command{
		Use:   "del BRIDGE MAC [--vlan VLAN]",
		Short: "Delete an entry, learned or static",
		Args:  nargs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.call(ctl.Request{Cmd: ctl.CmdFDBDel, Bridge: args[0], MAC: args[1], VLAN: delVLAN}, nil); err != nil {
				return err
			}
			return e.done(fmt.Sprintf("deleted %s vlan %d", args[1], delVLAN))
		},
	}
	vlanFlag(del.Flags(), &delVLAN, "VLAN of the entry (0: untagged)")
	del.Flags().BoolVar(&e.json, "json", false, "print JSON")
	flush := &cobra.Command{
		Use:   "flush BRIDGE [--port PORT] [--vlan VLAN]",
		Short: "Delete the learned entries of a bridge, a port, a VLAN (static entries stay)",
		Example: `  trestle fdb flush br0
  trestle fdb flush br0 --port veth-a --vlan 10`,
		Args: nargs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := ctl.Request{Cmd: ctl.CmdFDBFlush, Bridge: args[0], Port: flushPort}
			if cmd.Flags().Changed("vlan") {
				req.OnlyVLAN = &flushVLAN
			}
			var res daemon.FlushResult
			if err := e.call(req, &res); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(res)
			}
			fmt.Fprintf(e.stdout, "removed %d learned entries\n", res.Removed)
			return nil
		},
	}
	flush.Flags().StringVar(&flushPort, "port", "", "only the entries learned on this port")
	vlanFlag(flush.Flags(), &flushVLAN, "only the entries of this VLAN (0: untagged)")
	flush.Flags().BoolVar(&e.json, "json", false, "print JSON")
	c.AddCommand(show, add, del, flush)
	return c
}

func (e *env) statsCmd() *cobra.Command {
	var perVLAN bool
	var vlan uint16
	c := &cobra.Command{
		Use:   "stats [BRIDGE] [--per-vlan | --vlan VLAN]",
		Short: "Per-port counters, with drops by reason (--per-vlan: per-VLAN counters)",
		Long: `Per-port counters, with drops by reason.

With --per-vlan, the counters of each VLAN of the VLAN-aware bridges instead
(--vlan VLAN: of that VLAN alone): frames classified into the VLAN (RX),
copies sent out of its ports (TX), and frames flooded within it. Drops stay
per port: vlan_untagged, vlan_tagged_on_access, vlan_not_carried,
vlan_egress and double_tagged are among the reasons.`,
		Example: `  trestle stats
  trestle stats br0 --json
  trestle stats --per-vlan
  trestle stats br0 --vlan 10`,
		Args: nargs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if perVLAN || cmd.Flags().Changed("vlan") {
				var only *uint16
				if cmd.Flags().Changed("vlan") {
					only = &vlan
				}
				return e.vlanStats(first(args), only)
			}
			var ps []ctl.PortStats
			if err := e.call(ctl.Request{Cmd: ctl.CmdStats, Bridge: first(args)}, &ps); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(ctl.List[ctl.PortStats](ps))
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
	c.Flags().BoolVar(&perVLAN, "per-vlan", false, "per-VLAN counters of the VLAN-aware bridges")
	vlanFlag(c.Flags(), &vlan, "per-VLAN counters of this VLAN alone")
	return c
}

// vlanStats prints the per-VLAN counters of bridge (every bridge: ""),
// of VLAN only (nil: of every VLAN).
func (e *env) vlanStats(bridge string, only *uint16) error {
	var all []ctl.VLANStats
	if err := e.call(ctl.Request{Cmd: ctl.CmdVLANStats, Bridge: bridge}, &all); err != nil {
		return err
	}
	vs := ctl.List[ctl.VLANStats]{}
	for _, v := range all {
		if only == nil || v.VLAN == *only {
			vs = append(vs, v)
		}
	}
	if e.json {
		return e.printJSON(vs)
	}
	e.plainText()
	switch {
	case len(vs) == 0 && only != nil:
		fmt.Fprintf(e.stdout, "no VLAN-aware bridge has VLAN %d\n", *only)
		return nil
	case len(vs) == 0:
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
whose settings did not change keep forwarding. A file with problems is
refused with each on a line of its own, FILE:LINE: first (exit status 4;
with --json, listed in errors), and the running state stays.

The daemon is the one on --socket, TRESTLE_SOCKET, the [daemon] socket of
--config FILE (what the systemd unit's ExecReload gives), or the default.`,
		Args: nargs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			sock, err := e.sockOf(cfgPath)
			if err != nil {
				return refused("reload: the configuration is refused, the daemon was not asked", err)
			}
			err = ctl.Call(sock, ctl.Request{Cmd: ctl.CmdReload}, nil)
			var failed *ctl.DaemonError
			switch {
			case err == nil:
				return e.done("reloaded")
			case errors.As(err, &failed):
				return fmt.Errorf("reload failed, the running state is kept: %w", err)
			}
			return refused("reload refused, the running state is kept", err)
		},
	}
	configFlag(c, &cfgPath, "the daemon's configuration file, for its socket")
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
		cfg, err := e.loadConfig(cfgPath)
		if err != nil {
			return "", err
		}
		if cfg.Daemon.Socket != "" {
			return cfg.Daemon.Socket, nil
		}
	}
	return ctl.DefaultSocket, nil
}

// done reports a change that has no data to show; with --json as
// {"ok": true, "message": ...}.
func (e *env) done(msg string) error {
	if e.json {
		return e.printJSON(struct {
			OK      bool   `json:"ok"`
			Message string `json:"message"`
		}{true, msg})
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
