package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/trestle/trestle/internal/ctl"
)

func (e *env) mdbCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "mdb",
		Short: "Show the multicast group table of snooping bridges",
	}
	show := &cobra.Command{
		Use:   "show [BRIDGE]",
		Short: "List multicast group memberships and router ports (multicast_snooping)",
		Long: `List the multicast group table of the bridges with multicast_snooping = true,
as 'bridge mdb show' lists the Linux bridge's: for each group (IPv4 or IPv6) in
each VLAN of a bridge, each port that reported it (IGMPv2/v3, MLDv1/v2), with
the sources an IGMPv3 or MLDv2 include-mode report named (none: any source)
and how long ago its last report came. Multicast to a group listed goes to its
ports and the bridge's multicast router ports only; to any other group, and to
link-local groups (224.0.0.0/24, ff02::/16), it is flooded (docs/switching.md,
"Multicast snooping"). The router ports follow, with ROUTER yes: those with
multicast_router = true, and those that heard a query or a PIM hello in the
last 255 s. 'trestle show' names each VLAN's IGMP and MLD querier: the bridge's
own (multicast_querier) or the one heard, and by which port.

Columns: GROUP, VLAN (0: untagged, in a bridge that is not VLAN-aware), PORT,
SOURCES, AGE.`,
		Example: `  trestle mdb show
  trestle mdb show br0
  trestle mdb show br0 --json`,
		Args: nargs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ms []ctl.MDBEntry
			if err := e.call(ctl.Request{Cmd: ctl.CmdMDBShow, Bridge: first(args)}, &ms); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(ctl.List[ctl.MDBEntry](ms))
			}
			e.plainText()
			tw := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "BRIDGE\tGROUP\tVLAN\tPORT\tSOURCES\tROUTER\tAGE")
			for _, m := range ms {
				group, sources, router, age := m.Group, strings.Join(m.Sources, ","), "-", fmt.Sprintf("%.0fs", m.AgeSeconds)
				if m.Router {
					group, router, age = "-", "yes", "-"
				}
				if sources == "" {
					sources = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", m.Bridge, group, m.VLAN, m.Port, sources, router, age)
			}
			return tw.Flush()
		},
	}
	show.Flags().BoolVar(&e.json, "json", false, "print JSON")
	c.AddCommand(show)
	return c
}
