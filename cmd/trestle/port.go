package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
)

// `trestle port`: ports added and removed at run time, beside
// those of the config file; what the CNI plugin and the QEMU scripts call.
func (e *env) portCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "port",
		Short: "Add, remove, list and enable ports at run time, beside the config file's",
		Long: `Add an interface to a running bridge as a port, remove it, and list every
port with where it came from. A port added at run time takes the keys of a
[[bridge.port]] of the config file, checked the same way, and is kept:

  - across 'trestle reload' and SIGHUP: the file's ports are the file's, and
    a run-time port stays unless the reloaded file names the same interface
    (the file's port then wins) or drops its bridge (the port goes with it);
  - across a restart of the daemon, with or without persist (recorded in
    /run/trestle/, so a reboot forgets it, as container runtimes expect);
  - until its interface is deleted: the port then goes by itself.

A bridge declared with no [[bridge.port]] at all takes only such ports.
'port enable' lifts the block a guard (bpdu_guard, loop_detect) put on any
port, of the file or added at run time.
Container runtimes (the trestle CNI plugin) and VMs (dist/qemu-ifup) add
their interfaces this way; docs/run-time-ports.md explains it.`,
	}
	add := &cobra.Command{
		Use:   "add BRIDGE INTERFACE [KEY=VALUE...]",
		Short: "Add an interface to a running bridge; answers once the port forwards",
		Long: `Add INTERFACE, in the daemon's network namespace, to BRIDGE as a port, and
answer once it forwards (it is attached), or say why it cannot: no such
bridge or interface, the interface already a port (of which bridge, and
whether from the file or added at run time), the bridge or the switch full
(` + fmt.Sprint(config.MaxPortsPerBridge) + ` ports a bridge and ` + fmt.Sprint(config.MaxPorts) + ` in all), or a key the
config file would refuse, with the file's message. On an error nothing that
runs changes.

The keys are those of [[bridge.port]] (docs/configuration.md gives each in
full), a list's values separated by commas:

` + config.PortArgsHelp() + `
and owner=TEXT (not a port key): who added the port, shown by 'port list'
and used by 'port del --owner' (the CNI plugin writes its network, the
container's id and the interface's name).

A port whose vlan or trunk would make a bridge VLAN-aware is refused while
the bridge has other ports (it would change their VLAN); declare a VLAN in
the file, or add it to a bridge with no ports yet.`,
		Example: `  trestle port add br0 veth-pod1
  trestle port add br0 tap-vm1 vlan=10 max_macs=4 owner=vm1
  trestle port add br0 veth-up trunk=10,20-29 native=10 mode=tc
  trestle port add br0 veth-pod2 protected=true storm.broadcast=1000 --json`,
		Args: nargs(2, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := ctl.Request{Cmd: ctl.CmdPortAdd, Bridge: args[0], Port: args[1]}
			for _, a := range args[2:] {
				if !strings.Contains(a, "=") {
					return &usageError{cmd: cmd, err: fmt.Errorf("%q is not KEY=VALUE: the port's keys follow BRIDGE INTERFACE", a)}
				}
				if o, ok := strings.CutPrefix(a, "owner="); ok {
					req.Owner = o
				} else {
					req.Args = append(req.Args, a)
				}
			}
			var pe ctl.PortEntry
			if err := e.call(req, &pe); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(pe)
			}
			e.plainText()
			fmt.Fprintf(e.stdout, "added port %s to %s: %s at %s\n", pe.Name, pe.Bridge, pe.State, pe.Mode)
			return nil
		},
	}
	add.Flags().BoolVar(&e.json, "json", false, "print the port as 'port list --json' does")
	var owner string
	del := &cobra.Command{
		Use:   "del BRIDGE INTERFACE | del BRIDGE --owner TEXT",
		Short: "Remove a port added at run time, or every one of an owner",
		Long: `Remove a port that was added at run time: by its interface, or every one
of an owner in the bridge (none is no error: what an orchestrator cleans up
may be clean already). A port of the config file is removed from the file,
then 'trestle reload'.`,
		Example: `  trestle port del br0 veth-pod1
  trestle port del br0 --owner vm1`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 2 && owner == "", len(args) == 1 && owner != "":
				return nil
			case len(args) == 2:
				return &usageError{cmd: cmd, err: errors.New("give an interface or --owner, not both")}
			}
			return &usageError{cmd: cmd, err: fmt.Errorf("%s takes BRIDGE INTERFACE, or BRIDGE --owner TEXT; %d arguments given", cmd.CommandPath(), len(args))}
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req := ctl.Request{Cmd: ctl.CmdPortDel, Bridge: args[0], Owner: owner}
			if len(args) == 2 {
				req.Port = args[1]
			}
			var gone []ctl.PortEntry
			if err := e.call(req, &gone); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(ctl.List[ctl.PortEntry](gone))
			}
			e.plainText()
			if len(args) == 2 {
				fmt.Fprintf(e.stdout, "removed port %s of %s\n", args[1], args[0])
				return nil
			}
			var names []string
			for _, p := range gone {
				names = append(names, p.Name)
			}
			fmt.Fprintf(e.stdout, "removed %d ports of owner %q from %s", len(gone), owner, args[0])
			if len(names) > 0 {
				fmt.Fprintf(e.stdout, ": %s", strings.Join(names, ", "))
			}
			fmt.Fprintln(e.stdout)
			return nil
		},
	}
	del.Flags().StringVar(&owner, "owner", "", "remove every run-time port of this owner in the bridge")
	del.Flags().BoolVar(&e.json, "json", false, "print the ports removed as JSON")
	list := &cobra.Command{
		Use:   "list [BRIDGE]",
		Short: "List every port, from the file or added at run time, with its origin and owner",
		Long: `List the ports of BRIDGE, or of every bridge: ORIGIN is "file" (the config
file's) or "run" (added at run time), OWNER who added a run-time port. With
--json, each port is an object with bridge, origin, owner and the fields
of a port in 'trestle show --json'.`,
		Example: `  trestle port list
  trestle port list br0 --json`,
		Args: nargs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ps []ctl.PortEntry
			if err := e.call(ctl.Request{Cmd: ctl.CmdPortList, Bridge: first(args)}, &ps); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(ctl.List[ctl.PortEntry](ps))
			}
			e.plainText()
			tw := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "BRIDGE\tPORT\tORIGIN\tOWNER\tSTATE\tMODE\tVLANS")
			for _, p := range ps {
				m, o := p.Mode, p.Owner
				if p.Patch != "" {
					m = "patch"
				}
				if o == "" {
					o = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Bridge, p.Name, p.Origin, o, p.State, m, portVLANs(p.PortStatus))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&e.json, "json", false, "print JSON")
	enable := &cobra.Command{
		Use:   "enable BRIDGE PORT",
		Short: "Lift a guard's block of a port, so that it forwards again",
		Long: `Lift the block a guard put on PORT of BRIDGE, a port of the file or added at
run time, and let it forward again. A blocked port ('trestle show' gives its
state blocked, and why) stays attached, but takes and sends nothing:

  - bpdu_guard: a BPDU (a spanning tree frame) came in by a port that sets
    bpdu_guard = true. It stays blocked until this command, as an edge port
    that heard another switch should stay shut until someone has looked at
    its cable; the next BPDU blocks it again.
  - loop: the bridge's loop_detect heard its own probe come back by the
    port. It is tried again by itself after the bridge's loop_retry; this
    command tries it at once, and a loop still there blocks it again within
    a second.

A block lasts across reloads, not across a restart of the daemon. A port
that is not blocked is left as it is (no error). The answer is the port, as
'port list' gives it.`,
		Example: `  trestle port enable br0 veth-pod1
  trestle port enable br0 tap-vm1 --json`,
		Args: nargs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var pe ctl.PortEntry
			if err := e.call(ctl.Request{Cmd: ctl.CmdPortEnable, Bridge: args[0], Port: args[1]}, &pe); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(pe)
			}
			e.plainText()
			fmt.Fprintf(e.stdout, "port %s of %s: %s\n", pe.Name, pe.Bridge, pe.State)
			return nil
		},
	}
	enable.Flags().BoolVar(&e.json, "json", false, "print the port as 'port list --json' does")
	c.AddCommand(add, del, list, enable)
	return c
}
