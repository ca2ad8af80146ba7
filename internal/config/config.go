// Package config reads and validates the TOML file given to `trestle run
// --config FILE`.
//
// The contract: Load and Parse either return a complete *Config, with every
// default filled in and every rule checked, or a nil *Config and an Errors
// value listing every problem found, sorted by line. Each problem reads
// "FILE:LINE: FIELD: MSG", where FIELD is the TOML path with array indices
// (bridge[0].port[1].mode) and LINE is the line of that key, or of its table
// header when the key is missing. Nothing partial is ever returned, so the
// daemon can check a new file completely before it applies any of it, and
// keep its running state when the file is rejected.
//
// The file looks like this; only bridge.name and, in each port, interface
// or patch are required:
//
//	[daemon]
//	socket = "/run/trestle/trestle.sock"
//	persist = true        # the datapath outlives the daemon (pinned)
//	metrics = "127.0.0.1:9470"  # Prometheus endpoint (/metrics); off unless set
//
//	[[bridge]]
//	name = "br0"          # 1..15 of A-Z a-z 0-9 _ . -, unique
//	aging = "300s"        # Go duration, 1s..24h
//	max_entries = 65536   # FDB size, 1..16777216
//
//	[[bridge.port]]
//	interface = "veth-a"  # each interface in one port of one bridge only
//	mode = "auto"         # or "xdp" or "tc"
//	max_macs = 100        # MACs learned on this port, 0 = unlimited
//	mac_limit_action = "drop"  # or "forward": new sources at max_macs pass unlearned
//	learning = true       # false: no source learned on it
//	protected = false     # true: no frame to or from another protected port
//	flood = true          # false: no unknown unicast flooded out of it;
//	mcast_flood = true    # no multicast;
//	bcast_flood = true    # no broadcast
//	storm = { broadcast = 1000, multicast = 5000, unknown_unicast = 1000 }
//	                      # storm control: floods a second its host may send
//	vlan = 10             # access port of VLAN 10 (1..4094): untagged and
//	                      # priority-tagged frames join it; it leaves untagged
//
//	[[bridge.port]]
//	interface = "veth-b"
//	trunk = [10, 20, "100-199"]  # trunk: frames of these VLANs pass tagged
//	native = 10                  # optional, one of trunk: untagged frames
//	                             # join it, and it leaves untagged
//
//	[[bridge.port]]
//	patch = "br1"         # instead of interface: a patch port to bridge br1,
//	                      # which declares one back; no mode
//	name = "to-br1"       # optional, "patch-" + peer by default; the port's
//	                      # name in show, fdb, stats and static entries
//
//	[[bridge.mirror]]
//	name = "tap0"         # unique in the bridge
//	ports = ["veth-a"]    # mirrored ports with an interface, one mirror each
//	direction = "both"    # or "in" (what they receive), "out" (what they send)
//	to = "veth-c"         # the span port: a port of this bridge, not mirrored
//	vlans = [10]          # optional, VLAN-aware bridges: only these VLANs
//
//	[[bridge.static]]
//	mac = "02:00:00:00:00:01"  # unicast, not zero
//	port = "veth-a"            # a port of the same bridge: its interface,
//	                           # or a patch port's name
//	vlan = 10                  # see below
//
//	[[bridge]]
//	name = "br1"
//
//	[[bridge.port]]
//	patch = "br0"         # both sides declare the pair, as Open vSwitch's
//	                      # peer option does
//
// A bridge is VLAN-aware when any of its ports sets vlan or trunk. Its other
// ports are then access ports of VLAN 1, and each static entry belongs to a
// VLAN its port carries: vlan when set, else the port's untagged VLAN (its
// access VLAN, or the native VLAN of a trunk; a trunk without one needs vlan).
// A port sets vlan or trunk, not both, and no VLAN is listed twice in a
// trunk. In a bridge that is not VLAN-aware, frames pass whatever their tags
// and a static entry's vlan is 0 (untagged, the default) .. 4094. The VLANs
// of all bridges together, counted once per bridge, are at most MaxVLANs.
//
// Patch ports join bridges in one datapath, and trestle runs no spanning
// tree, so the patches must form a forest: each peer is another bridge that
// declares one patch back, two bridges are joined by one patch at most, no
// patches close a cycle, and no chain of bridges joined by patches is longer
// than MaxPatchChain. A port's name (its interface, or a patch port's name)
// is unique in its bridge. A patch port follows the VLAN rules of any port.
//
// Unknown keys and tables are errors, so a typo is never silently ignored.
// The filter stage is not built yet: its rules ([[bridge.rule]], default)
// are checked and kept (rule.go), and filter = true is rejected with a
// message that says so, rather than forwarding unfiltered.
package config

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2/unstable"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/mode"
)

// Defaults and limits.
const (
	DefaultSocket     = "/run/trestle/trestle.sock"
	DefaultAging      = 300 * time.Second
	DefaultMaxEntries = 65536
	// The datapath's limits, from bpf/types.h through its bindings.
	MaxBridges        = tbpf.MaxBridges     // bridge ids 1..64
	MaxPortsPerBridge = tbpf.MaxBridgePorts // ports of one bridge
	MaxPorts          = tbpf.MaxPorts - 1   // all bridges together: slot 0 is no port
	MaxVLANs          = tbpf.MaxVLANs       // distinct (bridge, VLAN) pairs of all bridges together
	// A port's mac_limit_action.
	LimitDrop    = "drop"
	LimitForward = "forward"

	// Bridges a frame may cross through patch ports in one program run
	// (issue 12): the longest chain of bridges joined by patches.
	MaxPatchChain = 16
)

// Limits of single values.
const (
	minAging      = time.Second
	maxAging      = 24 * time.Hour
	maxTableSize  = 1 << 24 // max_entries and max_macs
	maxVLAN       = 4094
	maxNameLen    = tbpf.NameLen - 1 // IFNAMSIZ-1; bridge names follow interface names, and are kept in the datapath
	maxSocketPath = 107              // sizeof(sun_path)-1: longer paths cannot be bound
)

// Config is a validated configuration file.
type Config struct {
	File    string // path as given
	Daemon  Daemon
	Bridges []Bridge // in file order
}

// Daemon holds settings of the daemon process.
type Daemon struct {
	Socket string // DefaultSocket when the file has none
	// Persist pins the datapath, so that it keeps forwarding when the
	// daemon exits, and a new daemon adopts it.
	Persist bool
	// Metrics is the address (host:port) of the Prometheus endpoint;
	// "" for none.
	Metrics string
}

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
	Line         int // line of the [[bridge]] header
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

// Port attaches one interface to a bridge, or is a patch port joining the
// bridge to another one (Patch set), with no interface. On a VLAN-aware
// bridge it is either an access port (VLAN set) or a trunk (Trunk set); on
// other bridges VLAN, Trunk and Native are all zero. Patch ports follow the
// same VLAN rules as the others.
type Port struct {
	Interface string    // "" for a patch port
	Mode      mode.Mode // auto, xdp or tc; auto for a patch port, which has none
	MaxMACs   int       // key max_macs; 0 = unlimited
	// Key learning (default true): false learns no address on the port;
	// its frames are still forwarded, and frames to the stations behind it
	// flood.
	NoLearning bool
	// Key mac_limit_action: what a frame from a new source gets when the
	// port is at max_macs: dropped ("drop", the default: port security),
	// or forwarded without its source learned ("forward", LimitForward
	// true: the Linux bridge's way).
	LimitForward bool
	// Key protected: the port exchanges no frame (unicast or flood) with
	// another protected port of its bridge; it does with the others.
	Protected bool
	// Keys flood, mcast_flood, bcast_flood (default true): false keeps
	// unknown unicast, multicast, broadcast floods off the port; known
	// unicast still reaches it.
	NoFlood, NoMcastFlood, NoBcastFlood bool
	// Key patch: the peer bridge, which has a patch port back to this
	// one; "" for an interface port.
	Patch string
	// Key name: a patch port's name, "patch-" + Patch by default; unique
	// among the names of the bridge's ports, interfaces included. "" for
	// an interface port.
	Name string
	// Key vlan: the access VLAN, which untagged and priority-tagged frames
	// join and which leaves the port untagged. 1 by default on a VLAN-aware
	// bridge; 0 on a trunk or on a bridge that is not VLAN-aware.
	VLAN uint16
	// Key trunk: every VID carried tagged, expanded from ranges, sorted,
	// unique; nil when the port is not a trunk.
	Trunk []uint16
	// Key native: the VLAN untagged frames on a trunk join, and which
	// leaves it untagged; one of Trunk. 0 = none: untagged frames are dropped.
	Native uint16
	// Key storm: storm control, the frames a second of each kind of flood
	// the port's ingress accepts (0: no limit); the excess is dropped.
	Storm Storm
	Line  int // line of the [[bridge.port]] header
}

// Storm is a port's storm control: frames a second of broadcast,
// multicast and unknown unicast (keys broadcast, multicast,
// unknown_unicast of the inline table); 0 is no limit.
type Storm struct {
	Broadcast, Multicast, UnknownUnicast int
}

// Any says whether any kind is limited.
func (s Storm) Any() bool { return s != Storm{} }

// Mirror is one [[bridge.mirror]]: copies of what Ports receive (In)
// and what the bridge sends out of them (Out) go to the span port To, a
// port of the same bridge that receives the copies and nothing else.
type Mirror struct {
	Name    string
	Ports   []string // port names, in file order
	In, Out bool     // key direction: "in", "out" or "both" (the default)
	To      string
	VLANs   []uint16 // key vlans: only frames of these VLANs (VLAN-aware bridges); nil: all
	Line    int      // line of the [[bridge.mirror]] header
}

// Direction is the mirror's direction as the file writes it.
func (m *Mirror) Direction() string {
	switch {
	case m.In && m.Out:
		return "both"
	case m.In:
		return "in"
	default:
		return "out"
	}
}

// IsPatch reports whether the port is a patch port to another bridge.
func (p *Port) IsPatch() bool { return p.Patch != "" }

// PortName returns what show, fdb, stats and static entries call the port:
// its interface, or a patch port's Name.
func (p *Port) PortName() string {
	if p.IsPatch() {
		return p.Name
	}
	return p.Interface
}

// IsTrunk reports whether the port carries tagged VLANs.
func (p *Port) IsTrunk() bool { return len(p.Trunk) > 0 }

// PVID returns the VLAN untagged frames join: the access VLAN, or a trunk's
// native VLAN. 0 for a trunk without one, and on a bridge that is not
// VLAN-aware.
func (p *Port) PVID() uint16 {
	if p.IsTrunk() {
		return p.Native
	}
	return p.VLAN
}

// Carries reports whether frames of VLAN vid may enter and leave the port.
func (p *Port) Carries(vid uint16) bool {
	if p.IsTrunk() {
		_, found := slices.BinarySearch(p.Trunk, vid)
		return found
	}
	return vid == p.VLAN
}

// VLANs returns every VID the port carries, sorted; nil on a bridge that is
// not VLAN-aware.
func (p *Port) VLANs() []uint16 {
	switch {
	case p.IsTrunk():
		return slices.Clone(p.Trunk)
	case p.VLAN != 0:
		return []uint16{p.VLAN}
	}
	return nil
}

// VLANRanges writes VIDs in the compact form of messages and listings,
// runs of consecutive VIDs as ranges: "10,20,100-199"; "" for none. The
// input need not be sorted or unique.
func VLANRanges(vids []uint16) string {
	vids = slices.Clone(vids)
	slices.Sort(vids)
	vids = slices.Compact(vids)
	var b strings.Builder
	for i := 0; i < len(vids); {
		j := i
		for j+1 < len(vids) && vids[j+1] == vids[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j == i {
			fmt.Fprintf(&b, "%d", vids[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", vids[i], vids[j])
		}
		i = j + 1
	}
	return b.String()
}

// Static is an FDB entry that is never learned over nor aged out.
type Static struct {
	MAC  net.HardwareAddr // 6-byte unicast, non-zero
	Port string           // PortName of a port of the same bridge
	// The entry's VLAN. On a VLAN-aware bridge 1..4094, one its port
	// carries, and the port's PVID when the file has none; elsewhere 0 =
	// untagged.
	VLAN uint16
	Line int // line of the [[bridge.static]] header
}

// Error is one problem in a config file.
type Error struct {
	File  string
	Line  int    // 0 when the problem is with the file as a whole
	Field string // TOML path such as bridge[0].port[1].mode; "" for syntax errors
	Msg   string
}

// Error returns "FILE:LINE: FIELD: MSG", leaving out LINE when it is 0 and
// FIELD when it is empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a file, in line order.
type Errors []*Error

// Error returns one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Load reads and parses the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err) // *PathError names the path
	}
	return Parse(path, data)
}

// Parse parses and validates data; file is used only in messages and as
// Config.File. On failure the error is an Errors.
func Parse(file string, data []byte) (*Config, error) {
	root, serr := parseTOML(data)
	if serr != nil {
		return nil, Errors{{File: file, Line: serr.line, Msg: "invalid TOML: " + serr.msg}}
	}
	c := &checker{file: file, ifaces: map[string]portRef{}}
	cfg := &Config{File: file, Daemon: Daemon{Socket: DefaultSocket}}
	var bridges *value
	for _, k := range root.keys {
		switch v := root.vals[k]; k {
		case "daemon":
			c.daemon(v, &cfg.Daemon)
		case "bridge":
			bridges = v
		default:
			c.unknown(v, keyName(k))
		}
	}
	cfg.Bridges = c.bridges(bridges)
	if len(c.errs) > 0 {
		slices.SortStableFunc(c.errs, func(a, b *Error) int { return a.Line - b.Line })
		return nil, c.errs
	}
	return cfg, nil
}

// checker validates the tree and collects every error instead of stopping
// at the first, so one run of the daemon shows everything to fix.
type checker struct {
	file       string
	errs       Errors
	ifaces     map[string]portRef // interface -> the port that has it
	totalPorts int
	totalVLANs int          // (bridge, VLAN) pairs of the bridges so far
	patches    []*patchPort // of named bridges, in file order
}

// portRef remembers where an interface was first used, for duplicate errors:
// bridge is how messages name its bridge ("bridge br0" or "bridge[2]").
type portRef struct {
	bridge string
	line   int
}

func (c *checker) errorf(line int, field, format string, args ...any) {
	c.errs = append(c.errs, &Error{File: c.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// keyName is a key as a field path shows it: a bare key as it is, any
// other (empty, or with a dot or a space in it) quoted, as TOML writes it,
// so that an error about it names it.
func keyName(k string) string {
	bare := k != ""
	for _, r := range k {
		bare = bare && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}
	if bare {
		return k
	}
	return strconv.Quote(k)
}

func (c *checker) unknown(v *value, field string) {
	c.errorf(v.line, field, "unknown field")
}

func (c *checker) daemon(v *value, d *Daemon) {
	if v.kind != unstable.Table {
		c.errorf(v.line, "daemon", "must be a table")
		return
	}
	for _, k := range v.keys {
		f, kv := "daemon."+keyName(k), v.vals[k]
		switch k {
		case "persist":
			if kv.kind != unstable.Bool {
				c.errorf(kv.line, f, "must be true or false")
			} else {
				d.Persist = kv.data == "true"
			}
		case "metrics":
			if s, ok := c.str(kv, f); ok {
				if err := CheckListenAddr(s); err != nil {
					c.errorf(kv.line, f, "%v", err)
				} else {
					d.Metrics = s
				}
			}
		case "socket":
			s, ok := c.str(kv, f)
			switch {
			case !ok:
			case !filepath.IsAbs(s):
				c.errorf(kv.line, f, "%q is not an absolute path", s)
			case len(s) > maxSocketPath:
				c.errorf(kv.line, f, "%q is longer than %d bytes, the limit for a unix socket path", s, maxSocketPath)
			default:
				d.Socket = s
			}
		default:
			c.unknown(kv, f)
		}
	}
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
	}
	c.patchGraph(names)
	return out
}

// bridge checks one bridge, and returns it with its patch ports for the
// checks across bridges.
func (c *checker) bridge(t *value, field string) (Bridge, []*patchPort) {
	b := Bridge{Aging: DefaultAging, MaxEntries: DefaultMaxEntries, Line: t.line}
	var ports, statics, mirrors, rules *value
	for _, k := range t.keys {
		f, v := field+"."+keyName(k), t.vals[k]
		switch k {
		case "name":
			if s, ok := c.str(v, f); ok {
				if validBridgeName(s) {
					b.Name = s
				} else {
					c.errorf(v.line, f, "%q is not a valid bridge name: use 1 to %d of A-Z a-z 0-9 _ . -", s, maxNameLen)
				}
			}
		case "aging":
			if s, ok := c.str(v, f); ok {
				d, err := time.ParseDuration(s)
				switch {
				case err != nil:
					c.errorf(v.line, f, "%q is not a duration such as \"300s\" or \"5m\"", s)
				case d < minAging || d > maxAging:
					c.errorf(v.line, f, "%q is out of range 1s..24h", s)
				default:
					b.Aging = d
				}
			}
		case "max_entries":
			if n, ok := c.integer(v, f, 1, maxTableSize); ok {
				b.MaxEntries = int(n)
			}
		case "filter":
			if on, ok := c.boolean(v, f); ok {
				b.Filter = on
			}
		case "default":
			b.DefaultBlock = c.action(v, f, ": what a frame no rule matches gets")
		case "rule":
			rules = v
		case "port":
			ports = v
		case "static":
			statics = v
		case "mirror":
			mirrors = v
		default:
			c.unknown(v, f)
		}
	}
	if _, ok := t.vals["name"]; !ok {
		c.errorf(t.line, field+".name", "is required")
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
		c.portNames(bp, sites, i)
		if p.IsPatch() && validBridgeName(p.Patch) {
			patches = append(patches, &patchPort{
				from: b.Name, peer: p.Patch,
				field: sites[i].field + ".patch", line: sites[i].t.vals["patch"].line,
				ok: sites[i].ok, aware: bp.aware, port: p,
			})
		}
	}
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
	c.spanStatics(&b, statics, field)
	c.countVLANs(&b, t, field, label)
	return b, patches
}

// mirror checks one [[bridge.mirror]] against the bridge's ports and the
// mirrors before it.
func (c *checker) mirror(t *value, field string, bp *bridgePorts, before []Mirror, sites []portSite) Mirror {
	m := Mirror{In: true, Out: true, Line: t.line}
	// port names a port of this bridge with an interface, or reports why not.
	port := func(v *value, f, what string) (string, int, bool) {
		name, ok := c.str(v, f)
		if !ok {
			return "", 0, false
		}
		i, found := bp.index[name]
		switch {
		case !found:
			c.errorf(v.line, f, "%q is not a port of %s: %s", name, bp.label, what)
			return name, 0, false
		case bp.ports[i].IsPatch():
			c.errorf(v.line, f, "%q is a patch port: mirrors copy frames of ports with an interface", name)
			return name, i, false
		}
		return name, i, true
	}
	var toLine int
	for _, k := range t.keys {
		f, v := field+"."+keyName(k), t.vals[k]
		switch k {
		case "name":
			if s, ok := c.str(v, f); ok {
				m.Name = s
				if !validBridgeName(s) {
					c.errorf(v.line, f, "%q is not a valid mirror name: use 1 to %d of A-Z a-z 0-9 _ . -", s, maxNameLen)
				}
				for _, o := range before {
					if o.Name == s {
						c.errorf(v.line, f, "%q is already the name of the mirror at line %d", s, o.Line)
					}
				}
			}
		case "ports":
			if v.kind != unstable.Array || len(v.elems) == 0 {
				c.errorf(v.line, f, `must be a non-empty array of port names, such as ["p1", "p2"]`)
				break
			}
			for i, e := range v.elems {
				ef := fmt.Sprintf("%s[%d]", f, i)
				name, _, ok := port(e, ef, "a mirror copies frames of its own bridge's ports")
				if !ok {
					continue
				}
				if slices.Contains(m.Ports, name) {
					c.errorf(e.line, ef, "%q is listed twice", name)
					continue
				}
				taken := false
				for _, o := range before {
					if slices.Contains(o.Ports, name) {
						c.errorf(e.line, ef, "%q is already mirrored by mirror %q at line %d: a port has one mirror", name, o.Name, o.Line)
						taken = true
					}
					if o.To == name {
						c.errorf(e.line, ef, "%q is the span port of mirror %q at line %d: a span port is not mirrored", name, o.Name, o.Line)
						taken = true
					}
				}
				if !taken {
					m.Ports = append(m.Ports, name)
				}
			}
		case "direction":
			if s, ok := c.str(v, f); ok {
				switch s {
				case "in":
					m.Out = false
				case "out":
					m.In = false
				case "both":
				default:
					c.errorf(v.line, f, "%q is not \"in\" (what the ports receive), \"out\" (what the bridge sends out of them) or \"both\"", s)
				}
			}
		case "to":
			name, i, ok := port(v, f, "the span port is a [[bridge.port]] of the mirror's bridge")
			m.To, toLine = name, v.line
			if !ok {
				break
			}
			for _, o := range before {
				if slices.Contains(o.Ports, name) {
					c.errorf(v.line, f, "%q is mirrored by mirror %q at line %d: a span port receives copies and nothing else", name, o.Name, o.Line)
				}
			}
			for _, k := range []string{"vlan", "trunk", "native"} {
				if kv, set := sites[i].t.vals[k]; set {
					c.errorf(kv.line, sites[i].field+"."+keyName(k), "port %q is the span port of mirror %q: it takes every VLAN tagged, and has no %s", name, m.Name, k)
				}
			}
		case "vlans":
			if !bp.aware {
				c.errorf(v.line, f, "%s is not VLAN-aware: no port has vlan or trunk", bp.label)
				break
			}
			if vids, ok := c.trunk(v, f); ok {
				m.VLANs = vids
			}
		default:
			c.unknown(v, f)
		}
	}
	for _, k := range []string{"name", "ports", "to"} {
		if _, ok := t.vals[k]; !ok {
			c.errorf(t.line, field+"."+keyName(k), "is required")
		}
	}
	if m.To != "" && slices.Contains(m.Ports, m.To) {
		c.errorf(toLine, field+".to", "%q is also one of the mirror's ports: the span port receives the copies and nothing else", m.To)
	}
	return m
}

// maxStormRate bounds a storm control rate: far above what one port can
// flood, and its interval (a second / rate) is still whole nanoseconds.
const maxStormRate = 100_000_000

// storm checks a port's storm control: an inline table of rates.
func (c *checker) storm(v *value, field string) Storm {
	var s Storm
	if v.kind != unstable.Table {
		c.errorf(v.line, field, "must be a table such as { broadcast = 1000, multicast = 5000, unknown_unicast = 1000 } (frames a second)")
		return s
	}
	if len(v.keys) == 0 {
		c.errorf(v.line, field, "is empty: give broadcast, multicast or unknown_unicast, in frames a second")
	}
	for _, k := range v.keys {
		f, kv := field+"."+keyName(k), v.vals[k]
		var dst *int
		switch k {
		case "broadcast":
			dst = &s.Broadcast
		case "multicast":
			dst = &s.Multicast
		case "unknown_unicast":
			dst = &s.UnknownUnicast
		default:
			c.unknown(kv, f)
			continue
		}
		if n, ok := c.integer(kv, f, 1, maxStormRate); ok {
			*dst = int(n)
		}
	}
	return s
}

// spanStatics reports static entries on span ports, which send nothing but
// copies.
func (c *checker) spanStatics(b *Bridge, statics *value, field string) {
	if statics == nil {
		return
	}
	for i, st := range b.Static {
		if mi := b.SpanPort(st.Port); mi != nil {
			line := st.Line
			if i < len(statics.elems) {
				if pv, ok := statics.elems[i].vals["port"]; ok {
					line = pv.line
				}
			}
			c.errorf(line, fmt.Sprintf("%s.static[%d].port", field, i), "%q is the span port of mirror %q: no station lives there", st.Port, mi.Name)
		}
	}
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
		names = append(names, named{p.Interface, site.t.vals["interface"].line, site.field + ".interface", true, false})
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
		case prevIface:
			prevLine = qsite.t.vals["interface"].line
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

// patchPort is a patch port of a named bridge, for the checks across
// bridges.
type patchPort struct {
	from, peer string // bridge names
	field      string // bridge[0].port[1].patch
	line       int    // of its patch key
	ok         bool   // no error about the port
	aware      bool   // its bridge is VLAN-aware
	port       *Port
}

// vlanRule says how a patch port carries VLANs, for messages.
func (p *patchPort) vlanRule() string {
	switch {
	case !p.aware:
		return "no VLANs (the bridge is not VLAN-aware)"
	case p.port.IsTrunk() && p.port.Native != 0:
		return fmt.Sprintf("trunk %s, native %d", VLANRanges(p.port.Trunk), p.port.Native)
	case p.port.IsTrunk():
		return "trunk " + VLANRanges(p.port.Trunk)
	}
	return fmt.Sprintf("access VLAN %d", p.port.VLAN)
}

// patchGraph checks the patch ports of every bridge against each other:
// names is every bridge name, the first bridge that has it. Each peer is
// another bridge, which declares one patch back (both sides declare the
// pair, as with Open vSwitch's peer option). A pair joins its two bridges;
// the pair whose second port, in file order, would close a cycle or make a
// chain longer than MaxPatchChain bridges, or a tree of more, is refused,
// so the pairs accepted always form a forest of small trees. A frame keeps
// its VLAN across a patch: the two ends must carry the same VLANs the same
// way, and their bridges be both VLAN-aware or both not.
func (c *checker) patchGraph(names map[string]int) {
	type pair struct{ from, to string }
	first := map[pair]*patchPort{} // the first patch of a bridge to a peer
	order := map[*patchPort]int{}
	for i, p := range c.patches {
		order[p] = i
		k := pair{p.from, p.peer}
		_, known := names[p.peer]
		prev, dup := first[k]
		switch {
		case p.peer == p.from:
			c.errorf(p.line, p.field, "%q is this bridge: a patch joins two bridges", p.peer)
		case !known:
			c.errorf(p.line, p.field, "no bridge is named %q", p.peer)
		case dup:
			c.errorf(p.line, p.field, "bridge %s already has a patch to %s at line %d: two bridges are joined by one patch at most", p.from, p.peer, prev.line)
		default:
			first[k] = p
			continue
		}
		p.ok = false
	}
	var g forest
	for _, p := range c.patches {
		if first[pair{p.from, p.peer}] != p {
			continue
		}
		back := first[pair{p.peer, p.from}]
		switch {
		case back == nil:
			c.errorf(p.line, p.field, "bridge %s has no patch back to %s: declare patch = %q in bridge %s too", p.peer, p.from, p.from, p.peer)
			p.ok = false
			continue
		case order[back] > order[p]:
			continue // the pair is complete at back
		}
		// p completes the pair: it closes the cycle, or makes the chain,
		// that the pair would.
		if a, b := back.vlanRule(), p.vlanRule(); a != b && p.ok && back.ok {
			c.errorf(p.line, p.field, "the ends of the patch %s - %s carry VLANs differently (%s: %s; %s: %s): a patch does not translate VLANs, so both ends carry the same VLANs the same way", p.peer, p.from, p.peer, a, p.from, b)
			p.ok, back.ok = false, false
			continue
		}
		if path := g.path(p.peer, p.from); path != nil {
			c.errorf(p.line, p.field, "%s -> %s closes the cycle %s", p.from, p.peer, strings.Join(append(path, p.peer), " -> "))
			p.ok, back.ok = false, false
			continue
		}
		chain := g.farthest(p.peer)
		slices.Reverse(chain)
		chain = append(chain, g.farthest(p.from)...)
		if len(chain) > MaxPatchChain {
			c.errorf(p.line, p.field, "%s -> %s makes a chain of %d bridges: %s; at most %d may be joined by patches", p.from, p.peer, len(chain), strings.Join(chain, " -> "), MaxPatchChain)
			p.ok, back.ok = false, false
			continue
		}
		if tree, _ := g.walk(p.peer); len(tree)+len(g.nodes(p.from)) > MaxPatchChain {
			all := append(tree, g.nodes(p.from)...)
			c.errorf(p.line, p.field, "%s -> %s joins %d bridges by patches: %s; at most %d may be", p.from, p.peer, len(all), strings.Join(all, ", "), MaxPatchChain)
			p.ok, back.ok = false, false
			continue
		}
		g.join(p.from, p.peer)
	}
}

// nodes returns the bridges of b's tree, b first.
func (g forest) nodes(b string) []string {
	visited, _ := g.walk(b)
	return visited
}

// forest is the bridges joined by accepted patches, which have no cycle.
type forest map[string][]string // bridge -> its neighbours, in the order joined

func (g *forest) join(a, b string) {
	if *g == nil {
		*g = forest{}
	}
	(*g)[a] = append((*g)[a], b)
	(*g)[b] = append((*g)[b], a)
}

// walk visits the tree of from breadth first, and returns the bridges in
// the order visited and the bridge each was reached from.
func (g forest) walk(from string) (visited []string, parent map[string]string) {
	parent = map[string]string{from: ""}
	visited = []string{from}
	for i := 0; i < len(visited); i++ {
		for _, n := range g[visited[i]] {
			if _, seen := parent[n]; !seen {
				parent[n] = visited[i]
				visited = append(visited, n)
			}
		}
	}
	return visited, parent
}

// trail returns the bridges from the root of a walk to b, in that order.
func trail(parent map[string]string, b string) []string {
	var t []string
	for ; b != ""; b = parent[b] {
		t = append(t, b)
	}
	slices.Reverse(t)
	return t
}

// path returns the bridges from a to b, or nil when they are not joined.
func (g forest) path(a, b string) []string {
	_, parent := g.walk(a)
	if _, joined := parent[b]; !joined {
		return nil
	}
	return trail(parent, b)
}

// farthest returns the longest path from b within its tree, b first.
func (g forest) farthest(b string) []string {
	visited, parent := g.walk(b)
	return trail(parent, visited[len(visited)-1])
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

// portVLANs is what port found in a port's VLAN keys, for the checks that
// need the whole bridge.
type portVLANs struct {
	set bool // vlan or trunk is present, valid or not: the bridge is VLAN-aware
	ok  bool // vlan, trunk and native are valid, so static entries can be checked against them
}

// bridgePorts is what static entries of one bridge are checked against.
type bridgePorts struct {
	label string // how messages name the bridge
	aware bool
	ports []Port
	vlans []portVLANs    // parallel to ports
	index map[string]int // PortName (and interface) -> index of the first port that has it
}

// portSite is where a port is in the file, for the checks that need the
// whole bridge or every bridge.
type portSite struct {
	field string // bridge[0].port[1]
	t     *value // the port's table
	ok    bool   // no error about the port so far
}

// ports checks the ports of bridge table t (v is its "port" value, nil when
// missing) and returns them with what their VLAN keys held.
func (c *checker) ports(t, v *value, field, label string) ([]Port, []portVLANs, []portSite) {
	if v == nil {
		c.errorf(t.line, field+".port", "at least one [[bridge.port]] is required")
		return nil, nil, nil
	}
	elems, ok := c.elements(v, field+".port")
	if ok && len(elems) == 0 {
		c.errorf(v.line, field+".port", "at least one [[bridge.port]] is required")
	}
	var ports []Port
	var vlans []portVLANs
	var sites []portSite
	for i, pt := range elems {
		pf := fmt.Sprintf("%s.port[%d]", field, i)
		before := len(c.errs)
		if i == MaxPortsPerBridge {
			c.errorf(pt.line, pf, "too many ports in one bridge: at most %d are allowed", MaxPortsPerBridge)
		}
		if c.totalPorts++; c.totalPorts == MaxPorts+1 {
			c.errorf(pt.line, pf, "too many ports in all bridges together: at most %d are allowed", MaxPorts)
		}
		if pt.kind != unstable.Table {
			continue
		}
		p, pv := c.port(pt, pf, label)
		ports = append(ports, p)
		vlans = append(vlans, pv)
		sites = append(sites, portSite{field: pf, t: pt, ok: len(c.errs) == before})
	}
	return ports, vlans, sites
}

func (c *checker) port(t *value, field, bridge string) (Port, portVLANs) {
	p := Port{Mode: mode.Auto, Line: t.line}
	vlansOK := true
	for _, k := range t.keys {
		f, v := field+"."+keyName(k), t.vals[k]
		switch k {
		case "interface":
			s, ok := c.str(v, f)
			if !ok {
				break
			}
			// Kept even when invalid, so that static entries naming it
			// do not add a second, misleading error.
			p.Interface = s
			if why := ifnameProblem(s); why != "" {
				c.errorf(v.line, f, "%q is not a valid interface name: %s", s, why)
				break
			}
			// One interface can carry one attachment only.
			if prev, dup := c.ifaces[s]; dup {
				c.errorf(v.line, f, "%q is also a port of %s at line %d", s, prev.bridge, prev.line)
			} else {
				c.ifaces[s] = portRef{bridge: bridge, line: v.line}
			}
		case "patch":
			// Checked against the other bridges once every bridge is known.
			s, ok := c.str(v, f)
			if !ok {
				break
			}
			p.Patch = s
			if !validBridgeName(s) {
				c.errorf(v.line, f, "%q is not a valid bridge name: use 1 to %d of A-Z a-z 0-9 _ . -", s, maxNameLen)
			}
		case "name":
			s, ok := c.str(v, f)
			if !ok {
				break
			}
			// Kept even when invalid, as interface is.
			p.Name = s
			if why := ifnameProblem(s); why != "" {
				c.errorf(v.line, f, "%q is not a valid port name: %s", s, why)
			}
		case "mode":
			_, hasIface := t.vals["interface"]
			if _, hasPatch := t.vals["patch"]; hasPatch && !hasIface {
				c.errorf(v.line, f, "a patch port attaches to no interface and has no mode")
				break
			}
			if s, ok := c.str(v, f); ok {
				if m, err := mode.Parse(s); err == nil {
					p.Mode = m
				} else {
					c.errorf(v.line, f, "%v", err)
				}
			}
		case "max_macs":
			if n, ok := c.integer(v, f, 0, maxTableSize); ok {
				p.MaxMACs = int(n)
			}
		case "learning":
			if b, ok := c.boolean(v, f); ok {
				p.NoLearning = !b
			}
		case "protected":
			if b, ok := c.boolean(v, f); ok {
				p.Protected = b
			}
		case "flood", "mcast_flood", "bcast_flood":
			if b, ok := c.boolean(v, f); ok {
				*map[string]*bool{"flood": &p.NoFlood, "mcast_flood": &p.NoMcastFlood, "bcast_flood": &p.NoBcastFlood}[k] = !b
			}
		case "storm":
			p.Storm = c.storm(v, f)
		case "mac_limit_action":
			if s, ok := c.str(v, f); ok {
				if s != LimitDrop && s != LimitForward {
					c.errorf(v.line, f, "%q is not %q (frames from new sources at max_macs are dropped) or %q (forwarded without learning)", s, LimitDrop, LimitForward)
					break
				}
				p.LimitForward = s == LimitForward
			}
		case "vlan":
			n, ok := c.integer(v, f, 1, maxVLAN)
			p.VLAN, vlansOK = uint16(n), vlansOK && ok
		case "trunk":
			vids, ok := c.trunk(v, f)
			p.Trunk, vlansOK = vids, vlansOK && ok
		case "native":
			n, ok := c.integer(v, f, 1, maxVLAN)
			p.Native, vlansOK = uint16(n), vlansOK && ok
		default:
			c.unknown(v, f)
		}
	}
	iface, hasIface := t.vals["interface"]
	patch, hasPatch := t.vals["patch"]
	name, hasName := t.vals["name"]
	switch {
	case hasIface && hasPatch:
		c.errorf(patch.line, field+".patch", "conflicts with interface at line %d: a port attaches an interface or patches to another bridge, not both", iface.line)
	case !hasIface && !hasPatch:
		c.errorf(t.line, field, "interface or patch is required")
	case hasName && !hasPatch:
		c.errorf(name.line, field+".name", "is for patch ports only: a port with an interface is named by it")
	case hasPatch && !hasName && p.Patch != "":
		p.Name = "patch-" + p.Patch
		// A valid bridge name is made of valid characters, but may be
		// too long to take the prefix.
		if why := ifnameProblem(p.Name); why != "" && validBridgeName(p.Patch) {
			c.errorf(t.line, field+".name", "the default name %q is not a valid port name: %s; set name", p.Name, why)
		}
	}
	if sv, ok := t.vals["storm"]; ok && hasPatch {
		c.errorf(sv.line, field+".storm", "limits what a port's interface floods into the bridge, and a patch port has none")
	}
	if la, ok := t.vals["mac_limit_action"]; ok {
		if _, hasMax := t.vals["max_macs"]; !hasMax || p.MaxMACs == 0 {
			c.errorf(la.line, field+".mac_limit_action", "says what happens at max_macs, which the port does not set (or sets to 0, no limit)")
		}
	}
	vlan, hasVLAN := t.vals["vlan"]
	trunk, hasTrunk := t.vals["trunk"]
	native, hasNative := t.vals["native"]
	switch {
	case hasVLAN && hasTrunk:
		c.errorf(trunk.line, field+".trunk", "conflicts with vlan at line %d: a port is an access port (vlan) or a trunk, not both; a trunk's untagged VLAN is native", vlan.line)
		vlansOK = false
	case hasNative && !hasTrunk:
		c.errorf(native.line, field+".native", "is for trunks only: set trunk too, or use vlan for an access port")
		vlansOK = false
	case p.Native != 0 && p.IsTrunk() && !p.Carries(p.Native):
		// Only when trunk is valid, or the list named would be wrong.
		c.errorf(native.line, field+".native", "%d is not one of the port's trunk VLANs (%s)", p.Native, VLANRanges(p.Trunk))
		vlansOK = false
	}
	return p, portVLANs{set: hasVLAN || hasTrunk, ok: vlansOK}
}

// trunk checks the VLAN list of a trunk port and returns its VIDs, sorted,
// or nil and false when any element is wrong, so that later checks against
// the list do not report a part of it.
func (c *checker) trunk(v *value, field string) (vids []uint16, ok bool) {
	if v.kind != unstable.Array {
		c.errorf(v.line, field, `must be an array of VLAN IDs and ranges such as [10, 20, "100-199"]`)
		return nil, false
	}
	if len(v.elems) == 0 {
		c.errorf(v.line, field, "is empty: list the VLANs the trunk carries")
		return nil, false
	}
	ok = true
	var owner [maxVLAN + 1]int // VID -> 1 + index of the element that lists it
	bounds := make([][2]int, len(v.elems))
	for i, e := range v.elems {
		ef := fmt.Sprintf("%s[%d]", field, i)
		lo, hi, eok := c.vlanRange(e, ef)
		if !eok {
			ok = false
			continue
		}
		bounds[i] = [2]int{lo, hi}
		// Report the first element this one overlaps, and take the VIDs
		// no element had yet, so later overlaps with it are named too.
		reported := false
		for vid := lo; vid <= hi; vid++ {
			if j := owner[vid] - 1; j < 0 {
				owner[vid] = i + 1
				vids = append(vids, uint16(vid))
			} else if !reported {
				verb := "overlaps"
				if bounds[j] == bounds[i] {
					verb = "repeats"
				}
				c.errorf(e.line, ef, "%s %s %s", spell(e), verb, spell(v.elems[j]))
				reported, ok = true, false
			}
		}
	}
	if !ok {
		return nil, false
	}
	slices.Sort(vids)
	return vids, true
}

// vlanRange checks one trunk element: a VID, or a string "A-B" or "A".
func (c *checker) vlanRange(e *value, field string) (lo, hi int, ok bool) {
	switch e.kind {
	case unstable.Integer:
		n, ok := c.integer(e, field, 1, maxVLAN)
		return int(n), int(n), ok
	case unstable.String:
		a, b, isRange := strings.Cut(e.data, "-")
		if !isRange {
			b = a
		}
		if !allDigits(a) || !allDigits(b) {
			c.errorf(e.line, field, "%q is not a VLAN ID or range such as \"100-199\"", e.data)
			return 0, 0, false
		}
		for _, end := range []string{a, b} {
			if n, err := strconv.Atoi(end); err != nil || n < 1 || n > maxVLAN {
				c.errorf(e.line, field, "%q: %s is out of range 1..%d", e.data, end, maxVLAN)
				return 0, 0, false
			}
		}
		lo, _ = strconv.Atoi(a)
		hi, _ = strconv.Atoi(b)
		if lo > hi {
			c.errorf(e.line, field, "%q is backwards: write \"%d-%d\"", e.data, hi, lo)
			return 0, 0, false
		}
		return lo, hi, true
	}
	c.errorf(e.line, field, `must be a VLAN ID or a range such as "100-199"`)
	return 0, 0, false
}

// spell writes a trunk element as the file does: 20 or "10-29".
func spell(e *value) string {
	if e.kind == unstable.String {
		return strconv.Quote(e.data)
	}
	return e.data
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// describe names what a port of a VLAN-aware bridge carries.
func describe(p *Port) string {
	if !p.IsTrunk() {
		return fmt.Sprintf("access VLAN %d", p.VLAN)
	}
	s := "trunk VLANs " + VLANRanges(p.Trunk)
	if p.Native != 0 {
		s += fmt.Sprintf(", native %d", p.Native)
	}
	return s
}

// static checks one static entry against the ports of its bridge; seen maps
// "mac/vlan" of earlier entries to their lines.
func (c *checker) static(t *value, field string, bp *bridgePorts, seen map[string]int) Static {
	s := Static{Line: t.line}
	macOK, vlanOK := false, true
	for _, k := range t.keys {
		f, v := field+"."+keyName(k), t.vals[k]
		switch k {
		case "mac":
			str, ok := c.str(v, f)
			if !ok {
				break
			}
			// ParseMAC also takes 02-00-… and 0200.0000.0001, which is
			// harmless; the length check drops its EUI-64 and InfiniBand forms.
			mac, err := net.ParseMAC(str)
			switch {
			case err != nil || len(mac) != 6:
				c.errorf(v.line, f, "%q is not a MAC address such as 02:00:00:00:00:01", str)
			case mac[0]&1 != 0:
				c.errorf(v.line, f, "%q is a multicast address; static entries must be unicast", str)
			case bytes.Equal(mac, make([]byte, 6)):
				c.errorf(v.line, f, "%q is the zero address", str)
			default:
				s.MAC, macOK = mac, true
			}
		case "port":
			str, ok := c.str(v, f)
			if !ok {
				break
			}
			if _, ok := bp.index[str]; !ok {
				c.errorf(v.line, f, "%q is not a port of %s", str, bp.label)
			}
			s.Port = str
		case "vlan":
			n, ok := c.integer(v, f, 0, maxVLAN)
			s.VLAN, vlanOK = uint16(n), ok
		default:
			c.unknown(v, f)
		}
	}
	for _, k := range []string{"mac", "port"} {
		if _, ok := t.vals[k]; !ok {
			c.errorf(t.line, field+"."+keyName(k), "is required")
		}
	}
	if bp.aware && vlanOK {
		vlanOK = c.staticVLAN(t, field, bp, &s)
	}
	if macOK && vlanOK {
		key := fmt.Sprintf("%s/%d", s.MAC, s.VLAN)
		line := t.vals["mac"].line
		if prev, dup := seen[key]; dup {
			c.errorf(line, field+".mac", "%s vlan %d is already a static entry at line %d", s.MAC, s.VLAN, prev)
		} else {
			seen[key] = line
		}
	}
	return s
}

// staticVLAN checks the VLAN of static entry s on a VLAN-aware bridge, and
// fills in its port's PVID when the file has none. It returns false when the
// VLAN is wrong or cannot be known.
func (c *checker) staticVLAN(t *value, field string, bp *bridgePorts, s *Static) bool {
	v, hasVLAN := t.vals["vlan"]
	if hasVLAN && s.VLAN == 0 {
		c.errorf(v.line, field+".vlan", "0 (untagged) is not a VLAN of VLAN-aware %s: use 1..%d, or leave vlan out for the port's untagged VLAN", bp.label, maxVLAN)
		return false
	}
	i, known := bp.index[s.Port]
	if !known || !bp.vlans[i].ok {
		return false // the port is missing or wrong, which is reported already
	}
	p := &bp.ports[i]
	switch {
	case hasVLAN && !p.Carries(s.VLAN):
		c.errorf(v.line, field+".vlan", "VLAN %d is not carried by port %q (%s)", s.VLAN, p.PortName(), describe(p))
		return false
	case hasVLAN:
		return true
	case p.PVID() == 0:
		c.errorf(t.line, field+".vlan", "port %q is a trunk with no native VLAN: set vlan", p.PortName())
		return false
	}
	s.VLAN = p.PVID()
	return true
}

// elements returns the elements of v, which should be an array of tables,
// and reports those that are not tables; callers skip them but still count
// them, so indices in messages match the file. ok is false when v is not an
// array at all.
func (c *checker) elements(v *value, field string) (elems []*value, ok bool) {
	if v.kind != unstable.Array {
		c.errorf(v.line, field, "must be an array of tables ([[%s]])", stripIndices(field))
		return nil, false
	}
	for i, e := range v.elems {
		if e.kind != unstable.Table {
			c.errorf(e.line, fmt.Sprintf("%s[%d]", field, i), "must be a table")
		}
	}
	return v.elems, true
}

func (c *checker) boolean(v *value, field string) (bool, bool) {
	if v.kind != unstable.Bool {
		c.errorf(v.line, field, "must be true or false")
		return false, false
	}
	return v.data == "true", true
}

func (c *checker) str(v *value, field string) (string, bool) {
	if v.kind != unstable.String {
		c.errorf(v.line, field, "must be a string")
		return "", false
	}
	return v.data, true
}

func (c *checker) integer(v *value, field string, lo, hi int64) (int64, bool) {
	if v.kind != unstable.Integer {
		c.errorf(v.line, field, "must be an integer")
		return 0, false
	}
	// The token is as written but valid TOML (the decoder checked it), and
	// Go's base-0 syntax covers TOML's: 1_000, 0x1f, 0o17, 0b101, +5.
	n, err := strconv.ParseInt(v.data, 0, 64)
	if err != nil || n < lo || n > hi {
		c.errorf(v.line, field, "%s is out of range %d..%d", v.data, lo, hi)
		return 0, false
	}
	return n, true
}

// stripIndices turns bridge[0].port into bridge.port, for naming the
// header a value should have been written as.
func stripIndices(field string) string {
	var b strings.Builder
	depth := 0
	for _, r := range field {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// validBridgeName allows what an interface name could be and a bpffs
// directory can safely be: bridge state is pinned under the bridge's name,
// so "." and ".." are refused too.
func validBridgeName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// ifnameProblem says why s cannot be a Linux interface name, or returns "".
// The rules are the kernel's dev_valid_name(), so a name that passes here
// can exist; whether it does is checked when the daemon attaches.
func ifnameProblem(s string) string {
	switch {
	case s == "":
		return "it is empty"
	case len(s) > maxNameLen:
		return fmt.Sprintf("longer than %d bytes", maxNameLen)
	case s == "." || s == "..":
		return "reserved name"
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '/' || c == ':':
			return fmt.Sprintf("contains %q", c)
		case c == ' ' || (c >= '\t' && c <= '\r'):
			return "contains whitespace"
		case c < ' ' || c == 0x7f:
			return "contains a control character"
		}
	}
	return ""
}

// CheckListenAddr checks a TCP address to listen on: host:port with a port
// 1..65535, the host an IP address, a name, or empty for every address.
func CheckListenAddr(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port (e.g. \"127.0.0.1:9470\" or \"[::1]:9470\")", s)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not 1..65535", s, port)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("%q: %q is not a host", s, host)
	}
	return nil
}
