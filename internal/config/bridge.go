package config

import (
	"fmt"
	"slices"
	"time"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Bridge is one learning switch.
type Bridge struct {
	Name       string
	Aging      time.Duration // how long a learned entry lives without traffic
	MaxEntries int           // FDB capacity
	Ports      []Port
	Static     []Static
	Mirrors    []Mirror
	// The filter stage (issue 14): key filter turns it on; Rules are the
	// [[bridge.rule]] tables in order, kept and checked while it is off;
	// DefaultBlock is key default "block" (a frame no rule matches is
	// dropped) rather than "pass".
	Filter       bool
	Rules        []Rule
	DefaultBlock bool
	// Established connections its keep_state rules may hold (issue 29):
	// the bridge's, and those opened from one of its ports.
	MaxStates, MaxPortStates int
	// NeighSuppress: the switch answers ARP requests and neighbour
	// solicitations for the addresses its neighbour table holds
	// (Port.Neighbours, and those learned from its ports' ARP, ND and
	// DHCP), and floods them no more. A learned entry lives NeighAging
	// without a frame that claims it; a port holds at most
	// MaxNeighsPerPort learned entries.
	NeighSuppress    bool
	NeighAging       time.Duration
	MaxNeighsPerPort int
	// LoopDetect: the daemon sends a probe out of each port every second
	// and blocks a port that hears one of the bridge's own; LoopRetry is
	// how long such a port stays blocked before it is tried again.
	LoopDetect bool
	// MulticastSnooping: IGMP and MLD build a group table, and multicast
	// to a group with members goes to them and the router ports only.
	MulticastSnooping bool
	// MulticastQuerier: the bridge sends IGMP and MLD general queries
	// while it hears no other querier (it needs MulticastSnooping), every
	// MulticastQueryInterval.
	MulticastQuerier       bool
	MulticastQueryInterval time.Duration
	LoopRetry              time.Duration
	// MACMoveLimit: an address that moves more than this many times within
	// MACMoveWindow (between its ports, or between a port and the fabric)
	// is frozen where it was for the window; 0: never frozen.
	MACMoveLimit  int
	MACMoveWindow time.Duration
	Line          int // line of the [[bridge]] header
}

// SpanPort returns the mirror a port is the span port of, or nil.
func (b *Bridge) SpanPort(name string) *Mirror {
	for i := range b.Mirrors {
		if b.Mirrors[i].To == name {
			return &b.Mirrors[i]
		}
	}
	return nil
}

// MirrorOf returns the mirror whose ports include name, or nil.
func (b *Bridge) MirrorOf(name string) *Mirror {
	for i := range b.Mirrors {
		if slices.Contains(b.Mirrors[i].Ports, name) {
			return &b.Mirrors[i]
		}
	}
	return nil
}

// VLANAware reports whether the bridge separates VLANs: any of its ports
// is an access port of a VLAN or a trunk.
func (b *Bridge) VLANAware() bool {
	for i := range b.Ports {
		if b.Ports[i].VLAN != 0 || b.Ports[i].IsTrunk() {
			return true
		}
	}
	return false
}

func (c *checker) bridges(v *value) []Bridge {
	if v == nil {
		c.errorf(0, "bridge", "at least one [[bridge]] is required")
		return nil
	}
	elems, ok := c.elements(v, "bridge")
	if ok && len(elems) == 0 {
		c.errorf(v.line, "bridge", "at least one [[bridge]] is required")
	}
	var out []Bridge
	var tables []*value       // each bridge's table
	var fields []string       // and its field
	names := map[string]int{} // name -> line where it was first used
	for i, t := range elems {
		field := fmt.Sprintf("bridge[%d]", i)
		if i == MaxBridges {
			c.errorf(t.line, field, "too many bridges: at most %d are allowed", MaxBridges)
		}
		if t.kind != unstable.Table {
			continue
		}
		b, patches := c.bridge(t, field)
		if b.Name != "" {
			line := t.vals["name"].line
			if prev, dup := names[b.Name]; dup {
				c.errorf(line, field+".name", "%q is already the name of the bridge at line %d", b.Name, prev)
			} else {
				names[b.Name] = line
				// Patches of a bridge without a name of its own are
				// left out: no peer could name it back.
				c.patches = append(c.patches, patches...)
			}
		}
		out = append(out, b)
		tables = append(tables, t)
		fields = append(fields, field)
	}
	c.patchGraph(names)
	c.stateRoom(tables, fields, out)
	return out
}

// stateRoom checks that the filtering bridges' max_states fit in the
// datapath's table of established connections together, so that each
// bridge's room is its own: a bridge that fills its share cannot take
// another's.
func (c *checker) stateRoom(tables []*value, fields []string, bridges []Bridge) {
	sum, line, field := 0, 0, "bridge"
	for i, b := range bridges {
		if !b.Filter {
			continue
		}
		sum += b.MaxStates
		if sum > MaxStatesAll && line == 0 {
			line, field = tables[i].line, fields[i]+".max_states"
			if v := tables[i].vals["max_states"]; v != nil {
				line = v.line
			}
		}
	}
	if sum > MaxStatesAll {
		c.errorf(line, field, "the filtering bridges' max_states add up to %d, over the %d established connections the datapath holds for all of them: lower max_states (default %d)",
			sum, MaxStatesAll, DefaultMaxStates)
	}
}

// bridgeTable is [[bridge]].
var bridgeTable = Table{
	Path:  "bridge",
	Array: true,
	Help:  "One learning switch; at least one. Its ports, static entries, mirrors and filter rules are the tables below, written after it.",
	Keys: []Key{
		{Name: "name", Kind: KindString, Form: "1 to 15 of A-Z a-z 0-9 _ . -, unique", Required: true, Example: `"br9"`,
			Help: "The bridge's name in every command and listing, and of its state pinned in the BPF filesystem."},
		{Name: "aging", Kind: KindDuration, Min: int64(minAging), Max: int64(maxAging), Default: `"300s"`, Example: `"5m"`,
			Help: "How long a learned entry lives without a frame from its station."},
		{Name: "max_entries", Kind: KindInt, Min: 1, Max: maxTableSize, Default: fmt.Sprint(DefaultMaxEntries), Example: "1024",
			Help: "Learned entries the bridge may hold (its FDB's size); the last sixteenth is kept for ports under their fair share (docs/security.md)."},
		{Name: "neigh_suppress", Kind: KindBool, Default: "false", Example: "true",
			Help: "Answer ARP requests and IPv6 neighbour solicitations for the addresses in the bridge's neighbour table (`trestle neigh show`: its ports' allowed_ips, each with the port's allowed_macs, and the addresses learned from its ports' ARP, neighbour discovery and DHCP) from the switch, out of the port they came in by, and flood them no more; as the Linux bridge's neigh_suppress (docs/switching.md, \"Neighbour suppression\")."},
		{Name: "neigh_aging", Kind: KindDuration, Min: int64(minAging), Max: int64(maxAging), Default: `"300s"`, Example: `"20m"`,
			Help: "How long a learned neighbour entry (neigh_suppress) lives without an ARP, neighbour discovery or DHCP frame that claims it; it also goes when its station's MAC leaves its port in the FDB. Until then no other station takes its address (docs/security.md)."},
		{Name: "max_neighs_per_port", Kind: KindInt, Min: 1, Max: MaxNeighsPerPort, Default: fmt.Sprint(DefaultMaxNeighsPerPort), Example: "8",
			Help: "Learned neighbour entries (neigh_suppress) one port's stations may hold; a claim beyond it is refused (event neigh_refused)."},
		{Name: "filter", Kind: KindBool, Default: "false", Example: "true",
			Help: "Turn the filter stage on (docs/filter.md); false keeps the rules, checked, and off."},
		{Name: "default", Kind: KindEnum, Values: []Value{{Name: ActionPass}, {Name: ActionBlock}}, why: ": what a frame no rule matches gets", Default: `"pass"`, Example: `"block"`,
			Help: "What the filter does with a frame no rule matches."},
		{Name: "max_states", Kind: KindInt, Min: 1, Max: int64(MaxStatesAll), Default: fmt.Sprint(DefaultMaxStates), Example: "4096",
			Help: fmt.Sprintf("Established connections the filter's keep_state rules may hold for this bridge (docs/filter.md); the filtering bridges' together at most %d. Beyond it, a connection still passes, held with those not yet established, which go first when that table is full.", MaxStatesAll)},
		{Name: "max_states_per_port", Kind: KindInt, Min: 1, Max: int64(MaxStatesAll), Default: fmt.Sprint(DefaultMaxPortStates), Example: "512",
			Help: "Established connections opened from one port of this bridge that it holds, at most (as max_states)."},
		{Name: "multicast_snooping", Kind: KindBool, Default: "false", Example: "true",
			Help: "Snoop IGMP (v2, v3) and MLD (v1, v2): multicast to a group that ports have joined goes to those ports and the multicast router ports only (`trestle mdb show`); groups without members, and link-local groups (224.0.0.0/24, ff02::/16), are flooded; as the Linux bridge's mcast_snooping (docs/switching.md, \"Multicast snooping\")."},
		{Name: "multicast_querier", Kind: KindBool, Default: "false", Example: "true",
			Help: "Send IGMPv3 and MLDv2 general queries into every VLAN of the bridge while no other querier is heard, so that hosts report their groups where no multicast router asks them; a query heard from a querier with a lower address (any address, for IGMP: the bridge's queries come from 0.0.0.0) silences it until that querier has been quiet for the other querier present interval. Needs multicast_snooping; as the Linux bridge's mcast_querier (docs/switching.md, \"Querier\")."},
		{Name: "multicast_query_interval", Kind: KindDuration, Min: int64(MinQueryInterval), Max: int64(MaxQueryInterval), Default: `"125s"`, Example: `"60s"`,
			Help: "How often multicast_querier sends general queries (RFC 3376's query interval; the first two come a quarter of it apart). The other timers follow it: the query response interval is 10 s or half this, whichever is shorter, and another querier silences the bridge's for twice this plus half the response interval."},
		{Name: "loop_detect", Kind: KindBool, Default: "false", Example: "true",
			Help: "Detect loops outside the switch (two ports joined by a cable, or by a VM that bridges its interfaces): the daemon sends a small probe (EtherType 0x9000, the loopback protocol's) out of each port every second, and a port that hears one of the bridge's own back is blocked (state blocked, why loop) until loop_retry has passed (docs/switching.md)."},
		{Name: "loop_retry", Kind: KindDuration, Min: int64(time.Second), Max: int64(maxAging), Default: `"60s"`, Example: `"5m"`,
			Help: "How long loop_detect keeps a port blocked before it lets it forward again; a loop still there blocks it again within a second."},
		{Name: "mac_move_limit", Kind: KindInt, Min: 0, Max: 1000000, Default: fmt.Sprint(DefaultMACMoveLimit), Example: "10",
			Help: "Freeze an address that moves between ports (or between a port and an overlay's fabric) more than this many times within mac_move_window: it is held as a static entry on the port it was on before the moves began (event mac_frozen; `trestle fdb show` marks it frozen), so frames with it as source from elsewhere are dropped (src_static), until the window has passed again or `trestle fdb del` releases it; 0 never freezes (docs/switching.md, \"MAC mobility\")."},
		{Name: "mac_move_window", Kind: KindDuration, Min: int64(time.Second), Max: int64(maxAging), Default: `"180s"`, Example: `"10m"`,
			Help: "The window mac_move_limit counts an address's moves in, and how long a frozen address stays frozen."},
		{Name: "port", Kind: KindTables, Form: "[[bridge.port]] tables, none or more", Help: "The bridge's ports. A bridge may have none in the file: it then takes only the ports added at run time (`trestle port add`, the CNI plugin, the QEMU scripts; docs/run-time-ports.md)."},
		{Name: "static", Kind: KindTables, Form: "[[bridge.static]] tables", Help: "Static FDB entries."},
		{Name: "mirror", Kind: KindTables, Form: "[[bridge.mirror]] tables", Help: "Port mirrors."},
		{Name: "rule", Kind: KindTables, Form: fmt.Sprintf("[[bridge.rule]] tables, at most %d", MaxRules), Help: "The filter's rules, in order: the first that matches decides."},
	},
}

// bridge checks one bridge, and returns it with its patch ports for the
// checks across bridges.
func (c *checker) bridge(t *value, field string) (Bridge, []*patchPort) {
	b := Bridge{Aging: DefaultAging, MaxEntries: DefaultMaxEntries, MaxStates: DefaultMaxStates, MaxPortStates: DefaultMaxPortStates, LoopRetry: DefaultLoopRetry,
		MulticastQueryInterval: DefaultQueryInterval, MACMoveLimit: DefaultMACMoveLimit, MACMoveWindow: DefaultMACMoveWindow,
		NeighAging: DefaultNeighAging, MaxNeighsPerPort: DefaultMaxNeighsPerPort, Line: t.line}
	var ports, statics, mirrors, rules *value
	querierLine := 0
	c.walk(t, field, &bridgeTable, func(k *Key, v *value, f string, x leaf, ok bool) {
		switch k.Name {
		case "name":
			if s, ok := c.str(v, f); ok {
				if validBridgeName(s) {
					b.Name = s
				} else {
					c.errorf(v.line, f, "%q is not a valid bridge name: use 1 to %d of A-Z a-z 0-9 _ . -", s, maxNameLen)
				}
			}
		case "aging":
			if ok {
				b.Aging = x.d
			}
		case "max_entries":
			if ok {
				b.MaxEntries = int(x.n)
			}
		case "filter":
			if ok {
				b.Filter = x.b
			}
		case "neigh_suppress":
			b.NeighSuppress = ok && x.b
		case "neigh_aging":
			if ok {
				b.NeighAging = x.d
			}
		case "max_neighs_per_port":
			if ok {
				b.MaxNeighsPerPort = int(x.n)
			}
		case "default":
			b.DefaultBlock = ok && x.s == ActionBlock
		case "max_states":
			if ok {
				b.MaxStates = int(x.n)
			}
		case "max_states_per_port":
			if ok {
				b.MaxPortStates = int(x.n)
			}
		case "loop_detect":
			b.LoopDetect = ok && x.b
		case "multicast_snooping":
			b.MulticastSnooping = ok && x.b
		case "multicast_querier":
			b.MulticastQuerier = ok && x.b
			if b.MulticastQuerier {
				querierLine = v.line
			}
		case "multicast_query_interval":
			if ok {
				b.MulticastQueryInterval = x.d
			}
		case "loop_retry":
			if ok {
				b.LoopRetry = x.d
			}
		case "mac_move_limit":
			if ok {
				b.MACMoveLimit = int(x.n)
			}
		case "mac_move_window":
			if ok {
				b.MACMoveWindow = x.d
			}
		case "rule":
			rules = v
		case "port":
			ports = v
		case "static":
			statics = v
		case "mirror":
			mirrors = v
		}
	})
	c.required(t, field, &bridgeTable)
	if b.MulticastQuerier && !b.MulticastSnooping {
		// The querier steps back for another by what snooping hears,
		// and its queries' answers are only of use to a snooping bridge.
		c.errorf(querierLine, field+".multicast_querier", "needs multicast_snooping = true: the querier's election and the reports it asks for are the snooping's")
	}
	// How messages name this bridge: by name when it has a valid one.
	label := field
	if b.Name != "" {
		label = "bridge " + b.Name
	}

	// Ports come before static entries whatever the file order, because
	// static entries refer to them, and whether the bridge is VLAN-aware
	// is known only once every port is.
	bp := &bridgePorts{label: label, index: map[string]int{}}
	var sites []portSite
	b.Ports, bp.vlans, sites = c.ports(t, ports, field, label)
	bp.aware = slices.ContainsFunc(bp.vlans, func(v portVLANs) bool { return v.set })
	bp.ports = b.Ports
	var patches []*patchPort
	for i := range b.Ports {
		p := &b.Ports[i]
		if bp.aware && !bp.vlans[i].set {
			p.VLAN = 1
		}
		if qv, ok := sites[i].t.vals["qinq"]; ok && p.Has(flagQinQ) && !bp.aware {
			c.errorf(qv.line, sites[i].field+".qinq", "is for access ports of a VLAN-aware bridge, and %s is not one: set vlan too", label)
		}
		c.portNames(bp, sites, i)
		if p.IsPatch() && validBridgeName(p.Patch) {
			patches = append(patches, &patchPort{
				from: b.Name, peer: p.Patch,
				field: sites[i].field + ".patch", line: sites[i].t.vals["patch"].line,
				ok: sites[i].ok, aware: bp.aware, port: p,
			})
		}
	}
	c.overlayVLANs(bp, sites)
	if statics != nil {
		elems, _ := c.elements(statics, field+".static")
		seen := map[string]int{} // "mac/vlan" -> line of the entry's mac
		for i, st := range elems {
			if st.kind == unstable.Table {
				b.Static = append(b.Static, c.static(st, fmt.Sprintf("%s.static[%d]", field, i), bp, seen))
			}
		}
	}
	if mirrors != nil {
		elems, _ := c.elements(mirrors, field+".mirror")
		for i, mt := range elems {
			if mt.kind == unstable.Table {
				b.Mirrors = append(b.Mirrors, c.mirror(mt, fmt.Sprintf("%s.mirror[%d]", field, i), bp, b.Mirrors, sites))
			}
		}
	}
	if rules != nil {
		elems, _ := c.elements(rules, field+".rule")
		if len(elems) > MaxRules {
			c.errorf(rules.line, field+".rule", "%d rules: at most %d a bridge", len(elems), MaxRules)
		}
		for i, rt := range elems {
			if rt.kind == unstable.Table && i < MaxRules {
				b.Rules = append(b.Rules, c.rule(rt, fmt.Sprintf("%s.rule[%d]", field, i), bp))
			}
		}
	}
	for i := range b.Ports {
		if v, ok := sites[i].t.vals["allowed_macs"]; ok {
			if why := b.BindConflict(&b.Ports[i]); why != "" {
				c.errorf(v.line, sites[i].field+".allowed_macs", "%s", why)
			}
		}
	}
	c.spanStatics(&b, statics, field)
	c.countVLANs(&b, t, field, label)
	return b, patches
}

// portNames enters the names of port i of a bridge into bp.index, and
// reports a name that an earlier port has already: interfaces and patch
// ports share one namespace per bridge, the one static entries, show and
// fdb use. Two interface ports with one interface are reported already, by
// port, and two patches with one default name are two patches to the same
// peer, which patchGraph reports.
func (c *checker) portNames(bp *bridgePorts, sites []portSite, i int) {
	p, site := &bp.ports[i], &sites[i]
	type named struct {
		name   string
		line   int
		field  string
		isPort bool // an interface, not a patch port's name
		dflt   bool // a patch port's default name
	}
	var names []named
	if p.Interface != "" {
		if iv, ok := site.t.vals["interface"]; ok {
			names = append(names, named{p.Interface, iv.line, site.field + ".interface", true, false})
		} else if vx, ok := site.t.vals["vxlan"]; ok {
			// An overlay port is named by its device.
			names = append(names, named{p.Interface, vx.line, site.field + ".vxlan", true, false})
		}
	}
	if p.IsPatch() && p.Name != "" {
		n := named{name: p.Name, field: site.field + ".name", line: site.t.line, dflt: true}
		if v, ok := site.t.vals["name"]; ok {
			n.line, n.dflt = v.line, false
		}
		names = append(names, n)
	}
	for _, n := range names {
		j, dup := bp.index[n.name]
		if !dup {
			bp.index[n.name] = i
			continue
		}
		q, qsite := &bp.ports[j], &sites[j]
		prevIface := q.Interface == n.name
		_, prevNamed := qsite.t.vals["name"]
		prevLine := qsite.t.line
		switch {
		case prevIface && qsite.t.vals["interface"] != nil:
			prevLine = qsite.t.vals["interface"].line
		case prevIface:
			prevLine = qsite.t.vals["vxlan"].line
		case prevNamed:
			prevLine = qsite.t.vals["name"].line
		}
		switch {
		case n.isPort && prevIface:
			continue
		case n.dflt && !prevIface && !prevNamed:
			continue
		case n.dflt:
			c.errorf(n.line, n.field, "the default name %q is already the name of a port of %s at line %d; set name", n.name, bp.label, prevLine)
		default:
			c.errorf(n.line, n.field, "%q is already the name of a port of %s at line %d", n.name, bp.label, prevLine)
		}
		site.ok = false
	}
}

// countVLANs adds the VLANs of bridge b to the total of all bridges, and
// reports the bridge that takes it over what the datapath holds.
func (c *checker) countVLANs(b *Bridge, t *value, field, label string) {
	var carried [maxVLAN + 1]bool
	n := 0
	for i := range b.Ports {
		p := &b.Ports[i]
		add := func(vid uint16) {
			if int(vid) < len(carried) && !carried[vid] {
				carried[vid] = true
				n++
			}
		}
		for _, vid := range p.Trunk {
			add(vid)
		}
		if p.VLAN != 0 {
			add(p.VLAN)
		}
	}
	before := c.totalVLANs
	c.totalVLANs += n
	if before <= MaxVLANs && c.totalVLANs > MaxVLANs {
		c.errorf(t.line, field, "%s brings the VLANs of all bridges to %d; the datapath holds %d", label, c.totalVLANs, MaxVLANs)
	}
}

// bridgePorts is what static entries of one bridge are checked against.
type bridgePorts struct {
	label string // how messages name the bridge
	aware bool
	ports []Port
	vlans []portVLANs    // parallel to ports
	index map[string]int // PortName (and interface) -> index of the first port that has it
}
