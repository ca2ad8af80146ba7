package lab

// Multicast groups on a DUT (Needs.Multicast, Topo.Multicast): the DUT's
// bridges snoop IGMP and MLD, or, in a DUT's nosnoop variant, do not, so
// that every group floods; and a DUT's group table, which the multicast
// kind waits on before it measures (Snooper). trestle snoops with
// multicast_snooping; the Linux bridge with mcast_snooping and its own
// querier (without a querier heard it floods every group, snooping or
// not: br_multicast_querier_exists).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/ctl"
)

// Multicast is what the multicast kind asks of the DUT's bridges.
type Multicast struct {
	// Snoop: IGMP and MLD snooping on; off, every group floods (the
	// nosnoop variant, the baseline).
	Snoop bool
}

// Membership is a port's membership of a group in a DUT's group table.
type Membership struct {
	Group string // "239.1.1.1", as the table writes it
	Port  string // the DUT's interface: "p2"
}

// Snooper is a DUT whose bridges can snoop IGMP and MLD (Topo.Multicast).
type Snooper interface {
	// Snooping says how the DUT snoops, or that it floods, for the record.
	Snooping(m Multicast) string
	// Memberships are the group table's memberships now (none while the
	// DUT does not snoop).
	Memberships(ctx context.Context, t *Topo) ([]Membership, error)
}

// Snooping: multicast_snooping on every bridge, or not.
func (d *trestleDUT) Snooping(m Multicast) string {
	if !m.Snoop {
		return "multicast_snooping = false (the default): every group's frames are flooded to every port"
	}
	return "multicast_snooping = true on every bridge: the hosts' IGMP and MLD reports build the group table (trestle mdb show), a group's frames go to its members and the router ports; no querier"
}

// Memberships: `trestle mdb show --json`, router ports left out.
func (d *trestleDUT) Memberships(_ context.Context, _ *Topo) ([]Membership, error) {
	var ms []ctl.MDBEntry
	if err := ctl.Call(d.sock, ctl.Request{Cmd: ctl.CmdMDBShow}, &ms); err != nil {
		return nil, fmt.Errorf("trestle mdb show: %w", err)
	}
	var out []Membership
	for _, m := range ms {
		if !m.Router {
			out = append(out, Membership{Group: m.Group, Port: m.Port})
		}
	}
	return out, nil
}

// Snooping: mcast_snooping with the bridge's own querier, or snooping off.
func (b *linuxBridge) Snooping(m Multicast) string {
	if !m.Snoop {
		return "mcast_snooping 0: every group's frames are flooded to every port"
	}
	return fmt.Sprintf("mcast_snooping 1, mcast_querier 1 (the bridge's own IGMP and MLD querier: without a querier, the Linux bridge floods every group whatever its table holds; IPv6 on the bridge, which its MLD querier needs), "+
		"mcast_query_response_interval %v (the kernel's least: a querier that starts floods that long first; the lab waits it out); the group table from the hosts' reports (bridge mdb show)", querierDelay)
}

// querierDelay is the Linux bridge's query response interval as the lab
// sets it, the kernel's least (1 s; its default is 10 s): a bridge whose
// querier starts waits that long (the other querier's delay timer,
// br_multicast_set_querier) before it takes its own querier for one, and
// floods every group until then.
const querierDelay = time.Second

// snoopArgs are the `ip link set BRIDGE type bridge` arguments of m, in
// turn: the querier comes on by a command of its own, after the response
// interval it reads (the kernel takes one command's attributes in an
// order of its own).
func (m Multicast) snoopArgs() [][]string {
	if !m.Snoop {
		return [][]string{{"mcast_snooping", "0"}}
	}
	cs := fmt.Sprint(int(querierDelay / (10 * time.Millisecond)))
	return [][]string{{"mcast_snooping", "1", "mcast_query_response_interval", cs}, {"mcast_querier", "1"}}
}

// setSnooping sets m on every bridge of t (the Linux bridge's Setup).
func (b *linuxBridge) setSnooping(ctx context.Context, t *Topo) error {
	for _, br := range t.Bridges {
		if t.Multicast.Snoop {
			// Its MLD querier counts only with an IPv6 address on the
			// bridge (br_multicast_querier_exists), which the lab's
			// namespaces have off.
			for _, kv := range [][2]string{{"accept_dad", "0"}, {"disable_ipv6", "0"}} {
				if err := t.DUT.Sysctl("net/ipv6/conf/"+br.Name+"/"+kv[0], kv[1]); err != nil {
					return fmt.Errorf("IPv6 on %s, for its MLD querier: %w", br.Name, err)
				}
			}
		}
		for _, set := range t.Multicast.snoopArgs() {
			args := append([]string{"link", "set", br.Name, "type", "bridge"}, set...)
			if _, err := t.DUT.Run(ctx, "ip", args...); err != nil {
				return fmt.Errorf("multicast snooping on %s: %w", br.Name, err)
			}
		}
	}
	b.set["multicast"] = b.Snooping(*t.Multicast)
	if t.Multicast.Snoop {
		SleepCtx(ctx, querierDelay+100*time.Millisecond) // the querier's delay, which floods
	}
	return ctx.Err()
}

// Memberships: `bridge -j mdb show` in the DUT.
func (b *linuxBridge) Memberships(ctx context.Context, t *Topo) ([]Membership, error) {
	out, err := t.DUT.Run(ctx, "bridge", "-j", "mdb", "show")
	if err != nil {
		return nil, fmt.Errorf("bridge mdb show in %s: %w", t.DUT.Name, err)
	}
	return parseBridgeMDB(out)
}

// parseBridgeMDB reads `bridge -j mdb show`: one object a bridge, with
// its entries under "mdb" (a port's membership: port, grp).
func parseBridgeMDB(out string) ([]Membership, error) {
	var brs []struct {
		MDB []struct {
			Port string `json:"port"`
			Grp  string `json:"grp"`
		} `json:"mdb"`
	}
	if len(out) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(out), &brs); err != nil {
		return nil, fmt.Errorf("bridge -j mdb show: %w: %s", err, FirstLine(out))
	}
	var ms []Membership
	for _, br := range brs {
		for _, e := range br.MDB {
			ms = append(ms, Membership{Group: e.Grp, Port: e.Port})
		}
	}
	return ms, nil
}

// Snooping: mcast_snooping_enable on every bridge, or not.
func (o *ovsDUT) Snooping(m Multicast) string {
	if !m.Snoop {
		return "mcast_snooping_enable=false (the default): every group's frames are flooded to every port"
	}
	return "mcast_snooping_enable=true on every bridge (no querier: Open vSwitch has none): the hosts' IGMP and MLD reports build the group table (ovs-appctl mdb/show), a group's frames go to its members and the router ports; unregistered groups flooded"
}

// setSnooping sets m on every bridge of t (Open vSwitch's Setup).
func (o *ovsDUT) setSnooping(ctx context.Context, t *Topo) error {
	for _, br := range t.Bridges {
		if _, err := o.vsctl(ctx, t, "set", "bridge", br.Name, fmt.Sprintf("mcast_snooping_enable=%v", t.Multicast.Snoop)); err != nil {
			return fmt.Errorf("multicast snooping on %s: %w", br.Name, err)
		}
	}
	o.set["multicast"] = o.Snooping(*t.Multicast)
	return nil
}

// Memberships: `ovs-appctl mdb/show` of every bridge, its ports named.
func (o *ovsDUT) Memberships(ctx context.Context, t *Topo) ([]Membership, error) {
	names, err := o.vsctl(ctx, t, "--format=csv", "--no-headings", "--columns=ofport,name", "list", "interface")
	if err != nil {
		return nil, err
	}
	var ms []Membership
	for _, b := range t.Bridges {
		out, err := o.appctl(ctx, "mdb/show", b.Name)
		if err != nil {
			return nil, fmt.Errorf("ovs-appctl mdb/show %s: %w", b.Name, err)
		}
		ms = append(ms, parseOVSMDB(out, ovsPortNames(names, b.Ports))...)
	}
	return ms, nil
}

// parseOVSMDB reads `ovs-appctl mdb/show` (" port  VLAN  GROUP  Age"; a
// router port's row has "querier" for its group), ports by OpenFlow
// number named by byNum.
func parseOVSMDB(out string, byNum map[string]string) []Membership {
	var ms []Membership
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] == "port" {
			continue
		}
		if _, err := netip.ParseAddr(f[2]); err != nil {
			continue
		}
		port := f[0]
		if name, ok := byNum[port]; ok {
			port = name
		}
		ms = append(ms, Membership{Group: f[2], Port: port})
	}
	return ms
}

// CheckSnoop refuses @nosnoop in a scenario whose kinds ask no bridge to
// snoop: it would change nothing there.
func (s Scenario) CheckSnoop() error {
	if s.needs().Multicast {
		return nil
	}
	for _, v := range s.DUTs {
		if v.NoSnoop {
			return fmt.Errorf("DUT %q: @nosnoop turns off the snooping the multicast scenario turns on, and %s has no multicast test: measure it in the multicast scenario", v.Text, s.Name)
		}
	}
	return nil
}
