package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/trestle/trestle/internal/ctl"
)

func (e *env) neighCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "neigh",
		Short: "Show the neighbour table: which station holds an IP address",
	}
	show := &cobra.Command{
		Use:   "show [BRIDGE]",
		Short: "List the neighbour table (IP address to MAC, per bridge and VLAN)",
		Long: `List the neighbour table: for each IP address (IPv4 and IPv6) in each VLAN of
a bridge, the MAC of the station that holds it and the port it is on. A
bridge with neigh_suppress = true answers ARP requests and IPv6 neighbour
solicitations for these addresses itself, out of the port they came in by,
and floods them no more (docs/switching.md, "Neighbour suppression"); its
ports count them as 'suppressed' in 'trestle stats'.

Columns: IP, MAC, VLAN (0: untagged, in a bridge that is not VLAN-aware),
PORT, ORIGIN and AGE. ORIGIN 'static' is the configuration's: an ip_guard
port's allowed_ips with its allowed_macs (when it has one), and the EUI-64
link-local address of each of its allowed_macs, in every VLAN the port
carries; AGE is then how long ago the entry was written. ORIGIN 'learned'
is what a neigh_suppress bridge learned from its ports' ARP, neighbour
discovery and DHCP (DHCPACK, DHCPv6 REPLY), each claim checked against its port (docs/security.md,
"Learned neighbours"); AGE is how long ago a frame last claimed it, and it
goes after the bridge's neigh_aging or when its MAC leaves its port. ORIGIN
'remote' is an overlay's, from other sites' EVPN routes, with the VTEP.
Only the ports that forward have entries. A request for an address the table does not
hold, a gratuitous ARP, an ARP probe (sender 0.0.0.0) and a duplicate
address detection solicitation (source ::) are flooded as before.`,
		Example: `  trestle neigh show
  trestle neigh show br0
  trestle neigh show br0 --json`,
		Args: nargs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ns []ctl.NeighEntry
			if err := e.call(ctl.Request{Cmd: ctl.CmdNeighShow, Bridge: first(args)}, &ns); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(ctl.List[ctl.NeighEntry](ns))
			}
			e.plainText()
			tw := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "BRIDGE\tIP\tMAC\tVLAN\tPORT\tORIGIN\tAGE")
			for _, n := range ns {
				origin := n.Origin
				if n.VTEP != "" {
					origin += " " + n.VTEP
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%.0fs\n", n.Bridge, n.IP, n.MAC, n.VLAN, n.Port, origin, n.AgeSeconds)
			}
			return tw.Flush()
		},
	}
	show.Flags().BoolVar(&e.json, "json", false, "print JSON")
	c.AddCommand(show)
	return c
}
