package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// The filter stage's rules (issue 14): [[bridge.rule]], in order, the first
// that matches deciding; default (a bridge key) for a frame none matches.
// Parsed and checked here whether the stage is on or not (filter = false
// keeps them, validated, and off).

// Rule is one [[bridge.rule]]. A zero field matches anything.
type Rule struct {
	Block     bool   // key action: "block" (true) or "pass"
	EtherType uint16 // key ethertype: "arp", "ipv4", "ipv6" or a number (1536..65535)
	In, Out   string // keys in, out: the ingress port, the egress port (per copy of a flood)
	// Key proto: "tcp", "udp", "icmp", "icmpv6" or a number; HasProto
	// says whether it is set (0, IPv6 hop-by-hop, is a number too).
	Proto    uint8
	HasProto bool
	Src, Dst netip.Prefix // keys src, dst: a prefix; a bare address is /32 or /128
	// Keys src_port, dst_port: a port or a range "1000-2000"; Hi 0: none.
	SrcPort, DstPort PortRange
	KeepState        bool             // key keep_state: replies of what this pass rule opens pass too
	SrcMAC, DstMAC   net.HardwareAddr // keys src_mac, dst_mac
	VLAN             uint16           // key vlan: 1..4094, VLAN-aware bridges
	// Key icmp_type: 0..255, with proto icmp or icmpv6.
	ICMPType    uint8
	HasICMPType bool
	Line        int // line of the [[bridge.rule]] header
}

// PortRange is a TCP or UDP port or range of them; Hi 0 is no match on ports.
type PortRange struct{ Lo, Hi uint16 }

// Set says whether the range matches on ports.
func (r PortRange) Set() bool { return r.Hi != 0 }

// String is the range as the config writes it.
func (r PortRange) String() string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

// EtherTypes and protocols by the names the config takes.
var (
	etherTypeNames = map[string]uint16{"arp": 0x0806, "ipv4": 0x0800, "ipv6": 0x86dd}
	protoNames     = map[string]uint16{"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58}
)

const (
	// MaxRules bounds the rules of one bridge.
	MaxRules = 4096
	// Default actions.
	ActionPass  = "pass"
	ActionBlock = "block"
)

// ruleTable is [[bridge.rule]].
var ruleTable = Table{
	Path:  "bridge.rule",
	Array: true,
	Help:  "A rule of the filter of the bridge above it (docs/filter.md); at most " + fmt.Sprint(MaxRules) + " a bridge. A key left out matches anything; a rule whose keys no frame could match is refused.",
	Keys: []Key{
		{Name: "action", Kind: KindEnum, Values: []Value{{Name: ActionPass}, {Name: ActionBlock}}, Required: true, Example: `"pass"`,
			Help: "What a frame the rule matches gets."},
		{Name: "ethertype", Kind: KindName, Values: nameValues(etherTypeNames), Min: 0x0600, Max: 65535, Example: `"ipv4"`,
			Help: "The frame's EtherType, after any VLAN tags."},
		{Name: "in", Kind: KindString, Form: "a port of the bridge", Example: `"veth-a"`, Help: "The port the frame came in by."},
		{Name: "out", Kind: KindString, Form: "a port of the bridge", Example: `"veth-b"`, Help: "The port the copy leaves by (each copy of a flood on its own)."},
		{Name: "proto", Kind: KindName, Values: nameValues(protoNames), Min: 0, Max: 255, Example: `"tcp"`,
			Help: "The IP protocol; IPv6: the header after any extension headers (up to 6, within 512 bytes, read; past them a block rule with proto blocks the frame)."},
		{Name: "src", Kind: KindString, Form: `an IPv4 or IPv6 address or prefix, such as "10.0.0.0/24"`, Example: `"10.0.0.0/24"`,
			Help: "The source address's network; a bare address is /32 (/128)."},
		{Name: "dst", Kind: KindString, Form: `an IPv4 or IPv6 address or prefix, such as "10.0.0.0/24"`, Example: `"10.0.0.2"`,
			Help: "The destination address's network; a bare address is /32 (/128)."},
		{Name: "src_port", Kind: KindPorts, Form: `a port 1..65535 or a range such as "1000-2000"`, Example: `"1000-2000"`,
			Help: "The TCP or UDP source port; with proto tcp or udp. A non-first fragment never matches a port; a frame whose transport header should be there and cannot be read (past 6 IPv6 extension headers or 512 bytes, or cut short) is blocked by a block rule with ports (unreadable) and passed by no pass rule with ports."},
		{Name: "dst_port", Kind: KindPorts, Form: `a port 1..65535 or a range such as "1000-2000"`, Example: "5201",
			Help: "The TCP or UDP destination port; with proto tcp or udp (frames whose ports cannot be read: as src_port)."},
		{Name: "icmp_type", Kind: KindInt, Min: 0, Max: 255, Example: "8",
			Help: "The ICMP or ICMPv6 type; with proto icmp or icmpv6 (frames whose ICMP header cannot be read: as src_port)."},
		{Name: "keep_state", Kind: KindBool, Default: "false", Example: "true",
			Help: "Pass rules: replies of the connections this rule lets through pass too."},
		{Name: "src_mac", Kind: KindString, Form: `a MAC address, such as "02:00:00:00:00:01"`, Example: `"02:00:00:00:00:01"`, Help: "The frame's source address."},
		{Name: "dst_mac", Kind: KindString, Form: `a MAC address, such as "02:00:00:00:00:01"`, Example: `"ff:ff:ff:ff:ff:ff"`, Help: "The frame's destination address."},
		{Name: "vlan", Kind: KindInt, Min: 1, Max: maxVLAN, own: true, Example: "10",
			Help: "The frame's VLAN; VLAN-aware bridges only."},
	},
}

// nameValues lists the names of a map of them, sorted by number.
func nameValues(names map[string]uint16) []Value {
	vs := make([]Value, 0, len(names))
	for n := range names {
		vs = append(vs, Value{Name: n})
	}
	slices.SortFunc(vs, func(a, b Value) int { return int(names[a.Name]) - int(names[b.Name]) })
	return vs
}

// rule checks one [[bridge.rule]] against its bridge's ports.
func (c *checker) rule(t *value, field string, bp *bridgePorts) Rule {
	r := Rule{Line: t.line}
	port := func(v *value, f string) string {
		name, ok := c.str(v, f)
		if ok {
			if _, found := bp.index[name]; !found {
				c.errorf(v.line, f, "%q is not a port of %s", name, bp.label)
			}
		}
		return name
	}
	c.walk(t, field, &ruleTable, func(k *Key, v *value, f string, x leaf, ok bool) {
		switch k.Name {
		case "action":
			r.Block = ok && x.s == ActionBlock
		case "ethertype":
			r.EtherType = c.named16(k, v, f, etherTypeNames, "an EtherType: \"arp\", \"ipv4\", \"ipv6\" or a number 1536..65535 (0x0600..0xffff)")
		case "in":
			r.In = port(v, f)
		case "out":
			r.Out = port(v, f)
		case "proto":
			n := c.named16(k, v, f, protoNames, "a protocol: \"tcp\", \"udp\", \"icmp\", \"icmpv6\" or a number 0..255")
			if v.kind == unstable.Integer && n > 255 {
				c.errorf(v.line, f, "%d is out of range 0..255", n)
				break
			}
			r.Proto, r.HasProto = uint8(n), n != 0 || v.data == "0"
		case "src":
			r.Src = c.prefix(v, f)
		case "dst":
			r.Dst = c.prefix(v, f)
		case "src_port":
			r.SrcPort = c.portRange(v, f)
		case "dst_port":
			r.DstPort = c.portRange(v, f)
		case "keep_state":
			if ok {
				r.KeepState = x.b
			}
		case "src_mac":
			r.SrcMAC = c.mac(v, f)
		case "dst_mac":
			r.DstMAC = c.mac(v, f)
		case "vlan":
			if !bp.aware {
				c.errorf(v.line, f, "%s is not VLAN-aware (no port has vlan or trunk): its frames have no VLAN to match", bp.label)
				break
			}
			if x, ok := c.leaf(k, v, f); ok {
				r.VLAN = uint16(x.n)
			}
		case "icmp_type":
			if ok {
				r.ICMPType, r.HasICMPType = uint8(x.n), true
			}
		}
	})
	if _, ok := t.vals["action"]; !ok {
		c.errorf(t.line, field+".action", "is required: \"pass\" or \"block\"")
	}
	c.ruleCanMatch(t, field, &r)
	return r
}

// ruleCanMatch reports a rule whose keys contradict each other, so that no
// frame could ever match it, and keep_state where it means nothing.
func (c *checker) ruleCanMatch(t *value, field string, r *Rule) {
	line := func(k string) (int, string) {
		if v, ok := t.vals[k]; ok {
			return v.line, field + "." + keyName(k)
		}
		return t.line, field
	}
	ip := r.HasProto || r.Src.IsValid() || r.Dst.IsValid() || r.SrcPort.Set() || r.DstPort.Set() || r.HasICMPType
	// The IP versions the rule's keys imply, taken in file order so that
	// the key reported is the later of two that disagree.
	type implied struct {
		line    int
		version int
		what    string // "key value"
	}
	var imps []implied
	add := func(k string, v int, what string) {
		l, _ := line(k)
		imps = append(imps, implied{l, v, what})
	}
	switch r.EtherType {
	case 0x0800:
		add("ethertype", 4, "ethertype ipv4")
	case 0x86dd:
		add("ethertype", 6, "ethertype ipv6")
	case 0:
	default:
		if ip {
			l, f := line("ethertype")
			c.errorf(l, f, "0x%04x is not IP, and the rule matches IP fields (proto, src, dst, ports, icmp_type): it can never match", r.EtherType)
		}
	}
	for _, p := range []struct {
		key string
		pfx netip.Prefix
	}{{"src", r.Src}, {"dst", r.Dst}} {
		if p.pfx.IsValid() {
			v := 4
			if p.pfx.Addr().Is6() {
				v = 6
			}
			add(p.key, v, p.key+" "+p.pfx.String())
		}
	}
	if r.HasProto && r.Proto == 1 {
		add("proto", 4, "proto icmp")
	}
	if r.HasProto && r.Proto == 58 {
		add("proto", 6, "proto icmpv6")
	}
	slices.SortStableFunc(imps, func(a, b implied) int { return a.line - b.line })
	for i := 1; i < len(imps); i++ {
		if imps[i].version != imps[0].version {
			k := strings.Fields(imps[i].what)[0]
			l, f := line(k)
			c.errorf(l, f, "%s is IPv%d, but %s is IPv%d: the rule can never match", imps[i].what, imps[i].version, imps[0].what, imps[0].version)
			break
		}
	}
	if (r.SrcPort.Set() || r.DstPort.Set()) && !(r.HasProto && (r.Proto == 6 || r.Proto == 17)) {
		k := "src_port"
		if r.DstPort.Set() {
			k = "dst_port"
		}
		l, f := line(k)
		c.errorf(l, f, "matches TCP and UDP ports: set proto = \"tcp\" or \"udp\"")
	}
	if r.HasICMPType && !(r.HasProto && (r.Proto == 1 || r.Proto == 58)) {
		l, f := line("icmp_type")
		c.errorf(l, f, "matches ICMP types: set proto = \"icmp\" or \"icmpv6\"")
	}
	if r.KeepState {
		l, f := line("keep_state")
		switch {
		case r.Block:
			c.errorf(l, f, "is for pass rules: a blocked frame opens no connection")
		case r.EtherType != 0 && r.EtherType != 0x0800 && r.EtherType != 0x86dd:
			c.errorf(l, f, "tracks IP connections, and the rule matches EtherType 0x%04x", r.EtherType)
		}
	}
}

// named16 reads a value that is one of names, or an integer of at least
// the key's Min.
func (c *checker) named16(k *Key, v *value, field string, names map[string]uint16, what string) uint16 {
	switch v.kind {
	case unstable.String:
		if n, ok := names[strings.ToLower(v.data)]; ok {
			return n
		}
		c.errorf(v.line, field, "%q is not %s", v.data, what)
	case unstable.Integer:
		if n, ok := c.integer(v, field, k.Min, 65535); ok {
			return uint16(n)
		}
	default:
		c.errorf(v.line, field, "must be %s", what)
	}
	return 0
}

// prefix reads an IPv4 or IPv6 prefix; a bare address is the whole-length
// prefix. A prefix with host bits set is refused: it names no network.
func (c *checker) prefix(v *value, field string) netip.Prefix {
	s, ok := c.str(v, field)
	if !ok {
		return netip.Prefix{}
	}
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			c.errorf(v.line, field, "%q is not an IPv4 or IPv6 address or prefix such as \"10.0.0.0/24\"", s)
			return netip.Prefix{}
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen())
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		c.errorf(v.line, field, "%q is not an IPv4 or IPv6 prefix such as \"10.0.0.0/24\"", s)
		return netip.Prefix{}
	}
	if m := p.Masked(); m != p {
		c.errorf(v.line, field, "%q has host bits set: the network is %q", s, m.String())
		return netip.Prefix{}
	}
	return p
}

// portRange reads a port (integer or string) or a range "lo-hi".
func (c *checker) portRange(v *value, field string) PortRange {
	const what = `a port 1..65535 or a range such as "1000-2000"`
	var s string
	switch v.kind {
	case unstable.Integer:
		s = v.data
	case unstable.String:
		s = v.data
	default:
		c.errorf(v.line, field, "must be %s", what)
		return PortRange{}
	}
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		hi = lo
	}
	a, errA := strconv.ParseUint(strings.TrimSpace(lo), 0, 16)
	b, errB := strconv.ParseUint(strings.TrimSpace(hi), 0, 16)
	switch {
	case errA != nil || errB != nil:
		c.errorf(v.line, field, "%q is not %s", s, what)
	case a == 0 || b == 0:
		c.errorf(v.line, field, "%q: port 0 is no port; use 1..65535", s)
	case a > b:
		c.errorf(v.line, field, "%q is an empty range: its first port is above its last", s)
	default:
		return PortRange{uint16(a), uint16(b)}
	}
	return PortRange{}
}

// mac reads a unicast or multicast MAC address.
func (c *checker) mac(v *value, field string) net.HardwareAddr {
	s, ok := c.str(v, field)
	if !ok {
		return nil
	}
	m, err := net.ParseMAC(s)
	if err != nil || len(m) != 6 {
		c.errorf(v.line, field, "%q is not a MAC address such as 02:00:00:00:00:01", s)
		return nil
	}
	return m
}

// ParseRuleArgs reads a rule given as KEY=VALUE arguments (`trestle rule
// add`), with the config's keys and checks, for bridge b. Errors name the
// argument: `proto: "xyz" is not a protocol ...`.
func ParseRuleArgs(b *Bridge, args []string) (Rule, error) {
	var doc strings.Builder
	for _, a := range args {
		k, v, err := splitArg(a, "_", "a rule key such as action=pass, proto=tcp or dst_port=5201")
		if err != nil {
			return Rule{}, err
		}
		if _, err := strconv.ParseInt(v, 10, 64); err == nil || v == "true" || v == "false" {
			fmt.Fprintf(&doc, "%s = %s\n", k, v)
		} else {
			fmt.Fprintf(&doc, "%s = %s\n", k, strconv.Quote(v))
		}
	}
	root, serr := parseTOML([]byte(doc.String()))
	if serr != nil {
		return Rule{}, fmt.Errorf("%s (a key given twice?)", serr.msg)
	}
	c := &checker{file: "args", ifaces: map[string]portRef{}}
	bp := &bridgePorts{label: "bridge " + b.Name, aware: b.VLANAware(), ports: b.Ports, index: map[string]int{}}
	for i, p := range b.Ports {
		if _, dup := bp.index[p.PortName()]; !dup {
			bp.index[p.PortName()] = i
		}
	}
	r := c.rule(root, "rule", bp)
	if err := c.argErrors("rule"); err != nil {
		return Rule{}, err
	}
	r.Line = 0
	return r, nil
}

// splitArg splits a KEY=VALUE argument, whose key is made of lowercase
// letters and more; want says what a key is, for the error.
func splitArg(a, more, want string) (k, v string, err error) {
	k, v, ok := strings.Cut(a, "=")
	k = strings.TrimSpace(k)
	if !ok || k == "" || strings.Trim(k, "abcdefghijklmnopqrstuvwxyz"+more) != "" {
		return "", "", fmt.Errorf("%q: want KEY=VALUE with %s", a, want)
	}
	return k, strings.TrimSpace(v), nil
}

// argErrors joins the errors of a check of KEY=VALUE arguments, each named
// by its key (field is the table's name in the messages), one about the
// whole table by nothing; nil for none.
func (c *checker) argErrors(field string) error {
	if len(c.errs) == 0 {
		return nil
	}
	msgs := make([]string, len(c.errs))
	for i, e := range c.errs {
		msgs[i] = e.Msg // about the whole table
		if key := strings.TrimPrefix(strings.TrimPrefix(e.Field, field), "."); key != "" {
			msgs[i] = key + ": " + e.Msg
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// EtherTypeName is an EtherType as the config writes it: a name it takes,
// or the number in hex.
func EtherTypeName(n uint16) string {
	for k, v := range etherTypeNames {
		if v == n {
			return k
		}
	}
	return fmt.Sprintf("0x%04x", n)
}

// ProtoName is an IP protocol as the config writes it.
func ProtoName(n uint8) string {
	for k, v := range protoNames {
		if v == uint16(n) {
			return k
		}
	}
	return strconv.Itoa(int(n))
}
